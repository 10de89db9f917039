"""PostgreSQL audit appends in one statement: one round trip instead of four.

An append used to be ``BEGIN``, the advisory lock that keeps ``seq`` in commit
order across replicas, the ``INSERT`` and ``COMMIT``: four round trips through
SQLAlchemy's async layer, about 1 ms per call on a loopback server. Here it is
one statement in autocommit mode, so its implicit transaction commits (and, with
``synchronous_commit`` on, is flushed) before the server answers::

    WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1))
    INSERT INTO audit (call_id, ...)
    SELECT v.* FROM lock, unnest($2::VARCHAR[], ...) AS v(call_id, ...)

The lock comes first: a row exists only once the CTE has run (its function is
volatile, so the CTE is never inlined), and ``seq``'s default is computed for
each row as the join produces it, so no ``nextval`` runs before the lock is
held. The batch travels as one array per column, so the statement text (and
its prepared statement) is the same for any number of records. Values are
converted by the columns' own bind processors, as SQLAlchemy would store them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Dialect

from callgate.store.tables import audit

__all__ = ["AuditStatement"]


class AuditStatement:
    """The one-statement append for ``dialect`` (PostgreSQL's)."""

    def __init__(self, dialect: Dialect) -> None:
        columns = [column for column in audit.columns if column.name != "seq"]
        self.names = [column.name for column in columns]
        self._processors: list[Callable[[Any], Any] | None] = [
            column.type.dialect_impl(dialect).bind_processor(dialect) for column in columns
        ]
        quoted = ", ".join(dialect.identifier_preparer.quote(name) for name in self.names)
        arrays = ", ".join(
            f"${i}::{column.type.compile(dialect=dialect)}[]"
            for i, column in enumerate(columns, start=2)
        )
        self.sql = (
            "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1)) "
            f"INSERT INTO audit ({quoted}) "
            f"SELECT v.* FROM lock, unnest({arrays}) AS v({quoted})"
        )

    def parameters(self, lock_key: int, rows: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
        """The statement's parameters for ``rows`` (dicts by column name)."""
        params: list[Any] = [lock_key]
        for name, process in zip(self.names, self._processors, strict=True):
            values = [row[name] for row in rows]
            params.append(values if process is None else [process(v) for v in values])
        return tuple(params)
