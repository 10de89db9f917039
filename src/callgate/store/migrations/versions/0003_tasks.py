"""Tasks: calls running in the background (the MCP Tasks extension).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("message", sa.Text()),
        sa.Column("call_id", sa.String()),
        sa.Column("result", sa.JSON()),
        sa.Column("error", sa.JSON()),
        sa.PrimaryKeyConstraint("id", name="pk_tasks"),
    )
    op.create_index("ix_tasks_status_owner", "tasks", ["status", "owner"])


def downgrade() -> None:
    op.drop_index("ix_tasks_status_owner", table_name="tasks")
    op.drop_table("tasks")
