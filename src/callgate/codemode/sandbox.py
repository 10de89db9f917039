"""The pool of sandbox processes (``pydantic-monty``), started on first use.

A gate with code mode holds one :class:`Sandbox`: a pool of ``monty`` worker
subprocesses, each running one program at a time. A worker that crashes or
hangs is killed and replaced by the pool; the gate's process never runs model
code. Without the ``code`` extra, the first use raises
:class:`CodeModeUnavailable`, which says what to install.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from callgate.codemode.settings import CodeModeSettings
from callgate.errors import UserError

if TYPE_CHECKING:
    from pydantic_monty import AsyncMonty, ResourceLimits

__all__ = ["CodeModeUnavailable", "Sandbox"]

INSTALL_HINT = "pip install 'callgate[code]'"
SETTLE_SECONDS = 0.02
"""How long a closed pool's I/O thread gets to hand back the GIL (see ``aclose``)."""


class CodeModeUnavailable(UserError):
    """Code mode was asked for, but ``pydantic-monty`` is not installed."""


def monty() -> Any:
    """The ``pydantic_monty`` module.

    Raises:
        CodeModeUnavailable: it is not installed.
    """
    try:
        import pydantic_monty
    except ImportError:
        raise CodeModeUnavailable(
            f"code mode needs the pydantic-monty sandbox, which is not installed: {INSTALL_HINT}"
        ) from None
    return pydantic_monty


class Sandbox:
    """A pool of sandbox workers for one gate (see the module docs)."""

    def __init__(self, settings: CodeModeSettings) -> None:
        self.settings = settings
        self._pool: AsyncMonty | None = None
        self._lock: asyncio.Lock | None = None

    async def pool(self) -> AsyncMonty:
        """The running pool (started on first use, one worker warm).

        Raises:
            CodeModeUnavailable: the sandbox is not installed.
        """
        if self._pool is not None:
            return self._pool
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._pool is None:
                settings = self.settings
                pool = monty().AsyncMonty(
                    min_processes=1,
                    max_processes=settings.workers,
                    # A worker that does not answer a turn in time is killed (a
                    # backstop: the CPU limit inside the sandbox comes first).
                    request_timeout=settings.max_cpu_seconds + 10,
                    # Programs wait for a free worker at most their own wall time.
                    checkout_timeout=settings.max_seconds,
                )
                await pool.__aenter__()
                self._pool = pool
        return self._pool

    def limits(self) -> ResourceLimits:
        """The limits each program runs under, as the sandbox takes them."""
        s = self.settings
        return {
            "max_feed_duration_secs": s.max_cpu_seconds,
            "max_memory": s.max_memory_mb * 1024 * 1024,
            "max_recursion_depth": s.max_recursion,
            # Tool calls, their awaits and imports each suspend the program once
            # or twice; the tool call limit itself is counted by the host.
            "max_suspensions": s.max_calls * 3 + 64,
            "max_total_sleep_secs": 0.0,
        }

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)
            # The pool's own I/O thread resolves that await: it schedules the result
            # (call_soon_threadsafe), then wakes the loop with the GIL released. If
            # the process ends before that thread takes the GIL back, Python 3.11
            # ends the thread under the extension's frames and the process aborts
            # (SIGABRT/SIGBUS at exit, about 1 run in 10 on a loaded machine). A
            # short wait with the GIL free lets it return first (0 in 198 runs).
            await asyncio.sleep(SETTLE_SECONDS)
