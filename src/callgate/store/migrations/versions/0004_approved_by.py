"""Approvals say who may decide them: another person, or the requester too.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing approvals were filed under the four-eyes rule: "another" keeps them so.
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(
            sa.Column("approved_by", sa.String(), nullable=False, server_default="another")
        )


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("approved_by")
