"""ops.send_email through the gate: validated, recorded in the outbox, never delivered."""

from __future__ import annotations

import pytest

from callgate import ErrorKind, Gate, Principal, Status
from callgate.demo._state import DemoState

pytestmark = pytest.mark.anyio


async def test_email_inside_the_domain_is_queued_in_the_outbox(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["bob@acme.example"], "subject": "D-1 rolled back", "body": "Done at 14:20."},
        principal=alice,
    )
    assert env.status is Status.OK
    assert env.payload["message_id"] == "msg-0001"
    assert env.payload["status"] == "queued"
    assert env.payload["sender"] == "alice@acme.example"
    (message,) = state.outbox
    assert message.to == ("bob@acme.example",)
    assert message.body == "Done at 14:20."


async def test_each_send_is_a_new_message(gate: Gate, alice: Principal, state: DemoState) -> None:
    args = {"to": ["bob@acme.example"], "subject": "hi", "body": "one"}
    first = await gate.call("ops.send_email", args, principal=alice)
    second = await gate.call("ops.send_email", args, principal=alice)
    assert (first.payload["message_id"], second.payload["message_id"]) == ("msg-0001", "msg-0002")
    assert len(state.outbox) == 2


async def test_invalid_address_is_a_construction_error_naming_the_field(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["bob@acme.example", "bob at acme"], "subject": "hi", "body": "x"},
        principal=alice,
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "to[1]" in env.error.message_for_model
    assert "bob at acme" in env.error.message_for_model
    assert state.outbox == []


async def test_no_recipients_is_a_construction_error(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.send_email", {"to": [], "subject": "hi", "body": "x"}, principal=alice
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "'to'" in env.error.message_for_model


async def test_sender_comes_from_the_principal_not_the_model(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await gate.call(
        "ops.send_email",
        {
            "to": ["bob@acme.example"],
            "subject": "hi",
            "body": "x",
            "user_id": "ceo@acme.example",
        },
        principal=alice,
    )
    assert env.ok
    assert state.outbox[0].sender == "alice@acme.example"


async def test_email_needs_the_send_scope(gate: Gate, carol: Principal, state: DemoState) -> None:
    env = await gate.call(
        "ops.send_email",
        {"to": ["bob@acme.example"], "subject": "hi", "body": "x"},
        principal=carol,
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "email:send" in env.error.message_for_model
    assert state.outbox == []
