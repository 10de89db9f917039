"""Tasks that wait for input (tasks/update) and leases their runners renew.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    # A task of an older version has no lease: the first server to start fails it
    # if it is still active, as before (its runner is gone with the old process).
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("arguments", sa.JSON()))
        batch.add_column(sa.Column("input_requests", sa.JSON()))
        batch.add_column(sa.Column("responses", sa.JSON()))
        batch.add_column(sa.Column("request_state", sa.Text()))
        batch.add_column(sa.Column("lease_until", _UTC))
        batch.drop_index("ix_tasks_status_owner")
        batch.create_index("ix_tasks_status_lease_until", ["status", "lease_until"])


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_index("ix_tasks_status_lease_until")
        batch.create_index("ix_tasks_status_owner", ["status", "owner"])
        for column in ("lease_until", "request_state", "responses", "input_requests", "arguments"):
            batch.drop_column(column)
