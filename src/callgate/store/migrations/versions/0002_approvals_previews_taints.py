"""Approvals, previews and session taints.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("model_arguments", sa.JSON(), nullable=False),
        sa.Column("args_hash", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("session_id", sa.String()),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rule", sa.String()),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("impact", sa.JSON()),
        sa.Column("preview_id", sa.String()),
        sa.Column("decided_by", sa.String()),
        sa.Column("decided_at", _UTC),
        sa.Column("note", sa.Text()),
        sa.Column("used_by_call", sa.String()),
        sa.Column("result", sa.JSON()),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
    )
    op.create_index(
        "ix_approvals_tool_args_hash_user_tenant",
        "approvals",
        ["tool", "args_hash", "user", "tenant"],
    )
    op.create_index("ix_approvals_state_created_at", "approvals", ["state", "created_at"])
    op.create_table(
        "previews",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("change", sa.String(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("args_hash", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("impact", sa.JSON(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("approval_id", sa.String()),
        sa.PrimaryKeyConstraint("id", name="pk_previews"),
    )
    op.create_table(
        "session_taints",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("taint", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("first_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "taint", name="pk_session_taints"),
    )


def downgrade() -> None:
    op.drop_table("session_taints")
    op.drop_table("previews")
    op.drop_index("ix_approvals_state_created_at", table_name="approvals")
    op.drop_index("ix_approvals_tool_args_hash_user_tenant", table_name="approvals")
    op.drop_table("approvals")
