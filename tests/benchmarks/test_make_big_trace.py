"""benchmarks/make_big_trace.py, the input builder of the benchmarks: copies shifted in time with
their ids offset, and with --renumber-steps a new ProfilerStep number per copy (what
benchmarks/commands.py's 1M-event trace needs: 485 steps, not one step number 485 times)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.make_big_trace import build

SOURCE = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#5", "pid": 0, "tid": 7, "ts": 110, "dur": 50},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 105, "dur": 5,
     "args": {"correlation": 9, "External id": 3}},
    {"ph": "X", "cat": "kernel", "name": "ProfilerStep#5 lookalike", "pid": 0, "tid": 7, "ts": 120, "dur": 20,
     "args": {"correlation": 9, "External id": 3}},
]


def _copies(tmp_path: Path, renumber: bool) -> list[dict]:
    src = tmp_path / "src.json"
    src.write_text(json.dumps({"traceEvents": SOURCE}))
    out = tmp_path / "out.json"
    assert build(src, out, 3, renumber_steps=renumber) == 1 + 4 * 3  # metadata once
    return json.loads(out.read_text())["traceEvents"]


def test_steps_renumbered_per_copy(tmp_path: Path) -> None:
    events = _copies(tmp_path, renumber=True)
    steps = [(e["cat"], e["name"], e["ts"]) for e in events if e.get("cat", "").endswith("user_annotation")]
    span = 61  # ceil(160 - 100 + 1): the source's span, the shift of each copy
    assert steps == [(c, f"ProfilerStep#{5 + k}", ts + k * span) for k in range(3)
                     for c, ts in (("user_annotation", 100), ("gpu_user_annotation", 110))]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [e["name"] for e in kernels] == ["ProfilerStep#5 lookalike"] * 3  # only whole step names change
    assert [e["args"]["correlation"] for e in kernels] == [9, 19, 29]  # ids offset by the largest + 1


def test_steps_kept_without_the_option(tmp_path: Path) -> None:
    events = _copies(tmp_path, renumber=False)
    assert {e["name"] for e in events if e.get("cat") == "user_annotation"} == {"ProfilerStep#5"}
