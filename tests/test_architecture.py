"""The layered layout holds (docs/architecture.md): no import cycles, imports at the top of files
outside the CLI layer, every module importable, a light command line, no binaries tracked."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, invoke

import trace_report

PACKAGE = REPO / "trace_report"
HEAVY = ("pandas", "altair", "torch", "hta", "ncu_report", "vl_convert", "ray")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Edges between our modules (module level and in functions) and the in-function ones
    outside ``trace_report.cli``."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    inner: list[str] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        in_func = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            hits = {t for t in targets if t in mods and t != name}
            edges[name] |= hits
            if hits and id(node) in in_func and not name.startswith("trace_report.cli"):
                inner.append(f"{path.relative_to(REPO)}:{node.lineno} imports {', '.join(sorted(hits))}")
    return edges, inner


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        stack.pop()
        return None

    for v in sorted(edges):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_no_import_cycles_and_few_deferred_imports() -> None:
    edges, inner = _imports(_modules())
    assert sum(map(len, edges.values())) > 150  # the walk sees the real graph
    assert _cycle(edges) is None, " -> ".join(_cycle(edges) or [])
    assert len(inner) <= 5, "\n".join(inner)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports() -> None:
    names = [m.name for m in pkgutil.walk_packages(trace_report.__path__, "trace_report.")
             if not m.name.endswith("__main__")]
    assert "trace_report.cli.declared" in names and "trace_report.store.tracedb" in names
    for name in names:
        importlib.import_module(name)


def test_cli_import_is_light() -> None:
    code = ("import sys, trace_report.cli.app; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "", f"importing the CLI loaded {out.stdout.strip()}"


def test_every_command_is_registered() -> None:
    from trace_report.cli.app import COMMAND_ORDER, app
    from trace_report.declare import commands

    assert "kernel-variance" in commands()  # declared commands are found by the walk of analyses/
    assert sorted(c.name for c in app.registered_commands) == sorted({*COMMAND_ORDER, *commands()})


def test_version() -> None:
    result = invoke(["--version"])
    assert (result.exit_code, result.stdout.strip()) == (0, f"trace-report {trace_report.__version__}")
    meta = (REPO / "pyproject.toml").read_text()
    assert 'version = { attr = "trace_report.__version__" }' in meta


def test_no_binary_file_is_tracked() -> None:
    files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, cwd=REPO, check=True).stdout
    binary = []
    for name in filter(None, files.decode().split("\0")):
        path = REPO / name
        if name.startswith("traces/") and name.endswith(".pt.trace.json.gz"):
            # the only binary data allowed: small gzip traces this project captured itself
            assert path.stat().st_size < 1 << 20, f"{name}: traces/ keeps small traces only"
            continue
        if path.is_file() and path.suffix not in (".png",) and b"\0" in path.read_bytes()[:8192]:
            binary.append(name)
    assert binary == []
    assert not (PACKAGE / "capture" / "overhead.py").exists()  # a benchmark, in benchmarks/


ANALYSES = "trace_report.analyses."
COMMON = "common"
CROSS_COMMAND_IMPORTS = {
    ("advise", "breakdown"): "advise's verdicts read the rank's breakdown rows (idle share, data loading)",
    ("advise", "queue"): "advise's launch-bound verdict reads the rank's launch-queue lengths",
    ("compare", "breakdown"): "compare diffs the two sides' breakdown results (compare/ray.py: on Ray)",
    ("compare", "top_kernels"): "compare diffs the two sides' CPU self time (top-kernels' CPU table; on Ray too)",
}
"""The imports of one analysis package's modules by another's that remain, each with its reason.
Every other import between packages under ``trace_report.analyses`` goes through ``common``."""


def _package_of(module: str) -> str | None:
    """The package under ``trace_report.analyses`` that ``module`` belongs to (None outside)."""
    return module[len(ANALYSES):].split(".")[0] if module.startswith(ANALYSES) else None


def _cross_command(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the imports, for packages other than ``common``
    as the imported side and other than the importer itself."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, targets in edges.items():
        a = _package_of(module)
        for target in sorted(targets):
            b = _package_of(target)
            if a and b and b not in (a, COMMON):
                found.setdefault((a, b), []).append(f"{module} imports {target}")
    return found


def test_the_cross_command_finder_finds_an_import() -> None:
    edges = {"trace_report.analyses.queue": {"trace_report.analyses.overlap", "trace_report.analyses.common.result"},
             "trace_report.analyses.ops.nesting_kept": {"trace_report.analyses.ops.nesting"}}
    assert list(_cross_command(edges)) == [("queue", "overlap")]


def test_no_analysis_imports_another_ones_modules() -> None:
    edges, _ = _imports(_modules())
    found = _cross_command(edges)
    new = {pair: found[pair] for pair in found if pair not in CROSS_COMMAND_IMPORTS}
    assert not new, "import through analyses/common instead:\n" + "\n".join(sum(new.values(), []))
    assert not set(CROSS_COMMAND_IMPORTS) - set(found), "remove the allowlist entries no import needs"
    packages = {p.name for p in (PACKAGE / "analyses").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert COMMON in packages and not list((PACKAGE / "analyses").glob("[!_]*.py"))  # packages only
