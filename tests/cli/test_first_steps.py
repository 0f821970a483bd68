"""First steps (README): ``./run trace-report ...`` without activating ``.venv``; the analysis
side installed alone (no torch: ``trace-report capture`` then says which extra to install);
the ``[capture]`` and ``[notebook]`` extras; the README's two set-up commands."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GPU_OP_CATS, complete_events, trace_file

REPO = Path(__file__).resolve().parents[2]
WITHOUT_TORCH = """
import contextlib, io, json, sys
sys.modules.update(torch=None, torchvision=None)  # as if not installed: `import torch` raises ImportError
import importlib, pkgutil, trace_report
from trace_report.cli.app import main
for mod in pkgutil.walk_packages(trace_report.__path__, "trace_report."):
    if not mod.name.startswith("trace_report.capture") and not mod.name.endswith("__main__"):
        importlib.import_module(mod.name)  # every module outside capture/ imports without torch
results = []
for args in json.loads(sys.argv[1]):
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def top_kernel(path: Path) -> str:
    """The GPU operation (kernel, memcpy or memset: top-kernels ranks them together) with the most
    total time, by a plain pass over the JSON."""
    totals: dict[str, float] = {}
    for e in complete_events(path):
        if e.get("cat") in GPU_OP_CATS:
            totals[e["name"]] = totals.get(e["name"], 0.0) + float(e["dur"])
    return max(totals, key=totals.get)


def fake_venv(folder: Path) -> Path:
    """A ``.venv`` as ``./run``'s set-up leaves it (its python, the install stamp of this
    pyproject.toml) whose ``trace-report`` runs this checkout."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    stamped = ("pyproject.toml", "requirements-pins.txt", "trace_report/formats/_scan.pyx")  # as ./run hashes them
    stamp = hashlib.sha256(b"".join((REPO / name).read_bytes() for name in stamped))
    (folder / f".installed-{stamp.hexdigest()[:16]}").touch()
    exe = bin_dir / "trace-report"
    exe.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m trace_report.cli "$@"\n')
    exe.chmod(0o755)
    return folder


def test_run_trace_report_passes_arguments_from_the_callers_folder(tmp_path):
    """``./run trace-report ARGS`` runs the command of ``.venv`` with ARGS untouched, relative
    paths read from the caller's folder (not the repository's)."""
    trace = trace_file("hta_trace_diff")  # skips without ../shared
    env = {**os.environ, "TRACE_REPORT_VENV": str(fake_venv(tmp_path / "venv"))}
    done = subprocess.run([str(REPO / "run"), "trace-report", "top-kernels", trace.name, "-n", "1", "-f", "json"],
                          cwd=trace.parent, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout[done.stdout.index("["):])
    assert row["name"] == top_kernel(trace)
    done = subprocess.run([str(REPO / "run"), "trace-report", "top-kernels", "absent.json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and done.stderr.startswith("Error:") and "absent.json" in done.stderr


def test_analysis_side_needs_no_torch(tmp_path):
    """What ``pip install trace-report`` (no extra) gets: with torch unimportable every module
    outside ``capture/`` imports and ``top-kernels`` ranks a real trace; ``capture`` is one
    ``Error:`` line naming the ``[capture]`` extra."""
    trace = trace_file("hta_trace_diff")
    calls = [["top-kernels", str(trace), "-n", "1", "-f", "json"],
             ["capture", "--steps", "1", "--out-dir", str(tmp_path)]]
    done = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, json.dumps(calls)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    (top, capture) = json.loads(done.stdout.splitlines()[-1])
    assert top[0] == 0 and json.loads(top[1][top[1].index("["):])[0]["name"] == top_kernel(trace)
    assert capture[0] == 1 and capture[2].startswith("Error:") and len(capture[2].strip().splitlines()) == 1
    assert "trace-report[capture]" in capture[2]
    assert not list(tmp_path.glob("*/run.json"))


def test_extras():
    """torch only in ``[capture]`` (and ``dev``); jupysql in ``[notebook]`` (and ``dev``)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {key: {req.split(">")[0].split("=")[0].strip() for req in reqs}
             for key, reqs in {"core": project["dependencies"], **project["optional-dependencies"]}.items()}
    assert not names["core"] & {"torch", "torchvision", "jupysql"}
    assert names["capture"] == {"torch", "torchvision"} and {"jupysql", "ipykernel"} <= names["notebook"]
    assert names["capture"] | names["notebook"] <= names["dev"]


def test_readme_keeps_two_setup_commands():
    readme = (REPO / "README.md").read_text()
    setup = readme[readme.index("## Set-up"):readme.index("## Use")]
    block = setup[setup.index("```bash"):setup.index("```", setup.index("```bash") + 3)]
    assert [line.split()[:2] for line in block.splitlines()[1:]] == [["./run", "demo"], ["./run", "test"]]
    assert "source .venv/bin/activate" in readme and "./run trace-report " in readme
    assert 'pip install "trace-report[notebook]' in readme
