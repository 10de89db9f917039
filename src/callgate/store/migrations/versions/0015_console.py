"""The web console: indexes for its audit filters, its inbox's decided requests,
runs and tasks by tenant, and its sign-in sessions (``console_sessions``).

Each audit index serves one filter read newest first (``ORDER BY seq DESC``), so
a page of a million-record audit reads a page of index entries;
docs/console-queries.md shows the query plans.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out rather than imported from callgate.store.tables: a migration is a
# frozen record of one schema version and must not follow later edits.
_UTC = sa.DateTime(timezone=True)
_AUDIT_INDEXES: tuple[tuple[str, ...], ...] = (
    ("tenant", "seq"),
    ("tool", "seq"),
    ("user", "seq"),
    ("outcome", "seq"),
    ("trace_id",),
    ("at", "seq"),
)
# The inbox: a tenant's pending requests; a tenant's (an admin: every) latest ones.
_APPROVAL_INDEXES: tuple[tuple[str, ...], ...] = (
    ("tenant", "state", "created_at"),
    ("tenant", "created_at"),
    ("created_at",),
)


def upgrade() -> None:
    for columns in _AUDIT_INDEXES:
        op.create_index(f"ix_audit_{'_'.join(columns)}", "audit", list(columns))
    for columns in _APPROVAL_INDEXES:
        op.create_index(f"ix_approvals_{'_'.join(columns)}", "approvals", list(columns))
    op.create_index("ix_agent_runs_tenant_created_at", "agent_runs", ["tenant", "created_at"])
    op.create_index("ix_tasks_tenant_created_at", "tasks", ["tenant", "created_at"])
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("principal", sa.JSON(), nullable=False),
        sa.Column("csrf", sa.String(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_console_sessions"),
    )
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_console_sessions_expires_at", table_name="console_sessions")
    op.drop_table("console_sessions")
    op.drop_index("ix_tasks_tenant_created_at", table_name="tasks")
    op.drop_index("ix_agent_runs_tenant_created_at", table_name="agent_runs")
    for columns in reversed(_APPROVAL_INDEXES):
        op.drop_index(f"ix_approvals_{'_'.join(columns)}", table_name="approvals")
    for columns in reversed(_AUDIT_INDEXES):
        op.drop_index(f"ix_audit_{'_'.join(columns)}", table_name="audit")
