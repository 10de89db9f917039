"""The web console over HTTP (in process): sign-in, the inbox and its decisions,
the audit, a call's story, runs, tools and health, on the demo's budget change.

The same flows run in a real browser in tests/browser/test_console_browser.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from callgate import Gate, Principal
from callgate.console import pages_approvals
from callgate.console.web import console_app
from callgate.demo import demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes
from callgate.store import AuditRecord

pytestmark = pytest.mark.anyio

SCOPES = ["campaigns:read", "campaigns:write"]
ALICE = Principal("alice@acme.example", "acme", scopes=SCOPES)
BOB = Principal("bob@acme.example", "acme", scopes=SCOPES)
"""C-101's owner: the demo's approval rule names him."""
GREG = Principal("greg@globex.example", "globex", scopes=SCOPES, roles={"admin", "approver"})
ROOT = Principal("root@ops.example", "ops", roles={"admin"})
AUDITOR = Principal("ann@acme.example", "acme", roles={"auditor"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Site:
    gate: Gate
    app: object
    state: DemoState

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)  # type: ignore[arg-type]
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765")

    @contextlib.asynccontextmanager
    async def signed_in(self, who: Principal) -> AsyncIterator[httpx.AsyncClient]:
        token = await self.app.state.console.sessions.mint_link(who)  # type: ignore[attr-defined]
        async with self.client() as client:
            page = await client.get(f"/console/login?token={token}")
            assert page.status_code == 200
            response = await client.post("/console/login", data={"token": token})
            assert response.status_code == 303, response.text
            yield client

    async def park(self, who: Principal = ALICE, budget: int = 2160) -> tuple[str, str]:
        """alice previews a budget increase of C-101 and applies it: parked.
        Returns (approval id, preview id)."""
        preview = await self.gate.call(
            "ops.budget_change_preview",
            {"campaign_id": "C-101", "new_daily_budget": budget},
            principal=who,
        )
        payload = preview.payload
        apply = await self.gate.call(
            "ops.budget_change_apply", {"preview_id": payload["preview_id"]}, principal=who
        )
        assert apply.status.value == "pending_approval", apply
        return str(payload["approval"]["approval_id"]), str(payload["preview_id"])


@pytest.fixture
async def site(tmp_path: Path, anyio_backend: str) -> AsyncIterator[Site]:
    state = DemoState()
    gate = Gate(
        build_toolboxes(state), store=f"sqlite:///{tmp_path / 'c.db'}", policy=demo_policy()
    )
    async with gate:
        yield Site(gate=gate, app=console_app(gate), state=state)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


async def test_a_sign_in_link_works_once_and_sets_a_strict_http_only_cookie(site: Site) -> None:
    token = await site.app.state.console.sessions.mint_link(BOB)  # type: ignore[attr-defined]
    async with site.client() as client:
        # Opening the link (as a link previewer would) does not use it up.
        assert (await client.get(f"/console/login?token={token}")).status_code == 200
        signed = await client.post("/console/login", data={"token": token})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
        assert "secure" not in cookie  # loopback, plain HTTP
        inbox = await client.get("/console/approvals")
        assert inbox.status_code == 200 and "bob@acme.example" in inbox.text
        assert inbox.headers["cache-control"] == "no-store"
        assert "frame-ancestors 'none'" in inbox.headers["content-security-policy"]
    async with site.client() as other:
        again = await other.post("/console/login", data={"token": token})
        assert again.status_code == 401 and "used already" in again.text
        assert (await other.get("/console/approvals")).status_code == 303


async def test_pages_need_a_session(site: Site) -> None:
    async with site.client() as client:
        page = await client.get("/console/audit?tool=x")
        assert page.status_code == 303
        assert page.headers["location"] == "/console/login?next=%2Fconsole%2Faudit%3Ftool%3Dx"
        assert (await client.post("/console/approvals/apr_x/approve")).status_code == 401
        assert (await client.get("/console/audit/export.jsonl")).status_code == 401


async def test_the_inbox_shows_who_asked_why_and_the_diff_and_the_owner_approves(
    site: Site,
) -> None:
    approval_id, _ = await site.park()
    async with site.signed_in(BOB) as bob:
        inbox = (await bob.get("/console/approvals")).text
        assert approval_id in inbox and "alice@acme.example" in inbox
        assert "write_high_risk" in inbox
        assert "daily budget 1,200 → 2,160 (+960 (+80%))" in inbox
        page = await bob.get(f"/console/approvals/{approval_id}")
        assert "+960 (+80%)" in page.text and "the server (trusted)" in page.text  # tenant_id
        assert "budget-increase-over-50pct" in page.text or "rule" in page.text
        decided = await bob.post(
            f"/console/approvals/{approval_id}/approve",
            data={"csrf": csrf_of(page.text), "text": "Q4 push agreed"},
        )
        assert decided.status_code == 303
        shown = (await bob.get(decided.headers["location"])).text
        assert "You approved this request" in shown
        assert "decided by <strong>bob@acme.example</strong>" in shown
        assert "cannot be decided again" in shown
        # Deciding again: refused, and the page says who decided.
        again = await bob.post(
            f"/console/approvals/{approval_id}/deny",
            data={"csrf": csrf_of(page.text), "text": "no"},
        )
        assert again.status_code == 409 and "bob@acme.example" in again.text
    # The caller repeats the apply: it runs once, and the budget changed.
    apply = await site.gate.call(
        "ops.budget_change_apply",
        {"preview_id": (await (await site.gate.approvals()).get(approval_id)).preview_id},  # type: ignore[union-attr]
        principal=ALICE,
    )
    assert apply.status.value == "ok"
    assert site.state.campaigns["C-101"].daily_budget == 2160


async def test_the_requester_cannot_approve_and_a_post_without_csrf_is_refused(
    site: Site,
) -> None:
    approval_id, _ = await site.park()
    async with site.signed_in(ALICE) as alice:
        page = await alice.get(f"/console/approvals/{approval_id}")
        assert "You cannot decide it" in page.text
        token = csrf_of(page.text)  # the sign-out form's
        refused = await alice.post(
            f"/console/approvals/{approval_id}/approve", data={"csrf": token}
        )
        assert refused.status_code == 409
        assert "cannot decide it; another person must" in refused.text
    async with site.signed_in(BOB) as bob:
        no_token = await bob.post(f"/console/approvals/{approval_id}/approve", data={})
        assert no_token.status_code == 403 and "security token" in no_token.text
        page = await bob.get(f"/console/approvals/{approval_id}")
        cross = await bob.post(
            f"/console/approvals/{approval_id}/approve",
            data={"csrf": csrf_of(page.text)},
            headers={"Origin": "http://evil.example"},
        )
        assert cross.status_code == 403 and "another site" in cross.text
    record = await (await site.gate.approvals()).get(approval_id)
    assert record is not None and record.state == "pending"


async def test_another_tenant_sees_nothing(site: Site) -> None:
    approval_id, _ = await site.park()
    async with site.signed_in(
        Principal("greg@globex.example", "globex", roles={"approver"})
    ) as greg:
        inbox = (await greg.get("/console/approvals")).text
        assert approval_id not in inbox and "Nothing is waiting" in inbox
        assert (await greg.get(f"/console/approvals/{approval_id}")).status_code == 404
        audit = (await greg.get("/console/audit")).text
        assert "alice@acme.example" not in audit and "No record matches" in audit
        export = await greg.get("/console/audit/export.jsonl")
        assert export.text == ""
    # An admin of another tenant may look, not decide.
    async with site.signed_in(ROOT) as root:
        page = await root.get(f"/console/approvals/{approval_id}")
        assert page.status_code == 200 and "You cannot decide it" in page.text


async def test_deny_needs_a_reason_and_the_requester_is_told(site: Site) -> None:
    approval_id, preview_id = await site.park()
    async with site.signed_in(BOB) as bob:
        page = await bob.get(f"/console/approvals/{approval_id}")
        empty = await bob.post(
            f"/console/approvals/{approval_id}/deny", data={"csrf": csrf_of(page.text)}
        )
        assert empty.status_code == 400 and "Say why" in empty.text
        denied = await bob.post(
            f"/console/approvals/{approval_id}/deny",
            data={"csrf": csrf_of(page.text), "text": "over the quarter's cap"},
        )
        assert denied.status_code == 303
    apply = await site.gate.call(
        "ops.budget_change_apply", {"preview_id": preview_id}, principal=ALICE
    )
    assert apply.error is not None and "over the quarter's cap" in apply.error.message_for_model


async def test_the_page_warns_when_the_world_changed_since_the_preview(site: Site) -> None:
    approval_id, _ = await site.park()
    campaign = site.state.campaigns["C-101"]  # someone changes it meanwhile
    site.state.campaigns["C-101"] = dataclasses.replace(campaign, daily_budget=1500)
    async with site.signed_in(BOB) as bob:
        page = (await bob.get(f"/console/approvals/{approval_id}")).text
        assert "The situation changed since the preview" in page
        assert "1,500" in page


async def test_new_requests_reach_the_inbox_rows_without_a_reload(site: Site) -> None:
    async with site.signed_in(BOB) as bob:
        inbox = (await bob.get("/console/approvals")).text
        version = re.search(r'data-version="([^"]+)"', inbox).group(1)  # type: ignore[union-attr]
        unchanged = await bob.get(f"/console/approvals/rows?version={version}")
        assert unchanged.status_code == 204
        approval_id, _ = await site.park()
        rows = await bob.get(f"/console/approvals/rows?version={version}")
        assert rows.status_code == 200 and approval_id in rows.text
        assert rows.headers["x-inbox-count"] == "1"


async def test_the_inbox_shows_the_longest_waiting_first_and_says_when_more_wait(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages_approvals, "PENDING_SHOWN", 2)
    oldest, _ = await site.park(budget=2100)
    second, _ = await site.park(budget=2200)
    newest, _ = await site.park(budget=2300)

    async with site.signed_in(BOB) as bob:
        inbox = (await bob.get("/console/approvals")).text
        rows = await bob.get("/console/approvals/rows")
        health = (await bob.get("/console/health")).text

    assert oldest in inbox and second in inbox and newest not in inbox
    assert inbox.index(oldest) < inbox.index(second)
    assert '<span class="count" id="pending-count">2+</span>' in inbox
    assert "More requests wait behind these 2" in inbox
    assert rows.headers["x-inbox-count"] == "2+"
    assert "<dd>2+</dd>" in health


async def test_decided_requests_show_below_however_many_newer_ones_wait(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages_approvals, "DECIDED_SHOWN", 1)
    denied, _ = await site.park(budget=2100)
    await (await site.gate.approvals()).deny(denied, by=BOB, reason="not this quarter")
    waiting = [(await site.park(budget=2200 + n))[0] for n in range(5)]

    async with site.signed_in(BOB) as bob:
        inbox = (await bob.get("/console/approvals")).text

    decided = inbox[inbox.index("Decided lately") :]
    assert denied in decided and "not this quarter" in decided
    assert all(w in inbox and w not in decided for w in waiting)


async def test_the_audit_filters_pages_exports_and_tells_a_calls_story(site: Site) -> None:
    approval_id, preview_id = await site.park()
    for n in range(60):
        await site.gate.call("ops.campaigns_find", {"query": f"q{n}"}, principal=ALICE)
    async with site.signed_in(AUDITOR) as auditor:
        first = await auditor.get("/console/audit", params={"tool": "ops.campaigns_find"})
        assert first.text.count("ops.campaigns_find</a>") == 50
        older = re.search(r'href="(/console/audit\?[^"]+)" rel="next"', first.text)
        assert older, "no link to the older page"
        second = await auditor.get(older.group(1).replace("&amp;", "&"))
        assert second.text.count("ops.campaigns_find</a>") == 10
        bad = await auditor.get("/console/audit", params={"since": "yesterday"})
        assert bad.status_code == 400 and "2026-12-05T13:00" in bad.text
        export = await auditor.get(
            "/console/audit/export.jsonl", params={"tool": "ops.campaigns_find"}
        )
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert len(lines) == 60 and {line["tool"] for line in lines} == {"ops.campaigns_find"}
        assert "attachment" in export.headers["content-disposition"]
        parked = await auditor.get(
            "/console/audit",
            params={"tool": "ops.budget_change_apply", "status": "pending_approval"},
        )
        call_id = re.search(r'href="/console/calls/([^"]+)"', parked.text).group(1)  # type: ignore[union-attr]
        story = (await auditor.get(f"/console/calls/{call_id}")).text
        assert approval_id in story and "pending_approval" in story
    async with site.signed_in(BOB) as bob:
        page = await bob.get(f"/console/approvals/{approval_id}")
        await bob.post(
            f"/console/approvals/{approval_id}/approve", data={"csrf": csrf_of(page.text)}
        )
    done = await site.gate.call(
        "ops.budget_change_apply", {"preview_id": preview_id}, principal=ALICE
    )
    async with site.signed_in(ALICE) as alice:
        story = (await alice.get(f"/console/calls/{done.call_id}")).text
        assert "approved by bob@acme.example" in story or "bob@acme.example" in story
        assert "Idempotency key" in story and "Envelope the caller got" in story
        # alice sees her own records only; bob's decision record is not hers.
        mine = (await alice.get("/console/audit", params={"phase": "decision"})).text
        assert "No record matches" in mine


async def test_runs_tools_and_health_pages(site: Site) -> None:
    await site.gate.call("ops.campaigns_find", {"query": "Autumn"}, principal=ALICE)
    async with site.signed_in(ALICE) as alice:
        tools = (await alice.get("/console/tools")).text
        assert "ops.campaigns_find" in tools and "ops.budget_change_apply" in tools
        assert "1 / 1" in tools  # its calls over the last hour and day
        health = (await alice.get("/console/health")).text
        assert "ok" in health and "No upstream MCP server" in health
        runs = await alice.get("/console/runs")
        assert runs.status_code == 200 and "No agent run" in runs.text
        assert (await alice.get("/console/runs/run_nope")).status_code == 404


async def test_the_tools_page_and_health_count_every_call_the_reader_may_see(
    site: Site,
) -> None:
    now = site.gate.clock.now()
    alice, bob = ALICE.user, BOB.user
    calls = [
        # minutes ago, tenant, user, status, outcome, duration
        (5, "acme", alice, "ok", "ok", 10.0),
        (10, "acme", alice, "error", "validation", 30.0),
        (180, "acme", alice, "ok", "ok", 20.0),  # in the day, not the hour
        (2880, "acme", alice, "ok", "ok", 99.0),  # two days ago: not shown
        (5, "acme", bob, "error", "permission", 1.0),  # not alice's own
        (5, "globex", alice, "error", "permission", 1.0),  # another tenant's
    ]
    await site.gate.store.append_audit(
        [
            AuditRecord(
                call_id=f"c{i}",
                phase="final",
                at=now - timedelta(minutes=minutes),
                trace_id=f"t{i}",
                tool="ops.campaigns_find",
                tenant=tenant,
                user=user,
                status=status,
                outcome=outcome,
                duration_ms=duration,
            )
            for i, (minutes, tenant, user, status, outcome, duration) in enumerate(calls)
        ]
    )
    async with site.signed_in(ALICE) as reader:
        tools = (await reader.get("/console/tools")).text
        health = (await reader.get("/console/health")).text
    row = re.search(r"<code>ops\.campaigns_find</code>.*?</tr>", tools, re.DOTALL)
    assert row, "no row for ops.campaigns_find"
    cells = re.sub(r"\s+", " ", row.group(0))
    assert "2 / 3</td>" in cells  # calls in the last hour / day
    assert "33.3%: validation 1</td>" in cells
    assert "20 / 30</td>" in cells  # p50 / p95 ms over the day
    assert "<dd>3 in the last 24 h</dd>" in health  # calls
    assert "<dd>1 in the last 24 h</dd>" in health  # errors


async def test_signing_out_ends_the_session(site: Site) -> None:
    async with site.signed_in(BOB) as bob:
        page = await bob.get("/console/approvals")
        out = await bob.post("/console/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303
        assert (await bob.get("/console/approvals")).status_code == 303
