"""The run manifest (``run.json``): one typed definition, written by capture, read by ingest,
the run tables and reports.

A capture writes ``traces/<run-id>/run.json`` for a single run (``schema =
"trace-report/run/1"``), ``run-rank<N>.json`` for each DDP rank, and an experiment manifest
(``"trace-report/experiment/1"``) in the folder of a multi-variant experiment. Every field is
optional when read, so ``run.json`` files written by earlier versions (no ``schema_version``)
load unchanged; unknown fields are ignored. Environment variables are never written here, and
whatever is read is passed through :func:`trace_report.redact.redact_value`.

Errors: :func:`read_manifest` returns ``None`` for a missing or unreadable file (a folder
without a manifest is simply not a run); :func:`write_manifest` raises ``OSError`` as the file
system does.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import msgspec

from trace_report import storage
from trace_report.redact import redact_value

MANIFEST = "run.json"
RUN_SCHEMA = "trace-report/run/1"
EXPERIMENT_SCHEMA = "trace-report/experiment/1"
SCHEMA_VERSION = 2
"""2: written through this module (``schema_version`` field); 1 or absent: earlier captures."""


class Environment(msgspec.Struct, kw_only=True):
    """Versions, device and host of the capturing process (``capture/runtime.environment``)."""

    torch_version: str | None = None
    cuda_version: str | None = None
    cudnn_version: int | None = None
    python_version: str | None = None
    device: str | None = None
    device_name: str | None = None
    compute_capability: str | None = None
    cuda_device_count: int | None = None
    cpu_count: int | None = None
    torch_threads: int | None = None
    tf32: dict[str, Any] | None = None
    cudnn_benchmark: bool | None = None
    host: str | None = None
    platform: str | None = None
    git: dict[str, Any] | None = None


class Distributed(msgspec.Struct, kw_only=True):
    """The process's place in a DDP job (rank 0 of 1 for a single process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None


class Summary(msgspec.Struct, kw_only=True):
    """End-of-run figures: losses and accuracies (fractions), peak memory in bytes."""

    epochs: int | None = None
    steps: int | None = None
    final_loss: float | None = None
    final_accuracy: float | None = None
    test_accuracy: float | None = None
    peak_memory_bytes: float | None = None
    peak_memory_source: str | None = None


class VariantRef(msgspec.Struct, kw_only=True):
    """One variant of an experiment: its name and folder relative to the experiment's."""

    variant: str | None = None
    dir: str = ""


class RunManifest(msgspec.Struct, kw_only=True):
    """``run.json``: a run (``schema`` :data:`RUN_SCHEMA`) or an experiment of several runs
    (:data:`EXPERIMENT_SCHEMA`). ``config`` is the capture configuration as given
    (``capture/config.CaptureConfig.to_json``); times are ISO 8601 UTC strings."""

    schema: str = RUN_SCHEMA
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    experiment: str | None = None
    variant: str | None = None
    started_utc: str | None = None
    finished_utc: str | None = None
    seed: int | None = None
    learning_rate: float | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    environment: Environment = msgspec.field(default_factory=Environment)
    distributed: Distributed | None = None
    traces: list[str] = msgspec.field(default_factory=list)
    files: dict[str, str] = msgspec.field(default_factory=dict)
    summary: Summary | None = None
    variants: list[VariantRef] = msgspec.field(default_factory=list)
    results: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    flop: dict[str, Any] | None = None
    """Forward FLOP of one batch and per image (``capture/params.flop_facts``)."""
    rank_manifests: list[str] = msgspec.field(default_factory=list)
    """A DDP world-size folder's ``run-rank<N>.json`` files."""

    @property
    def kind(self) -> str:
        """``experiment`` for a multi-variant (or DDP) experiment manifest, else ``run``."""
        return "experiment" if self.schema.startswith("trace-report/experiment") else "run"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (NaN as ``None``), as written to ``run.json``."""
        return _nan_to_none(msgspec.to_builtins(self, enc_hook=str))


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def from_dict(data: dict[str, Any], *, redacted: bool = False) -> RunManifest:
    """A manifest from decoded JSON, secret-looking values redacted (unless ``redacted`` says
    they already are); fields of the wrong type are dropped rather than failing the whole file
    (old or hand-edited manifests)."""
    clean = data if redacted else redact_value(data)[0]
    try:
        return msgspec.convert(clean, RunManifest, strict=False)
    except msgspec.ValidationError:
        known = {f: clean[f] for f in RunManifest.__struct_fields__ if f in clean}
        good = {}
        for key, value in known.items():
            try:
                msgspec.convert({key: value}, RunManifest, strict=False)
            except msgspec.ValidationError:
                continue
            good[key] = value
        return msgspec.convert(good, RunManifest, strict=False)


def raw_manifest(path: Path) -> dict[str, Any] | None:
    """The decoded manifest in ``path`` (a ``run*.json`` file, or a folder holding ``run.json``)
    as stored, every field kept, secrets redacted; ``None`` when there is none or it is not a
    JSON object. The ``runs.manifest`` JSON column shows this."""
    file = path / MANIFEST if path.is_dir() else path
    try:
        data = json.loads(storage.read_text(file, errors="strict"))
    except (OSError, ValueError):
        return None
    return redact_value(data)[0] if isinstance(data, dict) else None


def read_manifest(path: Path) -> RunManifest | None:
    """The typed manifest in ``path`` (as :func:`raw_manifest`); ``None`` when there is none."""
    raw = raw_manifest(path)
    return None if raw is None else from_dict(raw, redacted=True)


def write_manifest(path: Path, manifest: RunManifest) -> Path:
    """Write ``manifest`` as indented JSON to ``path`` (a temporary file renamed into place)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    storage.write_bytes(tmp, (json.dumps(manifest.to_dict(), indent=2, default=str) + "\n").encode())
    os.replace(tmp, path)
    return path


def manifest_for_trace(trace: Path) -> tuple[Path | None, RunManifest | None]:
    """The run folder and manifest a trace file belongs to: the ``run*.json`` beside it whose
    ``traces`` lists the file (one per DDP rank), else ``run.json``; (None, None) outside a run
    folder."""
    folder = trace.parent
    if not (folder / MANIFEST).is_file():
        return None, None
    for candidate in sorted(folder.glob("run-rank*.json")):
        manifest = read_manifest(candidate)
        if manifest is not None and trace.name in manifest.traces:
            return folder, manifest
    return folder, read_manifest(folder)
