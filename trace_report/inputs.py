"""What is this path? The one place that opens a file to ask (``docs/architecture.md``).

:func:`detect` names the kind of one file or folder from its content, never from its
neighbours: a Chrome/Kineto trace is a JSON object with ``traceEvents`` or a top-level array of
events (plain or gzip); an nsys export is SQLite with nsys' tables; an Nsight Compute report is
an ``.ncu-rep`` or a CSV whose header is ncu's; a database starts with DuckDB's magic bytes; a
dataset is a folder written by ``trace-report export``. :func:`resolve` expands what a user
typed (local paths, and URLs of objects, prefixes and archives in object storage, seen in a
scratch folder by :mod:`trace_report.staging`: a large trace or archive by its head, read from its
URL when decoded, :attr:`Source.location`) into typed :class:`Source` files, listing
every file seen and not used with its reason, and dropping repeats (the same file given twice,
a file and its folder) with a note. Tar archives are unpacked with limits by
:mod:`trace_report.archives`; FIFOs and devices are never opened; names are stored and printed
through :func:`~trace_report.pathtext.printable`.
"""

from __future__ import annotations

import enum
import os
import re
import stat
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath, PurePosixPath

from trace_report import storage
from trace_report.archives import ArchiveLimits, Member, Scratch, unpack
from trace_report.errors import InputError
from trace_report.formats.magic import GZIP_MAGIC
from trace_report.pathtext import printable
from trace_report.staging import Staged, Stager, identity_of

SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 4 << 20
"""How much of a (decompressed) JSON file is read to find ``traceEvents``."""
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_START = re.compile(rb'\[\s*(\]|\{\s*"(ph|name|cat|ts|pid|tid|dur|args|id)"\s*:)')


class InputKind(str, enum.Enum):
    """Kinds of input; the values appear in notes and errors."""

    trace = "Chrome/Kineto trace"
    archive = "tar archive"
    folder = "folder"
    database = "trace-report database"
    dataset = "Parquet dataset"
    ncu_report = "Nsight Compute report"
    ncu_csv = "Nsight Compute CSV"
    nsys_sqlite = "Nsight Systems SQLite export"
    nsys_report = "Nsight Systems report"
    nsys_kernsum = "nsys stats kernel summary CSV"
    other = "not an input"


INGESTED = {InputKind.trace, InputKind.ncu_report, InputKind.ncu_csv, InputKind.nsys_sqlite}
"""Kinds that become rows of the schema (``traces`` or the ncu tables)."""


@dataclass(frozen=True)
class Detected:
    """The kind of a path and, for :attr:`InputKind.other`, why it is not an input."""

    kind: InputKind
    reason: str = ""


def _head(path: Path, size: int = 64) -> bytes:
    return storage.read_head(path, size)


def _growing_heads(path: Path) -> Iterator[bytes]:
    """The start of the file's content (gunzipped when it is gzip), longer each time: 64 KB,
    256 KB, 1 MB, then :data:`HEAD_BYTES`, or less where the content ends. A truncated or damaged
    stream gives what could be read (the reader reports the damage precisely)."""
    with storage.open_input(path) as fh:
        gz = fh.read(2) == GZIP_MAGIC
        fh.seek(0)
        inflate = zlib.decompressobj(wbits=31) if gz else None
        out = bytearray()
        want = 64 << 10
        ended = False
        while not ended:
            while len(out) < want and not ended:
                if inflate is None:
                    block = fh.read(want - len(out))
                    out += block
                    ended = not block
                    continue
                block = fh.read(1 << 16)
                try:
                    out += inflate.decompress(block, want - len(out))
                except zlib.error:
                    ended = True
                    break
                ended = not block or inflate.eof
                if inflate.unconsumed_tail:  # the output limit was reached first: keep the rest
                    fh.seek(-len(inflate.unconsumed_tail), 1)
            yield bytes(out)
            if want >= HEAD_BYTES:
                return
            want = min(want * 4, HEAD_BYTES)


def _verdict(head: bytes, final: bool) -> Detected | None:
    """What a JSON file is, from the start of its content; None while more could change it."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        if _EVENTS_KEY.search(text):
            return Detected(InputKind.trace)
        return Detected(InputKind.other, "a JSON object without traceEvents") if final else None
    if text.startswith(b"["):
        if _EVENT_START.match(text):
            return Detected(InputKind.trace)
        return Detected(InputKind.other, _NOT_A_TRACE) if final else None
    if not text:
        return Detected(InputKind.other, "empty file") if final else None
    return Detected(InputKind.other, _NOT_A_TRACE)


_NOT_A_TRACE = "not a JSON trace (no traceEvents, not an array of events)"


def _json_kind(path: Path) -> Detected:
    """A JSON file (maybe gzip) is a trace when its content (up to :data:`HEAD_BYTES`) has
    ``"traceEvents": [`` or it is an array starting with an event; read in growing steps, so a
    Kineto trace (the key within its first kilobytes) costs one small read."""
    head = b""
    try:
        for head in _growing_heads(path):
            verdict = _verdict(head, final=False)
            if verdict is not None:
                return verdict
    except OSError as exc:
        return Detected(InputKind.other, f"unreadable ({exc.strerror or exc})")
    verdict = _verdict(head, final=True)
    assert verdict is not None
    return verdict


def _csv_kind(path: Path) -> Detected:
    lines = storage.read_text(path, limit=65536).splitlines()
    if any(line.lstrip("\ufeff").startswith(('"ID",', "ID,")) and "Kernel Name" in line for line in lines):
        return Detected(InputKind.ncu_csv)
    if any("," in line and "Total Time" in line and "Instances" in line and "Name" in line for line in lines):
        return Detected(InputKind.nsys_kernsum)
    return Detected(InputKind.other, "a CSV that is neither an ncu export nor an nsys kernel summary")


def _sqlite_kind(path: Path) -> Detected:
    import sqlite3  # only for SQLite files

    try:
        con = storage.sqlite_readonly(path)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        return Detected(InputKind.other, f"unreadable SQLite file ({exc})")
    if "CUPTI_ACTIVITY_KIND_KERNEL" in names or "StringIds" in names or "TARGET_INFO_SESSION_START_TIME" in names:
        return Detected(InputKind.nsys_sqlite)
    return Detected(InputKind.other, "an SQLite file without Nsight Systems tables")


def is_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder written by ``trace-report export``."""
    return path.is_dir() and (path / "traces.parquet").is_file() and (path / "events").is_dir()


def is_dataset_url(url: str) -> bool:
    """Whether ``url`` is a prefix written by ``trace-report export -o URL`` (``traces.parquet``
    and objects under ``events/``), read in place (:func:`trace_report.store.export.open_parquet_dataset`).
    Raises :class:`InputError` when it names neither an object nor a prefix."""
    if not storage.is_prefix(url):
        return False
    root = url.rstrip("/") + "/"
    names = {str(o.location)[len(root):] for o in storage.list_prefix(url)}
    return "traces.parquet" in names and any(n.startswith("events/") for n in names)


DUCKDB_IN_STORAGE = ("a trace-report database is opened from a local file only: copy it here (its event pieces "
                     "may stay in object storage: ingest --pieces), or export it (export -o s3://...), which "
                     "is read in place")
"""What is said of a ``.duckdb`` object given as an input (DuckDB cannot open one in object storage)."""


def detect(path: Path) -> Detected:
    """The kind of ``path`` by its content (suffixes only break ties between formats that
    share a container, such as ``.ncu-rep``). Raises :class:`InputError` for a missing path."""
    if not path.exists():
        raise InputError(f"{printable(path)}: no such file or directory")
    if path.is_dir():
        return Detected(InputKind.dataset if is_dataset(path) else InputKind.folder)
    if special := _special_file(path):
        return Detected(InputKind.other, special)
    name = path.name.lower()
    try:
        head = _head(path)
    except OSError as exc:
        return Detected(InputKind.other, f"unreadable ({exc.strerror or exc})")
    if name.endswith(".ncu-rep"):
        return Detected(InputKind.ncu_report)
    if name.endswith(".nsys-rep"):
        return Detected(InputKind.nsys_report, "an Nsight Systems report: export it with "
                        "`nsys export --type sqlite REPORT.nsys-rep` and give the .sqlite file")
    if head[8:12] == b"DUCK":
        return Detected(InputKind.database)
    if head.startswith(SQLITE_MAGIC):
        return _sqlite_kind(path)
    if name.endswith(ARCHIVE_SUFFIXES) and _is_tar(path):
        return Detected(InputKind.archive)
    if name.endswith((".csv", ".txt")) and not head.startswith(GZIP_MAGIC):
        return _csv_kind(path)
    return _json_kind(path)


_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _special_file(path: Path) -> str | None:
    """Why ``path`` (not a folder) is not read when it is no regular file, else None: reading a
    FIFO without a writer, or a device, would wait or run for ever."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # opening it tells what is wrong
    if stat.S_ISREG(mode):
        return None
    what = next((text for test, text in _SPECIAL if test(mode)), "a special file")
    return f"{what}, not a regular file"


def _is_tar(path: Path) -> bool:
    try:
        with storage.open_input(path) as fh:
            return tarfile.is_tarfile(fh)
    except (OSError, tarfile.TarError):
        return False


@dataclass(frozen=True)
class Source:
    """One file to ingest. ``label`` is what the user sees and ``traces.path`` stores
    (``archive!member`` for a tar member, whose ``path`` is an extracted temporary copy; the URL of
    an object in object storage, whose ``path`` is a copy: ``staged``), with the bytes of a name
    that are not UTF-8 as backslash escapes (:func:`~trace_report.pathtext.printable`)."""

    path: Path
    label: str
    kind: InputKind
    run_dir: Path | None = None
    identity: tuple[int | str, int, int, int] | None = field(default=None, compare=False, repr=False)
    """(device, inode, size, modification time in ns) of ``path`` when it was found, before any of it
    is read (for an object: its ETag, 0, size and time, :func:`~trace_report.staging.identity_of`):
    an ingest stores a file only when it is still this one once read
    (:func:`trace_report.ingest.files.check_unchanged`)."""
    staged: Staged | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.identity is None:
            found = identity_of(self.staged.info) if self.staged is not None else file_identity(self.path)
            object.__setattr__(self, "identity", found)

    def identity_now(self) -> tuple[int | str, int, int, int] | None:
        """:attr:`identity` as it is now (None: gone or unreadable)."""
        return self.staged.identity_now() if self.staged is not None else file_identity(self.path)

    @property
    def location(self) -> storage.Location:
        """Where its bytes are read: :attr:`path`, or the object's URL where only the object's head
        was copied (``staged.whole`` False), the rest streamed from object storage as it is decoded."""
        return self.staged.url if self.staged is not None and not self.staged.whole else self.path


def file_identity(path: Path) -> tuple[int | str, int, int, int] | None:
    """(device, inode, size, modification time in ns) of the file at ``path``; None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class Resolution:
    """What :func:`resolve` found. Scratch folders (tar members, :class:`~trace_report.archives.Scratch`)
    live until :meth:`close`."""

    sources: list[Source] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(label, reason) of every file seen and not used."""
    notes: list[str] = field(default_factory=list)
    database: Path | None = None
    dataset: storage.Location | None = None
    """A local folder, or a prefix in object storage (:func:`is_dataset_url`), read in place."""
    run_folders: list[storage.Location] = field(default_factory=list)
    """Folders holding a ``run.json`` (local, or prefixes in object storage: their URLs)."""
    scratch: list[Scratch] = field(default_factory=list)

    def close(self) -> None:
        for tmp in self.scratch:
            tmp.cleanup()
        self.scratch.clear()

    def __enter__(self) -> Resolution:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_dir_of(path: Path) -> Path | None:
    return path.parent if (path.parent / "run.json").is_file() else None


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


NCU_CSV_EXPORT = ".ncu.csv"
"""Suffix of the CSV that ``capture --ncu`` exports from its ``.ncu-rep`` (same stem, same
folder). Both hold the same launches: in a folder or archive only the report is read."""


def _export_skipped(path: PurePath, present: set[PurePath]) -> str | None:
    """Why ``path`` is not read, when it is ``X.ncu.csv`` and ``present`` (the files of a folder
    or the members of an archive) holds ``X.ncu-rep`` in the same folder; else None."""
    if not path.name.endswith(NCU_CSV_EXPORT):
        return None
    report = path.with_name(path.name[: -len(NCU_CSV_EXPORT)] + ".ncu-rep")
    return f"the CSV export of {report.name} beside it, which is read instead" if report in present else None


class _Resolver:
    def __init__(self, limits: ArchiveLimits, heads: int | None = None) -> None:
        self.out = Resolution()
        self.seen: dict[Path, str] = {}
        self.limits = limits
        self.stager = Stager(heads=heads)

    def label(self, path: Path) -> str:
        """What ``path`` is shown and stored as: its URL for a copy of an object, else its name."""
        return self.stager.label(path) or printable(path)

    def remote(self, url: str) -> None:
        """The object, prefix or archive at ``url``, copied to a scratch folder and read as local;
        an exported dataset is read in place, a database refused before anything is copied."""
        if is_dataset_url(url):
            self.out.dataset = url.rstrip("/")
            return
        if not storage.is_prefix(url) and storage.read_range(url, 8, 4) == b"DUCK":
            raise InputError(f"{storage.shown(url)}: {DUCKDB_IN_STORAGE}")
        before = len(self.stager.skipped)
        try:
            local = self.stager.stage(url)
        finally:
            if self.stager.scratch is not None and self.stager.scratch not in self.out.scratch:
                self.out.scratch.append(self.stager.scratch)
        self.out.skipped.extend(self.stager.skipped[before:])
        if local.is_dir():
            self.folder(local)
        else:
            self.file(local, explicit=True)

    def file(self, path: Path, *, explicit: bool) -> None:
        real = _real(path)
        if real in self.seen:
            if explicit:
                self.out.notes.append(f"{printable(path)}: given more than once (as {self.seen[real]}); read once")
            return
        label = self.label(path)
        self.seen[real] = label
        found = detect(path)
        if found.kind in INGESTED:
            staged = self.stager.by_path.get(path)
            self.out.sources.append(Source(path, label, found.kind, _run_dir_of(path), staged=staged))
        elif found.kind is InputKind.archive:
            self.archive(path)
        elif explicit and found.kind in (InputKind.database, InputKind.dataset):
            self.single(path, found.kind)
        elif explicit:
            reason = found.reason or f"a {found.kind.value}, which is not read here"
            raise InputError(f"{label}: {reason}")
        elif path.name != "run.json" and not path.name.startswith("run-rank"):
            self.out.skipped.append((label, found.reason or f"a {found.kind.value}"))

    def single(self, path: Path, kind: InputKind) -> None:
        if (url := self.stager.label(path)) is not None:
            why = DUCKDB_IN_STORAGE if kind is InputKind.database else "give its own prefix (s3://.../DIR/)"
            raise InputError(f"{storage.shown(url)}: a {kind.value} in object storage: {why}")
        if kind is InputKind.database:
            self.out.database = path
        else:
            self.out.dataset = path

    def folder(self, folder: Path) -> None:
        entries = [p for p in folder.rglob("*")
                   if not any(part.startswith(".") for part in p.relative_to(folder).parts)]
        files = sorted(p for p in entries if p.is_file())
        for p in sorted(entries):
            if not p.is_file() and not p.is_dir() and (special := _special_file(p)):
                self.out.skipped.append((self.label(p), special))
        present: set[PurePath] = set(files)
        for p in files:
            if p.name.endswith((".duckdb.wal", ".parquet")) or ".duckdb.events" in p.parent.name:
                continue  # a database's own files
            if why := _export_skipped(p, present):
                self.out.skipped.append((self.label(p), why))
                continue
            self.file(p, explicit=False)

    def archive(self, archive: Path) -> None:
        scratch = Scratch()
        self.out.scratch.append(scratch)
        before = len(self.out.sources)
        staged = self.stager.by_path.get(archive)
        where = staged.url if staged is not None and not staged.whole else archive  # an object: streamed
        members = unpack(where, scratch.path, self.limits, self.label(archive))
        present: set[PurePath] = {PurePosixPath(m.name) for m in members if m.path is not None}
        for m in members:
            label = f"{self.label(archive)}!{printable(m.name)}"
            if m.path is None:
                self.out.skipped.append((label, m.reason))
            elif why := _export_skipped(PurePosixPath(m.name), present):
                self.out.skipped.append((label, why))
            else:
                self.member(m, label)
        if len(self.out.sources) == before:
            raise InputError(f"{self.label(archive)}: no traces in this archive")

    def member(self, member: Member, label: str) -> None:
        assert member.path is not None
        found = detect(member.path)
        if found.kind in INGESTED:
            self.out.sources.append(Source(member.path, label, found.kind))
        else:
            self.out.skipped.append((label, found.reason or f"a {found.kind.value}"))


def as_paths(paths: object) -> list[storage.Location]:
    """The paths a caller of :func:`trace_report.open` gave: one path or a sequence of them, each
    a ``str``, ``bytes`` (decoded as the file system does, :func:`os.fsdecode`) or
    :class:`os.PathLike`; a URL (``s3://...``) stays text (:func:`trace_report.storage.location`).
    :class:`InputError` for an empty path (it would name the working folder) and for anything else."""
    one = isinstance(paths, (str, bytes, os.PathLike))
    items = [paths] if one else list(paths) if isinstance(paths, Sequence) else None
    if items is None:
        raise InputError(f"paths: expected a path or a list of paths, not {type(paths).__name__}")
    out = []
    for item in items:
        if not isinstance(item, (str, bytes, os.PathLike)):
            raise InputError(f"paths: expected str, bytes or os.PathLike, not {type(item).__name__}")
        text = os.fsdecode(item)
        if not text:
            raise InputError("an empty path names no file: give a trace, folder or database ('.' for the "
                             "working folder)")
        out.append(storage.location(text))
    return out


def resolve(paths: Sequence[storage.Location], *, allow_database: bool = True, max_ratio: float | None = None,
            archive_limits: ArchiveLimits | None = None, url_heads: bool = True) -> Resolution:
    """Expand ``paths`` (files, folders searched recursively, tar archives, one database or
    exported dataset; local paths, or URLs of objects, prefixes and archives) into typed
    sources, in a stable order.

    Archives are unpacked under ``archive_limits`` (default :class:`~trace_report.archives.ArchiveLimits`);
    ``max_ratio``, when given, replaces its ratio (``trace-report ingest --max-ratio``; 0: none).
    Raises :class:`InputError` for a missing path, object or bucket, denied access to one or an
    unreachable storage endpoint, a database in object storage, an explicit file that is no input (a FIFO or
    device among them), a database or dataset mixed with other inputs (or at all, unless
    ``allow_database``), an archive past a limit, and for paths holding nothing to read. The
    caller closes the result (temporary files).

    ``url_heads`` (default): of a trace or tar archive in object storage larger than
    :data:`HEAD_BYTES` copy only its first :data:`HEAD_BYTES` (enough to detect it;
    :class:`~trace_report.staging.Stager`); the ingest then streams it from its URL
    (:attr:`Source.location`; ``Source.staged.whole`` is False and ``Source.path`` is no trace to
    read), an archive is unpacked from its stream. False: every object copied whole, for a reader
    that needs a local file (HTA).
    """
    if not paths:
        raise InputError("no input paths given")
    limits = archive_limits or ArchiveLimits()
    if max_ratio is not None:
        limits = replace(limits, max_ratio=max_ratio)
    r = _Resolver(limits, HEAD_BYTES if url_heads else None)
    try:
        for path in paths:
            if storage.is_url(path):
                r.remote(str(path))
            else:
                _one(r, Path(path))
        out = r.out
        single = out.database or out.dataset
        if single is not None and (len(paths) > 1 or out.sources):
            raise InputError("give either one database (or exported dataset) or trace files and runs, not both")
        if single is not None and not allow_database:
            raise InputError(f"{printable(single)}: a database or dataset cannot be ingested; "
                             "give trace files or folders")
        out.run_folders = [*_run_folders([Path(p) for p in paths if not storage.is_url(p)]),
                           *_remote_run_folders(r.stager)]
        if single is None and not out.sources and not out.run_folders:
            raise InputError(_nothing_message(paths, out.skipped))
    except BaseException:
        r.out.close()
        raise
    return out


def _one(r: _Resolver, path: Path) -> None:
    if not path.exists():
        raise InputError(f"{printable(path)}: no such file or directory")
    if path.is_dir():
        if is_dataset(path):
            r.single(path, InputKind.dataset)
            return
        real = _real(path)
        inside = [printable(p) for p in r.seen if p == real or real in p.parents]
        r.folder(path)
        if inside:
            r.out.notes.append(f"{printable(path)}: overlaps inputs given before ({inside[0]}); each file read once")
        return
    r.file(path, explicit=True)


def _nothing_message(paths: Sequence[storage.Location], skipped: list[tuple[str, str]]) -> str:
    where = ", ".join(storage.shown(p) if storage.is_url(p) else printable(p) for p in paths)
    if skipped:
        return f"{where}: no traces or Nsight exports here ({len(skipped)} file(s) skipped, e.g. " \
               f"{skipped[0][0]}: {skipped[0][1]})"
    return f"{where}: no traces or Nsight exports here"


def _remote_run_folders(stager: Stager) -> list[storage.Location]:
    """The URLs of the prefixes holding a ``run.json`` among the objects copied (hidden folders skipped)."""
    found: dict[str, None] = {}
    for path, staged in sorted(stager.by_path.items()):
        if path.name == "run.json" and not any(p.startswith(".") for p in staged.url.split("://", 1)[1].split("/")):
            found[staged.url.rsplit("/", 1)[0]] = None
    return list(found)


def _run_folders(paths: list[Path]) -> list[Path]:
    """Folders holding a ``run.json`` in or beside the given paths (hidden folders skipped)."""
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            for manifest in sorted(path.rglob("run.json")):
                if not any(part.startswith(".") for part in manifest.relative_to(path).parts[:-1]):
                    found[manifest.parent] = None
        elif (path.parent / "run.json").is_file():
            found[path.parent] = None
    return list(found)
