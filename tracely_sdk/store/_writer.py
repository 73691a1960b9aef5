"""Getting recordings into the store without ever slowing down or breaking the app.

:class:`BackgroundWriter` takes recordings from the app's threads (``submit`` never blocks on
the store and never raises) and writes them from one daemon thread. Nothing accepted is lost:

- every batch is written ahead to the spool (a write-ahead log, :mod:`tracely_sdk.store._wal`:
  checksummed JSON lines, fsync'd) *before* the store is asked to store it, and that file is
  removed only after the store has committed it, so a crash mid-write leaves the batch on disk;
- while the store fails (down, locked, unreachable), batches are appended to the spool and the
  store is retried with exponential backoff;
- when the in-memory queue is full, ``submit`` appends the recording to the spool at once;
- on start, a spool left by an earlier process (or a crash) is written first.

A recording written twice (a retry after a crash between commit and cleanup) is stored once,
because the store is idempotent by trace id. A line that cannot be read back (cut short, or
failing its checksum), or a recording the store rejects as invalid, is moved to
``<spool>.rejected.jsonl`` beside the spool and logged, never retried forever and never silently
dropped. The spool's files are those of :class:`~tracely_sdk.store._wal.SharedLog`.

Each kind of failure is logged once (``logging.getLogger("tracely.store")``), then at DEBUG.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from tracely_sdk.errors import StoreError
from tracely_sdk.store._base import Store
from tracely_sdk.store._files import tracely_dir
from tracely_sdk.store._model import Recording, json_bytes
from tracely_sdk.store._wal import Damage, Lines, SharedLog

__all__ = ["BackgroundWriter", "Spool"]

log = logging.getLogger("tracely.store")

# How long the first recording of a batch waits for others to join it. Writing a batch costs
# about a millisecond of CPU whether it holds one recording or hundreds (the write-ahead file
# and its fsyncs, a transaction and its commit), and recordings come in bursts (the recorder
# hands over the traces it gathered at once): without the wait the writer woke on the first of
# a burst and wrote a few at a time. A clean exit, flush() and close() do not wait.
_GATHER_SECONDS = 0.1
_LINES: Final = Lines()


class Spool(SharedLog):
    """The on-disk spool of recordings not yet in the store: a write-ahead log of JSON lines."""

    def __init__(self, path: str | os.PathLike[str], *, token: str | None = None) -> None:
        super().__init__(path, _LINES, token=token)

    @staticmethod
    def line(recording: Recording) -> bytes:
        """A recording as one JSON object (what a rejected recording is kept as)."""
        try:
            return json_bytes(recording.to_dict())
        except ValueError as exc:  # what the writer's callers catch for a value JSON cannot hold
            raise TypeError(str(exc)) from exc

    @staticmethod
    def encode(recordings: Iterable[Recording]) -> bytes:
        return b"".join(part for r in recordings for part in _LINES.frame(Spool.line(r)))

    def read(self, path: Path) -> Iterator[tuple[bytes, Recording | None]]:
        """Each record of a claimed file, as a line, with its recording (None for a line that
        is not one: damaged, or not a recording)."""
        for item in self.records(path):
            if isinstance(item, Damage):
                yield item.raw, None
                continue
            try:
                data = orjson.loads(item.payload)
                rec = Recording.from_dict(data) if isinstance(data, Mapping) else None
            except (orjson.JSONDecodeError, ValueError, TypeError):
                rec = None
            yield item.payload, rec


class _SpoolUnreadable(Exception):
    """The spool itself cannot be read or claimed (the cause says why); the store is not at fault."""


class BackgroundWriter:
    """Write recordings to a store from a daemon thread; see the module docstring.

    ``store_factory`` is called in the writer thread (again after repeated failures), so a store
    that cannot even be opened is just another outage. Call :meth:`close` at exit (e.g.
    ``atexit.register(writer.close)``); it is idempotent.
    """

    def __init__(
        self,
        store_factory: Callable[[], Store],
        *,
        max_queue: int = 1000,
        spool_path: str | os.PathLike[str] | None = None,
        batch_size: int = 500,
        max_backoff: float = 30.0,
        min_backoff: float = 0.1,
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self._factory = store_factory
        self._max_queue = max_queue
        self._batch_size = max(1, batch_size)
        # A batch stops gathering when it is full, or when the queue is (more would be spooled).
        self._gathered = min(self._batch_size, max_queue)
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self.spool = Spool(spool_path or tracely_dir() / "spool" / "recordings.jsonl")
        self.stats: collections.Counter[str] = collections.Counter()
        self._logged: set[str] = set()
        self._closed = False
        self._start()

    # lifecycle ----------------------------------------------------------------------------

    def _start(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._items: collections.deque[Recording] = collections.deque()
        self._inflight = 0
        self._pending: list[Path] = []
        self._ahead: dict[Path, list[Recording]] = {}  # write-ahead files still held in memory
        self._dirty = True  # the spool may hold records from before: look at it first
        self._claiming = False  # see _drain
        self._stop = False
        self._hurry = False
        self._flushers = 0  # threads waiting in flush(): the writer does not gather for them
        self._failures = 0
        self._next_try = 0.0
        self._ended = False  # the thread has left its loop (set before it wakes the flushers)
        self._store: Store | None = None
        self.spool.attach()
        self._thread = threading.Thread(target=self._run, name="tracely-store-writer", daemon=True)
        self._thread.start()

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            # The thread did not survive fork(); the parent still owns its claimed files.
            self.spool = Spool(self.spool.path)
            self.stats = collections.Counter()
            self._start()

    def _once(self, kind: str, message: str, *args: Any, level: int = logging.WARNING) -> None:
        if kind in self._logged:
            log.debug(message, *args)
        else:
            self._logged.add(kind)
            log.log(level, message, *args)

    # the app's side -----------------------------------------------------------------------

    def submit(self, recording: Recording | Mapping[str, Any]) -> None:
        """Accept a recording (or an extracted bundle) for writing. Never blocks, never raises."""
        try:
            self._check_fork()
            if not isinstance(recording, Recording):
                recording = Recording.from_bundle(recording)
            with self._cond:
                items = self._items
                if not self._closed and len(items) < self._max_queue:
                    items.append(recording)
                    self.stats["submitted"] += 1
                    # The writer waits for a first recording, or gathers until a batch is full:
                    # waking it for each one in between would only cost the app CPU.
                    if len(items) == 1 or len(items) == self._gathered:
                        self._cond.notify()
                    return
            self.stats["submitted"] += 1
            if self._closed:
                self._once(
                    "after-close",
                    "recording %s submitted after close: spooled to %s",
                    recording.trace_id,
                    self.spool.path,
                )
            else:
                self._once(
                    "queue-full",
                    "store writer queue is full (%d): spooling to %s",
                    self._max_queue,
                    self.spool.path,
                )
            self._spool([recording])
        except Exception as exc:  # never let tracing break the app
            self.stats["dropped"] += 1
            self._once(
                "submit", "tracely could not accept a recording: %s", exc, level=logging.ERROR
            )

    def _spool(self, recordings: list[Recording]) -> None:
        try:
            self.spool.append(Spool.encode(recordings))
        except (OSError, TypeError, ValueError) as exc:
            self.stats["dropped"] += len(recordings)
            self._once(
                "spool-write",
                "cannot write the spool %s, %d recording(s) lost: %s",
                self.spool.path,
                len(recordings),
                exc,
                level=logging.ERROR,
            )
            return
        self.stats["spooled"] += len(recordings)
        with self._cond:
            self._dirty = True
            self._cond.notify()

    def _drained(self) -> bool:
        return (
            not self._items
            and self._inflight == 0
            and not self._pending
            and not self._dirty
            and not self._claiming
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything accepted so far is in the store; False if ``timeout`` ran out.

        During an outage the store is retried right away rather than after the backoff.
        """
        self._check_fork()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._hurry = True
            self._flushers += 1
            self._cond.notify_all()
            try:
                while not self._drained():
                    if self._ended or not self._thread.is_alive():
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    # Woken when the writer ends a step or stops: no polling.
                    self._cond.wait(remaining)
                return True
            finally:
                self._hurry = False
                self._flushers -= 1

    def close(self, timeout: float | None = 5.0) -> bool:
        """Drain (as :meth:`flush`), stop the thread and close the store. Idempotent.

        Returns True if everything reached the store; otherwise what is left stays in the spool
        for the next writer.
        """
        if self._pid != os.getpid():
            return True
        with self._cond:
            if self._closed and not self._thread.is_alive():
                return self._drained()
            self._closed = True
        start = time.monotonic()
        ok = self.flush(timeout)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        self._thread.join(0.5 if remaining is None else max(remaining, 0.05))
        with self._cond:
            left = list(self._items)
            self._items.clear()
        if left:  # the thread is stuck in a store call: keep the rest on disk
            self._spool(left)
            ok = False
        if not self._thread.is_alive():
            self._close_store()
            self.spool.detach()
        return ok and self._drained()

    # the writer thread --------------------------------------------------------------------

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:
                pass

    def _backoff(self) -> float:
        delay = min(self._max_backoff, self._min_backoff * float(2 ** min(self._failures - 1, 30)))
        return delay * random.uniform(0.8, 1.2)

    def _run(self) -> None:
        try:
            leftovers = self.spool.leftovers()
            with self._cond:
                self._pending[:0] = leftovers
            while True:
                with self._cond:
                    while True:
                        now = time.monotonic()
                        due = (self._pending or self._dirty) and (
                            self._hurry or now >= self._next_try
                        )
                        if self._items or due or self._stop:
                            break
                        wait = None
                        if self._pending or self._dirty:
                            wait = max(0.0, self._next_try - now)
                        self._cond.wait(wait)
                    self._gather()
                    if (
                        self._stop
                        and not self._items
                        and (not due or (self._failures and not self._hurry))
                    ):
                        return
                    batch = [
                        self._items.popleft()
                        for _ in range(min(len(self._items), self._batch_size))
                    ]
                    self._inflight = len(batch)
                    hurry, self._hurry = self._hurry, False
                self._step(batch, hurry)
                with self._cond:
                    self._cond.notify_all()  # a flush waits for the end of each step
        except BaseException as exc:  # pragma: no cover - a bug; keep what we hold on disk
            self._once("thread", "tracely store writer stopped: %s", exc, level=logging.ERROR)
            with self._cond:
                left = list(self._items)
                self._items.clear()
            self._spool(left)
        finally:
            with self._cond:
                self._inflight = 0
                self._ended = True
                self._cond.notify_all()

    def _gather(self) -> None:
        """Let the recordings of a burst join the first one's batch (``_cond`` held)."""
        if not self._items:
            return
        deadline = time.monotonic() + _GATHER_SECONDS
        # A flush in progress (it also sets `_hurry`, which the loop consumes) stops gathering.
        while len(self._items) < self._gathered and not (self._stop or self._flushers):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _step(self, batch: list[Recording], hurry: bool) -> None:
        now = time.monotonic()
        healthy = self._failures == 0
        if batch:
            try:
                data = Spool.encode(batch)
            except (TypeError, ValueError) as exc:
                data = b""
                self.stats["dropped"] += len(batch)
                self._once(
                    "encode",
                    "recording cannot be encoded as JSON, dropped: %s",
                    exc,
                    level=logging.ERROR,
                )
            try:
                if data and healthy:
                    claimed = self.spool.write_ahead(data)
                    with self._cond:
                        self._ahead[claimed] = batch
                        self._pending.append(claimed)
                elif data:
                    self.spool.append(data)
                    self.stats["spooled"] += len(batch)
                    with self._cond:
                        self._dirty = True
            except OSError as exc:
                problem = self._write_direct(batch)
                if problem is None:
                    self._once(
                        "spool-write",
                        "cannot write the spool %s (%s); recordings are written straight to "
                        "the store, and would be lost while it is unavailable",
                        self.spool.path,
                        exc,
                    )
                else:
                    self.stats["dropped"] += len(batch)
                    self._once(
                        "lost",
                        "tracely lost the recording of trace(s) %s: the spool %s cannot be "
                        "written (%s) and the store cannot take them (%s)",
                        ", ".join(r.trace_id for r in batch),
                        self.spool.path,
                        exc,
                        problem,
                        level=logging.ERROR,
                    )
            with self._cond:
                self._inflight = 0
        if not (healthy or hurry or now >= self._next_try):
            return
        if not (self._pending or self._dirty):
            return
        try:
            self._drain()
        except _SpoolUnreadable as exc:
            self._failures += 1
            self.stats["failures"] += 1
            self._next_try = time.monotonic() + self._backoff()
            self._once(
                "spool-read",
                "cannot use the spool %s (%s); recordings are written straight to the store, "
                "and nothing is kept for later when it is unavailable",
                self.spool.path,
                exc.__cause__,
                level=logging.ERROR,
            )
        except Exception as exc:
            self._failures += 1
            self.stats["failures"] += 1
            self._next_try = time.monotonic() + self._backoff()
            self._once(
                f"store:{type(exc).__name__}",
                "tracely store unavailable (%s: %s); recordings are kept in %s and retried",
                type(exc).__name__,
                exc,
                self.spool.path,
            )
            if self._failures % 3 == 0:
                self._close_store()  # reopen on a later attempt
        else:
            if self._failures:
                self._once(
                    "recovered",
                    "tracely store available again; spooled recordings written",
                    level=logging.INFO,
                )
            self._failures = 0
        finally:
            with self._cond:
                self._cond.notify_all()

    def _write_direct(self, batch: list[Recording]) -> str | None:
        """Store ``batch`` without the spool; None if it was stored, else why not."""
        try:
            self._put([(None, r) for r in batch])
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _get_store(self) -> Store:
        if self._store is None:
            self._store = self._factory()
        return self._store

    def _put(self, chunk: list[tuple[bytes | None, Recording]]) -> None:
        store = self._get_store()
        try:
            written = store.put_recordings([r for _, r in chunk])
        except (ValueError, TypeError) as exc:
            if isinstance(exc, StoreError):
                raise
            if len(chunk) == 1:  # the store says this recording is invalid: set it aside
                line, rec = chunk[0]
                self.spool.reject([line if line is not None else Spool.line(rec)])
                self.stats["rejected"] += 1
                self._once(
                    "rejected",
                    "the store rejected recording %s (%s); kept in %s",
                    chunk[0][1].trace_id,
                    exc,
                    self.spool.rejected_path,
                    level=logging.ERROR,
                )
                return
            for one in chunk:
                self._put([one])
            return
        self.stats["written"] += sum(written)

    def _drain(self) -> None:
        with self._cond:
            dirty, self._dirty = self._dirty, False
            # Between clearing `_dirty` and holding the claimed file in `_pending`, the spool's
            # records are in neither: a flush must not take that moment for drained.
            self._claiming = dirty
        claimed = None
        try:
            if dirty:
                try:
                    claimed = self.spool.claim()
                except OSError as exc:
                    # Nothing of this writer's can be in a spool it cannot open; a later process
                    # takes over whatever an earlier one left there.
                    raise _SpoolUnreadable() from exc
                except BaseException:
                    with self._cond:
                        self._dirty = True
                    raise
        finally:
            with self._cond:
                if claimed is not None:
                    self._pending.append(claimed)
                self._claiming = False
                pending = list(self._pending)
        for path in pending:
            self._store_file(path)
            self.spool.committed(path)
            with self._cond:
                self._pending.remove(path)
                self._ahead.pop(path, None)

    def _store_file(self, path: Path) -> None:
        held = self._ahead.get(path)
        if held is not None:  # just written ahead by this writer: no need to read it back
            for i in range(0, len(held), self._batch_size):
                self._put([(None, r) for r in held[i : i + self._batch_size]])
            return
        seen: set[bytes] = set()
        chunk: list[tuple[bytes | None, Recording]] = []
        bad: list[bytes] = []
        try:
            lines = self.spool.read(path)
            for line, rec in lines:
                digest = hashlib.blake2b(line, digest_size=16).digest()
                if digest in seen:  # the same line twice (a retried append): store it once
                    continue
                seen.add(digest)
                if rec is None:
                    bad.append(line)
                    continue
                chunk.append((line, rec))
                if len(chunk) >= self._batch_size:
                    self._put(chunk)
                    chunk = []
        except FileNotFoundError:
            return  # another writer took it over and stores it
        if chunk:
            self._put(chunk)
        if bad:
            self.spool.reject(bad)
            self.stats["rejected"] += len(bad)
            self._once(
                "spool-corrupt",
                "%d unreadable line(s) in the spool moved to %s",
                len(bad),
                self.spool.rejected_path,
                level=logging.ERROR,
            )
