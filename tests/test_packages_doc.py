"""docs/architecture.md lists every package of trace_report/ with the first line of its docstring
(the section between ``<!-- packages:start -->`` and ``<!-- packages:end -->``, written by
``python docs/packages.py``)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys

import pytest
from conftest import REPO

FIX = "run `python docs/packages.py` to rewrite the list"


def _listed() -> dict[str, str]:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start, end = text.index("<!-- packages:start -->"), text.index("<!-- packages:end -->")
    return dict(re.findall(r"^- `(trace_report/[^`]*)` — (.*)$", text[start:end], re.M))


def _docstrings() -> dict[str, str]:
    """Each package's first docstring line, from the imported package itself."""
    out = {}
    for init in (REPO / "trace_report").rglob("__init__.py"):
        rel = init.parent.relative_to(REPO)
        doc = importlib.import_module(".".join(rel.parts)).__doc__ or ""
        out[f"{rel.as_posix()}/"] = doc.strip().split("\n")[0].replace("``", "`")
    return out


def test_every_package_has_a_one_line_description() -> None:
    docs = _docstrings()
    assert {"trace_report/", "trace_report/store/", "trace_report/analyses/roofline/"} <= set(docs)
    assert [name for name, line in docs.items() if len(line) < 20 or not line.endswith(".")] == []


def test_architecture_lists_every_package_with_its_docstring() -> None:
    docs, listed = _docstrings(), _listed()
    missing = sorted(set(docs) - set(listed))
    assert missing == [], f"docs/architecture.md does not list {missing}: {FIX}"
    stale = sorted(set(listed) - set(docs))
    assert stale == [], f"docs/architecture.md lists {stale}, which are no packages: {FIX}"
    differ = [f"{name}: {listed[name]!r} != {docs[name]!r}" for name in sorted(docs) if listed[name] != docs[name]]
    assert differ == [], f"docs/architecture.md differs from the docstrings ({FIX}):\n" + "\n".join(differ)


def test_the_generator_checks_and_rewrites(tmp_path) -> None:
    check = subprocess.run([sys.executable, "docs/packages.py", "--check"], cwd=REPO, capture_output=True,
                           text=True)
    assert (check.returncode, check.stderr) == (0, ""), check.stderr
    spec = importlib.util.spec_from_file_location("packages_doc", REPO / "docs" / "packages.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stale = "intro\n<!-- packages:start -->\n- `trace_report/gone/` — old\n<!-- packages:end -->\nrest\n"
    new = gen.updated(stale)
    assert new.startswith("intro\n<!-- packages:start -->") and new.endswith("<!-- packages:end -->\nrest\n")
    assert "gone" not in new and "- `trace_report/store/` — " in new
    with pytest.raises(ValueError, match="packages:start"):
        gen.updated("no markers")
    (tmp_path / "__init__.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="no docstring"):
        gen.first_line(tmp_path / "__init__.py")
