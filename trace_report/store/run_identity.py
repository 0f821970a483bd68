"""Which traces belong to one run: the one definition every command uses to keep runs apart.

A *run* is one execution of a training job: one trace per rank (per process), captured together.
Traces from different runs are never summed or ranked together by an analysis unless the user
asks (``--merge-runs``); tables over several runs get a ``run`` column. The rules, first match
wins (``docs/schema.md``, "Runs"):

1. ``run.json`` (``trace-report capture``): traces tagged with the same run (``run_traces.run_key``,
   which tells an experiment's variants apart, else ``traces.run_id``) are one run, labelled with
   that key. ``run_source = 'run.json'``.
2. ``distributedInfo`` of one distributed job (PyTorch's Kineto metadata: ``rank``,
   ``world_size``): traces with ``rank_source = 'distributedInfo'``, the same ``world_size`` (> 1),
   the same GPU model (``device_name``), distinct ranks, and either the same folder or
   overlapping time spans (``min(ts_us)`` to ``max(ts_us + dur_us)``; the ranks of one job run at
   the same time, though on different hosts their clocks may differ, hence the folder
   alternative). ``run_source = 'distributedInfo'``, labelled with their folder's name.
3. Rank files of one job in one folder: traces whose rank came from the file name (``rank3.json``,
   ``worker3_step_12...``; ``rank_source = 'file name'``) in the same folder, distinct ranks.
   ``run_source = 'folder'``.
4. Anything else is a run of its own (``run_source = 'file'``), labelled with the file name
   without ``.json``/``.gz``/``.pt.trace``.

Two traces that would claim the same rank of one run (a copied file, two captures of one job
side by side) are kept as separate runs, each its own, with a warning. Labels are made unique by
prefixing parent folder names (``a/trace`` and ``b/trace``). Runs are ordered by their first
``trace_id``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import duckdb

from trace_report.store.views import CATALOGS

TABLE = "trace_runs"
"""TEMP table ``trace_runs(trace_id INTEGER, run VARCHAR, run_source VARCHAR)``."""


@dataclass
class Run:
    """One run: its label (the ``run`` column), the rule that grouped it, its traces (ascending)."""

    label: str
    source: str
    trace_ids: list[int]
    folder: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Trace:
    trace_id: int
    path: str
    run_key: str | None
    rank: int | None
    rank_source: str | None
    world_size: int | None
    device_name: str | None

    @property
    def location(self) -> PurePosixPath:
        """The trace's path with an archive member's path appended (``a.tar.gz!d/r0.json`` ->
        ``a.tar.gz/d/r0.json``): the folder of a member is its folder inside the archive."""
        return PurePosixPath(self.path.replace("!", "/"))

    @property
    def folder(self) -> str:
        return str(self.location.parent)


_SUFFIXES = re.compile(r"(\.pt\.trace)?\.json(\.gz)?$|\.(json|gz|csv|sqlite|ncu-rep)$", re.IGNORECASE)


def _stem(path: PurePosixPath) -> str:
    return _SUFFIXES.sub("", path.name) or path.name


def _read(con: duckdb.DuckDBPyConnection) -> list[_Trace]:
    """The traces with their run key: ``run_traces.run_key`` where the run tables are attached
    (:func:`trace_report.store.runs.attach_runs`), else ``traces.run_id``."""
    linked = con.execute(f"SELECT count(*) FROM duckdb_tables() WHERE {CATALOGS} AND table_name = 'run_traces'"
                         ).fetchone()[0]
    keys = ("(SELECT trace_id, min(run_key) AS run_key FROM run_traces GROUP BY trace_id)" if linked else
            "(SELECT NULL::INTEGER AS trace_id, NULL::VARCHAR AS run_key WHERE false)")
    rows = con.execute(
        "SELECT t.trace_id, t.path, coalesce(rt.run_key, t.run_id), t.rank, t.rank_source, t.world_size, "
        f"t.device_name FROM traces t LEFT JOIN {keys} rt USING (trace_id) ORDER BY t.trace_id").fetchall()
    return [_Trace(int(r[0]), str(r[1] or ""), r[2], r[3], r[4], r[5], r[6]) for r in rows]


def _spans(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, tuple[float, float]]:
    rows = con.execute("SELECT trace_id, min(ts_us), max(ts_us + coalesce(dur_us, 0)) FROM events "
                       "WHERE list_contains($ids, trace_id) GROUP BY trace_id", {"ids": ids}).fetchall()
    return {int(t): (float(lo), float(hi)) for t, lo, hi in rows if lo is not None}


def _components(traces: list[_Trace], spans: dict[int, tuple[float, float]]) -> list[list[_Trace]]:
    """Connected components of ``traces`` where two traces are joined when they share a folder or
    their ``spans`` (start, end us) overlap (``a.start < b.end and b.start < a.end``), in order of
    first member. Each folder is joined in one pass and the overlaps by a sweep over the spans
    sorted by start (each span joined to the earlier one reaching furthest): O(n log n), where
    testing every pair made thousands of ranks quadratic."""
    parent = list(range(len(traces)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    first_of: dict[str, int] = {}
    for i, t in enumerate(traces):
        union(i, first_of.setdefault(t.folder, i))
    for i, j in _overlapping(traces, spans):
        union(i, j)
    groups: dict[int, list[_Trace]] = defaultdict(list)
    for i, t in enumerate(traces):
        groups[find(i)].append(t)
    return list(groups.values())


def _overlapping(traces: list[_Trace], spans: dict[int, tuple[float, float]]) -> list[tuple[int, int]]:
    """Pairs of positions in ``traces`` whose spans overlap, enough of them to connect every two
    overlapping spans: each span with the span that ends last among those starting before it (a
    span overlaps one of those iff it starts before that one ends), and the spans of positive
    length that start at one time with each other."""
    order = sorted(spans[t.trace_id] + (i,) for i, t in enumerate(traces) if t.trace_id in spans)
    pairs: list[tuple[int, int]] = []
    reach: tuple[float, int] | None = None  # (end, position): last to end among earlier starts
    pos = 0
    while pos < len(order):
        same = [order[pos]]
        while pos + len(same) < len(order) and order[pos + len(same)][0] == same[0][0]:
            same.append(order[pos + len(same)])
        pos += len(same)
        pairs += [(i, reach[1]) for lo, _, i in same if reach is not None and lo < reach[0]]
        positive = [i for lo, hi, i in same if lo < hi]
        pairs += [(i, positive[0]) for i in positive[1:]]
        for _, hi, i in same:
            if reach is None or hi > reach[0]:
                reach = (hi, i)
    return pairs


def _split_duplicates(group: list[_Trace], source: str) -> tuple[list[tuple[list[_Trace], str]], list[str]]:
    """``group`` as one run when its ranks are distinct, else each trace a run of its own and a
    warning naming the rank claimed twice."""
    ranks = [t.rank for t in group]
    dup = sorted({r for r in ranks if r is not None and ranks.count(r) > 1})
    if not dup:
        return [(group, source)], []
    names = ", ".join(t.location.name for t in group if t.rank == dup[0])
    warning = (f"{len(group)} traces look like one job but claim the same rank ({dup[0]}: {names}); "
               "each is kept as a run of its own")
    return [([t], "file") for t in group], [warning]


def _distributed(con: duckdb.DuckDBPyConnection, traces: list[_Trace]) -> list[list[_Trace]]:
    """Rule 2's candidate jobs: same world size and GPU model, same folder or overlapping spans."""
    by_key: dict[tuple[int, str], list[_Trace]] = defaultdict(list)
    for t in traces:
        by_key[(int(t.world_size or 0), str(t.device_name or ""))].append(t)
    out: list[list[_Trace]] = []
    for group in by_key.values():
        spans = _spans(con, [t.trace_id for t in group]) if len({t.folder for t in group}) > 1 else {}
        out.extend(_components(group, spans))
    return out


def _groups(con: duckdb.DuckDBPyConnection, traces: list[_Trace]) -> tuple[list[tuple[list[_Trace], str]], list[str]]:
    groups: list[tuple[list[_Trace], str]] = []
    warnings: list[str] = []
    tagged: dict[str, list[_Trace]] = defaultdict(list)
    dist: list[_Trace] = []
    named: dict[str, list[_Trace]] = defaultdict(list)
    for t in traces:
        if t.run_key:
            tagged[str(t.run_key)].append(t)
        elif t.rank_source == "distributedInfo" and (t.world_size or 0) > 1:
            dist.append(t)
        elif t.rank_source == "file name":
            named[t.folder].append(t)
        else:
            groups.append(([t], "file"))
    candidates = [(g, "run.json") for g in tagged.values()]
    candidates += [(g, "distributedInfo") for g in _distributed(con, dist)]
    candidates += [(g, "folder") for g in named.values()]
    for group, source in candidates:
        if len(group) == 1 and source != "run.json":
            groups.append((group, "file"))
            continue
        kept, warned = _split_duplicates(group, source)
        groups.extend(kept)
        warnings.extend(warned)
    return groups, warnings


def _common_folder(group: list[_Trace]) -> PurePosixPath:
    parts = [t.location.parent.parts for t in group]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return PurePosixPath(*common) if common else PurePosixPath(".")


def _label_path(group: list[_Trace], source: str) -> PurePosixPath:
    """The path whose tail names the run: the file for a single trace, else the common folder."""
    if source == "file":
        t = group[0]
        return t.location.parent / _stem(t.location)
    return _common_folder(group)


def _unique_labels(paths: list[PurePosixPath], fixed: list[str | None]) -> list[str]:
    """The last component of each path, with parent folders prefixed until the labels differ."""
    depth = [1] * len(paths)

    def label(i: int) -> str:
        if fixed[i] is not None:
            return str(fixed[i])
        parts = [p for p in paths[i].parts if p not in ("/", ".", "..")] or [str(paths[i])]
        return "/".join(parts[-depth[i]:])

    for _ in range(64):
        labels = [label(i) for i in range(len(paths))]
        seen: dict[str, list[int]] = defaultdict(list)
        for i, lab in enumerate(labels):
            seen[lab].append(i)
        clashes = [ids for ids in seen.values() if len(ids) > 1]
        if not clashes:
            return labels
        grown = False
        for ids in clashes:
            for i in ids:
                if fixed[i] is None and depth[i] < len(paths[i].parts):
                    depth[i] += 1
                    grown = True
        if not grown:
            break
    labels = [label(i) for i in range(len(paths))]
    counts: dict[str, int] = defaultdict(int)
    out = []
    for lab in labels:
        counts[lab] += 1
        out.append(lab if labels.count(lab) == 1 else f"{lab}#{counts[lab]}")
    return out


def identify_runs(con: duckdb.DuckDBPyConnection) -> list[Run]:
    """The runs of the traces on ``con`` by the rules of this module, and the TEMP table
    :data:`TABLE` (``trace_runs``: ``trace_id``, ``run``, ``run_source``) created from them.

    Reads ``traces`` and ``run_traces`` (and ``events`` only for rule 2's time spans of ranks
    in different folders). Each run's ``warnings`` hold the duplicate-rank warnings (on the
    first run)."""
    traces = _read(con)
    groups, warnings = _groups(con, traces)
    groups.sort(key=lambda g: g[0][0].trace_id)
    paths = [_label_path(g, s) for g, s in groups]
    fixed = [str(g[0].run_key) if s == "run.json" else None for g, s in groups]
    labels = _unique_labels(paths, fixed)
    runs = [Run(lab, s, sorted(t.trace_id for t in g), str(_common_folder(g)))
            for lab, (g, s) in zip(labels, groups, strict=True)]
    if runs:
        runs[0].warnings.extend(warnings)
    # one statement for every row, lists zipped by unnest (a statement per row took seconds for
    # thousands of ranks; an Arrow table would load pyarrow and pandas into every command)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS "
                "SELECT unnest($ids)::INTEGER AS trace_id, unnest($runs)::VARCHAR AS run, "
                "unnest($sources)::VARCHAR AS run_source",
                {"ids": [t for r in runs for t in r.trace_ids], "runs": [r.label for r in runs for _ in r.trace_ids],
                 "sources": [r.source for r in runs for _ in r.trace_ids]})
    return runs
