"""The end of an eval run, for toolboxes built for one.

Every eval run builds a gate of its own, and a gate's objects refer to each
other: once the run is over, only the cyclic garbage collector frees them, with
everything their tools hold. For tau2's tools that is a database of 25,000
models a run, and collecting those held the event loop for up to a second at
a time. A toolbox factory called for an eval run can ask to be told when the
run ends (after its checks) and let go of such things then, so that they are
freed at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["on_run_end"]

_ending: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "callgate_eval_run_end", default=None
)


def on_run_end(callback: Callable[[], None]) -> bool:
    """Call ``callback`` when the eval run being set up ends; whether there is one.

    Outside an eval run (a gate a server builds) nothing is registered and
    ``False`` is returned: the caller keeps what it holds for the gate's life.
    """
    callbacks = _ending.get()
    if callbacks is None:
        return False
    callbacks.append(callback)
    return True


@contextmanager
def run_scope() -> Iterator[None]:
    """An eval run: callbacks registered within it are called as it ends,
    in the reverse order (each one's error logged, the others still called)."""
    callbacks: list[Callable[[], None]] = []
    token = _ending.set(callbacks)
    try:
        yield
    finally:
        _ending.reset(token)
        for callback in reversed(callbacks):
            try:
                callback()
            except Exception:
                logging.getLogger(__name__).exception("an eval run's end callback failed")
