"""Worker threads for sync tool code, kept between calls.

A hop through ``anyio.to_thread.run_sync`` for every call costs a loop turn
(its checkpoint), a capacity limiter, cancel scopes, task lookups and a
``queue.Queue`` hand-over: about 25 µs more than the hop itself, on every call
of every sync tool. Here a call is a ``SimpleQueue.put`` to an idle worker and,
when it ends, one ``call_soon_threadsafe``.

Each worker is still an AnyIO worker thread, serving many calls inside one
long ``anyio.to_thread.run_sync`` (its *host*, a task with a cancel scope of its
own), so what works in any AnyIO worker thread works in a sync tool:
``anyio.from_thread.run`` (the ``ToolContext.*_sync`` methods) and
``anyio.from_thread.check_cancelled``. When a caller gives up on a call that is
running, its worker is *retired*: its host scope is cancelled (so work the tool
started on the loop is cancelled and ``check_cancelled`` raises, as when the
caller's own scope was cancelled under ``to_thread.run_sync``), and the thread
leaves once the call returns.

One pool per event loop, shared by every gate on it, and the worker idle the
shortest time takes the next call: a thread that has just run is the quickest
to wake (with a pool per gate, calls alternating between gates each woke a
thread idle for longer, which cost up to 100 µs a call). Idle workers leave
after ``IDLE`` seconds, when the last gate (runner) of their loop closes,
when their loop cancels its tasks at its end, and at interpreter exit (before
threads are joined), so a worker never delays exit. A worker that leaves gives
its thread back to AnyIO's own pool, which ends it as it ends its others.

How many threads may run is not decided here: a runner reserves a slot per
call before it submits it (``runner.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import math
import queue
import threading
import weakref
from collections.abc import Callable
from typing import TypeAlias

import anyio
import anyio.to_thread

try:
    import sniffio
except ImportError:  # pragma: no cover - anyio installs it on every supported version
    sniffio = None  # type: ignore[assignment]

__all__ = ["IDLE", "Worker", "Workers", "workers"]

logger = logging.getLogger(__name__)

IDLE = 10.0
"""Seconds an idle worker waits for a call before its thread leaves (as AnyIO's own)."""

Job = Callable[["Worker"], bool]
"""Run one call in a worker thread; False when the worker must leave after it."""
Item: TypeAlias = "tuple[contextvars.Context, Job] | None"


class Worker:
    """One worker thread: its own queue of calls, and its host task's cancel scope."""

    __slots__ = ("leaving", "queue", "scope", "task")

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self.scope = anyio.CancelScope()
        self.task: asyncio.Task[None] | None = None
        self.leaving = False
        """Told to leave: it takes no more calls (changed under the pool's lock)."""

    def retire(self) -> None:
        """Its caller gave up on the call it runs (on the loop thread): cancel what
        the call started on the loop; the thread leaves once the call returns."""
        self.scope.cancel()


class Workers:
    """The worker threads of one event loop (see :func:`workers`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, idle: float | None = None) -> None:
        self.idle = IDLE if idle is None else idle
        self.users = 0
        """Runners started on this loop and not closed (see :meth:`aclose`)."""
        self._loop = loop
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        """Waiting for a call, the one idle the shortest time last."""
        self._alive: set[Worker] = set()
        # The hosts' limiter is never the bottleneck: the runners' slots are.
        self._limiter = anyio.CapacityLimiter(math.inf)
        _every.add(self)

    def submit(self, job: Job) -> None:
        """Have ``job`` run in a worker thread, in a copy of the caller's context
        (call on the loop's thread)."""
        context = contextvars.copy_context()
        if sniffio is not None:  # as in AnyIO's worker threads: no async library there
            context.run(sniffio.current_async_library_cvar.set, None)
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = self._start()
        worker.queue.put((context, job))

    def threads(self) -> int:
        """Worker threads alive (waiting for a call or running one)."""
        return len(self._alive)

    def leave(self) -> None:
        """Tell every worker to leave (idle ones at once); from any thread."""
        for worker in list(self._alive):
            self._dismiss(worker)

    async def aclose(self) -> None:
        """Let every worker go and wait for their hosts (once the last runner of
        the loop closes: no call is in flight; stray work runs on, unwaited)."""
        workers = list(self._alive)
        for worker in workers:
            self._dismiss(worker)
            worker.scope.cancel()
        hosts = [w.task for w in workers if w.task is not None]
        if hosts:
            await asyncio.wait(hosts)

    # internals --------------------------------------------------------------
    def _dismiss(self, worker: Worker) -> None:
        with self._lock:
            worker.leaving = True
            if worker in self._idle:
                self._idle.remove(worker)
        worker.queue.put(None)  # wakes it if it waits; else read after its call

    def _start(self) -> Worker:
        worker = Worker()
        self._alive.add(worker)
        worker.task = self._loop.create_task(self._host(worker), name="callgate worker thread")
        return worker

    async def _host(self, worker: Worker) -> None:
        try:
            with worker.scope:
                await anyio.to_thread.run_sync(
                    self._serve, worker, abandon_on_cancel=True, limiter=self._limiter
                )
        finally:
            # Retired, idle too long, or the loop is ending: the thread leaves.
            self._dismiss(worker)
            self._alive.discard(worker)

    def _serve(self, worker: Worker) -> None:
        """The worker thread: run calls until retired, told to leave, or idle too long."""
        while True:
            try:
                item = worker.queue.get(timeout=self.idle)
            except queue.Empty:
                with self._lock:
                    if worker in self._idle:  # else a call was just given to it
                        self._idle.remove(worker)
                        worker.leaving = True
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
            with self._lock:
                if not keep:
                    worker.leaving = True
                if worker.leaving:
                    return
                self._idle.append(worker)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Workers] = weakref.WeakKeyDictionary()
_every: weakref.WeakSet[Workers] = weakref.WeakSet()


_unreferable: dict[asyncio.AbstractEventLoop, Workers] = {}
"""Pools of loops that take no weak reference, until the loop is closed."""


def workers() -> Workers:
    """The worker threads of the running event loop."""
    loop = asyncio.get_running_loop()
    try:
        pool = _pools.get(loop)
    except TypeError:  # an event loop class without weak references
        return _held(loop)
    if pool is None:
        pool = _pools[loop] = Workers(loop)
    return pool


def _held(loop: asyncio.AbstractEventLoop) -> Workers:
    pool = _unreferable.get(loop)
    if pool is None:
        for closed in [other for other in _unreferable if other.is_closed()]:
            del _unreferable[closed]
        pool = _unreferable[loop] = Workers(loop)
    return pool


def _leave_at_exit() -> None:
    # Worker threads are AnyIO's, which are not daemons: an idle one would hold
    # the interpreter's exit for up to IDLE seconds when its loop was never
    # closed (run_until_complete without a close).
    for pool in list(_every):
        pool.leave()


_register: Callable[[Callable[[], None]], object] = getattr(
    threading, "_register_atexit", atexit.register
)
_register(_leave_at_exit)
