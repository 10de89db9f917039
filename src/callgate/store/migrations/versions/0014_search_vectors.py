"""Tool search's cache of embedding vectors (``search_vectors``).

One row per (model, digest of the text embedded): rebuilding the search index
after a restart reads the vectors back instead of encoding every tool again.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "search_vectors",
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        # BLOB on SQLite, BYTEA on PostgreSQL.
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("model", "digest", name="pk_search_vectors"),
    )


def downgrade() -> None:
    op.drop_table("search_vectors")
