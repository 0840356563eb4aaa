#!/usr/bin/env python3
"""Compares two directories written by scripts/sim_compare.sh (old binaries, new binaries).

    python3 scripts/sim_compare.py OLD NEW [--rtol 1e-9]

Text outputs (*.out) must be identical line for line, except the lines that report how long
the search took (mercury-tune's `time:` line and report line, `time_to_first_usable_s` and
the like in its JSON) and the two directories' names. JSON files
(the model's traces, mercury-tune's candidates, reports and plans) must have the same structure,
the same strings and numbers that agree within `rtol` relative (|a - b| <= rtol * max(|a|, |b|);
numbers in microseconds or seconds alike). Prints a summary: how many files were compared, how
many were identical, the largest relative difference of a number and where; exits 1 on any
mismatch (the first few are printed).

Each directory must be one that sim_compare.sh wrote, and every case in it must have run: a
directory with no case outputs (`CASE.out` ending in `exit N`), or with a case whose command
was not found or not executable (`exit 127` or `exit 126`: a wrong BIN_DIR), is refused
(`sim_compare.py: error: ...`, exit 1); two directories of cases that all failed to run
would otherwise compare identical.
"""
import argparse
import json
import os
import re
import sys

# Keys whose values are wall-clock measurements of the tool itself, not predictions.
TIMING_KEYS = {"time_to_first_usable_s", "total_s", "search_s", "elapsed_s", "wall_s", "time_s"}
TIMING_LINE = re.compile(r"^(time:|wrote \d+ files|- time to first usable schedule:)")


def walk(a, b, path, worst, problems):
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        if a != b:
            problems.append(f"{path}: {a!r} != {b!r}")
        return
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return
        scale = max(abs(a), abs(b))
        rel = abs(a - b) / scale if scale > 0 else 0.0
        if rel > worst[0]:
            worst[0], worst[1] = rel, f"{path}: {a!r} vs {b!r}"
        if rel > worst[2]:
            problems.append(f"{path}: {a!r} vs {b!r} (relative {rel:.3g})")
        return
    if type(a) is not type(b):
        problems.append(f"{path}: {type(a).__name__} vs {type(b).__name__}")
        return
    if isinstance(a, dict):
        if set(a) != set(b):
            problems.append(f"{path}: keys {sorted(set(a) ^ set(b))} differ")
            return
        for k in a:
            if k in TIMING_KEYS:
                continue
            walk(a[k], b[k], f"{path}.{k}", worst, problems)
    elif isinstance(a, list):
        if len(a) != len(b):
            problems.append(f"{path}: {len(a)} vs {len(b)} items")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", worst, problems)
    elif a != b:
        problems.append(f"{path}: {a!r} != {b!r}")


def files(root):
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if rel.startswith("in" + os.sep):
                continue
            if n.endswith((".out", ".json", ".md", ".transform", ".mlir")):
                yield rel


EXIT_LINE = re.compile(r"^exit (\d+)$")


def check_ran(root):
    """None when `root` holds case outputs that all ran, else why it is refused."""
    if not os.path.isdir(root):
        return f"{root}: not a directory"
    statuses = {}
    for f in files(root):
        if not f.endswith(".out"):
            continue
        with open(os.path.join(root, f)) as fh:
            lines = fh.read().splitlines()
        m = EXIT_LINE.match(lines[-1]) if lines else None
        if m:
            statuses[f] = int(m.group(1))
    if not statuses:
        return f"{root}: no case outputs (CASE.out ending in 'exit N'): not written by sim_compare.sh"
    not_run = sorted(f for f, s in statuses.items() if s in (126, 127))
    if not_run:
        return (f"{root}: {len(not_run)} of {len(statuses)} cases did not run (exit 127: command "
                f"not found, or 126: not executable), the first {not_run[0]}; was sim_compare.sh "
                "given the right BIN_DIR?")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rtol", type=float, default=1e-9)
    a = ap.parse_args()
    for root in (a.old, a.new):
        why = check_ran(root)
        if why:
            print(f"sim_compare.py: error: {why}", file=sys.stderr)
            sys.exit(1)
    old, new = set(files(a.old)), set(files(a.new))
    problems = []
    for f in sorted(old ^ new):
        problems.append(f"{f}: only in {'old' if f in old else 'new'}")
    worst = [0.0, "", a.rtol]
    identical = compared = 0
    for f in sorted(old & new):
        pa, pb = os.path.join(a.old, f), os.path.join(a.new, f)
        # The two directories' own names appear in messages (files written, inputs).
        ta = open(pa).read().replace(os.path.abspath(a.old), "OUT")
        tb = open(pb).read().replace(os.path.abspath(a.new), "OUT")
        compared += 1
        here = []
        if f.endswith(".json"):
            before = worst[0]
            worst_here = [0.0, "", a.rtol]
            walk(json.loads(ta), json.loads(tb), f, worst_here, here)
            if worst_here[0] > before:
                worst[0], worst[1] = worst_here[0], worst_here[1]
            same = not here and worst_here[0] == 0
        else:
            la = [l for l in ta.splitlines() if not TIMING_LINE.match(l)]
            lb = [l for l in tb.splitlines() if not TIMING_LINE.match(l)]
            if la != lb:
                diff = next(
                    (f"line {i + 1}: {x!r} vs {y!r}" for i, (x, y) in enumerate(zip(la, lb)) if x != y),
                    f"{len(la)} vs {len(lb)} lines",
                )
                here.append(f"{f}: {diff}")
            same = not here
        identical += same
        problems += here
    print(f"{compared} files compared: {identical} identical (but for paths and search times), "
          f"{compared - identical} not")
    if worst[0] > 0:
        print(f"largest relative difference of a number: {worst[0]:.3g} ({worst[1]})")
    else:
        print("no number differs")
    if problems:
        print(f"{len(problems)} mismatches; the first ones:")
        for p in problems[:20]:
            print("  " + p)
        sys.exit(1)


if __name__ == "__main__":
    main()
