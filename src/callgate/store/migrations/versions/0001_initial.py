"""Audit trail, idempotency records and spilled results.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("phase", sa.String(), nullable=False),
        sa.Column("at", _UTC, nullable=False),
        sa.Column("trace_id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("user", sa.String()),
        sa.Column("tenant", sa.String()),
        sa.Column("session_id", sa.String()),
        sa.Column("tool_version", sa.String()),
        sa.Column("contract_hash", sa.String()),
        sa.Column("args_hash", sa.String()),
        sa.Column("risk", sa.String()),
        sa.Column("decision", sa.String()),
        sa.Column("decision_reason", sa.Text()),
        sa.Column("status", sa.String()),
        sa.Column("outcome", sa.String()),
        sa.Column("duration_ms", sa.Float()),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String()),
        sa.Column("dropped_fields", sa.JSON(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit"),
    )
    op.create_index("ix_audit_call_id", "audit", ["call_id"])
    op.create_index(
        "ix_audit_session_id_tool_args_hash", "audit", ["session_id", "tool", "args_hash"]
    )
    op.create_table(
        "idempotency",
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("args_hash", sa.String(), nullable=False),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("envelope", sa.JSON()),
        sa.PrimaryKeyConstraint("scope", name="pk_idempotency"),
    )
    op.create_table(
        "results",
        sa.Column("ref", sa.String(), nullable=False),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("user", sa.String()),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("ref", name="pk_results"),
    )


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("idempotency")
    op.drop_index("ix_audit_session_id_tool_args_hash", table_name="audit")
    op.drop_index("ix_audit_call_id", table_name="audit")
    op.drop_table("audit")
