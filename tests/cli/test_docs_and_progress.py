"""The CLI reference cannot drift from --help; progress is reported while ingesting."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, trace_file

from trace_report.cli.doc import _help, command_names, reference
from trace_report.ingest.pipeline import IngestOptions, open_in_memory
from trace_report.inputs import resolve


def test_cli_reference_is_up_to_date() -> None:
    assert (REPO / "docs" / "cli.md").read_text() == reference(), \
        "docs/cli.md is stale: python -m trace_report.cli.doc > docs/cli.md"


def test_every_command_is_documented() -> None:
    text = (REPO / "docs" / "cli.md").read_text()
    for name in command_names():
        assert f"## trace-report {name}" in text


def test_every_command_shows_its_examples_one_per_line() -> None:
    for name in command_names():
        lines = _help([name]).splitlines()
        heads = [i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:")]
        assert len(heads) == 1, f"{name}: no example in --help"
        examples = []
        for line in lines[heads[0] + 1:]:
            if not line.strip():
                break
            examples.append(line.strip())
        assert examples and all(e.startswith(f"trace-report {name}") for e in examples), (name, examples)
        assert (len(examples) > 1) == (lines[heads[0]].strip() == "Examples:"), (name, examples)


def test_progress_reports_bytes_up_to_the_total(tmp_path: Path) -> None:
    path = trace_file("hta_ns_resolution")
    calls: list[tuple[int, int]] = []
    con, _ = open_paths([path], IngestOptions(piece_bytes=1 << 20, progress=lambda d, t: calls.append((d, t))))
    con.close()
    size = path.stat().st_size
    assert len(calls) > 3
    assert all(t == size for _, t in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == size


def open_paths(paths, options=None):
    """An in-memory database of ``paths`` through the one resolver (as ``trace_report.open``)."""
    with resolve(paths) as found:
        return open_in_memory(found, options)
