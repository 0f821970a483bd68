"""No timings, dates or issue numbers in the comments and docstrings of trace_report/ and
benchmarks/: the code says why in one sentence, the measurements live in docs/benchmarks.md and
the history in git. String literals that are program data are not read: only Python comments
(``tokenize``), docstrings (``ast``) and the ``--`` comments of the SQL files, with ``inline
literals`` and URLs left out."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

ROOTS = (REPO / "trace_report", REPO / "benchmarks")

_UNIT = r"(?:s|ms|µs|us|min)(?![\w/])"  # a rate such as ms/step is not a timing
_NUM = r"\d+(?:[.,]\d+)?"
_DAY = r"[01]\d-[0-3]\d"
PATTERNS = {
    "a date": re.compile(
        rf"(?<![-/\w])20\d\d-{_DAY}\b"  # 2026-11-28, not a folder name such as h100-2026-11-25
        rf"|\({_DAY}(?:\.\.{_DAY})?[),;]"  # (11-28), (11-25..11-27)
        rf"|\bon {_DAY}\b"),
    "an issue number": re.compile(r"\bissues? #?\d+|\(#\d+\)|\bPR #?\d+", re.I),
    "a timing": re.compile(
        rf"~\s?{_NUM}\s?{_UNIT}"  # ~30 ms
        rf"|\b\d+\.\d+\s?s(?![\w/])"  # 2.3 s
        rf"|\b{_NUM}\s?(?:{_UNIT})?\s?->\s?{_NUM}\s?{_UNIT}"  # 7.9 -> 7.2 s
        rf"|\b{_NUM}\s?{_UNIT}[^.\n]{{0,60}}(?:\bmedians?\b|x faster|\bcores\))"  # 7.2 s (medians of 5
        rf"|(?:\bmedians?\b|x faster)[^.\n]{{0,60}}\b{_NUM}\s?{_UNIT}"
        rf"|\b\d+\.\d+x\b"),  # a measured speed-up, 1.88x
}
_LEFT_OUT = re.compile(r"``.*?``|https?://\S+", re.S)


def texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring (a string statement) of a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):  # docstrings, and those of attributes: a string alone
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def sql_comments(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every ``--`` comment of a SQL file (one outside a quoted string)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        at = line.find("--")
        while at >= 0 and line.count("'", 0, at) % 2:
            at = line.find("--", at + 2)
        if at >= 0:
            yield number, line[at:]


def offences(text: str) -> list[tuple[str, str]]:
    """(kind, the words that matched) for each date, issue number or timing in ``text``."""
    text = _LEFT_OUT.sub("``…``", text)
    return [(kind, m.group(0)) for kind, pattern in PATTERNS.items() for m in pattern.finditer(text)]


def test_no_timings_dates_or_issue_numbers_in_comments_and_docstrings() -> None:
    found = []
    for root in ROOTS:
        for path in sorted([*root.rglob("*.py"), *root.rglob("*.sql")]):
            for line, text in (sql_comments(path) if path.suffix == ".sql" else texts(path)):
                found += [f"{path.relative_to(REPO)}:{line}: {kind}: {words!r}"
                          for kind, words in offences(text)]
    assert len(found) == 0, (
        "Say why in one sentence instead; measurements go to docs/benchmarks.md:\n" + "\n".join(found))


def test_the_patterns_tell_measurements_from_units_and_names() -> None:
    bad = ["report 7.9 -> 7.2 s (medians of 5, 2 cores)", "in ~30 ms", "took 2.3 s", "(11-28)",
           "see issue 36", "fixed in (#12)", "2026-11-28", "on 11-29 at 01:00", "ISSUE 36 item 3",
           "(11-25..11-27)", "1.88x at 4 workers", "120 ms, the median of 5 runs", "16 -> 1 ms"]
    good = ["``dur_us`` in µs on the trace's clock", "``830 µs``, ``12.4 ms`` or ``3.21 s``",
            "saves ~12.3 ms/step", "ProfilerStep#1 and #2", "f(…)::{lambda(int)#1}",
            "traces/h100-2026-11-25", "https://github.blog/changelog/2021-03-31-token-formats/",
            "fn(db) -> Result", "for 5 steps on 2 cores", "a 2x2 grid", "limit 1-10 (inclusive)"]
    assert [t for t in bad if not offences(t)] == []
    assert [(t, offences(t)) for t in good if offences(t)] == []
