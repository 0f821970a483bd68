"""``docs/notebooks/tour.ipynb`` runs top to bottom (nbclient, a real IPython kernel), so the
tour cannot rot: capture on the CPU, runs joined in SQL, jupysql's ``%sql``, charts, shared
traces, compare, export and the report."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "tour.ipynb"
SHARED = REPO.parent / "shared" / "data" / "traces"
BUDGET_S = 90


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


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not present")
def test_tour_notebook_runs(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel", reason="ipykernel (the notebook's kernel) is not installed")
    pytest.importorskip("sql", reason="jupysql is not installed")
    monkeypatch.setenv("PLOOMBER_STATS_ENABLED", "false")
    monkeypatch.setenv("TRACE_REPORT_SHARED", str(SHARED.parents[1]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    start = time.monotonic()
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    took = time.monotonic() - start
    text = outputs(nb)
    assert "optimizers/sgd-nesterov" in text  # the runs table and the %sql result
    assert "Running query in 'MagicConnection'" in text and "5 rows affected." in text
    assert "ncclKernel_AllReduce_RING_LL_Sum_float" in text and "Memcpy DtoD (Device -> Device)" in text
    assert "(True," in text  # the exported dataset reopens with the same numbers
    assert "'Headline numbers', 'Where the time goes', 'Kernel classes', 'Advice'" in text
    charts = [o for c in nb.cells for o in c.get("outputs", []) if "application/vnd.vegalite.v6+json" in
              o.get("data", {}) or "alt.Chart" in str(o.get("data", {}).get("text/plain", ""))]
    assert len(charts) == 6
    assert took < BUDGET_S, f"the tour took {took:.0f} s"
