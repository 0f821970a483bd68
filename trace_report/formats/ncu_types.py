"""Nsight Compute results in DuckDB: the ``ncu_kernels`` / ``ncu_metrics`` tables, unit
normalisation and the parsed-report type the readers fill (:mod:`~trace_report.formats.ncu_rep`,
:mod:`~trace_report.formats.ncu_csv`).

Every value is stored in base units (docs/roofline.md): seconds, bytes, bytes/second, hertz,
plain counts; ncu's auto-scaled units (``Kbyte``, ``usecond``, ``Gbyte/second``,
``cycle/nsecond``, ``Ghz``...) are converted with SI factors, as ncu scales them
(``102.40 Kbyte`` is ncu's display of 102,400 bytes). Columns are documented in
``docs/roofline.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KERNEL_FIELDS = [
    "launch_id", "kernel", "function", "process_id", "process_name", "host", "context", "stream",
    "device", "device_name", "compute_capability", "block_size", "grid_size",
]
"""Per-launch fields a reader fills (``None`` where the source does not record them)."""

METRIC_FIELDS = ["launch_id", "section", "metric", "label", "instance", "unit", "value", "text"]

# ------------------------------------------------------------------ units

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"second": 1.0, "s": 1.0, "sec": 1.0, "msecond": 1e-3, "ms": 1e-3, "usecond": 1e-6,
         "us": 1e-6, "µs": 1e-6, "nsecond": 1e-9, "ns": 1e-9, "psecond": 1e-12}
_FREQ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "thz": 1e12}
_COUNTS = {"byte", "inst", "cycle", "sector", "request", "warp", "thread", "block", "register",
           "wavefront", "op", "flop", "transaction", "branches", "sample", "pass", "fma", "B"}
_BYTE_ALIASES = {"B": "byte"}


def _token(token: str) -> tuple[float, str]:
    """(factor, base) of one unit token: ``Kbyte`` -> (1e3, 'byte'), ``usecond`` -> (1e-6, 'second')."""
    if token in _TIME:
        return _TIME[token], "second"
    if token.lower() in _FREQ:
        return _FREQ[token.lower()], "hz"
    if token in _COUNTS:
        return 1.0, _BYTE_ALIASES.get(token, token)
    if len(token) > 1 and token[0] in _PREFIX and token[1:] in _COUNTS:
        return _PREFIX[token[0]], _BYTE_ALIASES.get(token[1:], token[1:])
    if token[:-1] in _COUNTS and token.endswith("s") and token != "s":  # plural: 'bytes'
        return 1.0, _BYTE_ALIASES.get(token[:-1], token[:-1])
    return 1.0, token


def normalize_unit(unit: str | None) -> tuple[float, str]:
    """Factor and base unit for an ncu unit string; ``value * factor`` is in the base unit.

    ``Gbyte/second`` -> (1e9, 'byte/second'); ``cycle/nsecond`` and ``Ghz`` -> (1e9, 'hz');
    ``usecond`` -> (1e-6, 'second'); ``%`` and unknown units -> (1, unit) unchanged.
    """
    unit = (unit or "").strip()
    if not unit:
        return 1.0, ""
    if "/" in unit:
        num, den = unit.split("/", 1)
        f_num, b_num = _token(num.strip())
        f_den, b_den = _token(den.strip())
        if b_num == "cycle" and b_den == "second":
            return f_num / f_den, "hz"
        return f_num / f_den, f"{b_num}/{b_den}"
    return _token(unit)


_NA = {"", "n/a", "N/A", "nan", "NaN", "-", "(!) n/a"}
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d*)?([eE][+-]?\d+)?$")


INSTANCED = {
    "sass__inst_executed_per_opcode",                    # warp-level, per basic opcode
    "sass__inst_executed_per_opcode_with_modifier_all",  # warp-level, e.g. HMMA.16816.F32.BF16
    "sass__thread_inst_executed_true_per_opcode",        # thread-level, predicate true
}
"""Instanced metrics kept (instance = SASS opcode); other instanced metrics (per-PC samples) are
not stored."""

_INSTANCES = re.compile(r"^\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*\((.*)\)\s*$", re.S)


def split_instances(text: str) -> tuple[str, list[tuple[str, str]]] | None:
    """``ncu --print-metric-instances details`` cells: ``"4,718,604 (HMMA.1688.F32.TF32: 4,718,592;
    IMAD: 12)"`` -> ``("4,718,604", [("HMMA.1688.F32.TF32", "4,718,592"), ("IMAD", "12")])``
    (the aggregate, then each correlation id with its value); None for any other cell."""
    found = _INSTANCES.match(text)
    if found is None:
        return None
    pairs = [item.rsplit(":", 1) for item in found.group(2).split(";") if item.strip()]
    if not all(len(pair) == 2 for pair in pairs):
        return None
    return found.group(1), [(name.strip(), value.strip()) for name, value in pairs]


def instance_counts(text: str) -> list[tuple[str, float]] | None:
    """The (opcode, count) pairs of a per-opcode count cell, checked: every count a number and
    their sum the cell's aggregate (to ncu's rounding); None when the cell is not such a list or
    does not add up, so that a layout we misread is never taken for counts."""
    return checked_counts(split_instances(text))


def checked_counts(split: tuple[str, list[tuple[str, str]]] | None) -> list[tuple[str, float]] | None:
    """:func:`instance_counts` of a cell :func:`split_instances` has split."""
    if split is None:
        return None
    total, _ = parse_value(split[0])
    counts = [(name, parse_value(value)[0]) for name, value in split[1]]
    if total is None or any(c is None or not name or " " in name for name, c in counts):
        return None  # a SASS opcode with its modifiers has no space
    if abs(sum(c for _, c in counts) - total) > 1e-6 * max(total, 1.0):  # type: ignore[misc]
        return None
    return counts  # type: ignore[return-value]


def parse_value(text: str | None) -> tuple[float | None, str | None]:
    """(number, None) for a numeric ncu cell (``"1,215,000,000.00"``), (None, None) for
    ``n/a``/empty, else (None, text)."""
    if text is None:
        return None, None
    s = text.strip()
    if s in _NA:
        return None, None
    if _NUMBER.match(s) and any(c.isdigit() for c in s):
        return float(s.replace(",", "")), None
    return None, s


# ------------------------------------------------------------------ parsed reports


@dataclass
class NcuData:
    """One parsed report: launch rows (:data:`KERNEL_FIELDS`) and metric rows
    (:data:`METRIC_FIELDS`, values already in base units); ``redactions``: what the secret
    screen replaced, ``kind@ncu_kernels.<field> (N rows)``."""

    fmt: str
    kernels: list[dict[str, object]] = field(default_factory=list)
    metrics: dict[str, list[object]] = field(default_factory=lambda: {k: [] for k in METRIC_FIELDS})
    redactions: list[str] = field(default_factory=list)

    def add_metric(self, launch_id: int, section: str | None, metric: str, label: str | None,
                   unit: str | None, raw: str | float | int | None, instance: str | None = None) -> None:
        """Append one metric, converting ``raw`` (text or number) to base units."""
        factor, base = normalize_unit(unit)
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value, text = float(raw), None
        else:
            value, text = parse_value(None if raw is None else str(raw))
        if value is None and text is None:
            return
        row = [launch_id, section, metric, label, instance, base or None,
               None if value is None else value * factor, text]
        for key, item in zip(METRIC_FIELDS, row, strict=True):
            self.metrics[key].append(item)


def fill_device_names(data: NcuData) -> None:
    """Set each launch's ``device_name``/``compute_capability`` from device attribute
    metrics when the reader did not get them from columns."""
    by_launch: dict[int, dict[str, object]] = {}
    for lid, metric, value, text in zip(data.metrics["launch_id"], data.metrics["metric"],
                                        data.metrics["value"], data.metrics["text"], strict=True):
        if metric in _DEVICE_METRICS:
            by_launch.setdefault(int(lid), {})[metric] = text if text is not None else value
    for row in data.kernels:
        attrs = by_launch.get(int(row["launch_id"]), {})
        if not row.get("device_name") and attrs.get("device__attribute_display_name"):
            row["device_name"] = str(attrs["device__attribute_display_name"])
        major = attrs.get("device__attribute_compute_capability_major")
        minor = attrs.get("device__attribute_compute_capability_minor")
        if not row.get("compute_capability") and major is not None and minor is not None:
            row["compute_capability"] = f"{int(float(major))}.{int(float(minor))}"


_DEVICE_METRICS = {"device__attribute_display_name", "device__attribute_compute_capability_major",
                   "device__attribute_compute_capability_minor"}


