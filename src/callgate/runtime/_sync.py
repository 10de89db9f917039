"""The event loop thread behind ``Gate.call_sync``.

A gate used from synchronous code runs on its own event loop, in a thread. The
thread is a daemon, so a script that never closes its gate still exits: at exit,
the gates still open are closed (their audit records flushed, connections
closed) first. The hook is registered the way ``concurrent.futures`` registers
its own (``threading._register_atexit``, run before non-daemon threads are
joined) and later than it, so it runs while executors still take work: closing
a SQLite store needs one. A plain ``atexit`` hook would run too late.
"""

from __future__ import annotations

import atexit

# Imported before our exit hook is registered, so that its own hook (which stops
# executors taking work) is registered first: these hooks run last-in, first-out.
import concurrent.futures.thread  # noqa: F401
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Protocol, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

T = TypeVar("T")


class _ClosesSync(Protocol):
    def close_sync(self) -> None: ...


class LoopThread:
    """An asyncio event loop in a daemon thread, reached through a blocking portal."""

    def __init__(self, name: str = "callgate-gate") -> None:
        started: Future[BlockingPortal] = Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                started.set_result(portal)
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(serve, backend="asyncio")
            except BaseException as exc:  # reported to the thread that waits for the start
                if not started.done():
                    started.set_exception(exc)
                raise

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        self.portal = started.result()

    def call(self, func: Callable[[], Awaitable[T]]) -> T:
        """Run ``func()`` on the loop and return its result (blocks this thread)."""
        return self.portal.call(func)

    def stop(self) -> None:
        """Stop the loop and wait for its thread to end."""
        self.portal.call(self.portal.stop)
        self._thread.join()


_open: weakref.WeakSet[_ClosesSync] = weakref.WeakSet()


def closes_at_exit(owner: _ClosesSync) -> None:
    """Have ``owner.close_sync()`` called at interpreter exit unless it was closed before."""
    _open.add(owner)


def closed(owner: _ClosesSync) -> None:
    """``owner`` closed itself: nothing to do at exit."""
    _open.discard(owner)


def _close_open_gates() -> None:
    failures: list[Exception] = []
    for owner in list(_open):
        try:
            owner.close_sync()
        except Exception as exc:  # close the others, then report it
            failures.append(exc)
    if failures:
        raise failures[0]


_register: Callable[[Callable[[], None]], object] = getattr(
    threading, "_register_atexit", atexit.register
)
_register(_close_open_gates)
