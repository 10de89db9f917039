"""The SQL schema behind :class:`~callgate.store.sql.SQLStore` (SQLAlchemy Core).

The Alembic migrations in ``callgate/store/migrations`` must build exactly these
tables; ``tests/store/test_migrations.py`` holds the two together.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeDecorator

__all__ = [
    "UTCDateTime",
    "approvals",
    "as_utc",
    "audit",
    "console_sessions",
    "handles",
    "idempotency",
    "metadata",
    "previews",
    "rate_limits",
    "results",
    "search_vectors",
    "session_taints",
    "tasks",
]

# Named constraints let later migrations drop or alter them by name on every backend.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def as_utc(value: datetime) -> datetime:
    """Return ``value`` converted to UTC.

    Raises:
        ValueError: ``value`` is naive; a naive time cannot be placed on the
            timeline, and guessing would silently shift audit times.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}; use datetime.now(UTC)")
    return value.astimezone(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` on every backend.

    SQLite keeps no offset, so values are written in UTC (which also makes its
    text comparisons chronological) and read back with ``tzinfo=UTC``.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# SQLite only auto-assigns INTEGER PRIMARY KEY (the rowid alias), not BIGINT.
_SEQ = BigInteger().with_variant(Integer(), "sqlite")

audit = Table(
    "audit",
    metadata,
    Column("seq", _SEQ, primary_key=True, autoincrement=True),
    Column("call_id", String, nullable=False),
    Column("phase", String, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("trace_id", String, nullable=False),
    Column("tool", String, nullable=False),
    Column("user", String),
    Column("tenant", String),
    Column("session_id", String),
    Column("tool_version", String),
    Column("contract_hash", String),
    Column("args_hash", String),
    Column("risk", String),
    Column("decision", String),
    Column("decision_reason", Text),
    Column("status", String),
    Column("outcome", String),
    Column("duration_ms", Float),
    Column("attempts", Integer, nullable=False),
    Column("idempotency_key", String),
    Column("dropped_fields", JSON, nullable=False),
    Column("detail", JSON, nullable=False),
    Index(None, "call_id"),
    Index(None, "session_id", "tool", "args_hash"),
    # The console's filters, each newest first by seq (docs/console-queries.md shows the plans).
    Index(None, "tenant", "seq"),
    Index(None, "tool", "seq"),
    Index(None, "user", "seq"),
    Index(None, "outcome", "seq"),
    Index(None, "status", "seq"),
    Index(None, "risk", "seq"),
    Index(None, "phase", "seq"),
    Index(None, "trace_id"),
    Index(None, "at", "seq"),
    Index(None, "tenant", "at", "seq"),
)

idempotency = Table(
    "idempotency",
    metadata,
    Column("scope", String, primary_key=True),
    Column("args_hash", String, nullable=False),
    Column("call_id", String, nullable=False),
    Column("state", String, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    # SQL NULL rather than JSON 'null' while the call is pending.
    Column("envelope", JSON(none_as_null=True)),
)

results = Table(
    "results",
    metadata,
    Column("ref", String, primary_key=True),
    Column("call_id", String, nullable=False),
    Column("tool", String, nullable=False),
    Column("tenant", String),
    Column("user", String),
    Column("content", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    # Expired results are deleted, a batch at a time, whenever one is stored.
    Index(None, "expires_at"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String, primary_key=True),
    Column("tool", String, nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("model_arguments", JSON, nullable=False),
    Column("args_hash", String, nullable=False),
    Column("user", String, nullable=False),
    Column("tenant", String),
    Column("session_id", String),
    Column("call_id", String, nullable=False),
    Column("reason", Text, nullable=False),
    Column("rule", String),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("state", String, nullable=False),
    # SQL NULL rather than JSON 'null' when there is no impact / no result yet.
    Column("impact", JSON(none_as_null=True)),
    Column("preview_id", String),
    Column("approved_by", String, nullable=False, server_default="another"),
    Column("approvers", JSON, nullable=False, server_default="[]"),
    Column("decided_by", String),
    Column("decided_at", UTCDateTime),
    Column("note", Text),
    Column("used_by_call", String),
    Column("result", JSON(none_as_null=True)),
    Index(None, "tool", "args_hash", "user", "tenant"),
    Index(None, "state", "created_at"),
    # The console's inbox: a tenant's pending requests, and its (an admin: every
    # tenant's) latest ones whatever their state (docs/console-queries.md).
    Index(None, "tenant", "state", "created_at"),
    Index(None, "tenant", "created_at"),
    Index(None, "created_at"),
)

previews = Table(
    "previews",
    metadata,
    Column("id", String, primary_key=True),
    Column("change", String, nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("args_hash", String, nullable=False),
    Column("user", String, nullable=False),
    Column("tenant", String),
    # Any JSON value, null included (stored as JSON 'null', not SQL NULL).
    Column("impact", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("approval_id", String),
)

session_taints = Table(
    "session_taints",
    metadata,
    Column("session_id", String, nullable=False),
    Column("taint", String, nullable=False),
    Column("tool", String, nullable=False),
    Column("first_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("session_id", "taint"),
)

tasks = Table(
    "tasks",
    metadata,
    Column("id", String, primary_key=True),
    Column("tool", String, nullable=False),
    Column("user", String, nullable=False),
    Column("tenant", String),
    Column("owner", String, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("status", String, nullable=False),
    Column("message", Text),
    Column("call_id", String),
    Column("result", JSON(none_as_null=True)),
    Column("error", JSON(none_as_null=True)),
    Column("arguments", JSON(none_as_null=True)),
    Column("input_requests", JSON(none_as_null=True)),
    Column("responses", JSON(none_as_null=True)),
    Column("request_state", Text),
    Column("lease_until", UTCDateTime),
    Column("envelope", JSON(none_as_null=True)),
    Index(None, "status", "lease_until"),
    Index(None, "tenant", "created_at"),
)

handles = Table(
    "handles",
    metadata,
    Column("id", String, primary_key=True),
    Column("kind", String, nullable=False),
    Column("user", String, nullable=False),
    Column("tenant", String),
    Column("data", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("version", Integer, nullable=False),
    # Expired handles are purged by expiry on every create.
    Index(None, "expires_at"),
)

agent_runs = Table(
    "agent_runs",
    metadata,
    Column("id", String, primary_key=True),
    Column("user", String, nullable=False),
    Column("tenant", String),
    Column("status", String, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("state", JSON, nullable=False),
    Column("trace", JSON, nullable=False),
    Index(None, "status", "updated_at"),
    Index(None, "tenant", "created_at"),
)

upstream_listings = Table(
    "upstream_listings",
    metadata,
    Column("name", String, primary_key=True),
    Column("key", String, nullable=False),
    Column("listing", JSON, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

rate_limits = Table(
    # One GCRA bucket of a rate limit (callgate.ratelimit): ``tat`` is its
    # theoretical arrival time in microseconds since the epoch; a row whose
    # ``tat`` has passed is the same as no row (and is purged).
    "rate_limits",
    metadata,
    Column("key", String, primary_key=True),
    Column("tat", BigInteger, nullable=False),
    Column("admitted", Boolean, nullable=False),
    Index(None, "tat"),
)

search_vectors = Table(
    # Tool search's cache of embedding vectors (float32 arrays packed by the
    # caller), by the model that made them and the digest of the text embedded.
    "search_vectors",
    metadata,
    Column("model", String, nullable=False),
    Column("digest", String, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("model", "digest"),
)

console_sessions = Table(
    # The web console's sign-ins: one-time links and browser sessions, by the
    # SHA-256 of the secret the browser holds (never the secret itself).
    "console_sessions",
    metadata,
    Column("id", String, primary_key=True),
    Column("kind", String, nullable=False),
    Column("principal", JSON, nullable=False),
    Column("csrf", String, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("detail", JSON, nullable=False),
    Index(None, "expires_at"),
)
