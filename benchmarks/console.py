"""The web console over a million audit records: the approvals inbox, the audit
list under each filter, and the per-tool figures, on SQLite and PostgreSQL (issue 17).

    python benchmarks/console.py [--records 1000000] [--store sqlite|postgres|both]
                                 [--rounds 30] [--explain]

Each store is fresh (migrated by ``SQLStore.open()``) and filled with synthetic
records shaped like the gate writes them (``_console_data.py``: 20 tenants, 200
tools, 2,000 users, 30 days), a few hundred pending approvals and the decided
ones. Then the real console (``console_app`` over a ``Gate`` serving the 200
tools, on that store) answers signed-in requests through ``httpx.ASGITransport``.
A page's time is the server's: from the request reaching the app to its last
body byte leaving it (an ASGI wrapper), so the HTTP client's own work is not in
it; "store" is the part spent in the store's methods (query and rows made
records). Pages take turns, one request each per round, after warm-up rounds.

``--explain`` prints each audit filter's query plan (SQLite: ``EXPLAIN QUERY
PLAN``; PostgreSQL: ``EXPLAIN (ANALYZE, BUFFERS)``) of the statement
``audit_statement`` builds, with the values the page used, and the tools page's
(``tool_figures_statement``: the per-tool figures aggregated in SQL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from _console_data import (
    RARE_OUTCOME,
    World,
    load_approvals,
    load_postgres,
    load_sqlite,
    make_world,
)
from _harness import POSTGRES_URL, bench_store, machine, postgres_unreachable, table
from sqlalchemy.dialects import postgresql, sqlite

from callgate import Gate, Principal, Toolbox
from callgate.access import record_scope
from callgate.console.web import console_app
from callgate.store import SQLStore, Store
from callgate.store.console_records import AuditQuery
from callgate.store.sql_console import audit_statement, tool_figures_statement

PAGE = 50
BACKENDS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
EXPLAINED = ("/console/audit", "/console/tools")
TIMED = ("search_audit", "list_approvals", "tool_figures", "get_console_session")


@dataclass(frozen=True, eq=False)
class Case:
    """One page as one reader asks for it."""

    name: str
    who: str
    path: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.path + (f"?{urlencode(self.params)}" if self.params else "")


@dataclass
class Sample:
    server: list[float] = field(default_factory=list)
    store: list[float] = field(default_factory=list)
    rows: int = 0


def principals(world: World) -> dict[str, Principal]:
    tenant = world.tenant
    return {
        "tenant approver": Principal(world.users[tenant][0], tenant, roles={"approver"}),
        "tenant auditor": Principal(f"auditor@{tenant}.example", tenant, roles={"auditor"}),
        "admin": Principal("root@ops.example", "ops", roles={"admin"}),
        "member (own calls)": Principal(world.users[tenant][1], tenant),
    }


def cases(world: World) -> list[Case]:
    """The pages timed, with filter values that exist in ``world``'s audit."""
    mid, tool = world.end - timedelta(days=15), world.tool(20).name
    since = (world.end - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    window = {
        "since": (mid - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        "until": mid.strftime("%Y-%m-%dT%H:%M"),
    }
    auditor, admin, audit = "tenant auditor", "admin", "/console/audit"
    return [
        Case("inbox", "tenant approver", "/console/approvals"),
        Case("inbox", admin, "/console/approvals"),
        Case("audit, no filter", auditor, audit),
        Case("audit, no filter", admin, audit),
        Case("audit, no filter", "member (own calls)", audit),
        Case("audit, tool", auditor, audit, {"tool": tool}),
        Case("audit, tool", admin, audit, {"tool": tool}),
        Case("audit, user", auditor, audit, {"user": world.users[world.tenant][40]}),
        Case("audit, status=error", auditor, audit, {"status": "error"}),
        Case(f"audit, outcome={RARE_OUTCOME}", auditor, audit, {"outcome": RARE_OUTCOME}),
        Case(f"audit, outcome={RARE_OUTCOME}", admin, audit, {"outcome": RARE_OUTCOME}),
        Case("audit, trace_id", auditor, audit, {"trace_id": world.sample_trace}),
        Case("audit, one day 15 days ago", auditor, audit, window),
        Case("audit, one day 15 days ago", admin, audit, window),
        Case("audit, since one day ago", auditor, audit, {"since": since}),
        Case("audit, until 15 days ago (no since)", auditor, audit, {"until": window["until"]}),
        Case("audit, until 15 days ago (no since)", admin, audit, {"until": window["until"]}),
        Case(
            "audit, until 15 days ago (no since)",
            "member (own calls)",
            audit,
            {"until": window["until"]},
        ),
        Case(
            "audit, until 15 days ago, next page",
            admin,
            audit,
            {"until": window["until"], "before": str(world.middle_seq)},
        ),
        Case("audit, page at the middle", auditor, audit, {"before": str(world.middle_seq)}),
        Case("audit, page at the middle", admin, audit, {"before": str(world.middle_seq)}),
        Case("audit, tool + status=error", auditor, audit, {"tool": tool, "status": "error"}),
        Case("audit, tenant t05", admin, audit, {"tenant": world.tenants[5]}),
        Case("audit, risk=write_high_risk", admin, audit, {"risk": "write_high_risk"}),
        Case("audit, status=pending_approval", auditor, audit, {"status": "pending_approval"}),
        Case("audit, status=pending_approval", admin, audit, {"status": "pending_approval"}),
        Case("audit, phase=decision", admin, audit, {"phase": "decision"}),
        Case("audit, phase=late (matches none)", admin, audit, {"phase": "late"}),
        Case(
            "audit, status=pending_input (matches none)", admin, audit, {"status": "pending_input"}
        ),
        Case(
            "audit, status=pending_input (matches none)",
            auditor,
            audit,
            {"status": "pending_input"},
        ),
        Case("tools (figures of the last day)", auditor, "/console/tools"),
        Case("tools (figures of the last day)", admin, "/console/tools"),
    ]


def toolboxes(world: World) -> list[Toolbox]:
    """The 200 tools the records name, with the risk each was recorded with."""

    async def tool(campaign_id: str) -> dict[str, str]:
        """A stand-in: the console reads the specs, never calls them."""
        return {"campaign_id": campaign_id}

    boxes: dict[str, Toolbox] = {}
    hints = {
        "read": {"read_only": True},
        "write_idempotent": {"read_only": False, "destructive": False, "idempotent": True},
        "write_high_risk": {"read_only": False, "destructive": True, "idempotent": False},
    }
    for spec in world.tools:
        box, name = spec.name.split(".")
        boxes.setdefault(box, Toolbox(box, description=f"Stand-in toolbox {box}."))
        boxes[box].add(tool, name=name, open_world=False, **hints[spec.risk])  # type: ignore[arg-type]
    return list(boxes.values())


class Timed:
    """ASGI wrapper: the server time of the last response (to its last body byte)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        began = time.perf_counter()

        async def timed_send(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last = time.perf_counter() - began
            await send(message)

        await self.app(scope, receive, timed_send)


class StoreClock:
    """Time spent in, and rows returned by, the store methods the pages use."""

    def __init__(self, store: Store) -> None:
        self.seconds, self.rows = 0.0, 0
        for name in TIMED:
            setattr(store, name, self._wrap(getattr(store, name)))

    def _wrap(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                result = await method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began
            # A list's records; tool_figures' tools (one entry a tool, however many records).
            self.rows += len(result) if isinstance(result, (list, dict)) else 0
            return result

        return timed

    def reset(self) -> None:
        self.seconds, self.rows = 0.0, 0


async def measure(
    gate: Gate, world: World, rounds: int, warmup: int
) -> tuple[list[Case], dict[Case, Sample]]:
    app = console_app(gate)
    timed = Timed(app)
    clock = StoreClock(gate.store)
    who = principals(world)
    pages = cases(world)
    samples = {case: Sample() for case in pages}
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for name, principal in who.items():
            token = await app.state.console.sessions.mint_link(principal)
            transport = httpx.ASGITransport(app=timed)
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765")
            )
            await client.get(f"/console/login?token={token}")
            done = await client.post("/console/login", data={"token": token})
            if done.status_code != 303:
                raise RuntimeError(f"sign-in of {name} failed: {done.status_code}")
            clients[name] = client
        for r in range(warmup + rounds):
            shift = r % len(pages)
            for case in pages[shift:] + pages[:shift]:
                clock.reset()
                response = await clients[case.who].get(case.url)
                if response.status_code != 200:
                    raise RuntimeError(f"{case.url}: {response.status_code} {response.text[:300]}")
                if r >= warmup:
                    sample = samples[case]
                    sample.server.append(timed.last)
                    sample.store.append(clock.seconds)
                    sample.rows = clock.rows
    return pages, samples


def query_of(case: Case, world: World) -> AuditQuery:
    """The AuditQuery the audit page runs for ``case`` (its first page)."""
    values: dict[str, Any] = {k: v for k, v in case.params.items() if k not in ("since", "until")}
    if "before" in values:
        values["before"] = int(values["before"])
    for name in ("since", "until"):
        if name in case.params:
            values[name] = _utc(case.params[name])
    who = principals(world)[case.who]
    return AuditQuery(scope=record_scope(who), limit=PAGE + 1, **values)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def explain_sqlite(path: str, pages: Sequence[Case], world: World) -> list[str]:
    out = []
    conn = sqlite3.connect(path)
    try:
        for case in pages:
            if case.path not in EXPLAINED:
                continue
            sql = _literal(case, world, sqlite.dialect())
            plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
            depth: dict[int, int] = {0: 0}
            lines = []
            for node, parent, _, detail in plan:
                depth[node] = depth.get(parent, 0) + 1
                lines.append("  " * (depth[node] - 1) + detail)
            times = []
            for _ in range(5):
                began = time.perf_counter()
                conn.execute(sql).fetchall()
                times.append(time.perf_counter() - began)
            out += _explained(
                case, sql, lines, f"query alone: {statistics.median(times) * 1e3:.2f} ms"
            )
    finally:
        conn.close()
    return out


async def explain_postgres(schema: str, pages: Sequence[Case], world: World) -> list[str]:
    import asyncpg  # type: ignore[import-not-found]

    out = []
    conn = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
    try:
        for case in pages:
            if case.path not in EXPLAINED:
                continue
            sql = _literal(case, world, postgresql.dialect())
            rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            lines = [row[0] for row in rows]
            out += _explained(case, sql, lines, "")
    finally:
        await conn.close()
    return out


def _literal(case: Case, world: World, dialect: Any) -> str:
    if case.path == "/console/tools":
        scope = record_scope(principals(world)[case.who])
        statement = tool_figures_statement(scope, datetime.now(UTC))
    else:
        statement = audit_statement(query_of(case, world))
    sql = str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    return " ".join(sql.split())


def _explained(case: Case, sql: str, plan: list[str], note: str) -> list[str]:
    if sql.startswith("WITH "):  # the tools page's statement, whole
        shown = sql
    else:
        where = (
            sql[sql.index(" WHERE ") + 1 :] if " WHERE " in sql else sql[sql.index("ORDER BY") :]
        )
        shown = f"... FROM audit {where}"
    return [
        f"#### {case.name} ({case.who})",
        "",
        "```",
        shown,
        *(f"  {line}" for line in plan),
        *([note] if note else []),
        "```",
        "",
    ]


def figures(pages: Sequence[Case], samples: dict[Case, Sample]) -> list[list[str]]:
    rows = []
    for case in pages:
        s = samples[case]
        server = sorted(s.server)
        p95 = server[min(len(server) - 1, max(0, round(0.95 * len(server)) - 1))]
        rows.append(
            [
                case.name,
                case.who,
                f"{statistics.median(server) * 1e3:.1f}",
                f"{p95 * 1e3:.1f}",
                f"{statistics.median(s.store) * 1e3:.1f}",
                f"{s.rows:,}",
            ]
        )
    return rows


async def run_backend(kind: str, args: argparse.Namespace, workdir: Path) -> list[list[str]]:
    async with bench_store(kind, workdir) as (store, where):
        assert isinstance(store, SQLStore)
        schema = where if kind == "postgres" else None
        migrator = SQLStore(store.url, schema=schema)
        await migrator.open()
        await migrator.close()
        world = make_world(args.records, args.seed)
        if kind == "sqlite":
            seconds = await asyncio.to_thread(load_sqlite, where, world, args.seed)
        else:
            assert schema is not None
            seconds = await load_postgres(POSTGRES_URL, schema, world, args.seed)
        await load_approvals(store.url, schema, world)
        size = _size(where) if kind == "sqlite" else await _pg_size(schema or "")
        print(
            f"\n## {BACKENDS[kind]}: {args.records:,} audit records loaded in {seconds:.1f} s "
            f"({args.records / seconds:,.0f}/s; {size})\n"
        )
        phases = ", ".join(f"{k} {v:,}" for k, v in sorted(world.counts.items()))
        print(
            f"phases: {phases}; approvals: {len(world.pending):,} pending, "
            f"{len(world.decided):,} decided; records in the last day: "
            f"{args.records // 30:,} (all tenants)"
        )
        async with Gate(toolboxes(world), store=store) as gate:
            pages, samples = await measure(gate, world, args.rounds, args.warmup)
        rows = figures(pages, samples)
        print(f"\n{args.rounds} requests a page after {args.warmup} warm-up rounds; {machine()}\n")
        headers = ["page", "as", "p50 ms", "p95 ms", "store p50 ms", "rows read"]
        print(table(headers, rows, numeric=frozenset({2, 3, 4, 5})))
        if args.explain:
            print(f"\n### Query plans ({BACKENDS[kind]})\n")
            if kind == "sqlite":
                plans = explain_sqlite(where, pages, world)
            else:
                plans = await explain_postgres(schema or "", pages, world)
            print("\n".join(plans))
        return rows


def _size(path: str) -> str:
    return f"file {Path(path).stat().st_size / 2**20:,.0f} MB"


async def _pg_size(schema: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        table_bytes = await conn.fetchval("SELECT pg_table_size($1::regclass)", f"{schema}.audit")
        index_bytes = await conn.fetchval("SELECT pg_indexes_size($1::regclass)", f"{schema}.audit")
    finally:
        await conn.close()
    return f"table {table_bytes / 2**20:,.0f} MB, indexes {index_bytes / 2**20:,.0f} MB"


async def main_async(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    print(f"machine: {machine()}")
    if "postgres" in kinds:
        why = await postgres_unreachable()
        if why is not None:
            print(f"PostgreSQL skipped: {why}")
            kinds.remove("postgres")
    results: dict[str, list[list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="callgate-console-bench-") as tmp:
        for kind in kinds:
            results[kind] = await run_backend(kind, args, Path(tmp))
    if len(results) > 1:
        print("\n## Side by side (server time, ms)\n")
        first = next(iter(results.values()))
        headers = ["page", "as"] + [f"{BACKENDS[k]} {p}" for k in results for p in ("p50", "p95")]
        rows = [
            [row[0], row[1], *(c for k in results for c in results[k][i][2:4])]
            for i, row in enumerate(first)
        ]
        print(table(headers, rows, numeric=frozenset(range(2, len(headers)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="audit records to load")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=30, help="timed requests per page")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--explain", action="store_true", help="print the audit query plans")
    args = parser.parse_args()
    if args.records < 1_000:
        parser.error("--records must be at least 1,000 (the pages need filter values to find)")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
