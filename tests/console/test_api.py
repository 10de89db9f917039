"""The approvals HTTP API against a real gate on SQLite: who may read, who may decide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from starlette.requests import Request

from callgate import Principal
from callgate.console import bearer_tokens
from callgate.store import ApprovalRecord

from .conftest import ALICE, CAROL, Console

pytestmark = pytest.mark.anyio


async def test_every_endpoint_needs_a_principal(console: Console) -> None:
    approval_id = await console.park()

    responses = [
        await console.get("/api/approvals", token=None),
        await console.get(f"/api/approvals/{approval_id}", token="not-a-token"),
        await console.post(f"/api/approvals/{approval_id}/approve", token=None),
        await console.post(f"/api/approvals/{approval_id}/deny", {"reason": "no"}, token=None),
    ]

    assert [r.status_code for r in responses] == [401, 401, 401, 401]
    assert responses[0].json() == {
        "error": {"code": "unauthenticated", "message": "authentication required"}
    }
    assert responses[0].headers["www-authenticate"] == "Bearer"
    record = await (await console.gate.approvals()).get(approval_id)
    assert record is not None and record.state == "pending"


async def test_list_and_show_give_the_exact_arguments_of_the_own_tenant_only(
    console: Console,
) -> None:
    acme_id = await console.park()
    globex_id = await console.park(Principal("gina", "globex", scopes={"pay"}))

    listed = await console.get("/api/approvals?state=pending")
    shown = await console.get(f"/api/approvals/{acme_id}")
    other = await console.get(f"/api/approvals/{globex_id}")
    admin = await console.get("/api/approvals", token="t-root")

    assert listed.status_code == 200
    assert [a["id"] for a in listed.json()["approvals"]] == [acme_id]
    body = shown.json()
    assert body["arguments"] == {"to": "ACC-9", "amount": 5000, "tenant_id": "acme"}
    assert body["state"] == "pending"
    assert body["requested_by"] == "alice"
    assert body["reason"] == "large transfers need a human"
    assert shown.headers["cache-control"] == "no-store"
    # Another tenant's approval looks exactly like a missing one.
    assert other.status_code == 404
    missing = await console.get("/api/approvals/apr_nope")
    assert other.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    assert {a["id"] for a in admin.json()["approvals"]} == {acme_id, globex_id}


async def test_list_rejects_an_unknown_state(console: Console) -> None:
    response = await console.get("/api/approvals?state=maybe")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert "pending" in response.json()["error"]["message"]


async def test_approve_records_the_authenticated_decider_and_the_call_then_runs_once(
    console: Console,
) -> None:
    approval_id = await console.park()

    # A decider named in the body is ignored: the token says who decides.
    response = await console.post(
        f"/api/approvals/{approval_id}/approve", {"note": "checked with finance", "by": "mallory"}
    )

    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "approved"
    assert body["decided_by"] == "bob"
    assert body["note"] == "checked with finance"
    assert console.payments.sent == []  # deciding does not run the call
    ran = await console.gate.call("bank.transfer", {"to": "ACC-9", "amount": 5000}, principal=ALICE)
    assert ran.ok
    assert console.payments.sent == [{"to": "ACC-9", "amount": 5000, "tenant": "acme"}]
    after = (await console.get(f"/api/approvals/{approval_id}")).json()
    assert after["state"] == "used"
    assert after["result"]["status"] == "ok"
    decisions = [r for r in await console.gate.audit() if r.phase == "decision"]
    assert len(decisions) == 1
    assert decisions[0].call_id == approval_id
    assert decisions[0].user == "bob"
    assert decisions[0].decision == "approved"
    assert decisions[0].decision_reason == "checked with finance"


async def test_deny_needs_a_reason_and_the_caller_is_told_it(console: Console) -> None:
    approval_id = await console.park()

    no_reason = await console.post(f"/api/approvals/{approval_id}/deny", {})
    blank = await console.post(f"/api/approvals/{approval_id}/deny", {"reason": "  "})
    denied = await console.post(
        f"/api/approvals/{approval_id}/deny", {"reason": "ACC-9 is not a known supplier"}
    )
    envelope = await console.gate.call(
        "bank.transfer", {"to": "ACC-9", "amount": 5000}, principal=ALICE
    )

    assert no_reason.status_code == blank.status_code == 400
    assert denied.status_code == 200
    assert denied.json()["state"] == "denied"
    assert envelope.error is not None and envelope.error.kind.value == "permission"
    assert "ACC-9 is not a known supplier" in envelope.error.message_for_model
    assert console.payments.sent == []
    decisions = [r for r in await console.gate.audit() if r.phase == "decision"]
    assert [(d.user, d.decision) for d in decisions] == [("bob", "denied")]


async def test_deciding_needs_the_approver_role(console: Console) -> None:
    approval_id = await console.park(CAROL)

    approve = await console.post(f"/api/approvals/{approval_id}/approve", token="t-alice")
    deny = await console.post(
        f"/api/approvals/{approval_id}/deny", {"reason": "x"}, token="t-alice"
    )
    # Reading is allowed without the role.
    read = await console.get(f"/api/approvals/{approval_id}", token="t-alice")

    assert approve.status_code == deny.status_code == 403
    assert approve.json()["error"]["code"] == "not_an_approver"
    assert "role approver" in approve.json()["error"]["message"]
    assert read.status_code == 200 and read.json()["state"] == "pending"


async def test_an_approver_of_another_tenant_cannot_decide(console: Console) -> None:
    approval_id = await console.park()

    by_greg = await console.post(f"/api/approvals/{approval_id}/approve", token="t-greg")
    # An admin sees every tenant's requests but decides none of another tenant's.
    by_root = await console.post(f"/api/approvals/{approval_id}/approve", token="t-root")

    assert by_greg.status_code == 404  # indistinguishable from a missing approval
    assert by_root.status_code == 403 and by_root.json()["error"]["code"] == "other_tenant"
    record = await (await console.gate.approvals()).get(approval_id)
    assert record is not None and record.state == "pending"


async def test_unknown_approval_is_404_for_every_endpoint(console: Console) -> None:
    responses = [
        await console.get("/api/approvals/apr_missing"),
        await console.post("/api/approvals/apr_missing/approve"),
        await console.post("/api/approvals/apr_missing/deny", {"reason": "no"}),
        await console.get("/api/nothing-here"),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert all(r.json()["error"]["code"] == "not_found" for r in responses)


async def test_a_decision_is_taken_once(console: Console) -> None:
    approval_id = await console.park()
    first = await console.post(f"/api/approvals/{approval_id}/approve")

    again = await console.post(f"/api/approvals/{approval_id}/approve", token="t-carol")
    deny_after = await console.post(f"/api/approvals/{approval_id}/deny", {"reason": "late"})

    assert first.status_code == 200
    assert again.status_code == deny_after.status_code == 409
    assert again.json()["error"]["code"] == "already_decided"
    assert "approved" in again.json()["error"]["message"]
    decisions = [r for r in await console.gate.audit() if r.phase == "decision"]
    # One decision; the two late attempts are audited as refused.
    assert [(d.user, d.decision) for d in decisions] == [
        ("bob", "approved"),
        ("carol", "refused"),
        ("bob", "refused"),
    ]
    assert decisions[1].detail["refused"] == "already_decided"


async def test_an_expired_request_cannot_be_decided(console: Console) -> None:
    past = datetime.now(UTC) - timedelta(hours=2)
    await console.gate.store.create_approval(
        ApprovalRecord(
            id="apr_old",
            tool="bank.transfer",
            arguments={"to": "ACC-9", "amount": 5000, "tenant_id": "acme"},
            model_arguments={"to": "ACC-9", "amount": 5000},
            args_hash="h",
            user="alice",
            tenant="acme",
            session_id=None,
            call_id="call_old",
            reason="large transfers need a human",
            rule=None,
            created_at=past,
            expires_at=past + timedelta(hours=1),
        )
    )

    response = await console.post("/api/approvals/apr_old/approve")
    listed = await console.get("/api/approvals?state=expired")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "expired"
    assert [a["id"] for a in listed.json()["approvals"]] == ["apr_old"]
    assert listed.json()["approvals"][0]["state"] == "expired"


async def test_nobody_approves_their_own_request(console: Console) -> None:
    approval_id = await console.park(CAROL)

    own = await console.post(f"/api/approvals/{approval_id}/approve", token="t-carol")
    other = await console.post(f"/api/approvals/{approval_id}/approve", token="t-bob")

    assert own.status_code == 409
    assert own.json()["error"]["code"] == "self_approval"
    assert other.status_code == 200 and other.json()["decided_by"] == "bob"


async def test_post_bodies_must_be_json_objects(console: Console) -> None:
    approval_id = await console.park()
    url = f"/api/approvals/{approval_id}/approve"
    auth = {"Authorization": "Bearer t-bob"}

    form = await console.client.post(url, content=b"note=hi", headers=auth)
    bad_json = await console.client.post(
        url, content=b"{", headers={**auth, "Content-Type": "application/json"}
    )
    array = await console.post(url, ["note"])
    bad_note = await console.post(url, {"note": 7})

    assert form.status_code == 415  # a cross-site form post cannot decide
    assert [r.status_code for r in (bad_json, array, bad_note)] == [400, 400, 400]
    record = await (await console.gate.approvals()).get(approval_id)
    assert record is not None and record.state == "pending"


def test_bearer_tokens_match_exactly() -> None:
    alice = Principal("alice", "acme")
    authenticate = bearer_tokens({"secret-token": alice, "": Principal("nobody")})

    def request(header: str | None) -> Request:
        headers = [(b"authorization", header.encode())] if header is not None else []
        return Request({"type": "http", "headers": headers})

    assert authenticate(request("Bearer secret-token")) is alice
    assert authenticate(request("bearer secret-token")) is alice
    assert authenticate(request("Bearer secret-tokenX")) is None
    assert authenticate(request("Bearer ")) is None  # the empty token is never valid
    assert authenticate(request("Basic secret-token")) is None
    assert authenticate(request(None)) is None


async def test_a_deeply_nested_body_is_a_json_error_not_a_crash(console: Console) -> None:
    approval_id = await console.park()
    nested = "[" * 8000 + "]" * 8000  # under the size cap, deeper than the parser goes

    response = await console.client.post(
        f"/api/approvals/{approval_id}/approve",
        content=nested,
        headers={"Authorization": "Bearer t-bob", "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    record = await (await console.gate.approvals()).get(approval_id)
    assert record is not None and record.state == "pending"
