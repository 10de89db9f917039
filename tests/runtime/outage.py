"""A store that fails like a database gone away, and tools that take it down mid-call."""

from __future__ import annotations

import inspect
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import anyio
import sqlalchemy.exc

from callgate import Toolbox
from callgate.store import MemoryStore

SECRET = "4111-1111-1111-1111"
"""A value in the failing statement's parameters: it must never reach the caller."""

DRIVER_WORDS = ("INSERT", "SQL", "sqlite", "database is locked", SECRET, "asyncpg")
"""Driver text that must never be in what the model gets."""

_METHODS = {
    name
    for name in dir(MemoryStore)
    if not name.startswith("_") and name not in ("open", "close", "url")
}


def driver_error() -> sqlalchemy.exc.OperationalError:
    """What SQLAlchemy raises for a locked SQLite database, parameters included."""
    return sqlalchemy.exc.OperationalError(
        "INSERT INTO audit (call_id, phase, detail) VALUES (?, ?, ?)",
        {"detail": SECRET},
        sqlite3.OperationalError("database is locked"),
    )


class OutageStore(MemoryStore):
    """A MemoryStore whose every method raises a driver error while ``down``.

    ``down_for`` names the only methods that fail (all of them when empty).
    """

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.down_for: set[str] = set()
        self.refused: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in _METHODS and super().__getattribute__("down"):
            only = super().__getattribute__("down_for")
            if not only or name in only:
                refused = super().__getattribute__("refused")

                async def failing(*args: Any, **kwargs: Any) -> Any:
                    refused.append(name)
                    raise driver_error()

                def failing_now(*args: Any, **kwargs: Any) -> Any:
                    refused.append(name)
                    raise driver_error()

                return failing if inspect.iscoroutinefunction(attr) else failing_now
        return attr


@dataclass
class Effects:
    """What the tools did, and the switches that time an outage."""

    paid: list[int] = field(default_factory=list)
    reads: int = 0
    store: OutageStore | None = None
    """Taken down by the tools, once they have done their work."""
    started: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event | None = None
    """When set, ``pay`` waits for it after paying (the test breaks the store meanwhile)."""


def build(effects: Effects) -> Toolbox:
    box = Toolbox("o")

    @box.tool(scopes={"w"}, idempotent=False)
    async def pay(amount: int) -> dict[str, int]:
        """Pay an amount (a side effect, not idempotent)."""
        effects.paid.append(amount)
        effects.started.set()
        if effects.release is not None:
            await effects.release.wait()
        if effects.store is not None:
            effects.store.down = True
        return {"paid": amount}

    @box.tool(scopes={"r"}, read_only=True)
    async def balance() -> dict[str, int]:
        """Read the balance."""
        effects.reads += 1
        if effects.store is not None:
            effects.store.down = True
        return {"balance": 100 - sum(effects.paid)}

    return box
