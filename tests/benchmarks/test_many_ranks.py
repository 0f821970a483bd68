"""benchmarks/many_ranks.py's input: N copies of one small shared trace, each its own rank, its
timestamps shifted and its correlation ids offset, so that the ingest keeps every copy."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.many_ranks import SOURCE, make_ranks


def test_each_copy_is_its_own_rank_shifted_in_time(tmp_path: Path) -> None:
    if not SOURCE.is_file():
        pytest.skip(f"{SOURCE} is absent: real traces unavailable")
    with gzip.open(SOURCE, "rt") as fh:
        source = json.load(fh)["traceEvents"]
    assert make_ranks(tmp_path, 3) == len(source)
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == [f"rank-{r:05d}.pt.trace.json.gz" for r in range(3)]
    for rank, path in enumerate(files):
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh)
        assert doc["distributedInfo"] == {"rank": rank, "world_size": 3}
        for e, s in zip(doc["traceEvents"], source, strict=True):
            if isinstance(s.get("ts"), (int, float)):
                assert e["ts"] == s["ts"] + 3 * rank
            if "correlation" in (s.get("args") or {}):
                assert e["args"]["correlation"] == s["args"]["correlation"] + 100_000 * rank
