"""An index on results.expires_at: expired full results are deleted as new ones come.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_results_expires_at", "results", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_results_expires_at", table_name="results")
