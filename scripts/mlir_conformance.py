#!/usr/bin/env python3
"""Conformance of mercury-opt's IR core with upstream MLIR, measured on upstream's own tests.

    python3 scripts/mlir_conformance.py UPSTREAM [--mercury-opt BIN] [--mlir-opt BIN] [-j N]
                                        [--json FILE] [--show CATEGORY ...] [--only SUBSTR]

UPSTREAM is a folder holding upstream MLIR test files (`mlir/test/IR/*.mlir`,
`mlir/test/Dialect/{Builtin,Func,Arith}/*.mlir`, kept outside this repository): every `.mlir`
file under it is read. Each file is split at `// -----` as mlir-opt's `--split-input-file` splits
(where one of its RUN lines splits), and the chunks that use only the builtin, func and arith
dialects (and unregistered ones) are kept. Each kept chunk is written padded, so that its lines
and columns are those of the whole file, and run through:

- `mlir-opt-22` (with `--allow-unregistered-dialect` where the file's RUN lines pass it): its
  verdict (accept, or reject at a line) is the reference; where the RUN lines use
  `--verify-diagnostics`, the lines the `expected-error` annotations name are the lines a
  reject must point at (when mlir-opt-22 itself meets them);
- `mercury-opt`: its verdict. A chunk *agrees* when both accept, or both reject and
  mercury-opt's first error is on a line upstream names;
- for a chunk both accept: mercury-opt's output read by `mlir-opt-22 --mlir-print-op-generic`
  against mlir-opt-22's generic print of the chunk (*round-trips*);
- for the same chunks: mlir-opt-22's `--mlir-print-debuginfo` print read by mercury-opt
  (*debuginfo reads back*), and mercury-opt's `--mlir-print-debuginfo` print of it read by
  mlir-opt-22 to the same generic print with locations (*locations round-trip*).

The summary counts chunks per category; `--show` lists the chunks of the named categories
(`false-accept`, `false-reject`, `wrong-line`, `crash`, `no-roundtrip`, `unreadable`,
`no-debuginfo`, `no-locations`), `--json` writes every chunk's result.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ALLOWED_DIALECTS = {"builtin", "func", "arith"}
SPLIT_MARKER = "// -----"
TIMEOUT_S = 30

# Registered dialects of mlir-opt-22 (filled from `--show-dialects`).
REGISTERED: set[str] = set()


@dataclass
class Chunk:
    file: str
    index: int
    first_line: int
    text: str  # padded: the chunk at its place in the file, everything before it blanked
    allow_unregistered: bool
    verify_diagnostics: bool


@dataclass
class Result:
    file: str
    index: int
    first_line: int
    upstream: str = ""  # accept | reject
    upstream_lines: list = field(default_factory=list)
    ours: str = ""  # accept | reject | crash
    our_line: int | None = None
    our_message: str = ""
    category: str = ""
    roundtrip: str = ""  # same | differs | unreadable | ""
    debuginfo: str = ""  # reads | refused | ""
    locations: str = ""  # same | differs | unreadable | ""
    detail: str = ""


def run_lines(text: str) -> list[str]:
    """The file's RUN commands, continuation lines joined."""
    out, cur = [], None
    for line in text.splitlines():
        m = re.match(r"\s*//\s*RUN:(.*)$", line)
        if not m:
            continue
        body = m.group(1).rstrip()
        cont = body.endswith("\\")
        body = body[:-1] if cont else body
        cur = body if cur is None else cur + " " + body
        if not cont:
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    return out


def split_mlir_opt(text: str) -> list[tuple[int, str]]:
    """Chunks as mlir-opt's splitAndProcessBuffer cuts them: the buffer is split at every
    `// ---`, and a piece that goes on with `--` (and a third character, not `0`) ends the
    chunk before it; anything else is a near miss and stays in the chunk. Returns (offset of
    the chunk in `text`, chunk text)."""
    head = SPLIT_MARKER[:-2]
    raw, pos = [], 0
    while True:
        i = text.find(head, pos)
        if i < 0:
            raw.append((pos, text[pos:]))
            break
        raw.append((pos, text[pos:i]))
        pos = i + len(head)
    chunks = []
    prev = None
    for off, piece in raw:
        if prev is None:
            prev = (off, piece)
            continue
        if piece.startswith("--") and len(piece) > 2 and piece[2] != "0":
            chunks.append(prev)
            prev = (off + 2, piece[2:])
        else:
            p_off, p_text = prev
            prev = (p_off, p_text + head + piece)
    if prev is not None:
        chunks.append(prev)
    return chunks


def pad(text: str, offset: int, body: str) -> str:
    """`body` at `offset` of `text`, what comes before blanked (newlines kept)."""
    before = "".join("\n" if c == "\n" else " " for c in text[:offset])
    return before + body


COMMENT = re.compile(r"//[^\n]*")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
QUOTED_OP = re.compile(r'"([A-Za-z_][\w$]*)\.[^"]*"\s*\(')
DOTTED = re.compile(r"(?<![\w$.%^@#!\"-])([A-Za-z_][\w$]*)\.[A-Za-z_][\w$.]*")
PREFIXED = re.compile(r"[!#]([A-Za-z_][\w$]*)\.")


DIALECT_RESOURCES = re.compile(r"\bdialect_resources\s*:\s*\{")
RESOURCE_OWNER = re.compile(r"([A-Za-z_][\w$.]*)(\s*:)?")


def resource_dialects(text: str) -> set[str]:
    """The dialects a `{-# dialect_resources: { DIALECT: {...}, ... } #-}` section names: the
    keys at its first nesting level (each dialect parses its own resources)."""
    found = set()
    for m in DIALECT_RESOURCES.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth > 0:
            c = text[i]
            if c in "{}":
                depth += 1 if c == "{" else -1
                i += 1
            elif depth == 1 and (w := RESOURCE_OWNER.match(text, i)):
                if w.group(2):
                    found.add(w.group(1))
                i = w.end()
            else:
                i += 1
    return found


def dialects_in_text(text: str) -> set[str]:
    """Dialect namespaces a chunk's text names: quoted op names, `!d.t` / `#d.a`, dotted
    bare identifiers (custom op names, dialect attribute keys), and the dialects of a
    `dialect_resources` file-metadata section."""
    text = COMMENT.sub("", text)
    found = {m.group(1) for m in QUOTED_OP.finditer(text)}
    bare = STRING.sub('""', text)
    found |= {m.group(1) for m in PREFIXED.finditer(bare)}
    found |= {m.group(1) for m in DOTTED.finditer(bare)}
    found |= resource_dialects(bare)
    return found


def uses_only_allowed(names: set[str]) -> bool:
    return all(d in ALLOWED_DIALECTS or d not in REGISTERED for d in names)


def chunks_of(path: Path, root: Path) -> list[Chunk]:
    text = path.read_text(errors="replace")
    runs = [r for r in run_lines(text) if "mlir-opt" in r]
    if not runs:
        return []
    split = any(re.search(r"-split-input-file(\s|$|=)", r) for r in runs)
    allow = any("-allow-unregistered-dialect" in r for r in runs)
    verify = any("-verify-diagnostics" in r for r in runs)
    pieces = split_mlir_opt(text) if split else [(0, text)]
    out = []
    for i, (off, body) in enumerate(pieces):
        if not body.strip() or not COMMENT.sub("", body).strip():
            continue
        if not uses_only_allowed(dialects_in_text(body)):
            continue
        out.append(
            Chunk(
                file=str(path.relative_to(root)),
                index=i,
                first_line=text.count("\n", 0, off) + 1,
                text=pad(text, off, body),
                allow_unregistered=allow,
                verify_diagnostics=verify,
            )
        )
    return out


def run(cmd: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    try:
        p = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, errors="replace"
        )
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", "timeout"


ERROR_LINE = re.compile(r"^(?P<file>[^\n]*?):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$", re.M)
EXPECTED = re.compile(r"expected-error(?:@(?P<where>[-+]\d+|above|below|unknown|[^\s{]*))?\s*\{\{")


def expected_error_lines(text: str) -> tuple[list[int], bool]:
    """Lines named by `expected-error` annotations; the flag says one is `@unknown` (no line)."""
    lines, unknown = [], False
    all_lines = text.split("\n")
    for n, line in enumerate(all_lines, start=1):
        for m in EXPECTED.finditer(line):
            where = m.group("where")
            if where is None:
                lines.append(n)
            elif where == "unknown":
                unknown = True
            elif where in ("above", "below"):
                step = -1 if where == "above" else 1
                k = n + step
                while 0 < k <= len(all_lines) and not COMMENT.sub("", all_lines[k - 1]).strip():
                    k += step
                lines.append(k)
            elif re.fullmatch(r"[-+]\d+", where):
                lines.append(n + int(where))
            else:
                unknown = True  # @file:line and other forms: not checked here
    return lines, unknown


def generic(mlir_opt: str, text: str, allow: bool, debuginfo: bool = False) -> tuple[int, str, str]:
    cmd = [mlir_opt, "--mlir-print-op-generic", "-"]
    if allow:
        cmd.insert(1, "--allow-unregistered-dialect")
    if debuginfo:
        cmd.insert(1, "--mlir-print-debuginfo")
    return run(cmd, text)


def normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def check(chunk: Chunk, mercury: str, mlir_opt: str, tmp: str) -> Result:
    r = Result(chunk.file, chunk.index, chunk.first_line)
    path = os.path.join(tmp, f"{chunk.file.replace('/', '_')}.{chunk.index}.mlir")
    Path(path).write_text(chunk.text)
    flags = ["--allow-unregistered-dialect"] if chunk.allow_unregistered else []

    # Upstream's verdict.
    rc, _, err = run([mlir_opt, *flags, path])
    if rc == 0:
        r.upstream = "accept"
    else:
        r.upstream = "reject"
        lines = sorted({int(m.group("line")) for m in ERROR_LINE.finditer(err)})
        if chunk.verify_diagnostics:
            expected, unknown = expected_error_lines(chunk.text)
            vrc, _, _ = run([mlir_opt, *flags, "--verify-diagnostics", path])
            if vrc == 0 and (expected or unknown):
                lines = sorted(set(expected) | set(lines))
                if unknown:
                    lines.append(0)
        r.upstream_lines = lines

    # Ours.
    rc, out, err = run([mercury, *flags, path])
    if rc == 0:
        r.ours = "accept"
    elif rc == 1:
        r.ours = "reject"
        m = ERROR_LINE.search(err)
        if m:
            r.our_line = int(m.group("line"))
            r.our_message = m.group("msg")[:200]
        else:
            r.our_message = err.strip().splitlines()[0][:200] if err.strip() else ""
    else:
        r.ours = "crash"
        r.our_message = f"exit {rc}: " + (err.strip().splitlines() or [""])[-1][:200]

    if r.ours == "crash":
        r.category = "crash"
    elif r.upstream == "accept" and r.ours == "accept":
        r.category = "agree-accept"
    elif r.upstream == "reject" and r.ours == "reject":
        ok = r.our_line in r.upstream_lines or 0 in r.upstream_lines or not r.upstream_lines
        r.category = "agree-reject" if ok else "wrong-line"
    elif r.upstream == "reject":
        r.category = "false-accept"
    else:
        r.category = "false-reject"

    if r.category != "agree-accept":
        return r

    # Round trip through mlir-opt-22's generic print.
    grc, want, gerr = generic(mlir_opt, chunk.text, chunk.allow_unregistered)
    orc, got, oerr = generic(mlir_opt, out, chunk.allow_unregistered)
    if grc != 0:
        r.roundtrip = "differs"
        r.detail = "mlir-opt cannot print its own generic form: " + gerr[:200]
    elif orc != 0:
        r.roundtrip = "unreadable"
        r.detail = (oerr.strip().splitlines() or [""])[0][:300]
    elif normalize(got) == normalize(want):
        r.roundtrip = "same"
    else:
        r.roundtrip = "differs"
        r.detail = first_difference(want, got)

    # Debug info: upstream's print with locations reads back here, and ours keeps them.
    drc, dtext, _ = run([mlir_opt, *flags, "--mlir-print-debuginfo", path])
    if drc == 0:
        dpath = path + ".debuginfo.mlir"
        Path(dpath).write_text(dtext)
        mrc, mout, merr = run([mercury, *flags, dpath])
        if mrc != 0:
            r.debuginfo = "refused"
            r.detail = r.detail or (merr.strip().splitlines() or [""])[0][:300]
        else:
            r.debuginfo = "reads"
            lrc, lout, lerr = run([mercury, *flags, "--mlir-print-debuginfo", dpath])
            wrc, want_l, _ = generic(mlir_opt, dtext, chunk.allow_unregistered, debuginfo=True)
            grc2, got_l, gerr2 = generic(mlir_opt, lout, chunk.allow_unregistered, debuginfo=True)
            if lrc != 0 or grc2 != 0:
                r.locations = "unreadable"
                if not r.detail:
                    r.detail = "locations: " + ((lerr or gerr2).strip().splitlines() or [""])[0][:300]
            elif wrc == 0 and normalize(got_l) == normalize(want_l):
                r.locations = "same"
            else:
                r.locations = "differs"
                if not r.detail:
                    r.detail = "locations: " + first_difference(want_l, got_l)
    return r


def first_difference(want: str, got: str) -> str:
    a, b = normalize(want).splitlines(), normalize(got).splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: want `{x.strip()[:150]}` got `{y.strip()[:150]}`"
    return f"lengths {len(a)} vs {len(b)} lines"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("upstream", type=Path, help="folder of upstream MLIR test files")
    repo = Path(__file__).resolve().parent.parent
    ap.add_argument("--mercury-opt", default=str(repo / "target" / "debug" / "mercury-opt"))
    ap.add_argument("--mlir-opt", default=shutil.which("mlir-opt-22") or "mlir-opt-22")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every chunk's result here")
    ap.add_argument("--show", nargs="*", default=[], help="list the chunks of these categories")
    ap.add_argument("--only", help="only files whose path contains this")
    args = ap.parse_args()

    rc, out, _ = run([args.mlir_opt, "--show-dialects"])
    if rc != 0:
        print(f"cannot run {args.mlir_opt}", file=sys.stderr)
        return 2
    REGISTERED.update(d.strip() for d in out.split(":", 1)[-1].replace("\n", ",").split(",") if d.strip())
    if not os.path.isfile(args.mercury_opt):
        print(f"no mercury-opt at {args.mercury_opt}", file=sys.stderr)
        return 2

    files = sorted(p for p in args.upstream.rglob("*.mlir") if p.is_file())
    if args.only:
        files = [f for f in files if args.only in str(f)]
    chunks = [c for f in files for c in chunks_of(f, args.upstream)]
    with tempfile.TemporaryDirectory(prefix="mlir-conformance-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda c: check(c, args.mercury_opt, args.mlir_opt, tmp), chunks))

    total = len(results)
    cats: dict[str, int] = {}
    for r in results:
        cats[r.category] = cats.get(r.category, 0) + 1
    accepted = [r for r in results if r.category == "agree-accept"]
    same = sum(r.roundtrip == "same" for r in accepted)
    conform = same + cats.get("agree-reject", 0)
    debug_reads = sum(r.debuginfo == "reads" for r in accepted)
    debug_total = sum(r.debuginfo != "" for r in accepted)
    loc_same = sum(r.locations == "same" for r in accepted)

    print(f"files: {len(files)}, chunks using only builtin/func/arith: {total}")
    print(f"  upstream accepts {sum(r.upstream == 'accept' for r in results)}, rejects "
          f"{sum(r.upstream == 'reject' for r in results)}")
    for name in ["agree-accept", "agree-reject", "wrong-line", "false-reject", "false-accept", "crash"]:
        print(f"  {name:13} {cats.get(name, 0)}")
    print(f"  accepted chunks that round-trip to upstream's generic print: {same} of {len(accepted)} "
          f"(unreadable by mlir-opt: {sum(r.roundtrip == 'unreadable' for r in accepted)}, "
          f"different: {sum(r.roundtrip == 'differs' for r in accepted)})")
    print(f"  debuginfo print reads back: {debug_reads} of {debug_total}; locations round-trip: "
          f"{loc_same} of {debug_total}")
    pct = 100.0 * conform / total if total else 0.0
    print(f"conforming chunks (same verdict, accepted ones round-trip): {conform} of {total} ({pct:.1f}%)")

    show = set(args.show)
    named = {
        "no-roundtrip": lambda r: r.category == "agree-accept" and r.roundtrip == "differs",
        "unreadable": lambda r: r.category == "agree-accept" and r.roundtrip == "unreadable",
        "no-debuginfo": lambda r: r.debuginfo == "refused",
        "no-locations": lambda r: r.locations in ("differs", "unreadable"),
    }
    for r in results:
        if r.category in show or any(f(r) for k, f in named.items() if k in show):
            where = f"{r.file}:{r.first_line} (chunk {r.index})"
            print(f"[{r.category}{'/' + r.roundtrip if r.roundtrip else ''}] {where}: "
                  f"upstream {r.upstream} {r.upstream_lines[:4]}, ours {r.ours} {r.our_line or ''} "
                  f"{r.our_message} {r.detail}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
