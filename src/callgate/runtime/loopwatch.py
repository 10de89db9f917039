"""Async tools that block the event loop: found, named and reported.

An async tool that calls blocking code (``time.sleep``, a sync HTTP client, a
long computation) stops the whole gateway: every other call waits. Python
cannot preempt it, so the gate reports it instead, in two ways:

- **Steps timed.** Each async tool runs as its own task, driven through
  :class:`_Timed`, which times every step (the code between two awaits: while
  it runs, nothing else on the loop does). A step of ``threshold`` seconds or
  more is logged once per call, naming the tool, and kept in the call's audit
  detail as ``blocked_loop_ms`` (the longest such step). The attribution is
  exact: only the tool whose own code held the loop is named.
- **Lag watched.** A light task wakes every ``WATCH_INTERVAL`` seconds and
  measures how late it woke. Lag that no tool step explains (a callback or a
  task a tool spawned, the gateway itself) is logged with the async tools that
  were running meanwhile, at most once per ``WATCH_QUIET`` seconds. A stall is
  the loop's, not a gate's: the gates on one loop (an eval runs one a task) log
  it once, naming the async tools of all of them.

The rule for tool authors: blocking code belongs in a sync tool, which the gate
runs in a worker thread. A tool flagged here is not moved to a thread for its
later calls: its coroutine belongs to the gate's loop (its ToolContext reports
progress and asks the client there; its clients and locks are bound to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import Counter
from collections.abc import Coroutine, Generator
from typing import Any, Literal, NoReturn

__all__ = ["BLOCK_THRESHOLD", "LoopWatch", "ToolTask"]

logger = logging.getLogger(__name__)

BLOCK_THRESHOLD = 0.2
"""Seconds the loop may be held (by one step of a tool, or in all) before it is reported."""
WATCH_INTERVAL = 0.1
"""Seconds between two ticks of the watchdog."""
WATCH_QUIET = 10.0
"""Seconds between two watchdog warnings: a loop that keeps stalling must not flood the log."""


class _Loop:
    """What the watches on one event loop share."""

    __slots__ = ("last_block", "last_warning", "watches")

    def __init__(self) -> None:
        self.watches: weakref.WeakSet[LoopWatch] = weakref.WeakSet()
        self.last_block = float("-inf")
        """When a tool's step (of any gate on the loop) last blocked it."""
        self.last_warning = float("-inf")


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = weakref.WeakKeyDictionary()


def _shared(loop: asyncio.AbstractEventLoop, own: _Loop) -> _Loop:
    try:
        state = _LOOPS.get(loop)
        if state is None:
            state = _LOOPS[loop] = _Loop()
    except TypeError:  # a loop that takes no weak references: each watch on its own
        state = own
    return state


class ToolTask:
    """One async tool run as a task of its own: how it ended, once it has.

    ``wake`` is resolved inside the task's last step (one turn of the loop
    sooner than a done callback), or by whoever else wants the waiter up (the
    runner's deadline). The task itself ends quietly: its outcome is here.
    """

    __slots__ = ("detail", "ended", "error", "flagged", "tool", "value", "wake")

    def __init__(self, tool: str, detail: dict[str, Any], wake: asyncio.Future[None]) -> None:
        self.tool = tool
        self.detail = detail
        self.wake = wake
        self.flagged = False
        self.ended: Literal["returned", "raised", "cancelled"] | None = None
        self.value: Any = None
        self.error: BaseException | None = None


class LoopWatch:
    """Times the steps of async tool tasks and watches the event loop's lag.

    Args:
        threshold: seconds a step (or the loop's lag) may last before it is reported.
    """

    def __init__(self, *, threshold: float = BLOCK_THRESHOLD) -> None:
        self.threshold = threshold
        self.blocking: Counter[str] = Counter()
        """Calls per async tool that blocked the loop, since the gate started."""
        self._running: dict[str, int] = {}
        self._ended: set[str] = set()
        """Async tools that ended since the watchdog's last tick."""
        self._task: asyncio.Task[None] | None = None
        self._own = _Loop()

    def run(
        self, coro: Coroutine[Any, Any, Any], tool: str, detail: dict[str, Any]
    ) -> tuple[asyncio.Task[None], ToolTask]:
        """Start ``coro`` as a task of its own, each of its steps timed for ``tool``.

        A step that blocks the loop is kept in ``detail["blocked_loop_ms"]``.
        """
        loop = asyncio.get_running_loop()
        run = ToolTask(tool, detail, loop.create_future())
        task = loop.create_task(_Timed(coro, self, run))
        self._running[tool] = self._running.get(tool, 0) + 1
        return task, run

    def _end(
        self,
        run: ToolTask,
        ended: Literal["returned", "raised", "cancelled"],
        value: Any = None,
        error: BaseException | None = None,
    ) -> None:
        if run.ended is not None:
            return
        run.ended, run.value, run.error = ended, value, error
        if not run.wake.done():
            with contextlib.suppress(RuntimeError):  # closed with its loop: no one waits
                run.wake.set_result(None)
        tool = run.tool
        self._ended.add(tool)
        self._running[tool] -= 1
        if not self._running[tool]:
            del self._running[tool]

    def _stepped(self, run: ToolTask, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        _shared(loop, self._own).last_block = loop.time()
        blocked = round(seconds * 1000, 3)
        detail = run.detail
        detail["blocked_loop_ms"] = max(detail.get("blocked_loop_ms", 0.0), blocked)
        if run.flagged:
            return
        run.flagged = True
        self.blocking[run.tool] += 1
        logger.warning(
            "async tool %s blocked the event loop for %.0f ms (every other call waited); "
            "blocking code belongs in a sync tool, which runs in a worker thread",
            run.tool,
            blocked,
        )

    def start(self) -> None:
        """Start the watchdog on the running loop (again after :meth:`aclose`)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._watch(), name="callgate loop-lag watchdog"
            )

    async def aclose(self) -> None:
        """Stop the watchdog."""
        _shared(asyncio.get_running_loop(), self._own).watches.discard(
            self
        )  # a closed gate runs nothing
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        shared = _shared(loop, self._own)
        shared.watches.add(self)
        while True:
            before = loop.time()
            self._ended.clear()
            await asyncio.sleep(WATCH_INTERVAL)
            now = loop.time()
            lag = now - before - WATCH_INTERVAL
            if (
                lag < self.threshold
                or shared.last_block >= before  # a tool's step: already reported
                or now - shared.last_warning < WATCH_QUIET  # by this watch or another
            ):
                continue
            shared.last_warning = now
            # Those that ended during the stall count too: their end may have been
            # processed before this tick, in the same turn of the loop.
            running = sorted(
                {tool for watch in list(shared.watches) for tool in watch._ended}
                | {tool for watch in list(shared.watches) for tool in watch._running}
            )
            logger.warning(
                "the event loop stalled for %.0f ms outside the steps of async tools "
                "(blocking code elsewhere, or overload); async tools running meanwhile: %s",
                lag * 1000,
                ", ".join(running) or "none",
            )


class _Timed(Coroutine[Any, Any, None]):
    """A tool's coroutine as its task drives it: each step timed, its end
    recorded on its :class:`ToolTask` at once.

    The task calls ``send`` and ``throw``; other attributes (``cr_frame``, ...,
    which anyio inspects) are the coroutine's own.
    """

    __slots__ = ("_coro", "_run", "_watch")

    def __init__(self, coro: Coroutine[Any, Any, Any], watch: LoopWatch, run: ToolTask) -> None:
        self._coro = coro
        self._watch = watch
        self._run = run

    def send(self, value: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coro.send(value)
        except BaseException as exc:
            self._ended(exc)
        finally:
            elapsed = time.perf_counter() - started
            if elapsed >= self._watch.threshold:
                self._watch._stepped(self._run, elapsed)

    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        started = time.perf_counter()
        try:
            if val is None and tb is None:  # the one-argument form (the others are deprecated)
                return self._coro.throw(typ)
            return self._coro.throw(typ, val, tb)
        except BaseException as exc:
            self._ended(exc)
        finally:
            elapsed = time.perf_counter() - started
            if elapsed >= self._watch.threshold:
                self._watch._stepped(self._run, elapsed)

    def _ended(self, exc: BaseException) -> NoReturn:
        if isinstance(exc, StopIteration):
            self._watch._end(self._run, "returned", value=exc.value)
            raise StopIteration from None  # the value is on the ToolTask
        if isinstance(exc, asyncio.CancelledError):
            self._watch._end(self._run, "cancelled")
            raise exc  # the task is cancelled (that is never "unretrieved")
        self._watch._end(self._run, "raised", error=exc)
        if not isinstance(exc, Exception):
            raise exc  # KeyboardInterrupt, SystemExit: the loop must see them
        # The runner hands the error on; the task itself ends without one, so no
        # "exception was never retrieved" noise from a task nobody awaits.
        raise StopIteration from None

    def close(self) -> None:
        self._watch._end(self._run, "cancelled")  # destroyed before it ended
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._coro.__await__()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # a slot not set yet: no recursion through _coro
            raise AttributeError(name)
        return getattr(self._coro, name)
