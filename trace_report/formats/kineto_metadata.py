"""Trace-level facts from a trace's top-level keys, with secrets redacted."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_report.redact import redact_value, summarize

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def redact(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """Copy of ``value`` with every secret replaced by ``<redacted:KIND>`` (docs/architecture.md, Security).

    Delegates to :func:`trace_report.redact.redact_value`: values under secret-looking keys
    (``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*``, ...) that are credential-like, known
    token shapes inside any string, and ``--*token* VALUE`` command-line flags (strings and argv
    lists). Inputs: a JSON-like ``value`` and the ``path`` of ``value`` itself. Output: the copy
    and ``kind@path`` strings of what was redacted. The input is not modified. Raises
    :class:`~trace_report.errors.InputError` for a value nested deeper than 200 levels.
    """
    clean, found = redact_value(value, path)
    return clean, summarize(found)


def rank_from_name(name: str) -> int | None:
    """Rank encoded in a file name (``rank-3.…``, ``worker3_step_12.…``, ``rank_3``), else None."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class RunContext:
    """What a capture's ``run.json`` tells about one of its traces (all optional)."""

    run_id: str | None = None
    rank: int | None = None
    world_size: int | None = None
    torch_version: str | None = None
    host: str | None = None
    device_name: str | None = None
    compute_capability: str | None = None


@dataclass
class TraceFacts:
    """Facts for one row of the ``traces`` table (see ``docs/schema.md``)."""

    rank: int
    rank_source: str
    world_size: int | None
    host: str | None
    schema_version: str | None
    torch_version: str | None
    run_id: str | None
    metadata_json: str
    redacted_keys: list[str]


def _device_properties(meta: dict[str, Any]) -> list[dict[str, Any]]:
    props = meta.get("deviceProperties") or meta.get("computeProperties") or []
    return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def device_for(meta: dict[str, Any], device_id: int | None) -> tuple[str | None, str | None]:
    """(device name, compute capability 'major.minor') of ``device_id`` from deviceProperties.

    2021 traces use ``computeProperties`` with ``major``/``minor``; later ones
    ``deviceProperties`` with ``computeMajor``/``computeMinor``. Without ``device_id`` the
    first device is used.
    """
    props = _device_properties(meta)
    if not props:
        return None, None
    chosen = next((p for p in props if p.get("id") == device_id), props[0])
    major = chosen.get("computeMajor", chosen.get("major"))
    minor = chosen.get("computeMinor", chosen.get("minor"))
    cc = f"{major}.{minor}" if major is not None and minor is not None else None
    name = chosen.get("name")
    return (str(name) if name is not None else None), cc


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def trace_facts(meta: dict[str, Any], label: str, run: RunContext | None = None) -> tuple[TraceFacts, str | None]:
    """Facts of one trace and a warning (or None) when its rank had to be assumed.

    ``meta``: the trace's top-level keys (``distributedInfo``, ``hostname``, ``schemaVersion``...);
    ``run``: what the capture's ``run.json`` says, for our own captures (the trace itself does
    not record the torch version, and a single-process capture has no ``distributedInfo``).
    """
    run = run or RunContext()
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    warning = None
    rank = _int(dist.get("rank"))
    source = "distributedInfo"
    if rank is None:
        rank = rank_from_name(Path(label.split("!")[-1]).name)
        source = "file name"
    if rank is None and run.rank is not None:
        rank, source = run.rank, "run.json"
    if rank is None:
        rank, source = 0, "default"
        warning = f"{label}: no rank in distributedInfo or the file name; assuming rank 0"
    clean, redacted = redact(meta)
    host = clean.get("host_name") or clean.get("hostname") or run.host  # as redacted in the metadata
    world = _int(dist.get("world_size"))
    facts = TraceFacts(
        rank=rank,
        rank_source=source,
        world_size=world if world is not None else run.world_size,
        host=str(host) if host else None,
        schema_version=None if meta.get("schemaVersion") is None else str(meta["schemaVersion"]),
        torch_version=run.torch_version,
        run_id=run.run_id,
        metadata_json=json.dumps(clean, default=str),
        redacted_keys=redacted,
    )
    return facts, warning
