"""The demo state kept in a file (CALLGATE_DEMO_STATE): shared by processes, written atomically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from callgate import Gate, Principal, Status
from callgate.demo import STATE_ENV, demo_policy, toolboxes
from callgate.demo._state import STATE_FORMAT, DemoState, DemoStateError
from callgate.store import MemoryStore


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "demo" / "state.json"
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


async def _budget(gate: Gate, principal: Principal, name: str) -> int:
    env = await gate.call("ops.campaigns_find", {"query": name, "limit": 1}, principal=principal)
    assert env.status is Status.OK, env.error
    budget: int = env.payload[0]["daily_budget"]
    return budget


@pytest.mark.anyio
async def test_two_toolboxes_on_one_file_see_each_others_changes(
    state_file: Path, alice: Principal, anyio_backend: str
) -> None:
    first, second = toolboxes(), toolboxes()
    async with (
        Gate(first, store=MemoryStore(), policy=demo_policy()) as one,
        Gate(second, store=MemoryStore(), policy=demo_policy()) as two,
    ):
        assert await _budget(two, alice, "Autumn Sale_Search") == 1200
        preview = await one.call(
            "ops.budget_change_preview",
            {"campaign_id": "C-101", "new_daily_budget": 1500},
            principal=alice,
        )
        assert await _budget(two, alice, "Autumn Sale_Search") == 1200  # a preview changes nothing
        applied = await one.call(
            "ops.budget_change_apply",
            {"preview_id": preview.payload["preview_id"]},
            principal=alice,
        )
        assert applied.status is Status.OK, applied.error
        assert await _budget(two, alice, "Autumn Sale_Search") == 1500
    # A later process (here: a third toolboxes() call) starts from the file.
    async with Gate(toolboxes(), store=MemoryStore(), policy=demo_policy()) as three:
        assert await _budget(three, alice, "Autumn Sale_Search") == 1500


def test_the_file_is_seeded_on_first_use_and_holds_only_changeable_tables(
    state_file: Path,
) -> None:
    DemoState(path=state_file)
    data = json.loads(state_file.read_text(encoding="utf-8"))
    assert data["format"] == STATE_FORMAT
    assert sorted(data) == ["campaigns", "deployments", "format", "outbox"]
    assert {c["id"]: c["daily_budget"] for c in data["campaigns"]}["C-101"] == 1200
    assert data["outbox"] == []
    assert not list(state_file.parent.glob("*.tmp"))


def test_records_survive_the_round_trip_unchanged(state_file: Path) -> None:
    memory = DemoState()
    stored = DemoState(path=state_file)
    again = DemoState(path=state_file)
    assert stored.campaigns == again.campaigns == memory.campaigns
    assert stored.deployments == again.deployments == memory.deployments
    stored.queue_email(sender="alice@acme.example", to=["bob@acme.example"], subject="s", body="b")
    with again.transaction():
        assert again.outbox == stored.outbox
        assert again.outbox[0].to == ("bob@acme.example",)


def test_a_failed_transaction_writes_nothing(state_file: Path) -> None:
    state = DemoState(path=state_file)
    before = state_file.read_bytes()

    def change_then_fail() -> None:
        with state.transaction():
            state.update(state.campaigns, state.campaigns["C-101"], daily_budget=1)
            raise RuntimeError("check failed after the change")

    with pytest.raises(RuntimeError):
        change_then_fail()
    assert state_file.read_bytes() == before
    with state.transaction():
        assert state.campaigns["C-101"].daily_budget == 1200


def test_deleting_the_file_starts_over_from_the_seed(state_file: Path) -> None:
    state = DemoState(path=state_file)
    state.update(state.campaigns, state.campaigns["C-101"], daily_budget=1500)
    state_file.unlink()
    with state.transaction():
        assert state.campaigns["C-101"].daily_budget == 1200
    assert state_file.exists()


def test_a_file_that_is_not_a_demo_state_is_refused(state_file: Path) -> None:
    state_file.parent.mkdir(parents=True)
    state_file.write_text('{"hello": "world"}', encoding="utf-8")
    with pytest.raises(DemoStateError, match="delete it to start over"):
        toolboxes()


def test_without_the_variable_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    state = DemoState()
    state.update(state.campaigns, state.campaigns["C-101"], daily_budget=1500)
    assert state.path is None
    assert DemoState().campaigns["C-101"].daily_budget == 1200
    assert list(tmp_path.iterdir()) == []


_WORKER = """
import sys
from callgate.demo._state import DemoState

state = DemoState(path=sys.argv[1])
for i in range(int(sys.argv[2])):
    state.queue_email(sender=sys.argv[3], to=["x@acme.example"], subject=str(i), body="b")
"""


@pytest.mark.slow
def test_processes_do_not_interleave_read_modify_write(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    DemoState(path=path)
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(path), "25", f"w{n}@acme.example"])
        for n in range(4)
    ]
    assert [w.wait(timeout=60) for w in workers] == [0, 0, 0, 0]
    state = DemoState(path=path)
    with state.transaction():
        outbox = list(state.outbox)
    assert len(outbox) == 100
    assert len({m.message_id for m in outbox}) == 100
    assert {m.sender for m in outbox} == {f"w{n}@acme.example" for n in range(4)}
