"""`trace-report advise` on small constructed traces (advise_traces.py): the edge cases of each
rule, in pairs, one trace that must produce the finding and one that must not. Every expected
value is computed here with plain Python from the events the builder wrote (advise_traces'
interval helpers, and the closed form of the construction where it is short), never through the
package's SQL. Real traces: tests/analyses/advise/test_advise.py."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from advise_traces import A100, H100, NCCL, V100, TraceBuilder, clip, gaps, intervals, length, union

import trace_report as tr
from trace_report.analyses.advise import AdviceResult, advise

SYNC = re.compile(r"^cuda(Device|Stream|Event)Synchronize$")
PAGEABLE_HTOD = "Memcpy HtoD (Pageable -> Device)"
PINNED_HTOD = "Memcpy HtoD (Pinned -> Device)"
SGEMM = "ampere_sgemm_128x64_nn"
NVJET = "nvjet_tst_128x256_64x4_2x1_v_bz_TNN"

# --- running advise once per constructed trace ------------------------------------------------


@dataclass
class Advised:
    """A constructed trace and what advise said of it: ``results[all_findings]``; ``cats``: the
    events the ingest kept per category; ``device``: (compute capability, device name)."""

    b: TraceBuilder
    results: dict[bool, AdviceResult]
    cats: dict[str, int]
    device: tuple[str, str]

    @property
    def default(self) -> AdviceResult:
        return self.results[False]

    @property
    def every(self) -> AdviceResult:
        return self.results[True]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Advised]:
    """run(case, *all_findings) -> Advised: each trace written and opened once, advise run once per
    mode asked for (default: all_findings=False)."""
    folder = tmp_path_factory.mktemp("advise_rules")
    cache: dict[str, Advised] = {}

    def go(case: str, *modes: bool) -> Advised:
        modes = modes or (False,)
        have = cache.get(case)
        if have is None or not set(modes) <= set(have.results):
            b = have.b if have else CASES[case]()
            with tr.open(b.write(folder / f"{case}.json")) as db:
                results = {m: advise(db, all_findings=m) for m in modes}
                cats = dict(db.con.execute("SELECT cat, count(*) FROM events GROUP BY cat").fetchall())
                device = db.con.execute("SELECT compute_capability, device_name FROM traces").fetchone()
            cache[case] = Advised(b, {**(have.results if have else {}), **results}, cats, device)
        return cache[case]

    return go


def found(result: AdviceResult) -> dict[str, dict]:
    return {r["finding"]: r for r in result.frame.to_dict(orient="records")}


# --- plain-Python references -------------------------------------------------------------------

def windows(b: TraceBuilder) -> list[tuple[float, float]]:
    """ProfilerSteps; without them, 3 DataLoader ranges or more make iterations, each from the
    start of one to the start of the next (view iterations); else the first-to-last GPU operation
    span."""
    if b.steps:
        return [(s.ts, s.end) for s in b.steps]
    starts = sorted(s.ts for s in b.loading)
    if len(starts) >= 3:
        return list(zip(starts, starts[1:], strict=False))
    busy = union(intervals(b.gpu))
    return [(busy[0][0], busy[-1][1])]


def wall(b: TraceBuilder) -> float:
    return sum(hi - lo for lo, hi in windows(b))


def idle_by_cause(b: TraceBuilder) -> dict[str, float]:
    """GPU idle inside the windows by cause, as views_verdicts.sql's comment defines it: the part
    during DataLoader ranges is data_loading; the rest of a period is host_sync when the GPU went
    idle during a synchronising call (and work came after), launch when the next operation's
    launch call returned after the GPU went idle (or, before the first operation, after the window
    began), else other; cpu_wait: the part of launch periods before that launch call began."""
    busy = union(intervals(b.gpu))
    launch_of = {r.correlation: r for r in b.runtime}
    first_launch: dict[float, float] = {}
    launch_start: dict[float, float] = {}
    for g in b.gpu:
        call = launch_of[g.correlation]
        if call.end < first_launch.get(g.ts, math.inf):
            first_launch[g.ts], launch_start[g.ts] = call.end, call.ts
    syncs = [r for r in b.runtime if SYNC.match(r.name)]
    loading = union(intervals(b.loading))
    periods: list[tuple[float | None, float | None]] = [(None, busy[0][0]), *gaps(busy), (busy[-1][1], None)]
    out = dict.fromkeys(("data_loading", "host_sync", "launch", "other", "cpu_wait"), 0.0)
    for gone, resume in periods:
        for lo, hi in windows(b):
            s = max(lo if gone is None else gone, lo)
            e = min(hi if resume is None else resume, hi)
            if e <= s:
                continue
            dl = min(clip(loading, s, e), e - s)
            out["data_loading"] += dl
            if gone is not None and resume is not None and any(c.ts <= gone <= c.end for c in syncs):
                cause = "host_sync"
            elif resume is not None and first_launch[resume] > (s if gone is None else gone):
                cause = "launch"
                out["cpu_wait"] += max(0.0, min(launch_start[resume], e) - s - dl)
            else:
                cause = "other"
            out[cause] += e - s - dl
    return out


def gpu_us(b: TraceBuilder) -> float:
    return sum(g.dur for g in b.gpu)


def per_step_ms(b: TraceBuilder, us: float) -> float:
    return us / max(len(b.steps), 1) / 1e3


def mean_queue(b: TraceBuilder, stream: int = 7) -> tuple[float, int]:
    """Mean and max of the launch-queue series of a stream: +1 at each launch call, -1 when its
    operation starts (HTA's queue length; one value per change)."""
    launch_of = {r.correlation: r for r in b.runtime}
    changes = sorted([(launch_of[g.correlation].ts, 1) for g in b.gpu if g.stream == stream]
                     + [(g.ts, -1) for g in b.gpu if g.stream == stream], key=lambda c: (c[0], -c[1]))
    level, series = 0, []
    for _, d in changes:
        level += d
        series.append(level)
    return sum(series) / len(series), max(series)


# --- the constructed traces --------------------------------------------------------------------

STEPS = 3


def launch_shallow() -> TraceBuilder:
    """200 kernels of 2 µs per step, each launched by a 10 µs call and starting 2 µs after it ends;
    the CPU spends 10 µs more between launches (period 20 µs), so the GPU idles 18 µs before each."""
    b, period, n = TraceBuilder(), 20.0, 200
    step = n * period + 20
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        for i in range(n):
            t = s + 10 + i * period
            b.launch(t, 10, t + 12, 2)
    return b


def launch_back_to_back() -> TraceBuilder:
    """200 kernels of 2 µs per step launched by back-to-back 10 µs calls, each kernel starting 2 µs
    after its call returns: the next call is already under way when the GPU drains, its kernel is
    queued only when it returns."""
    b, period, n = TraceBuilder(), 10.0, 200
    step = n * period + 20
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        for i in range(n):
            t = s + 10 + i * period
            b.launch(t, 10, t + 12, 2)
    return b


def launch_deep() -> TraceBuilder:
    """The same 2 µs kernels and 10 µs launch calls, but all 200 launched early in the step, behind
    one 2.1 ms kernel: they run back to back long after their launches, the queue ~200 deep. The
    GPU still waits 300 µs per step boundary for the next step's first launch."""
    b, step = TraceBuilder(), 2800.0
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        b.launch(s, 10, s + 12, 2100)
        for i in range(200):
            b.launch(s + 20 + 10 * i, 10, s + 2112 + 2 * i, 2)
    return b


def cpu_bound() -> TraceBuilder:
    """40 kernels of 50 µs per step, 5 µs launches, 400 µs of CPU work between launches (no event
    recorded there: longer than Thresholds.dispatch_us, work of its own); each kernel starts 2 µs
    after its launch returns."""
    b, period, n = TraceBuilder(), 405.0, 40
    step = n * period + 10
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        for i in range(n):
            t = s + 10 + i * period
            b.launch(t, 5, t + 7, 50)
    return b


def sync_mid_step(inner: bool = False) -> TraceBuilder:
    """Each 1 ms step: kernel A (300 µs), then a cudaStreamSynchronize that returns 3 µs after A
    ends; the next launch comes 85 µs after the sync returns (kernel B, 600 µs, running into the
    next step until that step's kernel A, launched at its start, follows without a gap).
    ``inner``: a second, shorter synchronising call inside the first, which starts later but has
    returned when the GPU goes idle: only the enclosing call explains the idle period (the
    call starting last before it is not the one to look at)."""
    b, step = TraceBuilder(), 1000.0
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        b.launch(s, 10, s + 12, 300)
        b.sync(s + 20, 295)
        if inner:
            b.sync(s + 100, 50, name="cudaEventSynchronize")
        b.launch(s + 400, 10, s + 412, 600)
    return b


def sync_at_end() -> TraceBuilder:
    """The GPU busy back to back; one cudaDeviceSynchronize at the end of the last step, after the
    last GPU operation was launched, returning 3 µs after it ends; nothing comes after it."""
    b, step = TraceBuilder(), 1000.0
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step + (100 if k == STEPS - 1 else 0))
        b.launch(s, 10, s + 12, 500)
        b.launch(s + 20, 10, s + 512, 500)
    last = (STEPS - 1) * step
    b.sync(last + 30, 985, "cudaDeviceSynchronize")
    return b


def host_copies(name: str) -> Callable[[], TraceBuilder]:
    def build() -> TraceBuilder:
        """Per 500 µs step: a 400 µs host-to-device copy, then a 100 µs kernel; back to back."""
        b, step = TraceBuilder(), 500.0
        for k in range(STEPS):
            s = k * step
            b.step(k, s, step)
            b.launch(s, 10, s + 12, 400, name=name, cat="gpu_memcpy")
            b.launch(s + 20, 10, s + 412, 100)
        return b

    return build


def communication(overlapped: bool) -> Callable[[], TraceBuilder]:
    def build() -> TraceBuilder:
        """A 500 µs compute kernel on stream 7 and a 300 µs NCCL all-reduce on stream 20 per step:
        after the compute kernel (exposed) or inside it (overlapped)."""
        b = TraceBuilder(rank=0, world_size=2)
        step = 500.0 if overlapped else 800.0
        for k in range(STEPS):
            s = k * step
            b.step(k, s, step)
            b.launch(s, 10, s + 12, 500)
            b.launch(s + 20, 10, s + 100 if overlapped else s + 512, 300, name=NCCL, stream=20)
        return b

    return build


def data_loading(gpu_busy: bool) -> Callable[[], TraceBuilder]:
    def build() -> TraceBuilder:
        """No ProfilerStep: four iterations of 1 ms, each a 500 µs DataLoader range then a kernel
        launched when it returns: 468 µs long (the GPU idle through the next loading) or 1 ms
        (the GPU busy through it)."""
        b = TraceBuilder()
        if gpu_busy:  # the GPU busy through the first loading too
            b.launch(-600, 10, -588, 1100)
        for i in range(4):
            s = i * 1000.0
            b.dataloader(s, 500)
            b.launch(s + 500, 10, s + 512, 1000 if gpu_busy else 468)
        return b

    return build


def ranking() -> TraceBuilder:
    """Per 1 ms step (H100): kernel A 300 µs, a cudaStreamSynchronize until it ends, then after
    100 µs of GPU idle a 300 µs pageable copy, a 27 µs FP32 sgemm and a 273 µs kernel."""
    b, step = TraceBuilder(), 1000.0
    for k in range(STEPS):
        s = k * step
        b.step(k, s, step)
        b.launch(s, 10, s + 12, 300)
        b.sync(s + 20, 295)
        b.launch(s + 400, 10, s + 412, 300, name=PAGEABLE_HTOD, cat="gpu_memcpy")
        b.launch(s + 410, 10, s + 712, 27, name=SGEMM)
        b.launch(s + 420, 10, s + 739, 273)
    return b


def gemms(device: tuple[str, int, int, int], name: str) -> Callable[[], TraceBuilder]:
    def build() -> TraceBuilder:
        """Per 500 µs step: aten::mm launching a 400 µs GEMM, then a 100 µs kernel; back to back."""
        b, step = TraceBuilder(device=device), 500.0
        for k in range(STEPS):
            s = k * step
            b.step(k, s, step)
            b.cpu_op("aten::mm", s, 15)
            b.launch(s + 2, 10, s + 12, 400, name=name)
            b.launch(s + 20, 10, s + 412, 100)
        return b

    return build


CASES: dict[str, Callable[[], TraceBuilder]] = {
    "launch_shallow": launch_shallow, "launch_deep": launch_deep, "cpu_bound": cpu_bound,
    "sync_mid_step": sync_mid_step, "sync_at_end": sync_at_end, "sync_overlapping": lambda: sync_mid_step(inner=True),
    "pageable": host_copies(PAGEABLE_HTOD), "pinned": host_copies(PINNED_HTOD),
    "launch_back_to_back": launch_back_to_back,
    "comm_exposed": communication(overlapped=False), "comm_overlapped": communication(overlapped=True),
    "loading_idle": data_loading(gpu_busy=False), "loading_busy": data_loading(gpu_busy=True),
    "ranking": ranking,
    "h100_nvjet": gemms(H100, NVJET), "a100_sgemm": gemms(A100, SGEMM), "v100_sgemm": gemms(V100, SGEMM),
}

# --- 1. launch_bound ---------------------------------------------------------------------------


def test_shallow_queue_of_short_kernels_is_launch_bound(run):
    a = run("launch_shallow")
    b, result = a.b, a.default
    idle = idle_by_cause(b)
    # closed form: 18 µs before each of the 199 later kernels of a step, 38 µs across each of the
    # two step boundaries, and the first step's first 22 µs (nothing queued when it began); the
    # last step's last 16 µs are 'other'
    assert idle["launch"] == pytest.approx(STEPS * 199 * 18 + 2 * 38 + 22)
    assert idle["other"] == pytest.approx(16)
    f = found(result)
    assert "cpu_bound" not in f
    lb = f["launch_bound"]
    assert lb["value"] == pytest.approx(100 * idle["launch"] / wall(b), abs=1e-3)
    assert lb["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, idle["launch"]), abs=1e-3)
    assert lb["saving_pct_of_step"] == pytest.approx(100 * idle["launch"] / wall(b), abs=1e-3)
    assert result.frame.iloc[0]["finding"] == "launch_bound" and "(launch_bound)" in result.verdict
    assert mean_queue(b)[1] == 1  # never more than one launch ahead of the GPU


def test_back_to_back_launches_of_short_kernels_are_launch_bound(run):
    a = run("launch_back_to_back")
    b, result = a.b, a.default
    idle = idle_by_cause(b)
    # 8 µs before each of the 199 later kernels of a step (launch returns 6 µs after the previous
    # kernel ends, the kernel starts 2 µs later), 28 µs across each of the two step boundaries, 22 µs
    # before the first kernel
    assert idle["launch"] == pytest.approx(STEPS * 199 * 8 + 2 * 28 + 22)
    lb = found(result)["launch_bound"]
    assert lb["value"] == pytest.approx(100 * idle["launch"] / wall(b), abs=1e-3)
    assert result.frame.iloc[0]["finding"] == "launch_bound"


def test_deep_queue_of_the_same_kernels_is_not_launch_bound(run):
    a = run("launch_deep", True)
    b, result = a.b, a.every
    idle = idle_by_cause(b)
    # the GPU does wait for launches (300 µs at each of the two step boundaries, 7% of step
    # time, and the first 12 µs) and almost every kernel is shorter than its launch, yet the queue
    # is ~200 deep: not launch-bound. But at each boundary the CPU launched nothing for 288 µs
    # while the GPU had nothing queued: that part is CPU-bound time whatever the queue's mean.
    assert idle["launch"] == pytest.approx(2 * 300 + 12)
    assert idle["cpu_wait"] == pytest.approx(2 * 288)
    mean, deepest = mean_queue(b)
    assert mean > 10 and deepest == 200
    f = found(result)
    assert "launch_bound" not in f
    assert f["cpu_bound"]["value"] == pytest.approx(100 * idle["cpu_wait"] / wall(b), abs=1e-3)
    assert f["cpu_bound"]["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, idle["cpu_wait"]), abs=1e-3)
    assert "no launch call under way" in f["cpu_bound"]["evidence"]


# --- 2. cpu_bound ------------------------------------------------------------------------------


def test_long_kernels_with_cpu_gaps_are_cpu_bound_not_launch_bound(run):
    a = run("cpu_bound")
    b, result = a.b, a.default
    idle = idle_by_cause(b)
    # 355 µs per gap, 365 across steps, 17 before the first kernel
    assert idle["launch"] == pytest.approx(STEPS * 39 * 355 + 2 * 365 + 17)
    f = found(result)
    assert "launch_bound" not in f
    cb = f["cpu_bound"]
    assert cb["value"] == pytest.approx(100 * idle["launch"] / wall(b), abs=1e-3)
    assert cb["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, idle["launch"]), abs=1e-3)
    assert "0% shorter than their launch" in cb["evidence"]
    assert "here host code outside recorded events" in cb["recommendation"]
    assert mean_queue(b)[1] == 1


# --- 3. host_sync ------------------------------------------------------------------------------


def host_sync_of(a: Advised, idle_per_step_us: float) -> dict:
    """The host_sync finding of ``a``, checked against the plain-Python idle split, which must give
    ``idle_per_step_us`` of host_sync idle per step and no launch idle but the first kernel's 12 µs."""
    b = a.b
    idle = idle_by_cause(b)
    assert idle["host_sync"] == pytest.approx(STEPS * idle_per_step_us)
    assert idle["launch"] == pytest.approx(12)  # before the first kernel, nothing queued yet
    hs = found(a.default)["host_sync"]
    assert hs["value"] == pytest.approx(100 * idle["host_sync"] / wall(b), abs=1e-3)
    assert hs["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, idle["host_sync"]), abs=1e-3)
    return hs


def test_sync_mid_step_after_which_the_gpu_waits_is_host_sync(run):
    hs = host_sync_of(run("sync_mid_step"), 100)  # A ends at +312, B starts at +412
    calls = [c for c in run("sync_mid_step").b.runtime if c.name == "cudaStreamSynchronize"]
    blocked = sum(c.dur for c in calls)  # the one name, so the one with the most time
    assert hs["evidence"].startswith(f"1 synchronising calls per step (most: cudaStreamSynchronize ({len(calls)} "
                                     f"calls, {blocked:.3g} us in all))")  # under 1 ms: in us
    assert f"{STEPS} times the GPU ran out of work" in hs["evidence"]


def test_idle_during_an_enclosing_sync_is_host_sync_when_a_later_sync_has_returned(run):
    host_sync_of(run("sync_overlapping"), 100)  # A ends at +312, inside the first call; B starts at +412


def test_device_sync_at_the_end_of_the_last_step_is_no_host_sync(run):
    a = run("sync_at_end", True)
    b, result = a.b, a.every
    idle = idle_by_cause(b)
    # the first 12 µs wait for the first launch; the last 88 µs are 'other'
    assert idle["host_sync"] == 0 and idle["launch"] == pytest.approx(12) and idle["other"] == pytest.approx(88)
    assert "host_sync" not in found(result)
    # the GPU is busy 97% of the steps, running fill kernels back to back: kernel time is the one finding
    assert list(found(result)) == ["gpu_bound"]


# --- 4. pageable_memcpy ------------------------------------------------------------------------


def test_pageable_copies_are_the_first_finding(run):
    a = run("pageable")
    b, result = a.b, a.default
    copies = sum(g.dur for g in b.gpu if "Pageable" in g.name)
    assert copies / gpu_us(b) == pytest.approx(0.8)
    first = result.frame.iloc[0]
    assert first["finding"] == "pageable_memcpy"
    assert first["value"] == pytest.approx(100 * copies / gpu_us(b), abs=1e-3)
    assert first["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, copies / 2), abs=1e-3)
    assert first["saving_pct_of_step"] == pytest.approx(100 * copies / 2 / wall(b), abs=1e-3)


def test_pinned_copies_are_no_finding(run):
    result = run("pinned", True).every
    assert "pageable_memcpy" not in found(result)
    assert list(found(result)) == ["gpu_bound"]  # the GPU is busy 99% of the steps, on fill kernels


# --- 5. exposed_communication ------------------------------------------------------------------


def exposed_us(b: TraceBuilder) -> float:
    comm = union(intervals([g for g in b.gpu if g.name.startswith("nccl")]))
    comp = union(intervals([g for g in b.gpu if g.cat == "kernel" and not g.name.startswith("nccl")]))
    return length(comm) - sum(clip(comp, a, e) for a, e in comm)


def test_nccl_after_compute_is_exposed_communication(run):
    a = run("comm_exposed")
    b, result = a.b, a.default
    exposed = exposed_us(b)
    assert exposed == pytest.approx(STEPS * 300)
    f = found(result)["exposed_communication"]
    assert f["value"] == pytest.approx(100 * exposed / gpu_us(b), abs=1e-3)
    assert f["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, exposed), abs=1e-3)
    assert result.frame.iloc[0]["finding"] == "exposed_communication"


def test_nccl_inside_compute_is_no_finding(run):
    a = run("comm_overlapped", True)
    b, result = a.b, a.every
    assert exposed_us(b) == 0
    assert "exposed_communication" not in found(result)


# --- 6. data_loading without ProfilerStep ------------------------------------------------------


def test_data_loading_without_steps_saves_the_gpu_idle_during_it(run):
    a = run("loading_idle")
    b, result = a.b, a.default
    assert not b.steps
    idle = idle_by_cause(b)
    assert idle["data_loading"] == pytest.approx(3 * 500)  # the fourth range starts the last, unfinished iteration
    loading = union(intervals(b.loading))
    f = found(result)["data_loading"]
    assert f["unit"] == "% of iteration time" and f["per"] == "iteration"
    assert f["value"] == pytest.approx(100 * sum(clip(loading, a, c) for a, c in windows(b)) / wall(b), abs=1e-3)
    assert f["est_saving_ms_per_step"] == pytest.approx(idle["data_loading"] / len(windows(b)) / 1e3, abs=1e-3)
    assert f["saving_pct_of_step"] == pytest.approx(100 * idle["data_loading"] / wall(b), abs=1e-3)
    assert result.frame.iloc[0]["finding"] == "data_loading"


def test_data_loading_while_the_gpu_is_busy_saves_nothing(run):
    a = run("loading_busy", False, True)
    b, default, every = a.b, a.default, a.every
    assert idle_by_cause(b)["data_loading"] == 0
    assert "data_loading" not in found(default)
    assert any("would save under 2% of iteration time" in n for n in default.notes)
    f = found(every)["data_loading"]  # the DataLoader's share crosses 5%, its saving is nil
    assert f["value"] > 5 and f["est_saving_ms_per_step"] == 0


# --- 7. ranking --------------------------------------------------------------------------------


def test_findings_ranked_by_saving_and_small_ones_only_with_all(run):
    a = run("ranking", False, True)
    b, default, every = a.b, a.default, a.every
    pageable = sum(g.dur for g in b.gpu if "Pageable" in g.name) / 2
    sync_idle = idle_by_cause(b)["host_sync"]
    sgemm = sum(g.dur for g in b.gpu if g.name == SGEMM)
    assert pageable > sync_idle  # 150 vs 100 µs per step
    # the GPU is busy 90% of each step, and a step's last kernel (273 µs) and the next step's first
    # (300 µs) run back to back: a chain of two fusible kernels, half of which gpu_bound saves
    chains = (STEPS - 1) * (273 + 300)
    assert list(default.frame["finding"]) == ["gpu_bound", "pageable_memcpy", "host_sync"]
    assert default.frame.iloc[0]["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, chains / 2), abs=1e-3)
    top = default.frame.iloc[1]
    assert top["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, pageable), abs=1e-3)
    assert default.frame.iloc[2]["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, sync_idle), abs=1e-3)
    assert "(gpu_bound)" in default.verdict
    assert f"{per_step_ms(b, chains / 2) * 1e3:.3g} us per step" in default.verdict
    # FP32 sgemm: 3% of GPU time (over the 2% floor) but half of it is 1.35% of step time
    assert 100 * sgemm / gpu_us(b) > 2 and 100 * sgemm / 2 / wall(b) < 2
    assert any("1 finding(s) would save under 2%" in n for n in default.notes)
    f = found(every)
    assert list(every.frame["finding"])[-1] == "fp32_without_tf32"
    assert f["fp32_without_tf32"]["value"] == pytest.approx(100 * sgemm / gpu_us(b), abs=1e-3)
    assert f["fp32_without_tf32"]["saving_pct_of_step"] == pytest.approx(100 * sgemm / 2 / wall(b), abs=1e-3)


# --- 8. tensor cores ---------------------------------------------------------------------------


def test_nvjet_gemms_on_h100_are_tensor_core_work(run):
    result = run("h100_nvjet", True).every
    assert not {"fp32_without_tf32", "no_tensor_cores"} & set(found(result))


@pytest.mark.parametrize(("case", "finding"), [("a100_sgemm", "fp32_without_tf32"), ("v100_sgemm", "no_tensor_cores")])
def test_sgemm_on_cuda_cores(run, case, finding):
    a = run(case)
    b, result = a.b, a.default
    gemm = sum(g.dur for g in b.gpu if g.name == SGEMM)
    f = found(result)
    assert set(f) & {"fp32_without_tf32", "no_tensor_cores"} == {finding}
    assert f[finding]["value"] == pytest.approx(100 * gemm / gpu_us(b), abs=1e-3)
    assert f[finding]["est_saving_ms_per_step"] == pytest.approx(per_step_ms(b, gemm / 2), abs=1e-3)
    assert result.frame.iloc[0]["finding"] == finding


def test_builder_writes_what_the_ingest_reads(run):
    """The constructed trace's layout is accepted as it is: every event lands, on its category, and
    the device comes from deviceProperties."""
    a = run("ranking", False, True)
    assert a.cats == {"user_annotation": STEPS, "cuda_runtime": 5 * STEPS, "kernel": 3 * STEPS, "gpu_memcpy": STEPS}
    assert float(a.device[0]) == 9.0 and a.device[1] == H100[0]
