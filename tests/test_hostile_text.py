"""Hostile text in a trace: names holding terminal escape sequences, bidirectional overrides and
invisible characters, spreadsheet formulas and Markdown links reach the output harmless (docs/security.md,
"Text handling")."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import TRACES, invoke, shared_or_skip

from trace_report.present.safe_text import csv_text, markdown_text, terminal_text

ESCAPES = {
    "clear": "a\x1b[2Jb",
    "title": "t\x1b]0;title\x1b\\x",
    "clipboard": "c\x1b]52;c;aGVsbG8=\x07d",
    "c1_csi": "e\x9b31mf",
    "bidi": "bi\u202edi\u2066x\u2069",
    "zero_width": "z\u200bw\u200dx\ufeffy",
}
FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\ry"]
MARKDOWN = ["[link](http://evil.example)", "![img](http://evil.example/i.png)", "@someone <b>hi</b>",
            "a|b`code`", "see www.evil.example"]
HIDDEN = ["\x1b", "\x9b", "\x07", "\r", "\u202e", "\u2066", "\u2069", "\u200b", "\u200d", "\ufeff"]


def trace_with(tmp_path: Path, names: list[str]) -> Path:
    events = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 2.0,
               "args": {"correlation": i, "stream": 7}} for i, n in enumerate(names)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    return path


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_terminal_controls_never_reach_the_output(tmp_path: Path, fmt: str) -> None:
    trace = trace_with(tmp_path, list(ESCAPES.values()))
    result = invoke(["top-kernels", trace, "-f", fmt, "--full-names"])
    assert result.exit_code == 0, result.output
    assert not any(ch in result.stdout for ch in HIDDEN), repr(result.stdout)
    assert "\\x1b[2J" in result.stdout.replace("\\[", "[") and "\\u202e" in result.stdout


def test_json_escapes_controls_and_keeps_the_names(tmp_path: Path) -> None:
    trace = trace_with(tmp_path, list(ESCAPES.values()))
    result = invoke(["top-kernels", trace, "-f", "json"])
    assert not any(ch in result.stdout for ch in HIDDEN)
    assert sorted(r["name"] for r in json.loads(result.stdout)) == sorted(ESCAPES.values())


def test_messages_on_stderr_escape_controls(tmp_path: Path) -> None:
    folder = tmp_path / "x\x1b]0;pwned\x07"
    folder.mkdir()
    result = invoke(["top-kernels", folder / "missing\u202e.json"])
    assert result.exit_code != 0
    assert not any(ch in result.stderr for ch in HIDDEN), repr(result.stderr)
    assert "\\x1b]0;pwned\\x07" in result.stderr


def test_csv_formulas_get_an_apostrophe_and_raw_keeps_them(tmp_path: Path) -> None:
    trace = trace_with(tmp_path, FORMULAS)
    rows = list(csv.DictReader(io.StringIO(invoke(["top-kernels", trace, "-f", "csv"]).stdout)))
    assert sorted(r["name"] for r in rows) == sorted("'" + terminal_text(n) for n in FORMULAS)
    raw = list(csv.DictReader(io.StringIO(invoke(["top-kernels", trace, "-f", "csv", "--raw"]).stdout)))
    assert sorted(r["name"] for r in raw) == sorted(FORMULAS)


def test_csv_numbers_are_not_text(tmp_path: Path) -> None:
    trace = trace_with(tmp_path, ["k"])
    result = invoke(["sql", trace, "select -1.5 as num, '-1.5' as txt, 'plain' as ok", "-f", "csv"])
    assert result.stdout.splitlines() == ["num,txt,ok", "-1.5,'-1.5,plain"]


def test_markdown_links_images_and_mentions_are_text(tmp_path: Path) -> None:
    trace = trace_with(tmp_path, MARKDOWN)
    md = invoke(["top-kernels", trace, "-f", "markdown", "--full-names"]).stdout
    body = md.splitlines()[2:]
    assert len(body) == len(MARKDOWN)
    for unsafe in ("](", "[link]", "![", " @someone", "<b>", "http://", "www.evil", "`code`"):
        assert unsafe not in md, unsafe
    assert all(line.count(" | ") == 7 for line in body)  # no cell border from a name: 8 cells a row


def test_markdown_text_renders_back_to_the_name() -> None:
    """Undoing CommonMark's escapes gives the name back (what a reader of the page sees)."""
    import html
    import re

    for name in MARKDOWN:
        shown = html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown_text(name)))
        assert shown == name


def test_csv_text_rule() -> None:
    assert csv_text("=1+1") == "'=1+1" and csv_text("a=1") == "a=1" and csv_text("") == ""
    assert csv_text("\x1b[31m") == "\\x1b[31m"


def test_real_names_are_unchanged() -> None:
    """Real kernel names hold none of this: CSV with and without --raw, and the table, agree."""
    shared_or_skip()
    for folder in ("hta_amd_mi250", "tracelens_h100_bert_small"):
        safe = invoke(["top-kernels", TRACES / folder, "-f", "csv", "-n", "50"]).stdout
        assert safe == invoke(["top-kernels", TRACES / folder, "-f", "csv", "-n", "50", "--raw"]).stdout
        assert "'" not in {line[:1] for line in safe.splitlines()}
