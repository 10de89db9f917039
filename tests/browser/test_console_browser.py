"""The web console in a real browser (Debian's chromium, driven by playwright):
the README's approval scenario done by people, on the demo's budget change.

alice's calls go through the real gate; bob (the campaign's owner) signs in
with a one-time link, sees the request arrive without reloading, reads the
diff, approves it from the keyboard; the call then completes once and its story
is in the audit. A denial, a self-approval, a forged POST without the CSRF
token and another tenant's view are refused. Every page is shot at desktop and
phone width into the session's screenshots folder (and, with
``CALLGATE_CONSOLE_SHOTS=docs/console``, where docs/console.md takes them from).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from playwright.sync_api import Page, expect

from callgate import Gate, Principal
from callgate.console.web import console_app
from callgate.demo import demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes

from .conftest import NewContext, Serve

SCOPES = ["campaigns:read", "campaigns:write"]
ALICE = Principal("alice@acme.example", "acme", scopes=SCOPES)
BOB = Principal("bob@acme.example", "acme", scopes=SCOPES, roles={"approver"})
GREG = Principal("greg@globex.example", "globex", roles={"approver"})
PREVIEW, APPLY = "ops.budget_change_preview", "ops.budget_change_apply"
SHOTS_ENV = "CALLGATE_CONSOLE_SHOTS"


@dataclass
class Site:
    portal: BlockingPortal
    gate: Gate
    app: Any
    base: str
    state: DemoState

    def link(self, who: Principal) -> str:
        token = self.portal.call(self.app.state.console.sessions.mint_link, who)
        return f"{self.base}/console/login?token={token}"

    def sign_in(self, page: Page, who: Principal) -> None:
        page.goto(self.link(who))
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Approvals")).to_be_visible()

    def call(self, tool: str, arguments: dict[str, Any], who: Principal = ALICE) -> Any:
        async def go() -> Any:
            return await self.gate.call(tool, arguments, principal=who)

        return self.portal.call(go)

    def park(self, budget: int) -> tuple[str, str]:
        """alice previews C-101's new budget and applies it: (approval id, preview id)."""
        preview = self.call(PREVIEW, {"campaign_id": "C-101", "new_daily_budget": budget})
        preview_id = preview.payload["preview_id"]
        assert self.call(APPLY, {"preview_id": preview_id}).status.value == "pending_approval"
        return preview.payload["approval"]["approval_id"], preview_id


@pytest.fixture
def site(tmp_path: Path, portal: BlockingPortal, serve: Serve) -> Iterator[Site]:
    state = DemoState()
    gate = Gate(
        build_toolboxes(state), store=f"sqlite:///{tmp_path / 'console.db'}", policy=demo_policy()
    )
    portal.call(gate.__aenter__)
    try:
        app = console_app(gate)
        url = serve(app, "/console")
        yield Site(portal, gate, app, url.removesuffix("/console"), state)
    finally:
        portal.call(gate.__aexit__, None, None, None)


def shoot(page: Page, folder: Path, name: str) -> None:
    """A full-page PNG into ``folder`` (and the docs' folder when asked for)."""
    path = folder / f"{name}.png"
    page.screenshot(path=path, full_page=True)
    assert path.stat().st_size > 5_000, f"{name}: an empty screenshot"
    target = os.environ.get(SHOTS_ENV)
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


def fits(page: Page) -> bool:
    """Nothing wider than the window: tables scroll inside their own box."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_bob_approves_alices_budget_change_and_the_call_completes_with_its_story(
    site: Site, browser_context: NewContext, screenshots: Path
) -> None:
    first, preview_id = site.park(2160)
    bob = browser_context().new_page()
    site.sign_in(bob, BOB)

    # The inbox: who asked, the tool, its risk, why, and the diff.
    row = bob.locator("#pending tr[data-id]")
    expect(row).to_have_count(1)
    expect(row.first).to_contain_text("alice@acme.example")
    expect(row.first).to_contain_text("write_high_risk")
    expect(row.first).to_contain_text("daily budget 1,200 → 2,160 (+960 (+80%))")
    top = row.first.bounding_box()

    # A new request appears without a reload, below, and nothing shown moves.
    second, _ = site.park(2400)
    expect(row).to_have_count(2, timeout=10_000)
    expect(bob.locator("#inbox-status")).to_have_text("1 new request arrived.")
    expect(bob.locator(f'#pending tr[data-id="{second}"]')).to_contain_text("+100%")
    assert row.first.bounding_box() == top
    shoot(bob, screenshots, "approvals-desktop")

    # The request's page: exactly what will run, and the diff.
    bob.locator(f'#pending tr[data-id="{first}"]').get_by_role("link", name="Decide").click()
    expect(bob.get_by_role("heading", name=APPLY)).to_be_visible()
    diff = bob.locator("table.diff")
    expect(diff).to_contain_text("1,200")
    expect(diff).to_contain_text("2,160")
    expect(diff).to_contain_text("+960 (+80%)")
    expect(bob.locator("table.args")).to_contain_text(preview_id)
    shoot(bob, screenshots, "approval-desktop")

    # Approved from the keyboard: the note field, then Enter.
    bob.get_by_label("Note (optional)").focus()
    bob.keyboard.type("Q4 push agreed")
    bob.keyboard.press("Enter")
    expect(bob.locator(".done")).to_contain_text("You approved this request")
    expect(bob.locator(".decided")).to_contain_text("bob@acme.example")

    # alice's caller makes the call again: it runs, once.
    done = site.call(APPLY, {"preview_id": preview_id})
    assert done.status.value == "ok"
    assert site.state.campaigns["C-101"].daily_budget == 2160

    # The audit: filter by the tool, open the call, read its story.
    bob.get_by_role("link", name="Audit").click()
    bob.get_by_label("Tool").fill(APPLY)
    bob.get_by_label("Outcome", exact=True).select_option("ok")
    bob.get_by_role("button", name="Filter").click()
    bob.locator("table.audit a", has_text=APPLY).first.click()
    story = bob.locator("ol.story")
    expect(story).to_contain_text("approved by bob@acme.example: Q4 push agreed")
    expect(story).to_contain_text(first)
    expect(bob.locator("dl.facts")).to_contain_text("Idempotency key")
    expect(bob.locator("main")).to_contain_text("The Envelope the caller got")
    shoot(bob, screenshots, "call-desktop")

    # The second request: denied with a reason, which the caller is told.
    bob.goto(f"{site.base}/console/approvals/{second}")
    bob.get_by_label("Reason (the requester is told)").fill("one increase a quarter")
    bob.get_by_role("button", name="Deny").click()
    expect(bob.locator(".done")).to_contain_text("You denied this request")
    denied = site.call(APPLY, {"preview_id": site.portal.call(_preview_of, site, second)})
    assert "one increase a quarter" in denied.error.message_for_model


async def _preview_of(site: Site, approval_id: str) -> str:
    record = await (await site.gate.approvals()).get(approval_id)
    assert record is not None and record.preview_id is not None
    return record.preview_id


def test_refusals_self_approval_forged_post_and_another_tenant(
    site: Site, browser_context: NewContext
) -> None:
    approval_id, _ = site.park(2160)
    url = f"{site.base}/console/approvals/{approval_id}"

    alice = browser_context().new_page()
    site.sign_in(alice, ALICE)
    alice.goto(url)
    expect(alice.locator("main")).to_contain_text("You cannot decide it")
    expect(alice.get_by_role("button", name="Approve")).to_have_count(0)
    # Even a hand-made POST with her own CSRF token is refused.
    token = alice.locator('input[name="csrf"]').first.get_attribute("value")
    own = alice.request.post(f"{url}/approve", form={"csrf": token or ""})
    assert own.status == 409 and "another person must" in own.text()

    bob = browser_context().new_page()
    site.sign_in(bob, BOB)
    forged = bob.request.post(f"{url}/approve", form={"text": "no token"})
    assert forged.status == 403 and "security token" in forged.text()

    greg = browser_context().new_page()
    site.sign_in(greg, GREG)
    expect(greg.locator("#pending")).to_contain_text("Nothing is waiting")
    greg.goto(url)
    expect(greg.locator(".problem")).to_contain_text("no approval request")
    greg.get_by_role("link", name="Audit").click()
    expect(greg.locator("table.audit")).to_contain_text("No record matches")

    record = site.portal.call(_approval, site, approval_id)
    assert record.state == "pending"


async def _approval(site: Site, approval_id: str) -> Any:
    return await (await site.gate.approvals()).get(approval_id)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_every_page_reads_at_desktop_and_phone_width(
    site: Site, browser_context: NewContext, screenshots: Path, viewport: str
) -> None:
    approval_id, _ = site.park(2160)
    site.call("ops.campaigns_find", {"query": "Autumn Sale"})
    page = browser_context(viewport=viewport).new_page()  # type: ignore[arg-type]
    site.sign_in(page, BOB)
    pages = {
        "approvals": "/console/approvals",
        "approval": f"/console/approvals/{approval_id}",
        "audit": "/console/audit",
        "runs": "/console/runs",
        "tools": "/console/tools",
        "health": "/console/health",
    }
    for name, path in pages.items():
        page.goto(site.base + path)
        expect(page.locator("main h1")).to_be_visible()
        assert fits(page), f"{name} is wider than a {viewport} window"
        shoot(page, screenshots, f"{name}-{viewport}")
    page.goto(site.base + "/console/tools")
    expect(page.locator("table.tools")).to_contain_text("ops.campaigns_find")
