"""Event pieces in object storage: ``trace-report ingest -o runs.duckdb --pieces s3://bucket/db.events/``.

The catalog (the ``.duckdb`` file, its lock and the rows kept per trace) stays local; the Parquet
pieces go under the prefix, which the database records in ``trace_report_info`` (``pieces``: the
URL, ``pieces_id``: a random id). Every command reading the database creates its ``events`` view
over those objects through the prefix's file system registered on its connection
(:func:`trace_report.storage.register`), and the sandbox lets that connection read exactly that
prefix (:func:`~trace_report.store.sandbox.sandbox`'s ``allowed_directories``).

A prefix belongs to one database. Its first ingest writes the object :data:`MARKER` there (the
database's path and the id); a later ingest writes only when the marker holds the id the database
records, so that its clean-up (pieces the database no longer lists, those of an interrupted ingest)
never deletes another database's pieces. Only names an ingest gives
(:data:`~trace_report.store.layout.PIECE_NAME`) are ever deleted. An object is whole or absent
(a killed upload is never completed), and the database lists a piece only once the ingest
succeeded, so no half-written piece is ever read.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from trace_report import storage
from trace_report.errors import DatabaseError, InputError
from trace_report.storage import Location
from trace_report.store.layout import PIECE_NAME, events_dir_for

if TYPE_CHECKING:
    import duckdb

PIECES_KEY = "pieces"
PIECES_ID_KEY = "pieces_id"
MARKER = "_trace_report_pieces.json"
"""The object that says which database a prefix's pieces belong to (``app``, ``database``, ``id``)."""
SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss")


def check_url(url: str) -> str:
    """``url`` without its trailing ``/`` when it can hold a database's pieces (an ``s3://``,
    ``gs://`` or ``abfs://`` prefix below a bucket, no credentials nor ``?options`` in it: a
    database names its prefix, and a changed one must not send the pieces to another endpoint);
    else :class:`InputError`."""
    parts = urlsplit(url)
    if not storage.is_url(url) or parts.scheme.lower() not in SCHEMES:
        raise InputError(f"{storage.shown(url) if storage.is_url(url) else url}: --pieces takes an s3://, gs:// or "
                         "abfs:// prefix (the database's own events folder is the default)")
    storage.filesystem(url)  # refuses a URL with credentials
    if parts.query or parts.fragment:  # ?endpoint_override=... would send the pieces elsewhere
        raise InputError(f"{storage.shown(url).split('?', 1)[0]}: a pieces prefix takes no ?options (set the "
                         "endpoint and region in the environment: AWS_ENDPOINT_URL, AWS_REGION ...)")
    if not parts.path.strip("/"):
        raise InputError(f"{storage.shown(url)}: give a prefix inside the bucket for the pieces "
                         "(s3://bucket/runs.duckdb.events/), not the bucket itself")
    return url.rstrip("/")


def recorded(con: duckdb.DuckDBPyConnection) -> tuple[str | None, str | None]:
    """The pieces prefix and its id that the database behind ``con`` records; (None, None) when
    its pieces are in its events folder."""
    rows = dict(con.execute("SELECT key, value FROM trace_report_info WHERE key IN (?, ?)",
                            [PIECES_KEY, PIECES_ID_KEY]).fetchall())
    return rows.get(PIECES_KEY), rows.get(PIECES_ID_KEY)


def pieces_location(con: duckdb.DuckDBPyConnection, db_path: Path) -> Location:
    """Where the pieces of the database at ``db_path`` (open on ``con``) are: the prefix it
    records, else its events folder. Raises :class:`DatabaseError` for a recorded value that is
    no such prefix (a database changed outside trace-report)."""
    url, _ = recorded(con)
    return events_dir_for(db_path) if url is None else _checked(url, db_path)


def record_location(con: duckdb.DuckDBPyConnection, url: str, pieces_id: str) -> None:
    """Write the prefix and its id into ``trace_report_info`` (an ingest's copy of the database)."""
    con.execute("INSERT INTO trace_report_info VALUES (?, ?), (?, ?) ON CONFLICT (key) DO UPDATE SET value = "
                "excluded.value", [PIECES_KEY, url, PIECES_ID_KEY, pieces_id])


@dataclass
class Plan:
    """Where an ingest writes its pieces: ``folder`` (a local folder or a prefix), the prefix's
    ``pieces_id``, and notes on what was cleaned up."""

    folder: Location
    pieces_id: str | None = None
    notes: list[str] = field(default_factory=list)


def prepare(db_path: Path, asked: str | None) -> Plan:
    """Where an ingest into ``db_path`` (its lock held) writes its pieces: ``asked`` (``--pieces``)
    or the prefix the database records, else its events folder. For a prefix: its marker is checked
    (or written, for a new database) and the pieces there that the database does not list are
    deleted, with a note. Raises :class:`InputError` for a prefix that is not this database's (one
    holding other objects, or another prefix than the one it records, or any for a database whose
    pieces are beside it) and :class:`DatabaseError` for a prefix whose marker names another id."""
    url, pieces_id, listed = _existing(db_path)
    if asked is not None:
        asked = check_url(asked)
        if url is None and listed:
            raise InputError(f"{db_path}: keeps its event pieces in {events_dir_for(db_path)}; --pieces cannot move "
                             "them: ingest into a new database")
        if url is not None and asked != url:
            raise InputError(f"{db_path}: keeps its event pieces at {storage.shown(url)}, not "
                             f"{storage.shown(asked)}: leave out --pieces, or ingest into a new database")
    if url is None and asked is None:
        return Plan(events_dir_for(db_path))
    if url is None:
        assert asked is not None
        return _new_prefix(db_path, asked)
    marker = _marker(url)
    if marker is None or marker.get("id") != pieces_id:
        raise DatabaseError(f"{storage.shown(url)}: its {MARKER} does not name {db_path} (another database's "
                            "pieces?): nothing is written there; ingest into a new database")
    return Plan(url, pieces_id, _orphans(url, listed, db_path))


def _existing(db_path: Path) -> tuple[str | None, str | None, set[str]]:
    """The prefix and id the database at ``db_path`` records and the pieces it lists (none of them
    for a new database, or for a file that is no trace-report database: writing it refuses that)."""
    if not db_path.is_file():
        return None, None, set()
    import duckdb  # an existing database: no decoding starts before the ingest opens it anyway

    try:
        con = duckdb.connect(os.fspath(db_path), read_only=True)
    except (duckdb.Error, UnicodeError):
        return None, None, set()
    try:
        url, pieces_id = recorded(con)
        listed = {str(f) for (f,) in con.execute("SELECT file FROM event_files").fetchall()}
    except duckdb.Error:
        return None, None, set()
    finally:
        con.close()
    return (None if url is None else _checked(url, db_path)), pieces_id, listed


def _checked(url: str, db_path: Path) -> str:
    try:
        return check_url(url)
    except InputError as exc:
        raise DatabaseError(f"{db_path}: records its event pieces at {url!r}, which is no object-store prefix "
                            f"({exc}); it was changed outside trace-report") from None


def _marker(url: str) -> dict[str, str] | None:
    where = storage.join(url, MARKER)
    try:
        storage.stat(where)
    except InputError:
        return None
    with storage.open_stream(where) as fh:
        try:
            value = json.loads(fh.read(1 << 16))
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _new_prefix(db_path: Path, url: str) -> Plan:
    """A new database's prefix: empty, or holding only what an interrupted first ingest of this
    same database left (its marker and pieces, removed here); its marker written."""
    objects = storage.list_prefix(url)
    names = {storage.name_of(o.location): o.location for o in objects}
    marker = _marker(url) if MARKER in names else None
    ours = marker is not None and marker.get("database") == os.fsdecode(db_path)
    foreign = [n for n, loc in names.items() if n != MARKER and not (PIECE_NAME.fullmatch(n)
                                                                     and loc == storage.join(url, n))]
    if (names and not ours) or foreign:
        raise InputError(f"{storage.shown(url)}: holds other objects ({len(objects)}; another database's pieces?): "
                         "give an empty prefix of its own to this database")
    notes = _orphans(url, set(), db_path) if names else []
    pieces_id = secrets.token_hex(8)
    body = {"app": "trace-report", "database": os.fsdecode(db_path), "id": pieces_id}
    storage.write_bytes(storage.join(url, MARKER), json.dumps(body).encode())
    return Plan(url, pieces_id, notes)


def _orphans(url: str, listed: set[str], db_path: Path) -> list[str]:
    """Delete the pieces directly under ``url`` that the database does not list; a note when any were."""
    gone = 0
    for obj in storage.list_prefix(url):
        name = storage.name_of(obj.location)
        if PIECE_NAME.fullmatch(name) and name not in listed and obj.location == storage.join(url, name):
            storage.delete(obj.location)
            gone += 1
    return [f"{db_path}: removed {gone} orphan event piece(s) left by an interrupted ingest at "
            f"{storage.shown(url)}"] if gone else []
