"""Worker threads for sync tool code, kept between calls.

A hop through ``anyio.to_thread.run_sync`` for every call costs a loop turn
(its checkpoint), a capacity limiter, a cancel scope, task lookups and a
``queue.Queue`` hand-over: about 25 µs more than the hop itself, on every call
of every sync tool. Here a call is a ``SimpleQueue.put`` and, when it ends, one
``call_soon_threadsafe``.

Each worker is still an AnyIO worker thread, serving many calls inside one
long ``anyio.to_thread.run_sync`` (its *host*, a task of the runner with a
cancel scope of its own), so what works in any AnyIO worker thread works in a
sync tool: ``anyio.from_thread.run`` (the ``ToolContext.*_sync`` methods) and
``anyio.from_thread.check_cancelled``. When a caller gives up on a call that
is running, its worker is *retired*: its host scope is cancelled (so work the
tool started on the loop is cancelled and ``check_cancelled`` raises, as when
the caller's own scope was cancelled under ``to_thread.run_sync``), and the
thread leaves once the call returns. Idle workers leave after ``IDLE`` seconds.

How many threads may run is not decided here: the runner reserves a slot per
call before it submits it (``runner.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import queue
import threading
from collections.abc import Callable
from typing import TypeAlias

import anyio
import anyio.to_thread

try:
    import sniffio
except ImportError:  # pragma: no cover - anyio installs it on every supported version
    sniffio = None  # type: ignore[assignment]

__all__ = ["IDLE", "Worker", "Workers"]

logger = logging.getLogger(__name__)

IDLE = 10.0
"""Seconds an idle worker waits for a call before its thread leaves (as AnyIO's own)."""

Job = Callable[["Worker"], bool]
"""Run one call in a worker thread; False when the worker must leave after it."""
Queue: TypeAlias = "queue.SimpleQueue[tuple[contextvars.Context, Job] | None]"


class Worker:
    """One worker thread and the cancel scope of its host task."""

    __slots__ = ("scope", "task")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.task: asyncio.Task[None] | None = None

    def retire(self) -> None:
        """Its caller gave up on the call it runs (on the loop thread): cancel what
        the call started on the loop; the thread leaves once the call returns."""
        self.scope.cancel()


class Workers:
    """A pool of :class:`Worker` threads for one event loop."""

    def __init__(self, *, idle: float = IDLE) -> None:
        self.idle = idle
        self._queue: Queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._spare = 0
        """Workers waiting for a call, less the calls queued for them; below 0 a
        call needs a new worker."""
        self._workers: set[Worker] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # The hosts' limiter is never the bottleneck: the runner's slots are.
        self._limiter = anyio.CapacityLimiter(math.inf)

    def submit(self, job: Job) -> None:
        """Have ``job`` run in a worker thread, in a copy of the caller's context
        (on the event loop thread)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or a gate started again on another loop
            self._reset()
            self._loop = loop
        context = contextvars.copy_context()
        if sniffio is not None:  # as in AnyIO's worker threads: no async library there
            context.run(sniffio.current_async_library_cvar.set, None)
        with self._lock:
            self._queue.put((context, job))
            self._spare -= 1
            grow = self._spare < 0
            if grow:
                self._spare += 1
        if grow:
            self._start(loop)

    def threads(self) -> int:
        """Worker threads alive (waiting for a call or running one)."""
        return len(self._workers)

    def aclose(self) -> None:
        """Let every worker go: idle ones leave now, busy ones once their call returns."""
        self._loop = None
        self._reset()

    # internals --------------------------------------------------------------
    def _reset(self) -> None:
        # Workers serve the queue they started with: given a new one, the old
        # ones leave (at once if idle: one None each wakes them).
        with self._lock:
            for _ in self._workers:
                self._queue.put(None)
            self._workers = set()
            self._queue = queue.SimpleQueue()
            self._spare = 0

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        worker = Worker()
        self._workers.add(worker)
        host = self._host(worker, self._queue)
        worker.task = loop.create_task(host, name="callgate worker thread")

    async def _host(self, worker: Worker, jobs: Queue) -> None:
        with worker.scope:
            await anyio.to_thread.run_sync(
                self._serve, worker, jobs, abandon_on_cancel=True, limiter=self._limiter
            )
        self._workers.discard(worker)

    def _serve(self, worker: Worker, jobs: Queue) -> None:
        """The worker thread: run calls until retired, told to leave, or idle too long."""
        while True:
            try:
                item = jobs.get(timeout=self.idle)
            except queue.Empty:
                with self._lock:
                    if jobs is not self._queue:
                        return
                    if self._spare > 0:  # more workers wait than calls: one may go
                        self._spare -= 1
                        return
                continue
            if item is None:
                return
            context, job = item
            try:
                keep = context.run(job, worker)
            except BaseException:  # a job reports its own errors; this is a bug
                logger.exception("a worker thread's call failed")
                keep = False
            if not keep:
                return
            with self._lock:
                if jobs is not self._queue:
                    return
                self._spare += 1
