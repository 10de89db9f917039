"""What a store failure means: the store cannot answer now, or it refused.

The difference decides what happens next. A store that cannot answer now (a
SQLite file locked by another process, PostgreSQL connections terminated or a
server restarting) will take the same write later: the caller is told to try
again, or that the outcome is unknown, and a write that must not be lost is kept
and retried (:mod:`callgate.store.backlog`). A refusal (a constraint, a bug in
what was sent) will fail the same way again.

Drivers' texts (SQL statements and their parameters) are for operators only:
:func:`describe` gives the short form kept in the audit record's detail.
"""

from __future__ import annotations

import sqlite3

import sqlalchemy.exc

from callgate.errors import RuntimeFailure

__all__ = ["StoreUnavailable", "describe", "is_unavailable"]

# SQLSTATE classes of a PostgreSQL server that cannot serve now: connection
# exceptions, insufficient resources, operator intervention (shutdown,
# terminated backend, cannot connect now), and a transaction to run again.
_PG_UNAVAILABLE = ("08", "53", "57P", "40001", "40P01")


class StoreUnavailable(RuntimeFailure):
    """The store did not answer within its time (e.g. this process's writers queued)."""


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store cannot answer now (as opposed to a refusal)."""
    if isinstance(exc, StoreUnavailable | OSError | TimeoutError | sqlite3.OperationalError):
        return True
    if isinstance(exc, sqlalchemy.exc.DisconnectionError | sqlalchemy.exc.TimeoutError):
        return True
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        if isinstance(exc, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError):
            return True
        state = getattr(exc.orig, "sqlstate", None)
        if isinstance(state, str) and state.startswith(_PG_UNAVAILABLE):
            return True
        orig: BaseException | None = exc.orig
        return orig is not None and orig is not exc and is_unavailable(orig)
    cause = exc.__cause__
    return isinstance(cause, OSError | sqlite3.OperationalError)


def describe(exc: BaseException) -> str:
    """``Type: first line of the driver's message``, without the SQL or its parameters."""
    inner = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc
    text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
