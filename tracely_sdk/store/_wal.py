"""Write-ahead logs: records made durable before anything acts on them, read back after a crash.

The client's spool (recordings on their way to the store, :mod:`tracely_sdk.store._writer`)
and the server's ingest journal (accepted exports on their way to being assembled,
:mod:`tracely_sdk.server._ingest`) are both such logs, and both are this module:

- A record is framed with a CRC-32, so that one cut short by a crash or changed on disk is told
  from a good one (:class:`Frames` for binary payloads, :class:`Lines` for JSON documents).
- An append is written whole and fsync'd before it counts (the journal shares one fsync between
  concurrent appends, :meth:`SegmentLog.sync`); a new file's directory is fsync'd too. An append
  that fails (a full disk) is cut off again, so that the file stays readable past it, and the
  caller is told (:class:`LogError`, or the ``OSError``).
- Reading back yields the records in order and never a damaged one: a write cut short at the
  end of a file was never acknowledged and is skipped with a warning; anything else damaged is
  set aside beside the log and logged as an error, never dropped in silence.
- A file is deleted once every record in it is committed downstream.

Two layouts:

- :class:`SegmentLog` -- numbered segment files in a directory that one process owns, each
  reference-counted by what still needs its records (the journal).
- :class:`SharedLog` -- one file any process appends to under a lock, taken whole by a writer as
  a claimed file and deleted once stored; a dead writer's claimed files are taken over (the
  spool)::

      <log>                         appended to by every process
      <log>.<pid>.<token>.claimed   a batch a writer is storing (removed once committed)
      <log>.lock                    serialises appends and claims between processes
      <log>.rejected.jsonl          records set aside: damaged, or refused downstream
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Protocol

from tracely_sdk.errors import ConfigError

try:  # POSIX: appends and claims are also exclusive between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: exclusive within the process only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "Damage",
    "Frames",
    "Framing",
    "Lines",
    "LogError",
    "LogInUse",
    "Record",
    "SegmentLog",
    "SharedLog",
]

log = logging.getLogger("tracely.store")


class LogError(Exception):
    """The log could not be written; nothing of the append counts as written."""


class LogInUse(ConfigError):
    """Another process owns the log's directory."""


def _fsync_dir(directory: Path) -> None:
    """Make a file created (or renamed) in ``directory`` survive a power cut."""
    if os.name != "posix":  # pragma: no cover - the file's own fsync is all there is
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


_writev = getattr(os, "writev", None)  # not on Windows
_O_BINARY: Final = getattr(os, "O_BINARY", 0)  # Windows would translate newlines without it
_CREATE_NEW: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY  # as open(path, "xb")


def _write_all(fd: int, parts: Sequence[bytes]) -> None:
    views = [memoryview(part) for part in parts if part]
    while views:
        written = _writev(fd, views) if _writev is not None else os.write(fd, views[0])
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]


def _append_durably(path: Path, data: bytes, framing: Framing, *, mode: int = 0o666) -> None:
    """Append framed ``data`` to ``path`` and fsync it (and the directory of a new file); an
    append that fails is cut off again and raises ``OSError``."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | _O_BINARY, mode)
    try:
        start = os.fstat(fd).st_size
        last = b""
        if start:
            os.lseek(fd, start - 1, os.SEEK_SET)
            last = os.read(fd, 1)
        try:
            _write_all(fd, [framing.lead(last), data])
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)


# --------------------------------------------------------------------------------------------
# framing


@dataclass(frozen=True, slots=True)
class Record:
    """A good record read back: its payload as appended."""

    payload: bytes
    kind: int = 0


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes that are not a good record. ``torn``: a write cut short at the end of the file."""

    raw: bytes
    torn: bool


class Framing(Protocol):
    def frame(self, payload: bytes, kind: int = 0) -> list[bytes]:
        """The bytes that append one record (in parts, so a large payload is not copied)."""
        ...

    def read(self, f: IO[bytes]) -> Iterator[Record | Damage]:
        """The file's records in order, and what is damaged between and after them."""
        ...

    def lead(self, last: bytes) -> bytes:
        """What an append starts with after ``last``, the file's last byte (b"" if empty)."""
        ...


_HEADER: Final = struct.Struct("<4sBxxxII")  # magic, kind, payload length, CRC-32 of payload


class Frames:
    """Binary records: a 16-byte header (magic, kind, payload length, CRC-32 of the payload,
    little-endian) and the payload. A payload may hold anything, a header included, so nothing
    after the first damaged record is taken for a record: reading stops there. Damage is torn
    when it is a record cut short, or zeros to the end."""

    def __init__(self, magic: bytes, kinds: Iterable[int]) -> None:
        if len(magic) != 4:
            raise ValueError("the magic is 4 bytes")
        self.magic = magic
        self.kinds = frozenset(kinds)

    def frame(self, payload: bytes, kind: int = 0) -> list[bytes]:
        if kind not in self.kinds:
            raise ValueError(f"unknown record kind {kind}")
        return [_HEADER.pack(self.magic, kind, len(payload), zlib.crc32(payload)), payload]

    def read(self, f: IO[bytes]) -> Iterator[Record | Damage]:
        data = f.read()
        offset = 0
        while offset < len(data):
            end = offset + _HEADER.size
            torn = end > len(data)
            if not torn:
                magic, kind, length, crc = _HEADER.unpack_from(data, offset)
                if magic == self.magic and kind in self.kinds:
                    torn = end + length > len(data)
                    payload = data[end : end + length]
                    if not torn and zlib.crc32(payload) == crc:
                        yield Record(payload, kind)
                        offset = end + length
                        continue
            rest = data[offset:]
            # A power cut can leave a file longer than what reached it, the rest zeros.
            yield Damage(rest, torn or not rest.strip(b"\0"))
            return

    def lead(self, last: bytes) -> bytes:
        return b""


_CRC_HEAD: Final = b'{"~crc32":"'


class Lines:
    """JSON Lines whose objects lead with their CRC-32 as a member of its own,
    ``{"~crc32":"89abcdef", ...}`` (the checksum of the object without it), so that the file
    stays one JSON object a line for a person or another reader. A line without the member
    (as the previous release wrote them) is read as it is: the JSON parser is its one check.
    JSON never holds a raw newline, so reading goes on after a damaged line."""

    def frame(self, payload: bytes, kind: int = 0) -> list[bytes]:
        if payload[:1] != b"{" or payload[-1:] != b"}" or b"\n" in payload:
            raise ValueError("a line record is one JSON object on one line")
        rest = payload[1:]
        glue = b'"' if rest.lstrip()[:1] == b"}" else b'",'
        return [_CRC_HEAD + b"%08x" % zlib.crc32(payload) + glue + rest + b"\n"]

    def read(self, f: IO[bytes]) -> Iterator[Record | Damage]:
        for raw in f:
            line = raw.strip()
            if not line:
                continue
            payload = self._payload(line)
            if payload is None:
                yield Damage(line, torn=not raw.endswith(b"\n"))
            else:
                yield Record(payload)

    @staticmethod
    def _payload(line: bytes) -> bytes | None:
        if not line.startswith(_CRC_HEAD):
            # a line of the previous release, or one cut short inside the checksum's member
            return None if _CRC_HEAD.startswith(line) else line
        head = len(_CRC_HEAD)
        if line[head + 8 : head + 9] != b'"':
            return None
        rest = line[head + 9 :]
        payload = b"{" + (rest[1:] if rest[:1] == b"," else rest)
        return payload if b"%08x" % zlib.crc32(payload) == line[head : head + 8] else None

    def lead(self, last: bytes) -> bytes:
        # A crash mid-append leaves a partial last line; start on a fresh line after it.
        return b"\n" if last not in (b"", b"\n") else b""


# --------------------------------------------------------------------------------------------
# segments in a directory one process owns


class SegmentLog:
    """An append-only, fsync'd log in numbered segments (``<prefix><number><suffix>``).

    A record is durable once :meth:`sync` has returned for it; concurrent callers share one
    fsync. Segments are reference-counted by what still needs their records and deleted at zero
    once a newer segment is being written; :meth:`open` starts a new segment and returns the
    ones left by an earlier process for :meth:`read`. ``what`` names the log in errors.
    """

    def __init__(
        self,
        directory: Path,
        framing: Framing,
        *,
        what: str = "the write-ahead log",
        logger: logging.Logger = log,
        prefix: str = "segment-",
        suffix: str = ".log",
        segment_bytes: int = 8 * 1024 * 1024,
        segment_seconds: float = 5.0,
    ) -> None:
        self.directory = directory
        self.framing = framing
        self.what = what
        self.segment_bytes = segment_bytes
        self.segment_seconds = segment_seconds
        self._log = logger
        self._prefix, self._suffix = prefix, suffix
        self._lock = threading.Lock()  # appends, rotation, refs
        self._sync = threading.Condition(threading.Lock())
        self._fd = -1
        self._active = 0
        self._active_size = 0
        self._active_since = 0.0
        self._refs: dict[int, int] = {}
        self._sizes: dict[int, int] = {}  # segment -> bytes on disk
        self._written = 0  # records appended
        self._synced = 0  # records known durable
        self._syncing = False
        self._lock_fd = -1
        self._closed = False

    # lifecycle ------------------------------------------------------------------------------

    def open(self) -> list[int]:
        """Lock the directory and start a new segment; returns the segments left to recover."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {self.what} {self.directory}: {exc}") from exc
        self._lock_directory()
        prefix, suffix = self._prefix, self._suffix
        existing = sorted(
            int(p.name[len(prefix) : -len(suffix)])
            for p in self.directory.glob(f"{prefix}*{suffix}")
            if p.name[len(prefix) : -len(suffix)].isdigit()
        )
        for segment in existing:
            self._refs[segment] = 0
            try:
                self._sizes[segment] = self._path(segment).stat().st_size
            except OSError:
                self._sizes[segment] = 0
        with self._lock:
            self._start_segment((existing[-1] if existing else 0) + 1)
        return existing

    def _lock_directory(self) -> None:
        path = self.directory / ".lock"
        try:
            self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot open {path}: {exc}") from exc
        if fcntl is None:  # pragma: no cover - not POSIX: one process per directory, unchecked
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise LogInUse(f"{self.what} {self.directory} is in use by another process") from None

    def close(self) -> None:
        """Close the active segment (deleted if nothing needs it) and release the lock."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._fd >= 0:
                try:
                    os.fsync(self._fd)
                except OSError:
                    pass
                os.close(self._fd)
                self._fd = -1
            for segment, refs in list(self._refs.items()):
                if refs <= 0:
                    self._delete(segment)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    # segments -------------------------------------------------------------------------------

    def _path(self, segment: int) -> Path:
        return self.directory / f"{self._prefix}{segment:010d}{self._suffix}"

    def _start_segment(self, segment: int) -> None:
        path = self._path(segment)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL | _O_BINARY
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise LogError(f"cannot create {path}: {exc}") from exc
        _fsync_dir(self.directory)
        self._fd, self._active, self._active_size = fd, segment, 0
        self._active_since = time.monotonic()
        self._refs.setdefault(segment, 0)

    def _rotate(self) -> None:
        """Seal the active segment (fsync'd, so every record in it is durable) and start one."""
        old, fd = self._active, self._fd
        try:
            os.fsync(fd)
        except OSError as exc:
            raise LogError(f"cannot sync {self._path(old)}: {exc}") from exc
        with self._sync:
            self._synced = max(self._synced, self._written)
        os.close(fd)
        self._fd = -1
        self._start_segment(old + 1)
        if self._refs.get(old, 0) <= 0:
            self._delete(old)

    def _delete(self, segment: int) -> None:
        self._refs.pop(segment, None)
        self._sizes.pop(segment, None)
        try:
            self._path(segment).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            self._log.warning("cannot delete %s: %s", self._path(segment), exc)

    def read(self, segment: int) -> Iterator[tuple[int, bytes]]:
        """The records of a segment left from an earlier run, in order (kind, payload).

        Only the last record can be cut short (a crash while writing it, before its fsync
        returned, so never acknowledged); other damage is set aside in ``<segment>.damaged``.
        """
        path = self._path(segment)
        try:
            with open(path, "rb") as f:
                for item in self.framing.read(f):
                    if isinstance(item, Record):
                        yield item.kind, item.payload
                    elif item.torn:
                        self._log.warning(
                            "%s: ignoring %d bytes of an incomplete record at its end",
                            path.name,
                            len(item.raw),
                        )
                    else:
                        self._set_aside(path, item.raw)
        except OSError as exc:
            self._log.error("cannot read %s: %s", path, exc)

    def _set_aside(self, path: Path, raw: bytes) -> None:
        kept = path.with_name(path.name + ".damaged")
        try:
            _append_durably(kept, raw, self.framing, mode=0o600)
        except OSError as exc:
            self._log.error(
                "%s: a damaged record; the %d bytes from it on cannot be read, nor kept (%s)",
                path,
                len(raw),
                exc,
            )
            return
        self._log.error(
            "%s: a damaged record; the %d bytes from it on cannot be read and are kept in %s",
            path,
            len(raw),
            kept,
        )

    # writing --------------------------------------------------------------------------------

    def append(self, kind: int, payload: bytes) -> tuple[int, int]:
        """Write one record; returns (segment, sequence) with the segment pinned (see
        :meth:`unref`). The record is durable only after :meth:`sync` of the sequence."""
        parts = self.framing.frame(payload, kind)
        size = sum(map(len, parts))
        with self._lock:
            if self._closed:
                raise LogError(f"{self.what} is closed")
            if self._fd < 0:
                self._start_segment(self._active + 1)
            elif self._active_size and (
                self._active_size + len(payload) > self.segment_bytes
                or time.monotonic() - self._active_since > self.segment_seconds
            ):
                self._rotate()
            start = self._active_size
            try:
                _write_all(self._fd, parts)
            except OSError as exc:
                self._undo(start)
                raise LogError(f"cannot write {self.what}: {exc}") from exc
            self._active_size += size
            self._sizes[self._active] = self._active_size
            self._written += 1
            self._refs[self._active] = self._refs.get(self._active, 0) + 1
            return self._active, self._written

    def _undo(self, start: int) -> None:
        """Cut a failed append off, so that the segment stays readable past it."""
        try:
            os.ftruncate(self._fd, start)
        except OSError:
            # Leave the damaged segment behind (replay stops at the damage, and nothing in it
            # after that point was acknowledged) and continue in a new one, once what came
            # before the damage is on disk.
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            try:
                os.close(self._fd)
            finally:
                self._fd = -1

    def sync(self, sequence: int) -> None:
        """Return once record ``sequence`` is on disk (one fsync covers every waiting caller)."""
        with self._sync:
            while self._synced < sequence:
                if self._syncing:
                    self._sync.wait()
                    continue
                self._syncing = True
                self._sync.release()
                try:
                    with self._lock:
                        target = self._written
                        fd = os.dup(self._fd) if self._fd >= 0 else -1
                    if fd >= 0:
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                except OSError as exc:
                    raise LogError(f"cannot sync {self.what}: {exc}") from exc
                finally:
                    self._sync.acquire()
                    self._syncing = False
                    self._sync.notify_all()
                self._synced = max(self._synced, target)

    # references -----------------------------------------------------------------------------

    def ref(self, segment: int) -> None:
        with self._lock:
            self._refs[segment] = self._refs.get(segment, 0) + 1

    def unref(self, segment: int) -> None:
        with self._lock:
            if segment not in self._refs:
                return
            refs = self._refs[segment] - 1
            if refs > 0:
                self._refs[segment] = refs
                return
            self._refs[segment] = 0
            if segment != self._active or self._closed:
                self._delete(segment)

    def release_unreferenced(self) -> None:
        """Delete the sealed segments nothing refers to (after recovery)."""
        with self._lock:
            for segment, refs in list(self._refs.items()):
                if refs <= 0 and segment != self._active:
                    self._delete(segment)

    @property
    def size(self) -> int:
        """Bytes in the log's segments on disk."""
        with self._lock:
            return sum(self._sizes.values())

    def segments(self) -> dict[int, int]:
        """Segment → references (for tests and diagnostics)."""
        with self._lock:
            return dict(self._refs)


# --------------------------------------------------------------------------------------------
# one file shared by every process, taken a batch at a time


_live_tokens: set[str] = set()  # writers alive in this process (their claimed files are owned)
_STEAL_AFTER = 60.0  # a claimed file untouched this long is not being written by its owner


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class SharedLog:
    """One log file that every process appends to, and the claimed files its writers store.

    A writer :meth:`attach`-es while it is alive; the claimed files of one that is gone (an
    earlier process, or a crash) are taken over by the next (:meth:`leftovers`).
    """

    def __init__(
        self, path: str | os.PathLike[str], framing: Framing, *, token: str | None = None
    ) -> None:
        self.path = Path(path)
        self.framing = framing
        self.token = token or secrets.token_hex(4)
        self.rejected_path = self.path.with_name(self.path.name + ".rejected.jsonl")
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.Lock()
        self._seq = itertools.count(1)

    def attach(self) -> None:
        """This process's writer is alive: its claimed files are not taken over."""
        _live_tokens.add(self.token)

    def detach(self) -> None:
        _live_tokens.discard(self.token)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._thread_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if fcntl is None:  # pragma: no cover
                yield
                return
            with open(self._lock_path, "a+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def append(self, data: bytes) -> None:
        """Append framed records to the log and fsync them."""
        if data:
            with self.locked():
                _append_durably(self.path, data, self.framing)

    def _claimed_name(self) -> Path:
        return self.path.with_name(
            f"{self.path.name}.{os.getpid()}.{self.token}-{next(self._seq)}.claimed"
        )

    def write_ahead(self, data: bytes) -> Path:
        """A new claimed file holding framed ``data`` (fsync'd): the batch about to be stored."""
        target = self._claimed_name()
        try:
            fd = os.open(target, _CREATE_NEW, 0o666)
        except FileNotFoundError:  # the directory is made when a first file needs it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, _CREATE_NEW, 0o666)
        try:
            _write_all(fd, (data,))
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(target.parent)
        return target

    def claim(self) -> Path | None:
        """Take the log's current content as a claimed file of this writer (or None if empty)."""
        with self.locked():
            try:
                if self.path.stat().st_size == 0:
                    return None
            except FileNotFoundError:
                return None
            target = self._claimed_name()
            os.replace(self.path, target)
            _fsync_dir(self.path.parent)
            return target

    def leftovers(self) -> list[Path]:
        """Claimed files whose writer is gone (an earlier process, or a crash), taken over."""
        prefix = self.path.name + "."
        taken = []
        try:
            candidates = sorted(self.path.parent.glob(self.path.name + ".*.claimed"))
        except OSError:  # pragma: no cover
            return []
        for path in candidates:
            owner = path.name[len(prefix) : -len(".claimed")]
            pid_text, _, token = owner.partition(".")
            token = token.split("-", 1)[0]
            try:
                pid = int(pid_text)
            except ValueError:
                continue
            owned = (pid == os.getpid() and token in _live_tokens) or (
                pid != os.getpid() and _pid_alive(pid)
            )
            if owned:
                try:
                    if time.time() - path.stat().st_mtime < _STEAL_AFTER:
                        continue
                except OSError:
                    continue
            target = self._claimed_name()
            try:
                os.replace(path, target)
            except OSError:
                continue  # another writer took it first
            taken.append(target)
        return taken

    def committed(self, path: Path) -> None:
        """Every record of a claimed file is stored downstream: the file goes."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def records(self, path: Path) -> Iterator[Record | Damage]:
        """The records of a claimed file, and its damaged lines (to :meth:`reject`)."""
        with open(path, "rb") as f:
            yield from self.framing.read(f)

    def reject(self, lines: Iterable[bytes]) -> None:
        """Set records aside in :attr:`rejected_path`, one a line, never to be retried."""
        data = b"".join(line + b"\n" for line in lines)
        if data:
            with self.locked():
                _append_durably(self.rejected_path, data, self.framing)
