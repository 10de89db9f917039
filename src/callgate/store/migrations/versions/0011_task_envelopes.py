"""Tasks keep the Envelope their call ended with (``tasks.envelope``).

``tasks/get`` renders a finished task from it, as ``tools/call`` renders any
Envelope; tasks that ended before keep their wire result in ``result``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("envelope", sa.JSON(none_as_null=True)))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("envelope")
