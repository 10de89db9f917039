"""Agent runs: the state of a run that waits for a human, and its trace.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agent_runs",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("trace", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agent_runs"),
    )
    op.create_index("ix_agent_runs_status_updated_at", "agent_runs", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_status_updated_at", table_name="agent_runs")
    op.drop_table("agent_runs")
