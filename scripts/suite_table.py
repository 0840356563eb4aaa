#!/usr/bin/env python3
"""Joins our side of the side-by-side suite with the PyTorch baselines into one table.

Inputs: `--ours FILE` (lines `id<TAB>ms<TAB>check<TAB>schedule[<TAB>predicted ms]`, written by
scripts/gpu.sh's `suite` part, one per case run with mercury-run; the predicted time is the
cost model's on the suite's topology file, `mercury-run --predict`), and any number of `--baselines FILE` (the
JSON of scripts/baselines/attention.py, gemm.py or mlp.py). Prints one markdown table: per case our time,
each baseline's time, ours / best baseline as a speed ratio (> 1: we are faster; marked
"inputs unalike" where the baselines drew inputs unlike mercury-run's uniform ones), and the
scaling efficiency against the single-GPU cuDNN time where the attention baselines measured it
(t_1gpu / (world x ours)), and the model's predicted time with its error (predicted / ours - 1;
the median of the absolute errors last). A row of another of our schedules on a case (an id with
a suffix, `gemm.rs.m8192.n8192.k8192.megatron`) is compared with that case's baselines but not
counted in the geometric mean; a second mean takes each case's faster checked schedule. Rows
whose check failed say so. No third-party packages.

    python3 scripts/suite_table.py --ours $OUT/suite-ours.tsv \
        --baselines $OUT/attention-baselines.json --baselines $OUT/gemm-baselines.json \\
        --baselines $OUT/mlp-baselines.json
"""
import argparse
import json
import math


def num(x):
    """A positive finite time, or NaN for anything else ("nan", "-", empty, 0, inf, text)."""
    try:
        t = float(x)
    except (TypeError, ValueError):
        return math.nan
    return t if math.isfinite(t) and t > 0 else math.nan


def whole(x):
    """A positive whole number (a world size: an int or a string of digits), or None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x if x > 0 else None
    if isinstance(x, str) and x.strip().isdigit():
        return int(x) or None
    return None


def load_ours(path):
    """Our rows by case id: lines id<TAB>ms<TAB>check<TAB>schedule[<TAB>predicted ms]."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"suite_table.py: --ours {path}: {e}")
    rows = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 4 or parts[0].startswith("#"):
            continue
        cid, ms, check, sched = parts[:4]
        rows[cid] = {"ms": num(ms), "check": check, "schedule": sched,
                     "predicted": num(parts[4]) if len(parts) > 4 else math.nan}
    return rows


# How mercury-run draws its inputs (runtime/src/cpu.rs, random_inputs): uniform in [-1, 1),
# rounded to the buffer's dtype. The baselines' --inputs unit draws the same distribution; at
# the power limit the clocks follow the data's bits, so other draws time the kernels
# differently (normal: 2-3% on the same cuDNN kernel, docs/perf.md).
OUR_INPUTS = "unit"


def load_baselines(paths):
    """Baseline times by case id and baseline, the world size each case ran at (the files
    may differ: the MLP baselines always run 2 ranks), and the cases whose baselines drew
    their inputs unlike ours (case id -> the file's `inputs`; a file without it predates
    the field and drew normal inputs)."""
    out, worlds, unalike = {}, {}, {}
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print(f"<!-- {p}: {e} -->")
            continue
        if not isinstance(d, dict) or not isinstance(d.get("results", []), list):
            print(f"<!-- {p}: not a baseline file (an object with a list of results) -->")
            continue
        world = whole(d.get("world_size"))
        inputs = d.get("inputs", "normal")
        unusable = 0
        for r in d.get("results") or []:
            if not isinstance(r, dict):
                unusable += 1
                continue
            if r.get("ms") is None or r.get("check") not in ("ok", None):
                continue  # not run, or its check failed: no time to compare with
            if not (isinstance(r.get("id"), str) and isinstance(r.get("baseline"), str)
                    and num(r["ms"]) == num(r["ms"])):
                unusable += 1
                continue
            out.setdefault(r["id"], {})[r["baseline"]] = num(r["ms"])
            worlds[r["id"]] = whole(r.get("world_size", world))
            if inputs != OUR_INPUTS:
                unalike[r["id"]] = str(inputs)
        if unusable:
            print(f"<!-- {p}: {unusable} result(s) without a usable id, baseline or time -->")
    return out, worlds, unalike


def geomean(xs):
    """The geometric mean of positive numbers."""
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def case_of(cid, base):
    """The case whose baselines row `cid` is compared with, and whether the row is a variant:
    its own id, or for another of our schedules on the same case (an id with a suffix such as
    `.megatron` or `.overlap` whose prefix is a baseline case) that case's id."""
    if cid in base:
        return cid, False
    head = cid.rpartition(".")[0]
    if head in base:
        return head, True
    return cid, False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--baselines", action="append", default=[])
    args = ap.parse_args()
    ours = load_ours(args.ours)
    base, worlds, unalike = load_baselines(args.baselines)
    names = sorted({b for v in base.values() for b in v if b != "cudnn_1gpu"})
    head = ["case", "schedule", "ours ms"] + [f"{n} ms" for n in names]
    head += ["ours vs best baseline", "scaling eff.", "predicted ms", "model error"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    ratios, errors, best_of_ours, variants, marked = [], [], {}, 0, 0
    for cid in sorted(set(ours) | set(base)):
        o = ours.get(cid, {})
        case, variant = case_of(cid, base)
        b = base.get(case, {})
        t = o.get("ms", math.nan)
        cells = [cid, o.get("schedule", "-"), f"{t:.3f}" if t == t else "-"]
        cells += [f"{b[n]:.3f}" if n in b else "-" for n in names]
        best = min((b[n] for n in names if n in b), default=None)
        if best is not None and t == t and t > 0:
            r = best / t
            if variant:
                variants += 1
            else:
                ratios.append(r)
            if o.get("check") == "ok":
                best_of_ours[case] = max(best_of_ours.get(case, 0.0), r)
            cells.append(f"**{r:.2f}x**")
        else:
            cells.append("-")
        ratio_cell = len(cells) - 1
        one = b.get("cudnn_1gpu")
        world = worlds.get(case)
        if one and world and t == t and t > 0:
            cells.append(f"{100.0 * one / (world * t):.0f}%")
        else:
            cells.append("-")
        p = o.get("predicted", math.nan)
        if p == p and t == t and t > 0 and o.get("check") == "ok":
            errors.append(p / t - 1.0)
            cells += [f"{p:.3f}", f"{100.0 * (p / t - 1.0):+.1f}%"]
        else:
            cells += [f"{p:.3f}" if p == p else "-", "-"]
        if o.get("check", "ok") != "ok":
            cells[0] += f" (check: {o['check']})"
        if case in unalike and best is not None:
            cells[ratio_cell] += " (inputs unalike)"
            marked += 1
        print("| " + " | ".join(cells) + " |")
    if ratios:
        g = geomean(ratios)
        print(f"\ngeometric mean of ours vs best baseline over {len(ratios)} cases: {g:.3f}x; "
              f"worst {min(ratios):.3f}x" + (f" ({variants} rows of another schedule of a case "
              "not counted)" if variants else ""))
    if variants and best_of_ours:
        v = list(best_of_ours.values())
        g = geomean(v)
        print(f"with each case's faster checked schedule of ours: {g:.3f}x over {len(v)} cases; "
              f"worst {min(v):.3f}x")
    if marked:
        kinds = ", ".join(sorted(set(unalike.values())))
        print(f"{marked} ratio(s) marked 'inputs unalike': those baselines drew {kinds} inputs, "
              "ours uniform in [-1, 1); at the power limit the clocks follow the data's bits "
              "(2-3% on one cuDNN kernel), so those ratios are not a comparison within that "
              "(re-run the baselines with --inputs unit, their default)")
    if errors:
        a = sorted(abs(e) for e in errors)
        mid = len(a) // 2
        med = a[mid] if len(a) % 2 else 0.5 * (a[mid - 1] + a[mid])
        print(f"model vs ours over {len(a)} checked cases: median |error| {100.0 * med:.1f}%, "
              f"largest {100.0 * a[-1]:.1f}%, optimistic in {sum(e < 0 for e in errors)}")


if __name__ == "__main__":
    main()
