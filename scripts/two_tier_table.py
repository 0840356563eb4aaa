#!/usr/bin/env python3
"""The two-tier table of scripts/gpu.sh (part `twotier`, issue 13 item 4).

Reads DIR (the part's output folder): per operator (mha, gqa), mercury-tune's ranking on the
measured two-tier topology (tune-OP/candidates.json, schedule.json) and the checked runs of the
known templates and the pick (run.OP.NAME-r{0,1}.log, two processes each). Prints, per operator,
every run with its predicted and measured time and both rankings, then Kendall's tau between
them, whether the model's pick among those run is the measured best, and the median error of
the predictions. A run counts only when both processes passed their checks; its time is the
slower process's median.

When the part also ran the profile-guided search (tune-prof-OP/tuning-report.json, written by
process 0 of `mercury-tune --profile-top K --launcher env`), prints every profiled candidate
and whether the measured pick is a known template or a new schedule, against the fastest
known template among those profiled."""
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


def load_json(path, kind):
    """(the JSON value of `path` if it is a `kind`, else None; why not)."""
    try:
        v = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{path}: unreadable ({e})"
    if not isinstance(v, kind):
        return None, f"{path}: not a JSON {kind.__name__}"
    return v, ""


def num(v):
    """`v` if it is a finite number, else None."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


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


def profiled(report, op, template_runs):
    """The profile-guided search's table for `op`, from its tuning report (if it ran);
    `template_runs`: (template, measured ms) of the known templates' own runs in this call."""
    if not report.exists():
        return
    rep, why = load_json(report, dict)
    prof = rep.get("profile") if rep else None
    if not isinstance(prof, dict):
        print(f"\n{why or f'{report}: no profile in it'}")
        return
    rows = [r for r in (prof.get("rows") or []) if isinstance(r, dict) and num(r.get("predicted_s")) is not None]
    print(f"\n#### {op.upper()}: profile-guided search ({len(rows)} candidates run checked in both processes; "
          "time: the slower process's median)\n")
    print("| model rank | candidate | what | predicted ms | measured ms |")
    print("| ---: | --- | --- | ---: | ---: |")
    for r in rows:
        ms = num(r.get("measured_s"))
        meas = f"{ms * 1e3:.2f}" if ms is not None else f"failed: {str(r.get('failure') or '')[:120]}"
        print(f"| {r.get('model_rank', '?')} | {r.get('name', '?')} | {r.get('template') or 'new schedule'} | "
              f"{r['predicted_s'] * 1e3:.2f} | {meas} |")
    ok = [r for r in rows if num(r.get("measured_s")) is not None]
    if not ok:
        print("\nNo profiled candidate passed its checked run.")
        return
    best = min(ok, key=lambda r: r["measured_s"])
    templates = [r for r in ok if r.get("template")]
    line = (f"\nMeasured pick: {best.get('name', '?')} ({best.get('template') or 'a new schedule'}, "
            f"{best['measured_s'] * 1e3:.2f} ms); model pick {prof.get('model_pick')}")
    # The fastest known template of this call, profiled or run on its own (separate runs).
    cands = [(r["template"], r["measured_s"] * 1e3, "profiled") for r in templates]
    cands += [(t, ms, "own run") for t, ms in template_runs]
    if cands:
        t, ms, how = min(cands, key=lambda c: c[1])
        pick_ms = best["measured_s"] * 1e3
        line += (f"; fastest known template of this call: {t} ({ms:.2f} ms, {how}); "
                 f"the pick is {ms / pick_ms:.3f}x as fast")
    print(line + ".")


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
        clist, why_c = load_json(tune / "candidates.json", list)
        sched, why_s = load_json(tune / "schedule.json", dict)
        if clist is None or sched is None:
            print(f"\n### {op.upper()}: {why_c or why_s}")
            continue
        cands = {c["name"]: c for c in clist if isinstance(c, dict) and isinstance(c.get("name"), str)}
        pick = (sched.get("schedule") or {}).get("name") if isinstance(sched.get("schedule"), dict) else None
        rows = []
        for t in sorted(tune.glob("templates/*.transform")) + [tune / "schedule.transform"]:
            lines = t.read_text(errors="replace").splitlines()
            name = lines[0].lstrip("# ").strip() if lines else t.stem
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
            rows.append((name, label, (num(c.get("predicted_s")) or float("nan")) * 1e3, ms, why))
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
        template_runs = [(cands[r[0]]["template"], r[3]) for r in ok if cands.get(r[0], {}).get("template")]
        profiled(d / f"tune-prof-{op}" / "tuning-report.json", op, template_runs)

    if not found:
        sys.exit(f"two_tier_table.py: no tune-mha/ or tune-gqa/ with candidates.json and schedule.json in {d}")


if __name__ == "__main__":
    main()
