"""``docs/notebooks/tour.ipynb`` runs top to bottom (nbclient, a real IPython kernel), so the
tour cannot rot: capture on the CPU, runs joined in SQL, jupysql's ``%sql``, charts, shared
traces, compare, export and the report. The notebook is saved with its outputs (checked here:
executed in order, no error, no absolute path); ``TRACE_REPORT_UPDATE_NOTEBOOK=1`` writes the
freshly executed notebook back. The README's ``%sql`` lines run in a kernel as written."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from conftest import SHARED, TRACES, complete_events, trace_file

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "tour.ipynb"
BUDGET_S = 90
ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|Users|var|private)/")


def outputs(nb) -> str:
    """All text the notebook printed or displayed."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif out.get("output_type") == "error":
                parts.append(f"{out['ename']}: {out['evalue']}")
            else:
                parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def kernel_tools():
    """nbformat and nbclient, or a skip when the notebook extra is not installed."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel", reason="ipykernel (the notebook's kernel) is not installed")
    pytest.importorskip("sql", reason="jupysql is not installed: pip install 'trace-report[notebook]'")
    return nbformat, nbclient


def execute(nb, folder: Path):
    """Run every cell of ``nb`` in a fresh python3 kernel whose working folder is ``folder``."""
    _, nbclient = kernel_tools()
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def chart_outputs(nb) -> list[dict]:
    return [o for c in nb.cells for o in c.get("outputs", [])
            if any(k.startswith("application/vnd.vegalite") for k in o.get("data", {}))
            or "alt." in str(o.get("data", {}).get("text/plain", ""))]


@pytest.mark.slow  # a real kernel: the default run keeps test_readme_sql_magic_form_works (a real kernel, %sql)
@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")
def test_tour_notebook_runs(monkeypatch):
    nbformat, _ = kernel_tools()
    monkeypatch.setenv("PLOOMBER_STATS_ENABLED", "false")
    if not (REPO.parent / "shared" / "data" / "traces").is_dir():  # elsewhere: say where
        monkeypatch.setenv("TRACE_REPORT_SHARED", str(SHARED))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    start = time.monotonic()
    execute(nb, NOTEBOOK.parent)
    took = time.monotonic() - start
    text = outputs(nb)
    assert "'shared traces found'" in text
    assert "optimizers/sgd-nesterov" in text  # the runs table and the %sql result
    assert "Running query in 'MagicConnection'" in text and "5 rows affected." in text
    assert "ncclKernel_AllReduce_RING_LL_Sum_float" in text and "Memcpy DtoD (Device -> Device)" in text
    assert "(True," in text  # the exported dataset reopens with the same numbers
    sections = ["Headline numbers", "Where the time goes", "Communication", "Kernel classes", "Advice"]
    assert all(f"'{title}'" in text for title in sections), text  # the A100 DDP trace has NCCL
    assert [text.index(f"'{title}'") for title in sections] == sorted(text.index(f"'{t}'") for t in sections)
    assert len(chart_outputs(nb)) == 5
    compare = next(c for c in nb.cells if c.source.startswith("charts.compare_chart("))
    assert "A = A100 (control.json.gz)" in json.dumps(compare.outputs)  # the chart names A and B
    assert took < BUDGET_S, f"the tour took {took:.0f} s"
    assert not ABSOLUTE_PATH.search(json.dumps([c.get("outputs", []) for c in nb.cells]))
    if os.environ.get("TRACE_REPORT_UPDATE_NOTEBOOK"):
        nbformat.write(nb, NOTEBOOK)


def test_tour_notebook_is_saved_with_outputs():
    """The committed notebook shows its results: every code cell executed once, in order, with
    the jupysql and report outputs, no error and no absolute path of the machine it ran on."""
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    saved = [o for c in code for o in c["outputs"]]
    assert not [o for o in saved if o["output_type"] == "error"]
    assert sum(1 for c in code if c["outputs"]) == len(code) - 1  # all but the closing cell show something
    text = json.dumps(saved)
    assert "Running query in 'MagicConnection'" in text and "ncclKernel_AllReduce_RING_LL_Sum_float" in text
    assert not ABSOLUTE_PATH.search(text)
    assert NOTEBOOK.stat().st_size < 300_000


def test_tour_finds_shared_beside_its_repository(tmp_path, monkeypatch):
    """The tour's ``find_shared``: ``$TRACE_REPORT_SHARED``, else ``shared/`` beside the checkout
    that holds the working folder, else beside the imported package's checkout; never ``/shared``."""
    nbformat, _ = kernel_tools()
    monkeypatch.delenv("TRACE_REPORT_SHARED", raising=False)
    tour = nbformat.read(NOTEBOOK, as_version=4)
    setup = next(c for c in tour.cells if "def find_shared" in c.source)
    repo = tmp_path / "checkout"
    (repo / "trace_report").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    (repo / "docs" / "notebooks").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "traces").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = [f"os.chdir({str(repo / 'docs' / 'notebooks')!r}); str(find_shared())",
             f"os.chdir({str(elsewhere)!r}); str(find_shared())",
             "os.environ['TRACE_REPORT_SHARED'] = '/data/shared-copy'; str(find_shared())"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup.source),
                                         *(nbformat.v4.new_code_cell(p) for p in probe)])
    execute(nb, elsewhere)
    found = [c.outputs[0]["data"]["text/plain"].strip("'") for c in nb.cells[1:]]
    beside_package = REPO.parent / "shared"  # the kernel imports this checkout's trace_report
    expected = str(beside_package) if (beside_package / "data" / "traces").is_dir() else "None"
    assert found == [str(tmp_path / "shared"), expected, "/data/shared-copy"]


def readme_notebook_lines() -> list[str]:
    """The README's notebook example (its ```python block), line by line."""
    readme = (REPO / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    return block.splitlines()


def test_readme_sql_magic_form_works(monkeypatch):
    """The README's notebook lines, as written (the trace path aside), in a real kernel: ``%sql``
    through ``conn = db.magic`` answers on the TraceDB's own views; its top kernel is the one a
    plain pass over the JSON finds."""
    nbformat, _ = kernel_tools()
    monkeypatch.setenv("PLOOMBER_STATS_ENABLED", "false")
    path = trace_file("hta_trace_diff")  # skips without ../shared
    lines = readme_notebook_lines()
    assert any(line.startswith("%sql conn") for line in lines) and "conn = db.magic" in "\n".join(lines)
    source = "\n".join(lines).replace('"traces/run-42/"', repr(str(path)))
    assert str(path) in source
    nb = execute(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), REPO)
    text = outputs(nb)
    assert "Running query in 'MagicConnection'" in text and "Error" not in text
    totals: dict[str, float] = {}
    for e in complete_events(path):
        if e.get("cat") in ("kernel", "Kernel"):
            totals[e["name"]] = totals.get(e["name"], 0.0) + float(e["dur"])
    assert max(totals, key=totals.get)[:40] in text


def test_repr_names_traces_ranks_gpu_and_steps():
    """A notebook shows the handle as what it holds, not an object address."""
    import trace_report as tr

    if not TRACES.is_dir():
        pytest.skip("../shared/data is not present")
    db = tr.open(TRACES / "param_dlrm_kineto_v100x8")
    assert repr(db) == "<TraceDB: 8 traces, 1 run, ranks 0-7, Tesla V100-SXM2-32GB, 8 ProfilerSteps>"
    db.close()
    assert repr(db) == "<TraceDB: closed>"
