"""The one place tool code runs: tools, change helpers, resources and prompts.

Tool code is not trusted to behave: a sync function may hang forever (a thread
cannot be killed), an async one may swallow ``CancelledError`` and run on, or
block the event loop. :class:`Runner` keeps the gate's limits whatever it does:

- **The deadline holds.** The caller gets its answer at the deadline (plus a
  short grace for an async tool to take its cancellation), never later. Work
  still running then is *stray*: an abandoned thread, or a task that ignored its
  cancellation. Strays are tracked, and their eventual end (returned, raised)
  reaches the audit through ``on_late`` (a ``late`` record for a governed call).
- **Threads are capped per tool, under any burst.** A sync call reserves one of
  its tool's ``tool_threads`` slots (and one of the gate's ``max_threads``)
  *before* its thread starts, and frees it when the function returns, not when
  the caller stops waiting. So a tool never has more threads than its cap, hung
  or not. Calls beyond the cap wait in a queue; one whose deadline passes there
  leaves it uncounted (:class:`NotStarted`: its function never ran).
- **A tool whose stray work fills its cap is refused at once**
  (:class:`Unresponsive`) until some of it ends; stray async tasks count like
  threads. Only work that started and has not returned is ever counted.
  A burst of async calls holds no threads, so all of them start: the cap
  counts their strays once they overrun.
- **An async tool that blocks the loop is named** in the log and in the call's
  detail (``blocked_loop_ms``), by :class:`~callgate.runtime.loopwatch.LoopWatch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from callgate.errors import ErrorKind, RuntimeFailure, ToolError
from callgate.runtime.deadline import Alarm, Deadline, wait_until
from callgate.runtime.loopwatch import BLOCK_THRESHOLD, LoopWatch, ToolTask
from callgate.runtime.workers import Worker, Workers, workers

__all__ = [
    "Deadline",
    "LateEnd",
    "NotStarted",
    "Overran",
    "Runner",
    "Unresponsive",
]

logger = logging.getLogger(__name__)

TOOL_THREADS = 8
"""Worker threads one tool may hold at once, running or abandoned: a hung tool
cannot eat the process's threads, and a burst of calls cannot either."""
MAX_THREADS = 40
"""Worker threads all tools of one gate may hold at once."""
GRACE = 0.05
"""Seconds an async tool gets, after its deadline's cancellation, to end."""

Work = Callable[[], Any]
"""A sync function, or a function returning the awaitable to run (async)."""
OnLate = Callable[["LateEnd"], Awaitable[None]]


class Unresponsive(RuntimeFailure):
    """Refused before starting: the tool's stray work fills its cap."""

    def __init__(self, tool: str, stuck: int) -> None:
        super().__init__(f"{tool}: {stuck} earlier calls are still running")
        self.tool = tool
        self.stuck = stuck


class NotStarted(RuntimeFailure, TimeoutError):
    """The deadline passed while the call waited for a thread: its function never ran."""

    def __init__(self, tool: str) -> None:
        super().__init__(f"{tool}: no worker thread became free before the deadline")
        self.tool = tool


class Overran(RuntimeFailure, TimeoutError):
    """The deadline passed while the function ran.

    ``stray`` when it still runs (tracked until it ends): another attempt would
    add to it.
    """

    def __init__(self, tool: str, *, stray: bool) -> None:
        super().__init__(f"{tool}: did not finish before the deadline")
        self.tool = tool
        self.stray = stray


@dataclass(kw_only=True, frozen=True)
class LateEnd:
    """How stray work ended, after its caller had stopped waiting."""

    tool: str
    ran_as: Literal["thread", "task"]
    ended: Literal["returned", "raised", "cancelled", "running at close"]
    error: BaseException | None = None
    overran: float
    """Seconds from when the caller stopped waiting to the end (or to the close)."""

    @property
    def kind(self) -> ErrorKind | None:
        """The error kind it ended with; None when it returned or is unknown."""
        if self.ended != "raised":
            return None
        return self.error.kind if isinstance(self.error, ToolError) else ErrorKind.UNRECOVERABLE

    @property
    def outcome(self) -> str | None:
        """``ok``, the error kind it raised, or None (cancelled, or still running)."""
        return "ok" if self.ended == "returned" else (self.kind.value if self.kind else None)

    def facts(self) -> dict[str, Any]:
        """Operator-only facts for the audit record's detail."""
        out: dict[str, Any] = {
            "ran_as": self.ran_as,
            "ended": self.ended,
            "after_deadline_ms": round(self.overran * 1000, 3),
        }
        if self.error is not None:
            out["error"] = f"{type(self.error).__name__}: {self.error}"[:2000]
        return out


@dataclass
class _Tool:
    alive: int = 0
    """Worker threads reserved or running (their function has not returned)."""
    stuck: int = 0
    """Stray threads and tasks: started, abandoned by their caller, still running."""
    late: int = 0
    """Late records being written."""


@dataclass(slots=True, eq=False)
class _Job:
    tool: str
    ran_as: Literal["thread", "task"]
    on_late: OnLate | None
    # A thread's state, changed under the runner's lock:
    started: bool = False
    finished: bool = False
    cancelled: bool = False
    """The caller gave up before the function ran: it never will."""
    value: Any = None
    error: BaseException | None = None
    gave_up_at: float | None = None
    """Loop time the caller stopped waiting on work still running (a stray)."""
    reported: bool = False
    worker: Worker | None = None
    """The worker thread running it (once started)."""


class Runner:
    """Runs tool code under a deadline, with per-tool caps on threads and stray work.

    One per gate (``Gate.runner``). Everything but the worker threads runs on
    the gate's event loop; :meth:`start` and :meth:`aclose` bracket the
    loop-lag watchdog and the writing of late records.

    Args:
        tool_threads: threads one tool may hold (running or abandoned), and stray
            threads and tasks it may have before new calls are refused.
        max_threads: threads all tools may hold together.
        grace: seconds an async tool gets to end once cancelled at its deadline.
        block_threshold: seconds a step of an async tool may hold the loop
            before it is reported.
    """

    def __init__(
        self,
        *,
        tool_threads: int = TOOL_THREADS,
        max_threads: int = MAX_THREADS,
        grace: float = GRACE,
        block_threshold: float = BLOCK_THRESHOLD,
    ) -> None:
        if tool_threads < 1 or max_threads < 1:
            raise ValueError("tool_threads and max_threads must be at least 1")
        self.tool_threads = tool_threads
        self.max_threads = max_threads
        self.grace = grace
        self.watch = LoopWatch(threshold=block_threshold)
        """Names async tools that block the event loop."""
        self._tools: dict[str, _Tool] = {}
        self._threads = 0
        self._lock = threading.Lock()  # a thread starting vs its caller giving up
        self._waiters: list[asyncio.Future[None]] = []
        self._strays: set[_Job] = set()
        self._writing: set[asyncio.Task[None]] = set()
        self._pool: Workers | None = None

    # figures -------------------------------------------------------------
    def stuck(self, tool: str) -> int:
        """Stray threads and tasks of ``tool``: started, given up on, still running."""
        state = self._tools.get(tool)
        return state.stuck if state else 0

    def threads(self, tool: str | None = None) -> int:
        """Worker threads held by ``tool`` (by every tool if None)."""
        if tool is None:
            return self._threads
        state = self._tools.get(tool)
        return state.alive if state else 0

    async def wait_released(self, tool: str) -> None:
        """Return once ``tool`` holds no threads, no stray tasks, no unwritten late records."""
        state = self._state(tool)
        while state.alive or state.stuck or state.late:
            await self._changed(None)

    # running -------------------------------------------------------------
    async def run(
        self,
        tool: str,
        work: Work,
        *,
        is_async: bool,
        deadline: Deadline,
        detail: dict[str, Any] | None = None,
        on_late: OnLate | None = None,
    ) -> Any:
        """Run ``work`` for ``tool``: its result, or what it raised, by the deadline.

        Args:
            tool: whose caps apply (a tool's name, ``resource:<uri template>``, ...).
            work: a sync function (run in a worker thread) or, with ``is_async``,
                a function returning the awaitable to run (as its own task).
            deadline: when the caller stops waiting.
            detail: the call's operator-only detail (``blocked_loop_ms`` goes there).
            on_late: called with the :class:`LateEnd` of work that outlives its
                caller; awaited before :meth:`aclose` returns.

        Raises:
            Unresponsive: the tool's stray work fills its cap; nothing was started.
            NotStarted: no thread became free before the deadline; nothing ran.
            Overran: the deadline passed while the work ran.
            Exception: whatever the work raised.
        """
        state = self._state(tool)
        if not is_async:
            return await self._run_thread(tool, state, work, deadline, on_late)
        if state.stuck >= self.tool_threads:
            raise Unresponsive(tool, state.stuck)
        awaitable = work()
        coro = awaitable if asyncio.iscoroutine(awaitable) else _awaiting(awaitable)
        # A task of its own: the caller can stop waiting even if it ignores cancellation.
        task, run = self.watch.run(coro, tool, detail if detail is not None else {})
        job = _Job(tool, "task", on_late)
        alarm = Alarm(deadline, run.wake)
        try:
            await run.wake
        except asyncio.CancelledError:
            alarm.cancel()
            await self._give_up_task(job, task, run)
            raise
        alarm.cancel()
        if run.ended is None and await self._give_up_task(job, task, run) != "done":
            raise Overran(tool, stray=job.gave_up_at is not None)
        if run.ended == "raised":
            assert run.error is not None
            raise run.error
        if run.ended == "cancelled":  # by itself: as a cancellation of this call
            raise asyncio.CancelledError
        return run.value

    async def _run_thread(
        self, tool: str, state: _Tool, fn: Work, deadline: Deadline, on_late: OnLate | None
    ) -> Any:
        """Run ``fn`` in one of the loop's worker threads (AnyIO worker threads,
        see ``workers.py``: ToolContext's ``*_sync`` methods reach the loop from
        them, and ``from_thread.check_cancelled()`` sees the caller give up). The
        thread slot is released by whoever sees the function end: the caller, or
        (once the caller has given up) the thread itself.
        """
        await self._admit(tool, state, deadline)
        job = _Job(tool, "thread", on_late)
        loop = asyncio.get_running_loop()
        wake = loop.create_future()

        def body(worker: Worker) -> bool:
            with self._lock:
                if job.cancelled:
                    return True
                job.started = True
                job.worker = worker
            try:
                job.value = fn()
            except BaseException as exc:  # the caller gets it as the tool's own error
                job.error = exc
            with self._lock:
                job.finished = True
                stray = job.gave_up_at is not None
            with contextlib.suppress(RuntimeError):  # the loop is closed: no one to tell
                if stray:
                    loop.call_soon_threadsafe(self._thread_done, job, job.error)
                else:
                    loop.call_soon_threadsafe(_wake, wake)
            return not stray  # a retired worker leaves

        workers().submit(body)
        alarm = Alarm(deadline, wake)
        try:
            await wake
        except asyncio.CancelledError:
            alarm.cancel()
            self._give_up_thread(job)
            raise
        alarm.cancel()
        if job.finished:
            self._release(tool)
        else:  # the deadline
            given_up = self._give_up_thread(job)
            if given_up == "not started":
                raise NotStarted(tool)
            if given_up == "stray":
                raise Overran(tool, stray=True)
        if job.error is not None:
            raise job.error
        return job.value

    async def _admit(self, tool: str, state: _Tool, deadline: Deadline) -> None:
        """Reserve a thread slot for ``tool``, waiting for one until the deadline.

        Raises:
            Unresponsive: its stray threads fill its cap.
            NotStarted: no slot became free in time (nothing is counted).
        """
        while True:
            if state.stuck >= self.tool_threads:
                raise Unresponsive(tool, state.stuck)
            if state.alive < self.tool_threads and self._threads < self.max_threads:
                state.alive += 1
                self._threads += 1
                return
            if not await self._changed(deadline):
                raise NotStarted(tool)

    def _give_up_thread(self, job: _Job) -> Literal["done", "not started", "stray"]:
        """The caller stops waiting on a thread (which cannot be stopped).

        ``done``: it ended just now (its result stands); ``not started``: its
        function never ran and never will; ``stray``: it runs on, counted.
        """
        with self._lock:
            if not job.started:
                job.cancelled = True
            elif not job.finished:
                job.gave_up_at = asyncio.get_running_loop().time()
            started, finished = job.started, job.finished
        if not started or finished:
            self._release(job.tool)
            return "done" if finished else "not started"
        assert job.worker is not None
        job.worker.retire()
        self._stray(job)
        return "stray"

    def _thread_done(self, job: _Job, error: BaseException | None) -> None:
        self._release(job.tool)
        self._stray_ended(job, "raised" if error is not None else "returned", error)

    def _release(self, tool: str) -> None:
        self._state(tool).alive -= 1
        self._threads -= 1
        self._notify()

    async def _give_up_task(
        self, job: _Job, task: asyncio.Task[None], run: ToolTask
    ) -> Literal["done", "ended", "stray"]:
        """The caller stops waiting on a task: cancel it; track it if it runs on.

        ``done``: it returned after all (its result stands); ``ended``: it
        ended otherwise (took its cancellation, raised); ``stray``: it runs on,
        counted.
        """
        if run.ended is None:
            task.cancel()
            interrupted = False
            try:
                # Shielded: a caller cancelled through an anyio scope is re-cancelled
                # at every await; the grace must still be given.
                with anyio.CancelScope(shield=True):
                    await wait_until(task, Deadline(self.grace))
            except asyncio.CancelledError:
                interrupted = True
            if run.ended is None:
                job.gave_up_at = asyncio.get_running_loop().time()
                self._stray(job)
                task.add_done_callback(lambda _: self._task_ended(job, run))
            if interrupted:
                raise asyncio.CancelledError
        if run.ended is None:
            return "stray"
        return "done" if run.ended == "returned" else "ended"

    def _stray(self, job: _Job) -> None:
        state = self._state(job.tool)
        state.stuck += 1
        self._strays.add(job)
        logger.warning(
            "%s is still running after its caller stopped waiting (%s; %d stray for this tool)",
            job.tool,
            job.ran_as,
            state.stuck,
        )
        self._notify()  # queued calls of this tool may now have to be refused

    def _task_ended(self, job: _Job, run: ToolTask) -> None:
        self._stray_ended(job, run.ended or "cancelled", run.error)
        self._notify()

    def _stray_ended(
        self,
        job: _Job,
        ended: Literal["returned", "raised", "cancelled", "running at close"],
        error: BaseException | None,
    ) -> None:
        state = self._state(job.tool)
        if ended != "running at close":
            state.stuck -= 1
            self._strays.discard(job)
        assert job.gave_up_at is not None
        overran = asyncio.get_running_loop().time() - job.gave_up_at
        logger.warning(
            "%s %s %.0f ms after its caller stopped waiting (%s)",
            job.tool,
            "was still running" if ended == "running at close" else f"ended ({ended})",
            overran * 1000,
            job.ran_as,
        )
        if job.on_late is None or job.reported:
            return
        job.reported = True
        late = LateEnd(tool=job.tool, ran_as=job.ran_as, ended=ended, error=error, overran=overran)
        state.late += 1
        writing = asyncio.get_running_loop().create_task(self._write_late(job.on_late, late))
        self._writing.add(writing)
        writing.add_done_callback(self._writing.discard)

    async def _write_late(self, on_late: OnLate, late: LateEnd) -> None:
        try:
            await on_late(late)
        except Exception:
            logger.exception("could not record the late end of %s", late.tool)
        finally:
            self._state(late.tool).late -= 1
            self._notify()

    def start(self) -> None:
        """Start the loop-lag watchdog on the running loop (again after :meth:`aclose`);
        the loop's worker threads serve this runner until :meth:`aclose`."""
        self.watch.start()
        if self._pool is None:
            self._pool = workers()
            self._pool.users += 1

    async def aclose(self) -> None:
        """Stop the watchdog; record stray work still running; wait for late records;
        let the loop's worker threads go when no other runner uses them.

        Stray work is not waited for (it may never end): each still running is
        reported as ``running at close``, and its end later is only logged.
        """
        await self.watch.aclose()
        for job in list(self._strays):
            self._stray_ended(job, "running at close", None)
        if self._writing:
            await asyncio.wait(set(self._writing))
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.users -= 1
            if not pool.users:
                await pool.aclose()

    # waiting -------------------------------------------------------------
    def _state(self, tool: str) -> _Tool:
        state = self._tools.get(tool)
        if state is None:
            state = self._tools[tool] = _Tool()
        return state

    async def _changed(self, deadline: Deadline | None) -> bool:
        """Wait until some count changes; False if the deadline came first."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            if deadline is None:
                await waiter
                return True
            return await wait_until(waiter, deadline)
        finally:
            if not waiter.done():
                self._waiters.remove(waiter)

    def _notify(self) -> None:
        # Every waiter looks again (the counts are few; no slot is handed over,
        # so a waiter that leaves at the same moment loses nothing).
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


async def _awaiting(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
