"""Indexes for the console's last slow audit filters (docs/console-queries.md).

- ``(status, seq)``, ``(risk, seq)``, ``(phase, seq)``: a value that few records
  have, or none, no longer reads the whole audit (158-221 ms at a million
  records), each read newest first.
- ``(tenant, at, seq)``: a tenant's records before a time (``until`` without
  ``since``), newest first by time, start at that time.

Each costs one more index entry per audit record written (docs/benchmarks.md,
"Audit indexes: what they cost a write").

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (("status", "seq"), ("risk", "seq"), ("phase", "seq"), ("tenant", "at", "seq"))


def upgrade() -> None:
    for columns in INDEXES:
        op.create_index(f"ix_audit_{'_'.join(columns)}", "audit", list(columns))


def downgrade() -> None:
    for columns in INDEXES:
        op.drop_index(f"ix_audit_{'_'.join(columns)}", table_name="audit")
