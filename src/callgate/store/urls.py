"""Where a store is: its URL, from the caller, ``$CALLGATE_STORE`` or the user's data directory."""

from __future__ import annotations

import os

import platformdirs

from callgate.store.base import Store
from callgate.store.memory import MemoryStore
from callgate.store.sql import SQLStore

__all__ = ["STORE_ENV", "default_store_url", "store_from_url"]

STORE_ENV = "CALLGATE_STORE"


def default_store_url() -> str:
    """``$CALLGATE_STORE``, else a SQLite file in the user's data directory."""
    env = os.environ.get(STORE_ENV)
    if env:
        return env
    path = platformdirs.user_data_path("callgate", appauthor=False) / "callgate.db"
    return f"sqlite:///{path}"


def store_from_url(url: str) -> Store:
    """An unopened store for ``url`` (``memory://`` for an in-memory one)."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    return SQLStore(url)
