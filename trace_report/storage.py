"""Where bytes live: a local path or an object-store URL (``s3://``, ``gs://``, ``abfs://``).

The one place that opens, reads, stats, lists, writes and deletes a *location* that may be in
object storage, and the one through which every input file is read: a local path keeps its
fast path (:func:`open_input` is :func:`open`, :class:`RangeReader` is ``pread``), so a reader
written against this module reads an object as it reads a file.

``s3``, ``gs`` and ``abfs``/``abfss`` go through pyarrow's own file systems
(``pyarrow.fs.FileSystem.from_uri``: it reads ``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` and each
cloud's standard environment and config chain); any other scheme fsspec knows (``memory://``,
``https://`` ...) goes through fsspec, wrapped as a pyarrow file system so that both answer the
same calls. DuckDB reads and writes a URL through :func:`register`, fsspec's ``ArrowFSWrapper``
of the same file system (DuckDB's ``httpfs`` extension cannot be installed offline).

Credentials come only from that standard chain: a URL with a password (``s3://KEY:SECRET@...``)
is refused, no key is stored, and errors name the URL and what went wrong (no bucket, access
denied, endpoint unreachable), never a key (docs/security.md).

Traps handled here: pyarrow's ``open_input_stream`` un-gzips a ``.gz`` object by itself, and
``open_output_stream`` gzips one (``compression=None`` keeps the bytes as given); that stream
cannot seek; and a random-access file makes one ranged GET per read, so whole objects are read
as one stream with :data:`STREAM_BUFFER_BYTES` buffering.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from trace_report.errors import InputError

if TYPE_CHECKING:
    import sqlite3

    import duckdb
    import pyarrow as pa
    import pyarrow.fs as pafs

Location = Path | str
"""A local path, or a URL as text (:func:`is_url`)."""

ARROW_SCHEMES = frozenset({"s3", "gs", "gcs", "abfs", "abfss"})
"""Schemes opened by pyarrow's file systems (``FileSystem.from_uri``); others go through fsspec."""
STREAM_BUFFER_BYTES = 8 << 20
"""Read-ahead of a stream from object storage: 1 MB reads of a random-access S3 file made one GET
each, several times slower than one stream with this buffer (docs/scaling.md, "Object storage")."""
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
_ENV_PREFIXES = ("AWS_", "GOOGLE_", "GCS_", "AZURE_", "CLOUDSDK_")


def is_url(location: object) -> bool:
    """Whether ``location`` is a URL text (``scheme://...``, a scheme of two letters or more, not
    ``file://``) rather than a local path."""
    return isinstance(location, str) and bool(_URL.match(location)) and not location.lower().startswith("file://")


def location(text: str | os.PathLike[str]) -> Location:
    """What a user typed, as a location: a URL stays text (a :class:`~pathlib.Path` would fold
    its ``//``), anything else becomes a Path."""
    if isinstance(text, str) and is_url(text):
        return text
    return Path(text)


def shown(loc: Location) -> str:
    """``loc`` as printed: a URL without any user name or password in it."""
    if not is_url(loc):
        return os.fspath(loc)
    parts = urlsplit(str(loc))
    if parts.username is None and parts.password is None:
        return str(loc)
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path, parts.query, ""))


def join(url: str, *names: str) -> str:
    """``url`` with ``names`` appended, ``/``-separated."""
    return "/".join([url.rstrip("/"), *(n.strip("/") for n in names)])


def name_of(loc: Location) -> str:
    """The last component of ``loc`` (a URL's trailing ``/`` ignored)."""
    return str(loc).rstrip("/").rsplit("/", 1)[-1] if is_url(loc) else Path(loc).name


@dataclass(frozen=True)
class ObjectInfo:
    """One file or object: its location, ``size`` in bytes, modification time in ns since the epoch
    (object stores keep whole seconds) and ``etag`` (the object store's version tag, quotes
    removed; None for a local file or where the store gives none)."""

    location: Location
    size: int
    mtime_ns: int
    etag: str | None = None

    @property
    def identity(self) -> tuple[str, int, int]:
        """What tells this version of the object from another: (ETag, size, modification time)."""
        return self.etag or "", self.size, self.mtime_ns


# ---------------------------------------------------------------- file systems


def _environment_key() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)))


_FILESYSTEMS: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}


def filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system of ``url`` and the path inside it (``bucket/key`` for S3), one per
    scheme, bucket and environment (made once: an S3 client costs a few milliseconds).
    Raises :class:`InputError` for a URL with a password or a scheme nothing can open."""
    parts = urlsplit(url)
    if parts.password is not None:
        raise InputError(f"{shown(url)}: a URL may not hold credentials; give them through the cloud's "
                         "environment or config (AWS_PROFILE, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_...)")
    scheme = parts.scheme.lower()
    key = (scheme, parts.netloc, _environment_key())
    fs = _FILESYSTEMS.get(key)
    if fs is None:
        fs = _FILESYSTEMS[key] = _make_filesystem(url, scheme)
    return fs, _bucket_path(parts) if scheme in ARROW_SCHEMES else _fsspec_path(url)


def _bucket_path(parts: Any) -> str:
    """``bucket/key`` (``container/path`` for abfs, whose host is ``container@account...``)."""
    bucket = parts.netloc.split("@", 1)[0] if parts.scheme.lower().startswith("abfs") else parts.netloc
    return (bucket + parts.path).rstrip("/") if parts.path.strip("/") else bucket


def _fsspec_path(url: str) -> str:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return path


def _make_filesystem(url: str, scheme: str) -> pafs.FileSystem:
    if scheme in ARROW_SCHEMES:
        from pyarrow.fs import FileSystem

        try:
            return FileSystem.from_uri(url)[0]
        except (OSError, ValueError) as exc:
            raise storage_error(url, exc) from exc
    try:
        import fsspec
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        return PyFileSystem(FSSpecHandler(fsspec.filesystem(scheme)))
    except (ImportError, ValueError) as exc:
        raise InputError(f"{shown(url)}: no file system for {scheme}:// (pip install the fsspec "
                         f"package for it, or give s3://, gs://, abfs:// or a local path)") from exc


_REASONS = (
    (("NO_SUCH_BUCKET", "NoSuchBucket", "bucket does not exist", "ContainerNotFound"), "no such bucket"),
    (("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "403",
      "AuthorizationFailure", "AuthenticationFailed", "Unauthorized", "401"),
     "access denied (check the credentials of the environment: AWS_PROFILE, AWS_ACCESS_KEY_ID ...)"),
    (("NETWORK_CONNECTION", "curlCode", "Could not connect", "Couldn't connect", "Connection refused",
      "Name or service not known", "Could not resolve", "timed out", "Timeout"),
     "cannot reach the storage endpoint"),
)


def storage_error(loc: Location, exc: BaseException) -> InputError:
    """One line for a failed storage call: the location and the reason (no such object, no such
    bucket, access denied, endpoint unreachable, else the library's first line). The library's
    text is never copied when it is recognised; it names buckets and keys, never secrets."""
    text = str(exc)
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{shown(loc)}: no such file or directory")
    for words, reason in _REASONS:
        if any(w in text for w in words):
            if reason.startswith("cannot reach") and (endpoint := os.environ.get("AWS_ENDPOINT_URL")):
                reason += f" ({shown(endpoint)})"
            return InputError(f"{shown(loc)}: {reason}")
    first = text.splitlines()[0] if text else type(exc).__name__
    return InputError(f"{shown(loc)}: {first}")


@contextmanager
def _errors(loc: Location) -> Iterator[None]:
    try:
        yield
    except InputError:
        raise
    except (OSError, ValueError) as exc:
        raise storage_error(loc, exc) from exc


# ---------------------------------------------------------------- reading


def _file_type(url: str) -> tuple[Any, str, Any]:
    from pyarrow.fs import FileType

    fs, path = filesystem(url)
    with _errors(url):
        info = fs.get_file_info(path)
    return fs, path, info if info.type is not FileType.NotFound else None


def stat(loc: Location) -> ObjectInfo:
    """Size, modification time and ETag of the file or object at ``loc``. Raises
    :class:`InputError` when it is missing (naming a missing bucket as such), a folder or prefix,
    or cannot be reached."""
    if not is_url(loc):
        with _errors(loc):
            st = os.stat(loc)
        return ObjectInfo(Path(loc), st.st_size, st.st_mtime_ns)
    url = str(loc)
    fs, path, info = _file_type(url)
    from pyarrow.fs import FileType

    if info is None:
        raise _missing(url)
    if info.type is not FileType.File:
        raise InputError(f"{shown(url)}: a prefix (folder), not an object")
    with _errors(url), fs.open_input_file(path) as fh:  # one HEAD request: the ETag is not listed
        meta = fh.metadata()
    return ObjectInfo(url, int(info.size), _mtime_ns(info, meta), _etag(meta))


def is_prefix(url: str) -> bool:
    """Whether ``url`` names a prefix (a folder of objects) rather than one object. Raises
    :class:`InputError` when it names neither."""
    from pyarrow.fs import FileType

    _, _, info = _file_type(url)
    if info is None:
        raise _missing(url)
    return bool(info.type is FileType.Directory)


def _missing(url: str) -> InputError:
    """No object or prefix at ``url``: say so, or that its bucket is missing."""
    from pyarrow.fs import FileType

    fs, path = filesystem(url)
    bucket = path.split("/", 1)[0]
    if bucket and bucket != path:
        with _errors(url):
            there = fs.get_file_info(bucket).type is not FileType.NotFound
        if not there:
            return InputError(f"{shown(url)}: no such bucket")
    return InputError(f"{shown(url)}: no such object or prefix")


def _etag(meta: dict[bytes | str, bytes | str]) -> str | None:
    for key, value in meta.items():
        name = key.decode() if isinstance(key, bytes) else key
        if name.lower() == "etag":
            text = value.decode() if isinstance(value, bytes) else value
            return text.strip('"')
    return None


def _mtime_ns(info: Any, meta: dict[bytes | str, bytes | str]) -> int:
    if info.mtime_ns is not None:
        return int(info.mtime_ns)
    for key, value in meta.items():
        if (key.decode() if isinstance(key, bytes) else key).lower() == "last-modified":
            text = value.decode() if isinstance(value, bytes) else value
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return int(stamp.replace(tzinfo=stamp.tzinfo or timezone.utc).timestamp()) * 10**9
    return 0


def list_prefix(loc: Location) -> list[ObjectInfo]:
    """Every file under the folder or prefix ``loc`` (recursively), sorted by location; none for a
    prefix without objects; ETags are not listed (:func:`stat` asks for one). Raises
    :class:`InputError` for a missing bucket, denied access or an unreachable endpoint."""
    if not is_url(loc):
        root = Path(loc)
        return sorted((ObjectInfo(p, st.st_size, st.st_mtime_ns) for p in root.rglob("*")
                       if p.is_file() and (st := p.stat())), key=lambda o: str(o.location))
    from pyarrow.fs import FileSelector, FileType

    url = str(loc).rstrip("/")
    fs, path = filesystem(url)
    with _errors(url):
        infos = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
    root = path.rstrip("/") + "/"  # names below it keep the URL's own spelling (an abfs account, say)
    return sorted((ObjectInfo(join(url, i.path[len(root):]), int(i.size), int(i.mtime_ns or 0)) for i in infos
                   if i.type is FileType.File and i.path.startswith(root)), key=lambda o: str(o.location))


@contextmanager
def open_stream(loc: Location) -> Iterator[IO[bytes]]:
    """A buffered binary stream of the bytes of ``loc`` as stored (a ``.gz`` stays compressed);
    forward only for a URL. Raises :class:`InputError` when it cannot be opened or read."""
    with _errors(loc), open_input(loc, STREAM_BUFFER_BYTES) as fh:
        yield fh


def open_input(loc: Location, buffering: int = -1) -> IO[bytes]:
    """The bytes of ``loc`` as stored, as a binary file object that the caller closes: a local
    file opened as :func:`open` opens it (``buffering`` as there; its errors are :func:`open`'s
    ``OSError``), or an object read as one forward-only stream with :data:`STREAM_BUFFER_BYTES`
    of read-ahead (:class:`InputError` naming the URL when it cannot be opened or read)."""
    if not is_url(loc):
        return open(loc, "rb", buffering=buffering)
    fs, path = filesystem(str(loc))
    with _errors(loc):
        return _ObjectStream(fs.open_input_stream(path, compression=None, buffer_size=STREAM_BUFFER_BYTES),
                             str(loc))


class _ObjectStream(io.RawIOBase):
    """A stream of an object: a failure (a dropped connection) is an :class:`InputError` naming
    its URL, as a failed open is."""

    def __init__(self, stream: Any, url: str) -> None:
        super().__init__()
        self._stream, self._url = stream, url

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        with _errors(self._url):
            return bytes(self._stream.read() if size is None or size < 0 else self._stream.read(size))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return int(self._stream.tell())

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def read_head(loc: Location, length: int) -> bytes:
    """The first ``length`` bytes of ``loc`` (fewer when it is shorter): one ranged request for an
    object. Errors as :func:`open_input`'s."""
    if not is_url(loc):
        with open(loc, "rb") as fh:
            return fh.read(length)
    return read_range(loc, 0, length)


def read_text(loc: Location, encoding: str = "utf-8", errors: str = "replace", limit: int = -1) -> str:
    """The text of ``loc`` (its first ``limit`` characters when given) as :meth:`Path.read_text`
    reads it (universal newlines). Errors as :func:`open_input`'s."""
    with io.TextIOWrapper(open_input(loc), encoding=encoding, errors=errors) as fh:
        return fh.read(limit)


def read_bytes(loc: Location) -> bytes:
    """All the bytes of ``loc`` (a small file: a manifest, a piece). Errors as :func:`open_input`'s."""
    with open_input(loc) as fh:
        return fh.read()


def read_range(loc: Location, start: int, length: int) -> bytes:
    """``length`` bytes of ``loc`` from offset ``start`` (fewer at its end): one ranged request."""
    with _errors(loc), open_ranges(loc) as fh:
        return fh.pread(start, length)


class RangeReader:
    """Random reads of one file or object: ``pread`` of a local file's descriptor (no request,
    no seek shared with another thread), one ranged GET per read of an object. ``size``: its
    length in bytes."""

    def __init__(self, loc: Location) -> None:
        self.loc = loc
        if is_url(loc):
            fs, path = filesystem(str(loc))
            with _errors(loc):
                self._file: Any = fs.open_input_file(path)
                self.size = int(self._file.size())
            self._fd = -1
        else:
            self._fd = os.open(loc, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self.size = os.fstat(self._fd).st_size

    def pread(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes from offset ``start``."""
        if self._fd >= 0:
            return os.pread(self._fd, length, start)
        with _errors(self.loc):
            return bytes(self._file.read_at(max(0, min(length, self.size - start)), start))

    def readinto(self, start: int, buffer: memoryview) -> int:
        """Fill ``buffer`` from offset ``start``; returns the bytes read (fewer at the end)."""
        if self._fd < 0:
            data = self.pread(start, len(buffer))
            buffer[: len(data)] = data
            return len(data)
        done = 0
        while done < len(buffer) and (n := os.preadv(self._fd, [buffer[done:]], start + done)):
            done += n
        return done

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        else:
            self._file.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_ranges(loc: Location) -> RangeReader:
    """A :class:`RangeReader` of ``loc`` (a context manager). A local file's errors are
    ``OSError``; an object's, :class:`InputError`."""
    return RangeReader(loc)


def sqlite_readonly(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only SQLite connection to the local file ``path`` (any byte of its name quoted in
    the URI; ``immutable``: no locks taken, the file may not change meanwhile). SQLite opens a
    file by name, so an object is copied whole before it (:mod:`trace_report.staging`).
    Raises ``sqlite3.Error``."""
    import sqlite3

    uri = f"{Path(path).absolute().as_uri()}?mode=ro{'&immutable=1' if immutable else ''}"
    return sqlite3.connect(uri, uri=True)


def download(loc: Location, dest: Path) -> ObjectInfo:
    """Copy the object at ``loc`` to the local file ``dest`` as one buffered stream, giving it the
    object's modification time. Returns the object's :func:`stat` as it was before the copy."""
    info = stat(loc)
    with open_stream(loc) as src, open(dest, "wb") as out, _errors(loc):
        shutil.copyfileobj(src, out, STREAM_BUFFER_BYTES)
    os.utime(dest, ns=(info.mtime_ns, info.mtime_ns))
    return info


# ---------------------------------------------------------------- writing


def write_bytes(loc: Location, data: bytes) -> None:
    """Write ``data`` as the whole of ``loc`` (an object is replaced in one request)."""
    if not is_url(loc):
        with _errors(loc):
            Path(loc).write_bytes(data)
        return
    fs, path = filesystem(str(loc))
    with _errors(loc), fs.open_output_stream(path, compression=None) as out:
        out.write(data)


def write_file(loc: Location, source: Path) -> None:
    """Copy the local file ``source`` to ``loc`` (streamed, in :data:`STREAM_BUFFER_BYTES` blocks)."""
    if not is_url(loc):
        with _errors(loc):
            shutil.copyfile(source, loc)
        return
    fs, path = filesystem(str(loc))
    with _errors(loc), open(source, "rb") as src, fs.open_output_stream(path, compression=None) as out:
        shutil.copyfileobj(src, out, STREAM_BUFFER_BYTES)  # type: ignore[misc]


def write_parquet(table: pa.Table, loc: Location, **options: Any) -> None:
    """Write ``table`` as one Parquet file at ``loc`` (``options``: :func:`pyarrow.parquet.write_table`'s)."""
    import pyarrow.parquet as pq

    if not is_url(loc):
        with _errors(loc):
            pq.write_table(table, loc, **options)
        return
    fs, path = filesystem(str(loc))
    with _errors(loc):
        pq.write_table(table, path, filesystem=fs, **options)


def delete(loc: Location) -> None:
    """Remove the file or object at ``loc`` (nothing when it is already gone)."""
    if not is_url(loc):
        Path(loc).unlink(missing_ok=True)
        return
    fs, path = filesystem(str(loc))
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise storage_error(loc, exc) from exc


def register(con: duckdb.DuckDBPyConnection, url: str, *, unchanging: bool = False) -> None:
    """Let ``con`` read and write ``url``'s scheme (``read_parquet('s3://...')``, ``COPY ... TO
    's3://...'``) through fsspec's ``ArrowFSWrapper`` of :func:`filesystem`.

    ``unchanging``: the objects ``con`` reads do not change while it is open (a database's event
    pieces: a name is never written twice), so each object's size and time are asked for once
    (:class:`_UnchangingObjects`): DuckDB asks for them at every open of a file, one HEAD request
    each, thousands for one command over a few dozen pieces.

    A sandboxed connection (:func:`trace_report.store.sandbox.sandbox`) reads only the folders its
    ``allowed_directories`` names, URLs of a registered file system included."""
    from fsspec.implementations.arrow import ArrowFSWrapper

    fs, _ = filesystem(url)
    scheme = urlsplit(url).scheme.lower()
    bases = (_UnchangingObjects, ArrowFSWrapper) if unchanging else (ArrowFSWrapper,)
    # DuckDB sends a path to the file system whose protocol it starts with (pyarrow names gs:// "gcs")
    wrapper = type("ArrowFSWrapper", bases, {"protocol": (scheme, fs.type_name)})
    con.register_filesystem(wrapper(fs))


class _UnchangingObjects:
    """An ``ArrowFSWrapper`` mix-in that keeps each object's pyarrow ``FileInfo`` (size, time) once
    asked for, and opens an object for reading only at its first read (pyarrow's ``open_input_file``
    sends a HEAD, and DuckDB opens every file at every scan, then mostly reads its own cache)."""

    fs: pafs.FileSystem

    def _arrow_info(self, path: str) -> Any:
        from pyarrow.fs import FileType

        known: dict[str, Any] = self.__dict__.setdefault("_known", {})
        key = self._strip_protocol(path)  # type: ignore[attr-defined]
        if key not in known:
            info = self.fs.get_file_info(key)
            if info.type is not FileType.File:
                return info  # a prefix or nothing: asked again next time
            known[key] = info
        return known[key]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return self._make_entry(self._arrow_info(path))  # type: ignore[attr-defined, no-any-return]

    def modified(self, path: str) -> datetime:
        return self._arrow_info(path).mtime  # type: ignore[no-any-return]

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, seekable: bool = True,
              **kwargs: Any) -> Any:
        if mode != "rb" or not seekable:
            return super()._open(path, mode, block_size, seekable, **kwargs)  # type: ignore[misc]
        key = self._strip_protocol(path)  # type: ignore[attr-defined]
        return _lazy_file_class()(self, key, int(self._arrow_info(path).size))


@cache
def _lazy_file_class() -> type:
    """A read-only fsspec ``ArrowFile`` of one object of a known size that opens it at its first
    read: seeking, telling, its size and closing ask nothing of the store (fsspec loads only here)."""
    from fsspec.implementations.arrow import ArrowFile

    class LazyArrowFile(ArrowFile):  # type: ignore[misc]
        def __init__(self, wrapper: Any, key: str, size: int) -> None:
            self._opened: Any = None
            self._pos, self._size, self._closed = 0, size, False
            super().__init__(wrapper, None, key, "rb")

        @property
        def stream(self) -> Any:
            if self._opened is None:
                try:
                    self._opened = self.fs.fs.open_input_file(self.path)
                except OSError as exc:
                    raise storage_error(self.path, exc) from exc
                self._opened.seek(self._pos)
            return self._opened

        @stream.setter
        def stream(self, value: Any) -> None:
            self._opened = value

        def seek(self, offset: int, whence: int = 0) -> int:
            if self._opened is not None:
                return int(self._opened.seek(offset, whence))
            self._pos = {0: 0, 1: self._pos, 2: self._size}[whence] + offset
            return self._pos

        def tell(self) -> int:
            return int(self._opened.tell()) if self._opened is not None else self._pos

        @property
        def closed(self) -> bool:
            return self._closed

        def close(self) -> None:
            if self._opened is not None:
                self._opened.close()
            self._closed = True

        @property
        def size(self) -> int:
            return self._size

        def seekable(self) -> bool:
            return True

        def readable(self) -> bool:
            return True

    return LazyArrowFile
