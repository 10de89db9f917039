"""Rate limit buckets shared by every replica on one database (``rate_limits``).

UNLOGGED on PostgreSQL (see ``callgate/store/sql_rates.py`` for why).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("tat", sa.BigInteger(), nullable=False),
        sa.Column("admitted", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_rate_limits_tat", "rate_limits", ["tat"])
    if op.get_bind().dialect.name == "postgresql":
        # Counts need no WAL: no flush to disk per call; a crash empties the table.
        op.execute("ALTER TABLE rate_limits SET UNLOGGED")


def downgrade() -> None:
    op.drop_index("ix_rate_limits_tat", table_name="rate_limits")
    op.drop_table("rate_limits")
