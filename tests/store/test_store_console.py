"""The console's time filters on every store kind, with records whose ``seq``
order is not their time order (a late commit, a backlog written after an outage):
the SQL store narrows time filters by ``seq`` (sql_console.py) and must still
find exactly the records of the window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from callgate.store import AuditRecord, Store
from callgate.store.console_records import AuditQuery, Scope

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


async def test_durations_since_a_time_keep_late_commits_and_leave_old_ones_out(
    store: Store, audit: Audit
) -> None:
    await _fill(store, audit)
    rows = await store.audit_durations(Scope(every_tenant=True), since=T0 + timedelta(minutes=11.5))
    assert sorted(r.duration_ms for r in rows if r.duration_ms is not None) == sorted(
        float(m) for m in MINUTES if m >= 12
    )
    assert [r.at for r in rows] == sorted((r.at for r in rows), reverse=True)
    acme = await store.audit_durations(Scope(tenant="acme"), since=T0 + timedelta(minutes=11.5))
    expected = [float(m) for i, m in enumerate(MINUTES) if m >= 12 and i % 3]
    assert sorted(r.duration_ms for r in acme if r.duration_ms is not None) == sorted(expected)
