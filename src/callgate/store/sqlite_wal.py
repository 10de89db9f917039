"""Keeps a SQLite file's write-ahead log bounded while a gateway writes without pause.

In WAL mode every commit appends to the ``-wal`` file, and the file is rewound
only when a checkpoint has copied *all* of it into the database and a writer
then starts over at its beginning. SQLite's own automatic checkpoints are
PASSIVE: they copy what they can while writers keep appending, so under
steady load they never catch up, and the WAL once reached 1.25 GB after 100K
calls. Here checkpoints are made to complete:

- every few commits the WAL's size is looked at (a ``stat``); past
  ``CHECKPOINT_BYTES`` a checkpoint runs in two steps on this class's own thread:
  a PASSIVE one while writers go on (it copies nearly everything), then, with
  this process's writers held back by the store's write lock, a RESTART one,
  which copies the few frames committed meanwhile and makes the next writer
  start the WAL over; ``journal_size_limit`` then cuts the file back;
- once no commit came for ``IDLE_SECONDS``, a TRUNCATE checkpoint empties the
  file;
- should the WAL still pass ``PRESSURE_FACTOR`` times that size while a
  checkpoint runs (writes much faster than the disk, say), this process's
  writers wait for that checkpoint before their next write: the limit holds.

Nothing of this runs on the event loop: the loop only awaits the thread. The
loop's own connection (inline audit commits and reads, see ``sqlite_writer``)
never waits for it either: it has no busy timeout, and a read it cannot start
at once is made through the async engine instead. Nor does it sync: the first
commit after a rewind writes a new WAL header and fsyncs it (even at
``synchronous=NORMAL``), so that commit is sent to the audit writer's thread.

A checkpoint cannot copy past a snapshot that a reader still uses: a read
transaction held open (by another process, say) stops the WAL from being
rewound, and it grows until that reader ends. That is logged as a warning
(once per doubling), naming the cause; writers are not held back then, since
no checkpoint could help, and the next tries come after growing pauses (up to
``MAX_PAUSE``), so that their short waits for the reader cost little.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import anyio

__all__ = ["CHECKPOINT_BYTES", "IDLE_SECONDS", "PRESSURE_FACTOR", "WALKeeper"]

logger = logging.getLogger(__name__)

CHECKPOINT_BYTES = 16 * 1024 * 1024
"""A WAL larger than this is checkpointed and rewound (also its ``journal_size_limit``)."""
PRESSURE_FACTOR = 2
"""A WAL over this many times ``CHECKPOINT_BYTES`` (32 MiB by default) holds
writers back until the running checkpoint ends."""
IDLE_SECONDS = 1.0
"""No commit for this long: the WAL is checkpointed and truncated to nothing."""
LOOK_EVERY = 32
"""Commits between two looks at the WAL's size (a large write is looked at at once)."""
RESTART_BUSY_MS = 250
"""How long the RESTART step waits for readers while this process's writers wait."""
MAX_PAUSE = 10.0
"""Longest pause, in seconds, between two checkpoints that could not rewind the WAL."""


class WALKeeper:
    """Checkpoints one SQLite file's WAL so that it stays under ``CHECKPOINT_BYTES``."""

    def __init__(
        self,
        path: str,
        *,
        write_lock: anyio.Lock,
        pragmas: Sequence[str],
        on_rewound: Callable[[], None] = lambda: None,
    ) -> None:
        """Keep ``path``'s WAL; nothing runs until the first :meth:`committed`.

        Args:
            path: The database file.
            write_lock: The lock this process's writers take for every write
                transaction; held during the short RESTART step.
            pragmas: Settings of the checkpointing connection (its ``busy_timeout``
                is how long the last checkpoint, at close, waits for readers).
            on_rewound: Called on the loop, still under ``write_lock``, once the
                whole WAL was copied: the next commit starts the WAL over and
                syncs its new header, which the loop's inline writer must not do.
        """
        self._path = path
        self._wal = f"{path}-wal"
        self._write_lock = write_lock
        self._pragmas = list(pragmas)
        self._on_rewound = on_rewound
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="callgate-checkpoint")
        self._conn: sqlite3.Connection | None = None
        self._commits = 0
        self._checkpointed_at = 0
        self._since_look = 0
        self._running: asyncio.Task[bool] | None = None
        self._idle: asyncio.Task[None] | None = None
        self._closed = False
        self._rewinds = True  # whether the last checkpoint could copy the whole WAL
        self._pressing = False
        self._pause = 0.0
        self._next_try = 0.0
        self._warned_at = 4 * CHECKPOINT_BYTES

    def committed(self, *, look: bool = False) -> None:
        """A write transaction just committed (call on the event loop).

        Args:
            look: Look at the WAL's size now (the write may have been large).
        """
        if self._closed:
            return
        self._commits += 1
        self._since_look += 1
        if self._idle is None:
            self._idle = asyncio.get_running_loop().create_task(
                self._watch_idle(), name="callgate-wal-idle"
            )
        if not (look or self._since_look >= LOOK_EVERY):
            return
        self._since_look = 0
        size = self.wal_bytes()
        if size <= CHECKPOINT_BYTES:
            return
        if self._running is None:
            if self._pause and asyncio.get_running_loop().time() < self._next_try:
                return
            self._start("RESTART", size)
        elif self._rewinds and size > PRESSURE_FACTOR * CHECKPOINT_BYTES:
            self._pressing = True

    @property
    def pressing(self) -> bool:
        """Whether writers should wait for :meth:`relieved` before writing."""
        return self._pressing

    async def relieved(self) -> None:
        """Return once the checkpoint running when the WAL got too large has ended."""
        running = self._running
        if running is not None:
            await asyncio.wait([running])
        self._pressing = False

    def wal_bytes(self) -> int:
        """The WAL file's size now (0 when there is none)."""
        try:
            return os.stat(self._wal).st_size
        except FileNotFoundError:
            return 0

    async def checkpoint(self, mode: str = "TRUNCATE") -> bool:
        """Checkpoint now, after any checkpoint already running; whether the whole
        WAL was copied (and will be rewound, or with TRUNCATE, was emptied)."""
        while self._running is not None:
            await asyncio.wait([self._running])
        if self._closed:
            return False
        return await self._checkpoint(mode)

    async def aclose(self) -> None:
        """Stop watching, empty the WAL if possible, and stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._idle is not None:
            self._idle.cancel()
            await asyncio.wait([self._idle])
        if self._running is not None:
            await asyncio.wait([self._running])  # bounded: PASSIVE, then RESTART_BUSY_MS
        loop = asyncio.get_running_loop()
        with contextlib.suppress(sqlite3.Error):
            async with self._write_lock:
                await loop.run_in_executor(self._executor, self._run, "TRUNCATE", None)
        await loop.run_in_executor(self._executor, self._close_connection)
        self._executor.shutdown(wait=True)

    def _start(self, mode: str, size: int | None) -> asyncio.Task[bool]:
        task = asyncio.get_running_loop().create_task(
            self._checkpoint(mode, size), name="callgate-wal-checkpoint"
        )
        self._running = task
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[bool]) -> None:
        self._running = None
        self._pressing = False
        if not task.cancelled() and task.exception() is not None:
            logger.warning("callgate: WAL checkpoint failed: %s", task.exception())

    async def _checkpoint(self, mode: str, size: int | None = None) -> bool:
        loop = asyncio.get_running_loop()
        commits = self._commits
        try:
            # Copy nearly everything while this process's writers go on...
            await loop.run_in_executor(self._executor, self._run, "PASSIVE", None)
            # ...then the rest, briefly holding them back, so that the copy completes.
            async with self._write_lock:
                done = await loop.run_in_executor(self._executor, self._run, mode, RESTART_BUSY_MS)
                if done:
                    self._on_rewound()
        except sqlite3.Error as exc:
            # Not the writers' business: they go on, and the next try waits longer.
            if not self._pause:
                logger.warning("callgate: checkpoint of %s failed: %s", self._path, exc)
            done = False
        self._rewinds = done
        if done:
            self._checkpointed_at = commits
            self._pause = 0.0
        else:
            self._pause = min(max(self._pause * 2, 0.1), MAX_PAUSE)
            self._next_try = loop.time() + self._pause
        if not done and size is not None and size >= self._warned_at:
            self._warned_at = size * 2
            logger.warning(
                "callgate: the SQLite WAL of %s is %d MB and cannot be rewound: a read "
                "transaction is held open on the database (another process, or a "
                "connection left in a transaction); it keeps growing until that ends",
                self._path,
                size // 1_000_000,
            )
        return done

    def _run(self, mode: str, busy_ms: int | None) -> bool:
        """One ``wal_checkpoint(mode)`` on the thread; True if the whole WAL was copied."""
        if self._conn is None:
            self._conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            for pragma in self._pragmas:
                self._conn.execute(f"PRAGMA {pragma}")
        conn = self._conn
        if busy_ms is not None:
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
        try:
            row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        finally:
            if busy_ms is not None:
                for pragma in self._pragmas:
                    if pragma.startswith("busy_timeout"):
                        conn.execute(f"PRAGMA {pragma}")
        busy, frames, copied = row
        return bool(busy == 0 and frames == copied)

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _watch_idle(self) -> None:
        """Empty the WAL once commits have stopped for ``IDLE_SECONDS``."""
        seen = self._commits
        while True:
            await asyncio.sleep(IDLE_SECONDS)
            if self._commits != seen:
                seen = self._commits
                continue
            if (
                self._running is None
                and self._checkpointed_at != self._commits
                and asyncio.get_running_loop().time() >= self._next_try
            ):
                await asyncio.wait([self._start("TRUNCATE", None)])
