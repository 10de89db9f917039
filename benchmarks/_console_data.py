"""A synthetic but realistic audit for ``console.py``, and loading it fast.

Not a benchmark itself. The records are shaped like the gate writes them
(``callgate.runtime.recording.audit_record`` and the approvals' ``decision``
records): a trace is one user's few calls; a call of a read tool writes one
``final`` record, a write tool an ``intent`` first; some high-risk calls are
parked for approval (a ``final`` with status ``pending_approval``), later decided
(a ``decision`` record by an approver of the tenant, then the resumed call) or,
when parked in the last 23 hours, still pending. Tenants, users and tools are
used with skewed (Zipf-like) frequencies; ``seq`` order is time order.

Rows go straight into the ``audit`` table the store's migrations created: the
stdlib ``sqlite3`` driver (``executemany``) on SQLite, asyncpg's binary
``COPY`` on PostgreSQL, in the format SQLAlchemy writes (UTC text times on
SQLite, JSON text). The indexes stay in place while loading, as in a store that
grew by appends.
"""

from __future__ import annotations

import bisect
import json
import math
import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert

from callgate.store.engine import create_engine
from callgate.store.tables import approvals, audit

SPAN = timedelta(days=30)
STILL_PENDING = timedelta(hours=23)
TENANTS, USERS, TOOLS, BOXES = 20, 2_000, 200, 20
PARKED = 0.1
"""Share of high-risk calls a policy rule parks for approval."""
ERRORS = (  # (outcome, share of finished calls, what the detail says)
    ("construction", 0.030, "ValidationError: 1 validation error for arguments"),
    ("permission", 0.012, "missing scope campaigns:write"),
    ("business_state", 0.010, "CampaignArchived: campaign C-{n} is archived"),
    ("transient", 0.008, "TimeoutError: upstream did not answer within 30 s"),
    ("unrecoverable", 0.0035, "KeyError: 'budget'\nTraceback (most recent call last): ..."),
    ("unknown_outcome", 0.0004, "ConnectionResetError: the upstream hung up mid-call"),
)
RARE_OUTCOME = "unknown_outcome"
AUDIT_COLUMNS = [c.name for c in audit.columns]
_EMITTED = [  # the order Synth.emit writes a row in
    *("seq", "call_id", "phase", "at", "trace_id", "tool", "user", "tenant", "session_id"),
    *("tool_version", "contract_hash", "args_hash", "risk", "decision", "decision_reason"),
    *("status", "outcome", "duration_ms", "attempts", "idempotency_key", "dropped_fields"),
    "detail",
]
if _EMITTED != AUDIT_COLUMNS:
    raise RuntimeError(f"the audit table changed; update Synth.emit: {AUDIT_COLUMNS}")
BATCH = 20_000


@dataclass(frozen=True)
class Tool:
    name: str
    risk: str
    version: str
    contract_hash: str
    median_ms: float


@dataclass
class World:
    """Who and what the records are about, and the values the pages filter by."""

    records: int
    end: datetime
    tenants: list[str]
    users: dict[str, list[str]]
    """Each tenant's users, most active first; the first three are its approvers."""
    tools: list[Tool]
    """Most used first."""
    sample_trace: str = ""
    """A trace of the largest tenant, from the middle of the audit."""
    middle_seq: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)
    decided: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def tenant(self) -> str:
        return self.tenants[0]

    def tool(self, rank: int) -> Tool:
        return self.tools[min(rank, len(self.tools) - 1)]


def make_world(records: int, seed: int) -> World:
    rng = random.Random(seed)
    tenants = [f"t{i:02d}" for i in range(TENANTS)]
    weights = _zipf(TENANTS, 0.9)
    users: dict[str, list[str]] = {}
    for tenant, weight in zip(tenants, weights, strict=True):
        users[tenant] = [
            f"u{j:04d}@{tenant}.example" for j in range(max(10, round(USERS * weight)))
        ]
    tools = []
    verbs = (
        "get",
        "list",
        "search",
        "create",
        "update",
        "delete",
        "pause",
        "export",
        "sync",
        "run",
    )
    for rank in range(TOOLS):
        box = f"box{rank % BOXES:02d}"
        name = f"{box}.{verbs[rank // BOXES]}_{rng.choice(('campaign', 'account', 'report', 'order', 'invoice'))}_{rank}"
        draw = rng.random()
        risk = (
            "read"
            if rank < 5 or draw < 0.55
            else "write_idempotent"
            if draw < 0.85
            else "write_high_risk"
        )
        tools.append(
            Tool(
                name=name,
                risk=risk,
                version=f"1.{rank % 4}",
                contract_hash=f"sha256:{rng.getrandbits(256):064x}",
                median_ms=math.exp(rng.uniform(math.log(3), math.log(400))),
            )
        )
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    return World(records=records, end=end, tenants=tenants, users=users, tools=tools)


def _zipf(n: int, s: float) -> list[float]:
    raw = [1 / (k + 1) ** s for k in range(n)]
    total = sum(raw)
    return [w / total for w in raw]


def _cumulative(weights: list[float]) -> list[float]:
    out, acc = [], 0.0
    for w in weights:
        acc += w
        out.append(acc)
    return out


def _pick(rng: random.Random, cumulative: list[float]) -> int:
    return bisect.bisect_left(cumulative, rng.random() * cumulative[-1])


class Synth:
    """Writes the records in ``seq`` order; :meth:`batches` hands them out."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        self.rng = random.Random(seed)
        self.start = (world.end - SPAN).timestamp()
        self.step = SPAN.total_seconds() / world.records
        self.tenant_cum = _cumulative(_zipf(TENANTS, 0.9))
        self.tool_cum = _cumulative(_zipf(TOOLS, 1.0))
        self.user_cum = {t: _cumulative(_zipf(len(u), 0.7)) for t, u in world.users.items()}
        self.error_cum = _cumulative([share for _, share, _ in ERRORS])
        self.seq = 0
        self.out: list[tuple[Any, ...]] = []

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        """Tuples in ``AUDIT_COLUMNS`` order, ``at`` an aware datetime, JSON as text."""
        world, rng = self.world, self.rng
        while self.seq < world.records:
            tenant = world.tenants[_pick(rng, self.tenant_cum)]
            user = world.users[tenant][_pick(rng, self.user_cum[tenant])]
            trace = f"{rng.getrandbits(128):032x}"
            session = f"mcp-{rng.getrandbits(64):016x}" if rng.random() < 0.6 else None
            if tenant == world.tenant and not world.sample_trace and self.seq >= world.records // 2:
                world.sample_trace, world.middle_seq = trace, self.seq
            for _ in range(1 + min(int(rng.expovariate(0.35)), 11)):
                tool = world.tools[_pick(rng, self.tool_cum)]
                self.call(tool, user, tenant, trace, session)
                if self.seq >= world.records:
                    break
            if len(self.out) >= BATCH:
                yield self.out
                self.out = []
        if self.out:
            yield self.out

    def emit(
        self,
        *,
        call_id: str,
        phase: str,
        trace_id: str,
        tool: str,
        user: str,
        tenant: str,
        session_id: str | None = None,
        tool_version: str | None = None,
        contract_hash: str | None = None,
        args_hash: str | None = None,
        risk: str | None = None,
        decision: str | None = None,
        decision_reason: str | None = None,
        status: str | None = None,
        outcome: str | None = None,
        duration_ms: float | None = None,
        attempts: int = 0,
        idempotency_key: str | None = None,
        detail: str = "{}",
    ) -> datetime:
        """Append one record (unless the audit is full); its time."""
        at = datetime.fromtimestamp(self.start + (self.seq + self.rng.random()) * self.step, UTC)
        if self.seq >= self.world.records:
            return at
        self.seq += 1
        self.world.counts[phase] = self.world.counts.get(phase, 0) + 1
        self.out.append(
            (
                self.seq,
                call_id,
                phase,
                at,
                trace_id,
                tool,
                user,
                tenant,
                session_id,
                tool_version,
                contract_hash,
                args_hash,
                risk,
                decision,
                decision_reason,
                status,
                outcome,
                duration_ms,
                attempts,
                idempotency_key,
                "[]",  # dropped_fields
                detail,
            )
        )
        return at

    def call(self, tool: Tool, user: str, tenant: str, trace: str, session: str | None) -> None:
        """One governed call's records (and, when parked, its approval and decision)."""
        rng = self.rng
        common: dict[str, Any] = {
            "call_id": f"call_{rng.getrandbits(128):032x}",
            "trace_id": trace,
            "tool": tool.name,
            "user": user,
            "tenant": tenant,
            "session_id": session,
            "tool_version": tool.version,
            "contract_hash": tool.contract_hash,
            "args_hash": f"sha256:{rng.getrandbits(256):064x}",
            "risk": tool.risk,
            "decision": "allow",
            "decision_reason": "rule reads: allowed" if tool.risk == "read" else None,
        }
        if tool.risk != "read" and rng.random() < 0.3:
            common["idempotency_key"] = f"idem-{rng.getrandbits(64):016x}"
        duration = round(rng.lognormvariate(math.log(tool.median_ms), 0.8), 3)
        if tool.risk == "write_high_risk" and rng.random() < PARKED:
            resumed = self.park(common, tool, duration)
            if resumed is None:
                return
            common = resumed
        if tool.risk != "read":
            self.emit(**common, phase="intent")
        outcome, detail, draw = "ok", "{}", rng.random()
        for (kind, _, says), bound in zip(ERRORS, self.error_cum, strict=True):
            if draw < bound:
                outcome = kind
                detail = json.dumps({"exception": says.format(n=rng.randrange(10_000))})
                break
        self.emit(
            **common,
            phase="final",
            status="ok" if outcome == "ok" else "error",
            outcome=outcome,
            duration_ms=duration,
            attempts=2 if outcome == "transient" else 1,
            detail=detail,
        )

    def park(self, common: dict[str, Any], tool: Tool, duration: float) -> dict[str, Any] | None:
        """A call parked for approval: the resumed call's fields once approved, else None."""
        rng, world = self.rng, self.world
        approval_id = f"apr_{rng.getrandbits(72):018x}"
        parked = {
            **common,
            "decision": "require_approval",
            "decision_reason": "rule big-changes: a second person approves",
        }
        created = self.emit(
            **parked,
            phase="final",
            status="pending_approval",
            outcome="pending_approval",
            duration_ms=round(duration / 10, 3),
            attempts=0,
            detail=json.dumps({"approval_filed": approval_id}),
        )
        approval = _approval(rng, approval_id, common, tool, created)
        if world.end - created < STILL_PENDING:
            world.pending.append(approval)
            return None
        tenant, user = common["tenant"], common["user"]
        approver = next(a for a in world.users[tenant][:4] if a != user)
        state = "approved" if rng.random() < 0.85 else "denied"
        approval.update(
            state="used" if state == "approved" else "denied",
            decided_by=approver,
            decided_at=created + timedelta(minutes=5),
        )
        world.decided.append(approval)
        self.emit(
            call_id=approval_id,
            phase="decision",
            trace_id=common["call_id"],
            tool=tool.name,
            user=approver,
            tenant=tenant,
            session_id=common["session_id"],
            args_hash=common["args_hash"],
            decision=state,
            status="decision",
            outcome=state,
            detail=json.dumps(
                {"requested_by": user, "approval_id": approval_id, "parked_call": common["call_id"]}
            ),
        )
        if state == "denied":
            return None
        return {
            **common,
            "call_id": f"call_{rng.getrandbits(128):032x}",
            "decision_reason": f"approved by {approver} ({approval_id})",
        }


def _approval(
    rng: random.Random, approval_id: str, common: dict[str, Any], tool: Tool, created: datetime
) -> dict[str, Any]:
    campaign = f"C-{rng.randrange(1000, 9999)}"
    before = rng.randrange(100, 5000)
    after = before + rng.randrange(100, 2000)
    arguments = {"campaign_id": campaign, "new_daily_budget": after}
    return {
        "id": approval_id,
        "tool": tool.name,
        "arguments": arguments,
        "model_arguments": arguments,
        "args_hash": common["args_hash"],
        "user": common["user"],
        "tenant": common["tenant"],
        "session_id": common["session_id"],
        "call_id": common["call_id"],
        "reason": "rule big-changes: a second person approves budget increases",
        "rule": "big-changes",
        "created_at": created,
        "expires_at": created + timedelta(hours=24),
        "state": "pending",
        "impact": {"daily_budget_before": before, "daily_budget_after": after, "name": campaign},
        "approvers": [{"rule": "big-changes", "roles": ["approver"], "users": []}],
    }


# loading ----------------------------------------------------------------------
def _sqlite_row(row: tuple[Any, ...], at: int) -> tuple[Any, ...]:
    values = list(row)
    values[at] = str(values[at])  # as the store's audit writer stores it (sqlite3's adapter)
    return tuple(values)


def load_sqlite(path: str, world: World, seed: int) -> float:
    """Append the records to the SQLite file at ``path``; seconds taken."""
    began = time.perf_counter()
    at = AUDIT_COLUMNS.index("at")
    quoted = ", ".join(f'"{c}"' for c in AUDIT_COLUMNS)  # "user" is an SQL keyword
    sql = f"INSERT INTO audit ({quoted}) VALUES ({', '.join('?' * len(AUDIT_COLUMNS))})"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA cache_size=-1000000")  # this connection only: 1 GB
        for batch in Synth(world, seed).batches():
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, [_sqlite_row(r, at) for r in batch])
            conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return time.perf_counter() - began


async def load_postgres(url: str, schema: str, world: World, seed: int) -> float:
    """Append the records to ``schema``'s audit with binary COPY; seconds taken.

    Then ``VACUUM ANALYZE``, as autovacuum does after a table grows by 10%.
    """
    import asyncpg  # type: ignore[import-not-found]

    began = time.perf_counter()
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    try:
        for batch in Synth(world, seed).batches():
            await conn.copy_records_to_table(
                "audit", records=batch, columns=AUDIT_COLUMNS, schema_name=schema
            )
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('audit', 'seq'), (SELECT max(seq) FROM audit))"
        )
        await conn.execute("VACUUM ANALYZE audit")
    finally:
        await conn.close()
    return time.perf_counter() - began


async def load_approvals(url: str, schema: str | None, world: World) -> None:
    """The pending and decided approvals, with SQLAlchemy Core (a few thousand rows)."""
    engine = create_engine(url, schema=schema)
    try:
        async with engine.begin() as conn:
            rows = world.pending + world.decided
            for i in range(0, len(rows), 1000):
                await conn.execute(insert(approvals), rows[i : i + 1000])
    finally:
        await engine.dispose()
