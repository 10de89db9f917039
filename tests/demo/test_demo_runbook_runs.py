"""ops.runbook_start / runbook_step_done / runbook_status: a checklist worked through across calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from callgate import ErrorKind, Gate, Principal, Status, Toolbox
from callgate.demo._checklists import RUN
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes

pytestmark = pytest.mark.anyio

RUN_TOOLS = ("ops.runbook_start", "ops.runbook_step_done", "ops.runbook_status")


async def _start(gate: Gate, who: Principal, note_id: str = "N-1") -> str:
    env = await gate.call("ops.runbook_start", {"note_id": note_id}, principal=who)
    assert env.status is Status.OK, env.error
    return str(env.payload["run"])


async def test_starting_lists_the_checkout_checklist(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.runbook_start", {"note_id": "N-1"}, principal=alice)

    run = env.payload
    assert run["run"].startswith("run_")
    assert (run["note_id"], run["done"], run["total"], run["next_step"]) == ("N-1", 0, 9, 1)
    assert run["title"] == "Runbook: checkout-api rollback and recovery"
    assert run["steps"][0] == {
        "step": 1,
        "text": "deployment found and timing confirmed",
        "done": False,
        "done_by": None,
        "done_at": None,
        "note": None,
    }
    assert run["steps"][-1]["text"] == "postmortem note opened"
    left = datetime.fromisoformat(run["expires_at"]) - datetime.now(UTC)
    assert timedelta(minutes=119) < left <= timedelta(hours=2)


async def test_steps_done_are_kept_with_who_when_and_the_note(
    gate: Gate, alice: Principal, now: datetime
) -> None:
    run = await _start(gate, alice)
    before = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=alice)

    first = await gate.call(
        "ops.runbook_step_done",
        {"run": run, "step": 1, "note": "D-1 rolled out 14:02, first alert 14:05"},
        principal=alice,
    )
    # The model cannot say who did a step: user_id is set by the server.
    await gate.call(
        "ops.runbook_step_done",
        {"run": run, "step": 5, "user_id": "mallory@acme.example"},
        principal=alice,
    )
    status = await gate.call("ops.runbook_status", {"run": run}, principal=alice)
    after = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=alice)

    assert first.payload["done"] == 1 and first.payload["next_step"] == 2
    run_now = status.payload
    assert (run_now["done"], run_now["next_step"]) == (2, 2)
    step1, step5 = run_now["steps"][0], run_now["steps"][4]
    assert step1["note"] == "D-1 rolled out 14:02, first alert 14:05"
    assert datetime.fromisoformat(step1["done_at"]) == now
    assert step5["done"] and step5["done_by"] == "alice@acme.example"
    # Ticking "rollback done" records progress; it rolls nothing back.
    assert after.payload == before.payload


async def test_completing_every_step_leaves_no_next_step(gate: Gate, alice: Principal) -> None:
    run = await _start(gate, alice)
    for step in range(1, 10):
        await gate.call("ops.runbook_step_done", {"run": run, "step": step}, principal=alice)

    status = await gate.call("ops.runbook_status", {"run": run}, principal=alice)

    assert (status.payload["done"], status.payload["next_step"]) == (9, None)


async def test_another_users_run_is_unknown_to_them(
    gate: Gate, alice: Principal, bob: Principal, hiro: Principal
) -> None:
    run = await _start(gate, alice)

    for who in (bob, hiro):
        for tool, args in (
            ("ops.runbook_status", {"run": run}),
            ("ops.runbook_step_done", {"run": run, "step": 1}),
        ):
            env = await gate.call(tool, args, principal=who)
            assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
            assert env.error.message_for_model == (
                f"runbook run '{run}' is unknown or expired. "
                "Runbook runs live 2 hours after their last change."
            )
            assert env.payload is None
    status = await gate.call("ops.runbook_status", {"run": run}, principal=alice)
    assert status.payload["done"] == 0


async def test_an_expired_run_says_to_start_a_new_one(gate: Gate, alice: Principal) -> None:
    run = await _start(gate, alice)
    record = await gate.store.get_handle(run)
    assert record is not None
    past = datetime.now(UTC) - timedelta(seconds=1)
    await gate.store.update_handle(
        run, version=record.version, data=record.data, at=past, expires_at=past
    )

    env = await gate.call("ops.runbook_step_done", {"run": run, "step": 1}, principal=alice)

    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "unknown or expired" in env.error.message_for_model
    assert env.error.next_step is not None
    assert "ops.runbook_start" in env.error.next_step


async def test_bad_notes_and_steps_are_construction_errors(
    gate: Gate, alice: Principal, hiro: Principal
) -> None:
    no_checklist = await gate.call("ops.runbook_start", {"note_id": "N-2"}, principal=alice)
    other_tenant = await gate.call("ops.runbook_start", {"note_id": "N-1"}, principal=hiro)
    run = await _start(gate, alice)
    no_step = await gate.call("ops.runbook_step_done", {"run": run, "step": 12}, principal=alice)

    assert no_checklist.error is not None
    assert "has no checklist" in no_checklist.error.message_for_model
    assert no_checklist.error.next_step is not None
    assert "ops.notes_read" in no_checklist.error.next_step
    assert other_tenant.error is not None
    # As ops.notes_read says of it: the note is not theirs, and nothing of it shows.
    assert other_tenant.error.kind is ErrorKind.PERMISSION
    assert "checkout" not in other_tenant.error.message_for_model
    assert no_step.error is not None
    assert "steps 1 to 9" in no_step.error.message_for_model


async def test_the_examples_run_with_a_started_run(gate: Gate, alice: Principal) -> None:
    (box,) = build_toolboxes_for_specs()
    run = await _start(gate, alice)
    for name in ("ops.runbook_step_done", "ops.runbook_status"):
        spec = box.get(name)
        assert spec is not None and spec.input_examples
        for example in spec.input_examples:
            env = await gate.call(name, {**example, "run": run}, principal=alice)
            assert env.status is Status.OK, (name, env.error)


def build_toolboxes_for_specs() -> list[Toolbox]:
    return build_toolboxes(DemoState())


@pytest.mark.parametrize("name", RUN_TOOLS)
def test_descriptions_state_the_lifetime(name: str) -> None:
    (box,) = build_toolboxes_for_specs()
    spec = box.get(name)
    assert spec is not None
    text = " ".join(spec.description.split())
    assert f"Runbook runs live {RUN.lifetime} after their last change" in text
    # The handle's shape is shown where the model reads or fills it.
    run = spec.input_schema["properties"].get("run")
    assert "run_" in (text if run is None else run["description"])
