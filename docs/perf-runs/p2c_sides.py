"""The medians of one side of a P2c comparison, by case id (ms), for the table steps of the
docs/perf-runs/2026-12-03c-*.sh scripts: `ours(path)` reads mercury-gpu-bench --json-out,
`torch(path)` reads scripts/sdpa_baseline.py --out (CUDNN_LSE rows when others are there)."""
import json


def ours(path):
    return {r["id"][4:]: r["median_ms"] for r in json.load(open(path))["rows"]
            if r["id"].startswith("P2c.") and r["median_ms"] > 0}


def torch(path):
    return {r["id"]: r["ms"] for r in json.load(open(path))["results"]
            if r["ms"] and r["backend"] == "CUDNN_LSE"}
