"""Read binary Nsight Compute reports (``.ncu-rep``) with NVIDIA's ``ncu_report`` module
(PyPI package ``ncu-report``; ``ncu_report.load_report(path)``, no GPU and no ncu binary).

Every scalar metric of every profiled launch is kept (values converted to base units: the
report stores times in ``ns``), plus the per-opcode SASS instruction counts of the Source
Counters / Instruction Statistics sections (instanced metrics, one row per opcode), which the
roofline uses for half-precision and tensor-core work. Strings (device name) go to ``text``.
Every string kept goes through the secret screen (:func:`~trace_report.formats.ncu_csv.screen_strings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_report.errors import InputError
from trace_report.formats.ncu_csv import screen_strings
from trace_report.formats.ncu_types import INSTANCED, NcuData, fill_device_names
from trace_report.pathtext import printable

_SKIP_PREFIXES = ("group:", "breakdown:", "pmsampling:")


def _load(path: Path) -> Any:
    try:
        import ncu_report
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError(f"{path}: reading .ncu-rep files needs NVIDIA's ncu-report package "
                         "(pip install ncu-report)") from exc
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # ncu_report takes a C string: a TypeError and a traceback otherwise
        raise InputError(f"{printable(path)}: ncu_report cannot open a report whose name is not valid UTF-8; "
                         "rename it, or give a link to it with a UTF-8 name") from None
    try:
        return ncu_report, ncu_report.load_report(str(path))
    except (OSError, RuntimeError, ValueError) as exc:
        raise InputError(f"{path}: not a readable Nsight Compute report ({exc})") from exc


def _sections(action: Any) -> dict[str, tuple[str, str]]:
    """metric name -> (section name, label) from the sections' header and body metrics."""
    out: dict[str, tuple[str, str]] = {}
    for section in action.sections():
        for metric in (*section.header_metrics(), *section.body_metrics()):
            out.setdefault(metric.name(), (section.name(), metric.label()))
    return out


def _value(action: Any, name: str) -> Any:
    metric = action.metric_by_name(name)
    if metric is None or metric.num_instances() or not metric.has_value():
        return None
    return metric.value()


def _dims(action: Any, prefix: str) -> str | None:
    dims = [_value(action, f"{prefix}_{axis}") for axis in "xyz"]
    if any(d is None for d in dims):
        return None
    return "(" + ", ".join(str(int(d)) for d in dims) + ")"


def _kernel_row(mod: Any, action: Any, launch_id: int) -> dict[str, object]:
    def as_int(name: str) -> int | None:
        value = _value(action, name)
        return None if value is None else int(value)

    return {
        "launch_id": launch_id,
        "kernel": action.name(mod.IAction.NameBase_DEMANGLED) or action.name(),
        "function": action.name(mod.IAction.NameBase_FUNCTION) or action.name(),
        "process_id": None, "process_name": None, "host": None,
        "context": as_int("launch__context_id"), "stream": as_int("launch__stream_id"),
        "device": as_int("launch__device_id"), "device_name": None, "compute_capability": None,
        "block_size": _dims(action, "launch__block_dim"), "grid_size": _dims(action, "launch__grid_dim"),
    }


def _add_metrics(data: NcuData, action: Any, launch_id: int) -> None:
    where = _sections(action)
    for name in action.metric_names():
        if name.startswith(_SKIP_PREFIXES):
            continue
        metric = action.metric_by_name(name)
        section, label = where.get(name, (None, None))
        label = label or metric.label() or None
        unit = metric.unit()
        if metric.num_instances():
            if name in INSTANCED and metric.has_correlation_ids():
                ids = metric.correlation_ids()
                for k in range(metric.num_instances()):
                    data.add_metric(launch_id, section, name, label, unit, metric.as_double(k),
                                    instance=ids.as_string(k))
            continue
        if metric.has_value():
            data.add_metric(launch_id, section, name, label, unit, metric.value())


def read_ncu_rep(path: Path) -> NcuData:
    """Parse a ``.ncu-rep`` file into :class:`NcuData` (launch ids in profiling order).

    Raises :class:`InputError` when ``ncu_report`` cannot read it or it holds no results.
    """
    mod, ctx = _load(path)
    data = NcuData("ncu-rep")
    launch_id = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            data.kernels.append(_kernel_row(mod, action, launch_id))
            _add_metrics(data, action, launch_id)
            launch_id += 1
    if not data.kernels:
        raise InputError(f"{path}: not a readable Nsight Compute report (no profiling results in it)")
    fill_device_names(data)
    data.redactions = screen_strings(data)
    return data
