"""The advise findings for people (present/findings.py): one block per finding at 80-120 columns,
never a word cut, the verdict first; Markdown as a pull-request comment. Built on hand-made
frames of the advise contract (not through the analysis)."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from trace_report.present.findings import (
    milliseconds,
    number,
    ranks_label,
    render_markdown,
    render_text,
)

COLUMNS = ["ranks", "finding", "title", "value", "unit", "threshold", "est_saving_ms_per_step",
           "saving_pct_of_step", "evidence", "recommendation", "link"]
LONG_URL = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/overlapping-communication.html"
VERDICT = ("Pageable host<->device copies cost the most: about 12.3 ms per step (41% of step time) "
           "could be saved on rank 0.")


def _frame() -> pd.DataFrame:
    rows = [
        [[0], "pageable_memcpy", "Pageable host<->device copies", 84.2, "% of GPU time", 2.0, 12.3, 41.0,
         "37 copies per step, 24.6 ms per step (Memcpy HtoD (Pageable -> Device)); the GPU is idle "
         "0.3 ms per step during them; the largest copy moves 38.5 MB from a tensor built by the "
         "DataLoader with num_workers>0 and pin_memory=False",
         "Allocate the host tensors in pinned memory: DataLoader(pin_memory=True), then "
         ".to(device, non_blocking=True)",
         "https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers"],
        [[0, 1, 2, 3, 5], "exposed_communication", "Communication not hidden behind compute", 23.456,
         "% of step time", 10.0, 4.56, 15.2,
         "nccl:all_reduce 18 calls per step, 9.8 ms per step; 4.6 ms per step of it with no kernel "
         "running beside it; bucket sizes 25 MB (default) on every rank",
         "Overlap gradient all-reduce with the backward pass: keep DistributedDataParallel's "
         "bucketing, raise bucket_cap_mb, and avoid a torch.cuda.synchronize() between backward and step",
         LONG_URL],
        [[2], "memory_near_capacity", "Memory near capacity", 95.04, "% of device memory", 90.0,
         math.nan, math.nan,
         "peak reserved 75.9 GB of 79.6 GB; peak allocated 71.2 GB",
         "Lower the batch size or enable activation checkpointing before the allocator starts to thrash",
         ""],
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def _contains(words: list[str], part: list[str]) -> bool:
    """Whether ``part`` occurs in ``words`` as a contiguous run."""
    n = len(part)
    return any(words[i:i + n] == part for i in range(len(words) - n + 1))


@pytest.mark.parametrize("width", [80, 100, 120])
def test_text_fits_width_without_cutting_words(width: int) -> None:
    frame = _frame()
    text = render_text(frame, VERDICT, width)
    lines = text.splitlines()
    assert text.endswith("\n")
    for line in lines:
        if len(line) > width:  # only a lone word that no line can hold: the long URL
            assert line.split() == [LONG_URL], line
    words = text.split()
    for column in ("evidence", "recommendation", "title"):
        for value in frame[column]:
            assert _contains(words, value.split()), (column, value)
    assert _contains(words, VERDICT.split())
    for url in frame["link"]:
        if url:
            assert any(url in line.split() for line in lines), url  # whole, on one line


@pytest.mark.parametrize("width", [80, 100, 120])
def test_text_verdict_first_blocks_in_order(width: int) -> None:
    frame = _frame()
    lines = render_text(frame, VERDICT, width).splitlines()
    assert lines[0] == VERDICT[: len(lines[0])] and lines[0]
    heads = [i for i, line in enumerate(lines) if re.match(r"^\d+\. ", line)]
    assert [lines[i].split(".")[0] for i in heads] == ["1", "2", "3"]
    for i, title in zip(heads, frame["title"], strict=True):
        assert lines[i].startswith(f"{lines[i].split('.')[0]}. {title}")
    assert heads[0] > 0 and lines[heads[0] - 1] == ""
    assert "ranks 0-3, 5" in "\n".join(lines)


def test_text_missing_saving_is_left_out() -> None:
    text = render_text(_frame(), VERDICT, 100)
    assert re.search(r"\bnan\b", text, re.IGNORECASE) is None
    memory = text[text.index("3. Memory near capacity"):]
    assert "95% of device memory (threshold 90%)" in memory
    assert "saves" not in memory
    assert "See:" not in memory  # no link, no line for it


def test_text_layout() -> None:
    frame = _frame().iloc[[0]].rename(columns={"ranks": "rank"}).assign(rank=[0])
    text = render_text(frame, "One finding.", 100)
    assert text == (
        "One finding.\n"
        "\n"
        "1. Pageable host<->device copies (pageable_memcpy) — rank 0\n"
        "   84.2% of GPU time (threshold 2%) · saves ~12.3 ms/step (41% of step time)\n"
        "   Evidence: 37 copies per step, 24.6 ms per step (Memcpy HtoD (Pageable -> Device)); the GPU is\n"
        "             idle 0.3 ms per step during them; the largest copy moves 38.5 MB from a tensor built by\n"
        "             the DataLoader with num_workers>0 and pin_memory=False\n"
        "   Do: Allocate the host tensors in pinned memory: DataLoader(pin_memory=True), then .to(device,\n"
        "       non_blocking=True)\n"
        "   See: https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers\n"
    )


def test_text_long_url_alone_at_80() -> None:
    lines = render_text(_frame(), VERDICT, 80).splitlines()
    i = next(i for i, line in enumerate(lines) if LONG_URL in line)
    assert lines[i].strip() == LONG_URL
    assert lines[i - 1].strip() == "See:"


def test_text_empty_frame_is_the_verdict() -> None:
    empty = _frame().iloc[0:0]
    assert render_text(empty, "No finding crosses a threshold.", 80) == "No finding crosses a threshold.\n"
    assert render_text(empty, "", 80) == ""


def test_markdown_pr_comment() -> None:
    frame = _frame()
    md = render_markdown(frame, VERDICT)
    lines = md.splitlines()
    assert lines[0].startswith("## ")
    assert "**Pageable host<->device copies cost the most: about 12.3 ms per step (41% of step time) " \
           "could be saved on rank 0.**" in md
    heads = [line for line in lines if line.startswith("### ")]
    assert len(heads) == 3
    for n, (head, title) in enumerate(zip(heads, frame["title"], strict=True), start=1):
        assert head.startswith(f"### {n}. {title}")
    assert "— ranks 0-3, 5" in heads[1]
    for url in frame["link"]:
        if url:
            assert re.search(r"\[[^\]]+\]\(" + re.escape(url) + r"\)", md), url
    assert not any(line.startswith("|") for line in lines)  # no table cells of prose
    assert re.search(r"\bnan\b", md, re.IGNORECASE) is None
    words = md.split()
    for value in frame["evidence"]:
        assert _contains(words, value.split())
    assert md.endswith("\n") and not md.endswith("\n\n")


def test_markdown_escapes_tags() -> None:
    frame = _frame().iloc[[0]].assign(evidence=["kernel void add<float>(float*, int) & more"])
    md = render_markdown(frame, "")
    assert "add&lt;float>(float\\*, int) & more" in md
    assert "host<->device" in md  # an arrow is not a tag


@pytest.mark.parametrize(("value", "text"), [
    (1234.5, "1,234"), (123.4, "123"), (84.2, "84.2"), (41.0, "41"), (2.0, "2"), (1.5, "1.5"),
    (0.123, "0.123"), (0.0, "0"), (-12.34, "-12.3"),
])
def test_number(value: float, text: str) -> None:
    assert number(value) == text


@pytest.mark.parametrize(("value", "text"), [(12.3, "12.3"), (12.0, "12.0"), (1234.56, "1,234.6"),
                                             (2.456, "2.46"), (0.3, "0.3")])
def test_milliseconds(value: float, text: str) -> None:
    assert milliseconds(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0, "rank 0"), ([3], "rank 3"), ([0, 1, 2, 3, 5], "ranks 0-3, 5"), ([5, 0, 1], "ranks 0-1, 5"),
    ([0, 2, 4], "ranks 0, 2, 4"), (math.nan, ""), (None, ""), ([], ""),
])
def test_ranks_label(value: object, text: str) -> None:
    assert ranks_label(value) == text


def test_text_measure_parts_on_lines_of_their_own_when_narrow() -> None:
    frame = _frame().iloc[[1]].assign(unit=["% of the step time spent in exposed collectives"])
    lines = render_text(frame, "", 80).splitlines()
    assert lines[:2] == ["1. Communication not hidden behind compute (exposed_communication)",
                         "   — ranks 0-3, 5"]  # the ranks stay together
    assert lines[2] == "   23.5% of the step time spent in exposed collectives (threshold 10%)"
    assert lines[3] == "   saves ~4.56 ms/step (15.2% of step time)"
