"""Approvals carry their approver sets (roles, named users, the resource owner).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Approvals filed before named no approvers: anyone of the tenant but the
    # requester, which is what the empty list means.
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("approvers", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("approvers")
