"""ops.notes_search and ops.notes_read through the gate."""

from __future__ import annotations

import pytest

from callgate import ErrorKind, Gate, Principal, Status

pytestmark = pytest.mark.anyio


async def test_search_returns_titles_and_summaries_not_bodies(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.notes_search", {"query": "checkout rollback"}, principal=alice)
    assert env.status is Status.OK
    first = env.payload[0]
    assert first["id"] == "N-1"
    assert first["title"].startswith("Runbook: checkout-api rollback")
    assert first["summary"]
    assert "body" not in first
    assert all(len(hit["summary"]) < 120 for hit in env.payload)


async def test_search_only_sees_the_callers_tenant(
    gate: Gate, alice: Principal, hiro: Principal
) -> None:
    acme = await gate.call("ops.notes_search", {"query": "runbook"}, principal=alice)
    globex = await gate.call("ops.notes_search", {"query": "runbook"}, principal=hiro)
    assert [n["id"] for n in acme.payload] == ["N-1"]
    assert [n["id"] for n in globex.payload] == ["N-6"]


async def test_search_honours_limit_and_reports_no_match_as_empty(
    gate: Gate, alice: Principal
) -> None:
    env = await gate.call("ops.notes_search", {"query": "deploy", "limit": 1}, principal=alice)
    assert len(env.payload) == 1
    env = await gate.call("ops.notes_search", {"query": "quantum"}, principal=alice)
    assert env.payload == []


async def test_search_needs_the_notes_scope(gate: Gate, carol: Principal) -> None:
    env = await gate.call("ops.notes_search", {"query": "runbook"}, principal=carol)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "notes:read" in env.error.message_for_model


async def test_read_returns_the_whole_note(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.notes_read", {"note_id": "N-3"}, principal=alice)
    assert env.status is Status.OK
    assert env.truncated is None
    assert env.payload["title"] == "Autumn Sale budget plan"
    assert "C-102" in env.payload["body"]
    assert env.payload["author"] == "carol@acme.example"


async def test_read_the_long_runbook_fits_the_default_budget(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.notes_read", {"note_id": "N-1"}, principal=alice)
    assert env.truncated is None
    assert len(env.payload["body"]) > 4000
    assert "Appendix: checklist" in env.payload["body"]


async def test_read_the_long_runbook_is_truncated_with_a_small_limit(
    small_gate: Gate, alice: Principal
) -> None:
    env = await small_gate.call("ops.notes_read", {"note_id": "N-1"}, principal=alice)
    assert env.status is Status.OK
    assert env.truncated is not None
    assert env.truncated.shown < env.truncated.total
    assert env.truncated.cursor
    assert "callgate.read_more" in env.truncated.notice

    more = await small_gate.read_more(env.truncated.cursor, principal=alice)
    assert more.status is Status.OK
    assert more.payload["offset"] == env.truncated.shown


async def test_read_another_tenants_note_is_denied(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.notes_read", {"note_id": "N-7"}, principal=alice)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "another tenant" in env.error.message_for_model
    assert "pricing" not in env.error.message_for_model.lower()


async def test_read_an_unknown_note_points_to_notes_search(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.notes_read", {"note_id": "N-404"}, principal=alice)
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert '"N-" and a number' in env.error.message_for_model
    assert env.error.next_step is not None
    assert "ops.notes_search" in env.error.next_step


async def test_a_tenant_id_sent_by_the_model_does_not_open_other_notes(
    gate: Gate, alice: Principal
) -> None:
    env = await gate.call(
        "ops.notes_read", {"note_id": "N-7", "tenant_id": "globex"}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    # Refused as another tenant's note (alice's own tenant was used), not for a scope.
    assert "another tenant" in env.error.message_for_model
    assert "pricing" not in env.error.message_for_model.lower()
