"""tau2's modules, and its domains' tool kits over fresh databases.

tau2 ships no type information: its modules are imported by name, typed Any.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from callgate.errors import InvalidArgument

DOMAINS = ("airline", "retail")


def _quiet() -> None:
    # tau2 logs through loguru and warns about a missing .env on import.
    logging.getLogger("tau2").setLevel(logging.ERROR)
    from loguru import logger

    logger.remove()


def check_domain(domain: str) -> None:
    if domain not in DOMAINS:
        raise InvalidArgument(f"tau2 domain {domain!r}: expected one of {', '.join(DOMAINS)}")


_KITS = {"airline": ("FlightDB", "AirlineTools"), "retail": ("RetailDB", "RetailTools")}


def tau2_module(module: str) -> Any:
    _quiet()
    return importlib.import_module(f"tau2.{module}")


def kit_class(domain: str) -> Any:
    check_domain(domain)
    return getattr(tau2_module(f"domains.{domain}.tools"), _KITS[domain][1])


def _db_path(domain: str) -> Path:
    check_domain(domain)
    return Path(getattr(tau2_module(f"domains.{domain}.utils"), f"{domain.upper()}_DB_PATH"))


# A fresh database, fast and without stalling the event loop ----------------------
# Reading airline's db.json and validating it takes 0.3-0.6 s, all of it holding
# the GIL, and every eval run needs its own copy. So the database is read once a
# process and kept pickled (our own bytes, never input from outside), a copy is
# made at a run's first tool call, in the worker thread that runs the tool, and
# the cyclic garbage collector is paused meanwhile: copying 25,000 models made
# it sweep the whole heap, which held the event loop for 100-300 ms at a time
# (measured: a copy takes 75 ms with the collector paused, 170-370 ms without).
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False
_shipped_lock = threading.Lock()
_SHIPPED: dict[str, bytes] = {}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (process-wide, for the 75 ms of a copy):
    pauses that overlap share one, and it comes back on only if it was on."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def shipped(domain: str) -> bytes:
    """``domain``'s database as shipped, read once a process, pickled."""
    with _shipped_lock:
        data = _SHIPPED.get(domain)
        if data is None:
            db_class = getattr(tau2_module(f"domains.{domain}.data_model"), _KITS[domain][0])
            with gc_paused():
                db = db_class.load(str(_db_path(domain)))
                data = _SHIPPED[domain] = pickle.dumps(db, protocol=pickle.HIGHEST_PROTOCOL)
        return data


def tool_kit(domain: str) -> Any:
    """tau2's tool kit for ``domain`` over a fresh copy of the database as shipped."""
    data = shipped(domain)
    with gc_paused():
        return kit_class(domain)(pickle.loads(data))


class FreshKit:
    """A kit over a fresh database, made at the first call that needs it (once,
    even when calls come at once), let go when the eval run it was made for ends."""

    def __init__(self, domain: str) -> None:
        self._domain = domain
        self._kit: Any = None
        self._ended = False
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            if self._ended:
                raise RuntimeError(f"the eval run this {self._domain} database was for has ended")
            if self._kit is None:
                self._kit = tool_kit(self._domain)
            return self._kit

    def end(self) -> None:
        with self._lock:
            self._kit, self._ended = None, True


def data_dir(domain: str) -> Path:
    """Where tau2 keeps ``domain``'s db.json, tasks.json, split_tasks.json and policy.md."""
    return _db_path(domain).parent
