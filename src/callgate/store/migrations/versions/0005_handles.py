"""Handles: state tools keep across calls for one caller, behind opaque ids.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "handles",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("tenant", sa.String()),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_handles"),
    )
    op.create_index("ix_handles_expires_at", "handles", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_handles_expires_at", table_name="handles")
    op.drop_table("handles")
