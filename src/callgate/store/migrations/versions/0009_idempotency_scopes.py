"""Idempotency scopes as JSON arrays: no tenant and tenant "-" no longer share keys.

Scopes were ``tenant/tool/key`` with ``-`` for no tenant, so a tenantless caller
and tenant ``-`` shared keys (and ``/`` inside a tenant or key could make two
requests meet too). They are now ``["tenant","tool","key"]`` (``null`` for no
tenant). Each stored scope is rewritten with the tenant and tool its call was
audited with, so no key changes owner: a resent key still replays (never runs
twice), and nobody starts replaying another caller's answer. A claim whose call
left no audit record yet (a read still running when the gateway stopped) is
parsed instead: ``-`` read as no tenant, the tool up to the next ``/``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_idempotency = sa.table("idempotency", sa.column("scope", sa.String), sa.column("call_id"))
_audit = sa.table(
    "audit", sa.column("seq"), sa.column("call_id"), sa.column("tenant"), sa.column("tool")
)


def _scope(tenant: str | None, tool: str, key: str) -> str:
    # As runtime/idempotency.py's scope_for at this revision (kept here: a
    # migration must not change when the code does).
    return json.dumps([tenant, tool, key], ensure_ascii=False, separators=(",", ":"))


def _is_new(scope: str) -> bool:
    try:
        parts = json.loads(scope)
    except ValueError:
        return False
    return isinstance(parts, list) and len(parts) == 3


def _parsed(bind: sa.Connection, scope: str, call_id: str) -> tuple[str | None, str, str]:
    audited = bind.execute(
        sa.select(_audit.c.tenant, _audit.c.tool)
        .where(_audit.c.call_id == call_id)
        .order_by(_audit.c.seq)
        .limit(1)
    ).first()
    if audited is not None:
        tenant, tool = audited
        prefix = f"{tenant or '-'}/{tool}/"
        if scope.startswith(prefix):
            return tenant, tool, scope[len(prefix) :]
    tenant_part, _, rest = scope.partition("/")
    tool, _, key = rest.partition("/")
    return (None if tenant_part == "-" else tenant_part), tool, key


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.select(_idempotency.c.scope, _idempotency.c.call_id)).all()
    for scope, call_id in rows:
        if _is_new(scope):
            continue
        new = _scope(*_parsed(bind, scope, call_id))
        bind.execute(sa.update(_idempotency).where(_idempotency.c.scope == scope).values(scope=new))


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.select(_idempotency.c.scope)).all()
    for (scope,) in rows:
        if not _is_new(scope):
            continue
        tenant, tool, key = json.loads(scope)
        old = f"{tenant or '-'}/{tool}/{key}"
        bind.execute(sa.update(_idempotency).where(_idempotency.c.scope == scope).values(scope=old))
