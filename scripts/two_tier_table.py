#!/usr/bin/env python3
"""The two-tier table of scripts/gpu.sh (part `twotier`, issue 13 item 4).

Reads DIR (the part's output folder): per operator (mha, gqa), mercury-tune's ranking on the
measured two-tier topology (tune-OP/candidates.json, schedule.json) and the checked runs of the
known templates and the pick (run.OP.NAME-r{0,1}.log, two processes each). Prints, per operator,
every run with its predicted and measured time and both rankings, then Kendall's tau between
them, whether the model's pick among those run is the measured best, and the median error of
the predictions. A run counts only when both processes passed their checks; its time is the
slower process's median."""
import json
import re
import sys
from pathlib import Path


def kendall_tau(a, b):
    n, s = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            x = (a[i] - a[j]) * (b[i] - b[j])
            s += (x > 0) - (x < 0)
    pairs = n * (n - 1) / 2
    return s / pairs if pairs else float("nan")


def run_result(logs):
    """(measured ms or None, why) of one run from its two process logs."""
    times, why = [], []
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        if not re.search(r"check @\S+ .*  ok", text) or "FAILED" in text:
            err = re.search(r"(error: |mercury-run: ).*", text)
            why.append(err.group(0)[:200] if err else f"{log.name}: no passing check")
        m = re.search(r"\| schedule, \d+ ranks \(this process\) \| ([0-9.]+) ms", text)
        if m:
            times.append(float(m.group(1)))
    if why or len(times) != len(logs):
        return None, "; ".join(dict.fromkeys(why)) or "no time"
    return max(times), ""


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: two_tier_table.py DIR   (the twotier folder of scripts/gpu.sh --remote)")
    d = Path(sys.argv[1])
    if not d.is_dir():
        sys.exit(f"two_tier_table.py: {d} is not a directory")
    found = 0
    for op in ("mha", "gqa"):
        tune = d / f"tune-{op}"
        if not (tune / "candidates.json").exists() or not (tune / "schedule.json").exists():
            continue
        found += 1
        cands = {c["name"]: c for c in json.loads((tune / "candidates.json").read_text())}
        pick = json.loads((tune / "schedule.json").read_text()).get("schedule", {}).get("name")
        rows = []
        for t in sorted(tune.glob("templates/*.transform")) + [tune / "schedule.transform"]:
            name = t.read_text().splitlines()[0].lstrip("# ").strip()
            stem = f"{op}.{t.stem}"
            logs = [d / f"run.{stem}-r{r}.log" for r in (0, 1)]
            if not logs[0].exists():
                continue
            # The pick may be a template too: its row is already there.
            if any(r[0] == name for r in rows):
                continue
            c = cands.get(name, {})
            ms, why = run_result(logs)
            label = c.get("template") or "new schedule"
            if name == pick:
                label += " (search pick)"
            rows.append((name, label, (c.get("predicted_s") or float("nan")) * 1e3, ms, why))
        print(f"\n### {op.upper()}: {len(rows)} schedules run (2 processes x 4 virtual ranks)\n")
        print("| schedule | what | predicted ms | measured ms | predicted rank | measured rank | error |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        ok = [r for r in rows if r[3] is not None]
        prank = {r[0]: i + 1 for i, r in enumerate(sorted(ok, key=lambda r: r[2]))}
        mrank = {r[0]: i + 1 for i, r in enumerate(sorted(ok, key=lambda r: r[3]))}
        for name, label, pred, ms, why in sorted(rows, key=lambda r: r[2]):
            if ms is None:
                print(f"| {name} | {label} | {pred:.2f} | failed: {why} | - | - | - |")
            else:
                err = pred / ms - 1
                print(f"| {name} | {label} | {pred:.2f} | {ms:.2f} | {prank[name]} | {mrank[name]} | {err:+.0%} |")
        if len(ok) >= 2:
            tau = kendall_tau([r[2] for r in ok], [r[3] for r in ok])
            errs = sorted(abs(r[2] / r[3] - 1) for r in ok)
            med = errs[len(errs) // 2] if len(errs) % 2 else (errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2
            best_pred = min(ok, key=lambda r: r[2])
            best_meas = min(ok, key=lambda r: r[3])
            within = best_pred[3] / best_meas[3] - 1
            print(f"\nKendall tau {tau:.2f}; median |predicted/measured - 1| {med:.0%}; model's best of these: "
                  f"{best_pred[0]} ({best_pred[3]:.2f} ms), measured best: {best_meas[0]} ({best_meas[3]:.2f} ms), "
                  f"{'the same' if best_pred is best_meas else f'{within:+.1%}'}.")


    if not found:
        sys.exit(f"two_tier_table.py: no tune-mha/ or tune-gqa/ with candidates.json and schedule.json in {d}")


if __name__ == "__main__":
    main()
