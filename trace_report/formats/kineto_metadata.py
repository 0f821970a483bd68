"""Trace-level facts from a trace's top-level keys, with secrets redacted."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
SECRET_KEY = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
REDACTED = "<redacted>"


def redact(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """Copy of ``value`` with every value under a secret-looking key replaced by ``<redacted>``.

    Keys match ``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*`` (and PASSWD, CREDENTIAL,
    AUTH), case-insensitively, at any depth (docs/architecture.md, Security). Returns the copy and the dotted
    paths of what was redacted. The input is not modified.
    """
    found: list[str] = []
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if SECRET_KEY.search(str(key)) and item not in (None, "", REDACTED):
                out[key] = REDACTED
                found.append(here)
            else:
                out[key], sub = redact(item, here)
                found.extend(sub)
        return out, found
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            copy, sub = redact(item, f"{path}[{i}]")
            items.append(copy)
            found.extend(sub)
        return items, found
    return value, found


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
    host = meta.get("host_name") or meta.get("hostname") or run.host
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
