"""What each upstream MCP server of a gateway last listed (``upstream_listings``).

A gateway started while an upstream is down serves that upstream's tools from
here (its calls answer ``transient`` until it is back) instead of none at all.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "upstream_listings",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("listing", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("upstream_listings")
