"""The golden cases: every analysis command's JSON output on every input in ``../shared/data``.

Recorded once before the package was restructured (``python -m tests.golden.record``), and
checked by ``tests/test_golden.py`` so that a refactor cannot change a number silently. A
golden file is updated only in a commit that says which number changed and why.

Each case is ``(key, argv)``; ``$SHARED`` in an argument stands for the shared folder, and the
same placeholder replaces that folder's path in the recorded output (so that the file does not
depend on where the checkout lives).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "outputs"

TRACE_COMMANDS: list[tuple[str, list[str]]] = [
    ("top-kernels", ["top-kernels", "-n", "40"]),
    ("top-kernels-by-rank", ["top-kernels", "--by-rank", "-n", "10"]),
    ("breakdown", ["breakdown"]),
    ("breakdown-by-step", ["breakdown", "--by-step"]),
    ("flags", ["flags", "-n", "60"]),
    ("flags-summary", ["flags", "--summary"]),
    ("advise", ["advise"]),
    ("roofline-estimate", ["roofline", "--gpu", "a100-sxm4-80gb", "-n", "40"]),
]
HTA_COMMANDS: list[tuple[str, list[str]]] = [
    ("hta-temporal", ["hta", "temporal"]),
    ("hta-idle", ["hta", "idle"]),
    ("hta-launch", ["hta", "launch"]),
]
NCU_COMMANDS: list[tuple[str, list[str]]] = [
    ("roofline", ["roofline"]),
    ("roofline-by-name", ["roofline", "--by-name"]),
    ("roofline-a100", ["roofline", "--gpu", "a100-sxm4-80gb"]),
]
COMPARE_PAIRS: list[tuple[str, str, str]] = [
    ("trace-diff", "$SHARED/data/traces/hta_trace_diff/control.json.gz",
     "$SHARED/data/traces/hta_trace_diff/test.json.gz"),
    ("rn50-2021", "$SHARED/data/traces/kineto_rn50_nw4_2021feb/worker0.pt.trace.json.gz",
     "$SHARED/data/traces/kineto_rn50_nw4_2021jun/worker0.1623212756351.pt.trace.json.gz"),
]


def _rel(path: Path, shared: Path) -> str:
    return "$SHARED/" + str(path.relative_to(shared))


def trace_inputs(shared: Path) -> list[str]:
    """Every trace file (and archive) under ``data/traces``, as ``$SHARED/...`` paths."""
    folder = shared / "data" / "traces"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz", ".tar.gz")))
    return [_rel(p, shared) for p in files]


def cases(shared: Path, *, hta: bool = True) -> list[tuple[str, list[str]]]:
    """All golden cases for the shared folder, in a stable order."""
    out: list[tuple[str, list[str]]] = []
    commands = TRACE_COMMANDS + (HTA_COMMANDS if hta else [])
    for path in trace_inputs(shared):
        for name, argv in commands:
            if name.startswith("hta") and path.endswith(".tar.gz"):
                continue  # HTA reads folders of ranks, not archives
            out.append((f"{path}::{name}", [*argv, path]))
    for report in sorted((shared / "data" / "ncu").rglob("*.ncu-rep")):
        for name, argv in NCU_COMMANDS:
            out.append((f"{_rel(report, shared)}::{name}", [*argv, _rel(report, shared)]))
    for db in sorted((shared / "data" / "nsys").rglob("*.sqlite")):
        for name, argv in TRACE_COMMANDS[:7]:
            out.append((f"{_rel(db, shared)}::{name}", [*argv, _rel(db, shared)]))
    for csv in sorted((shared / "data" / "nsys").rglob("*kernsum*.csv")):
        out.append((f"{_rel(csv, shared)}::top-kernels", ["top-kernels", _rel(csv, shared)]))
    for key, a, b in COMPARE_PAIRS:
        out.append((f"compare::{key}::kernel", ["compare", a, b]))
        out.append((f"compare::{key}::region", ["compare", "--by", "region", a, b]))
    return out


def run_case(argv: list[str], shared: Path) -> dict[str, Any]:
    """Run ``trace-report ARGV -f json`` in this process: ``{"exit": code, "rows": parsed stdout}``."""
    from trace_report.cli.app import main

    args = [a.replace("$SHARED", str(shared)) for a in argv] + ["-f", "json"]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except Exception as exc:  # a traceback escaping the CLI: recorded as what it was
            first = str(exc).splitlines()[0] if str(exc) else ""
            return {"exit": "traceback", "rows": f"{type(exc).__name__}: {first}"}
    text = out.getvalue().replace(str(shared), "$SHARED")
    try:
        rows = json.loads(text) if text.strip() else None
    except ValueError:
        rows = text
    return {"exit": code, "rows": rows}


def golden_file(key: str) -> Path:
    """The file holding the golden outputs of one input (all its commands)."""
    stem = key.split("::")[0] if not key.startswith("compare::") else "compare"
    safe = stem.replace("$SHARED/", "").replace("/", "__")
    return GOLDEN / f"{safe}.json"


def differences(expected: Any, actual: Any, where: str = "", rel: float = 1e-9) -> list[str]:
    """Where two JSON values differ: strings, ints, bools and None exactly; floats within
    ``rel`` (DuckDB's parallel sums may differ in the last bits between runs)."""
    if isinstance(expected, float) or isinstance(actual, float):
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (expected, actual))
        if numbers and math.isclose(float(expected), float(actual), rel_tol=rel, abs_tol=1e-9):
            return []
        return [f"{where}: {expected!r} != {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        if list(expected) != list(actual):
            out.append(f"{where}: keys {list(expected)} != {list(actual)}")
        for k in expected:
            if k in actual:
                out.extend(differences(expected[k], actual[k], f"{where}.{k}", rel))
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} rows != {len(actual)} rows"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(differences(e, a, f"{where}[{i}]", rel))
        return out
    return [] if expected == actual else [f"{where}: {expected!r} != {actual!r}"]
