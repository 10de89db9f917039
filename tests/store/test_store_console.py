"""The console's reads on every store kind: time filters with records whose
``seq`` order is not their time order (a late commit, a backlog written after an
outage: the SQL store narrows time filters by ``seq``, sql_console.py, and must
still find exactly the records of the window), and the per-tool figures the SQL
store aggregates in its query."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from callgate.store import AuditRecord, MemoryStore, Store
from callgate.store.console_records import AuditQuery, Scope, ToolFigures, ToolWindows
from tests.store.conftest import Database

pytestmark = pytest.mark.anyio

Audit = Callable[..., AuditRecord]
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# Minutes after T0 of the records in append (seq) order: mostly rising, with a
# record committed late (minute 15 after minute 50) and a backlog of old ones.
MINUTES = [0, 10, 20, 30, 40, 50, 15, 60, 70, 5, 25, 80]


async def _fill(store: Store, audit: Audit) -> None:
    for i, minute in enumerate(MINUTES):
        await store.append_audit(
            [
                audit(
                    call_id=f"c{i}",
                    at=T0 + timedelta(minutes=minute),
                    tenant="acme" if i % 3 else "globex",
                    status="ok" if i % 2 else "error",
                    duration_ms=float(minute),
                )
            ]
        )


def _expected(since: float, until: float | None, tenant: str | None = None) -> list[str]:
    ids = [
        f"c{i}"
        for i, minute in enumerate(MINUTES)
        if since <= minute
        and (until is None or minute < until)
        and (tenant is None or ("acme" if i % 3 else "globex") == tenant)
    ]
    return ids[::-1]  # newest first by seq


# Bounds between records' times (half minutes): a record exactly at a bound is
# another matter (on a SQLite file the audit writer stores whole seconds as
# "...12:10:00+00:00", which sorts before the bound "...12:10:00.000000").
@pytest.mark.parametrize(
    ("since", "until"), [(9.5, 45.5), (-0.5, 30.5), (12.5, 28.5), (45.5, 200.5), (90.5, 99.5)]
)
async def test_a_time_window_finds_exactly_its_records_newest_first_by_seq(
    store: Store, audit: Audit, since: float, until: float
) -> None:
    await _fill(store, audit)
    window = {"since": T0 + timedelta(minutes=since), "until": T0 + timedelta(minutes=until)}
    every = await store.search_audit(AuditQuery(scope=Scope(every_tenant=True), **window))
    assert [r.call_id for r in every] == _expected(since, until)
    acme = await store.search_audit(AuditQuery(scope=Scope(tenant="acme"), **window))
    assert [r.call_id for r in acme] == _expected(since, until, "acme")


async def test_pages_of_a_time_window_follow_the_cursor(store: Store, audit: Audit) -> None:
    await _fill(store, audit)
    query = AuditQuery(
        scope=Scope(every_tenant=True),
        since=T0 + timedelta(minutes=4.5),
        until=T0 + timedelta(minutes=75.5),
        limit=3,
    )
    seen: list[str] = []
    page = await store.search_audit(query)
    while page:
        seen += [r.call_id for r in page]
        page = await store.search_audit(replace(query, before=page[-1].seq))
    assert seen == _expected(4.5, 75.5)


def _by_time(until: float = 1e9, tenant: str | None = None, since: float = -1) -> list[str]:
    ids = [
        (minute, i)
        for i, minute in enumerate(MINUTES)
        if since <= minute < until and (tenant is None or ("acme" if i % 3 else "globex") == tenant)
    ]
    return [f"c{i}" for _, i in sorted(ids, reverse=True)]  # newest first by time


@pytest.mark.parametrize(
    ("bound", "minutes"),
    [("until", 4.5), ("until", 22.5), ("until", 55.5), ("until", 200.5), ("since", 12.5)],
)
async def test_one_time_bound_lists_records_newest_first_by_time_a_page_at_a_time(
    store: Store, audit: Audit, bound: str, minutes: float
) -> None:
    """``since`` or ``until`` alone reads in time order from the bound: the late
    commit (minute 15) and the backlog (5, 25) sit among the records of their time."""
    await _fill(store, audit)
    every = AuditQuery(scope=Scope(every_tenant=True), **{bound: T0 + timedelta(minutes=minutes)})
    expected = {bound: minutes}
    assert every.by_time
    assert [r.call_id for r in await store.search_audit(every)] == _by_time(**expected)
    acme = replace(every, scope=Scope(tenant="acme"), limit=2)
    seen: list[str] = []
    page = await store.search_audit(acme)
    while page:
        assert len(page) <= 2
        seen += [r.call_id for r in page]
        page = await store.search_audit(replace(acme, before=page[-1].seq))
    assert seen == _by_time(tenant="acme", **expected)


async def test_a_time_ordered_page_after_an_unknown_record_is_empty(
    store: Store, audit: Audit
) -> None:
    await _fill(store, audit)
    query = AuditQuery(scope=Scope(every_tenant=True), until=T0 + timedelta(hours=2))
    assert len(await store.search_audit(query)) == len(MINUTES)
    assert await store.search_audit(replace(query, before=10_000)) == []
    # A cursor newer than until: the page starts at until.
    early = replace(query, until=T0 + timedelta(minutes=22.5))
    newest = (await store.search_audit(query))[0]
    after_newest = await store.search_audit(replace(early, before=newest.seq))
    assert [r.call_id for r in after_newest] == _by_time(22.5)
    # In seq order, a cursor past the newest record is just the start.
    seq_order = replace(query, until=None, before=10_000)
    assert len(await store.search_audit(seq_order)) == len(MINUTES)


async def test_figures_of_the_day_keep_late_commits_and_leave_old_ones_out(
    store: Store, audit: Audit
) -> None:
    await _fill(store, audit)
    # The day starts at minute 11.5: minutes 20 ... 80, 15 (committed late) and 25
    # (a backlog) are in it; 0, 10 and 5 are not. Even indexes are errors.
    now = T0 + timedelta(days=1, minutes=11.5)
    every = await store.tool_figures(Scope(every_tenant=True), now=now)
    day = ToolFigures(calls=9, errors=(("error", 5),), p50_ms=40.0, p95_ms=80.0)
    assert every == {"weather_get": ToolWindows(hour=ToolFigures(), day=day)}
    acme = await store.tool_figures(Scope(tenant="acme"), now=now)
    day = ToolFigures(calls=7, errors=(("error", 4),), p50_ms=50.0, p95_ms=80.0)
    assert acme == {"weather_get": ToolWindows(hour=ToolFigures(), day=day)}


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


async def test_tool_figures_count_errors_by_kind_and_take_percentiles_by_nearest_rank(
    store: Store, audit: Audit
) -> None:
    """The same exact figures on every store kind (so the stores agree)."""
    rows: list[tuple[str, float, str, str | None, float | None, str]] = [
        # tool, minutes ago, status, outcome, duration, tenant
        ("shop.find", 10, "ok", "ok", 12.0, "acme"),
        ("shop.find", 20, "error", "validation", 3.0, "acme"),
        ("shop.find", 30, "ok", "ok", None, "acme"),  # counted, no duration
        ("shop.find", 180, "error", "validation", 40.0, "acme"),
        ("shop.find", 300, "error", "permission", 7.0, "acme"),
        ("shop.find", 1200, "ok", "ok", 100.0, "acme"),
        ("shop.find", 1500, "ok", "ok", 1.0, "acme"),  # 25 h ago: not in the day
        ("shop.pay", 40, "error", None, 250.0, "acme"),  # no outcome: kind "error"
        ("shop.pay", 120, "ok", "ok", 90.0, "acme"),
        ("shop.pay", 15, "error", "timeout", 5.0, "globex"),  # another tenant's
        ("shop.refund", 360, "ok", "ok", 8.0, "acme"),  # not in the last hour
    ]
    records = [
        audit(
            call_id=f"c{i}",
            at=_ago(minutes),
            tool=tool,
            status=status,
            outcome=outcome,
            duration_ms=duration,
            tenant=tenant,
        )
        for i, (tool, minutes, status, outcome, duration, tenant) in enumerate(rows)
    ]
    # Not final: an intent and a decision are no calls.
    records.append(audit(call_id="c0", phase="intent", at=_ago(11), tool="shop.find"))
    records.append(audit(call_id="c7", phase="decision", at=_ago(39), tool="shop.pay"))
    await store.append_audit(records)

    acme = await store.tool_figures(Scope(tenant="acme"), now=NOW)
    assert acme == {
        "shop.find": ToolWindows(
            hour=ToolFigures(calls=3, errors=(("validation", 1),), p50_ms=3.0, p95_ms=12.0),
            day=ToolFigures(
                calls=6,
                errors=(("validation", 2), ("permission", 1)),
                p50_ms=12.0,  # of 3, 7, 12, 40, 100: rank ceil(2.5) = 3
                p95_ms=100.0,  # rank ceil(4.75) = 5
            ),
        ),
        "shop.pay": ToolWindows(
            hour=ToolFigures(calls=1, errors=(("error", 1),), p50_ms=250.0, p95_ms=250.0),
            day=ToolFigures(calls=2, errors=(("error", 1),), p50_ms=90.0, p95_ms=250.0),
        ),
        "shop.refund": ToolWindows(
            hour=ToolFigures(), day=ToolFigures(calls=1, p50_ms=8.0, p95_ms=8.0)
        ),
    }
    assert acme["shop.find"].day.error_rate == 0.5

    every = await store.tool_figures(Scope(every_tenant=True), now=NOW)
    assert every["shop.find"] == acme["shop.find"]
    assert every["shop.pay"] == ToolWindows(
        # Kinds of equal counts in name order.
        hour=ToolFigures(calls=2, errors=(("error", 1), ("timeout", 1)), p50_ms=5.0, p95_ms=250.0),
        day=ToolFigures(calls=3, errors=(("error", 1), ("timeout", 1)), p50_ms=90.0, p95_ms=250.0),
    )
    assert await store.tool_figures(Scope(tenant="initech"), now=NOW) == {}


async def test_the_sql_figures_equal_the_memory_stores_over_many_records(
    database: Database, audit: Audit
) -> None:
    """Many records with tied, missing and spread durations: SQLite and PostgreSQL
    give exactly the memory store's figures, for every scope."""
    rng = random.Random(17)
    # Whole seconds, never on a window's start (a record exactly at a bound is
    # another matter on a SQLite file: see the time-window test above).
    seconds = [s for s in range(1, 26 * 3600) if s not in (3600, 86400)]
    records = [
        audit(
            call_id=f"c{i}",
            phase=rng.choice(["final"] * 9 + ["intent"]),
            at=NOW - timedelta(seconds=rng.choice(seconds)),
            tool=rng.choice(["a.one", "a.two", "b.three"]),
            tenant=rng.choice(["acme", "globex", None]),
            user=rng.choice(["ann", "ben"]),
            status=(status := rng.choice(["ok", "ok", "error", "denied"])),
            outcome=rng.choice([None, "validation", "permission"]) if status == "error" else "ok",
            duration_ms=rng.choice([None, *(float(rng.randint(1, 40)) for _ in range(5))]),
        )
        for i in range(600)
    ]
    memory = MemoryStore()
    await memory.open()
    async with database.store() as sql:
        for start in range(0, len(records), 100):
            await sql.append_audit(records[start : start + 100])
            await memory.append_audit(records[start : start + 100])
        scopes = [
            Scope(every_tenant=True),
            Scope(tenant="acme"),
            Scope(tenant=None),
            Scope(tenant="globex", user="ann"),
        ]
        for scope in scopes:
            expected = await memory.tool_figures(scope, now=NOW)
            assert await sql.tool_figures(scope, now=NOW) == expected, scope
        every = await memory.tool_figures(Scope(every_tenant=True), now=NOW)
    await memory.close()
    assert set(every) == {"a.one", "a.two", "b.three"}
    assert all(len(w.day.errors) == 3 and w.hour.calls for w in every.values())
