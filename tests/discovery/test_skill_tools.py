"""Skills through the gate: found by search, loaded with the definitions of the tools
they name that the caller may use, their files read only inside their folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from callgate import Gate, Principal
from callgate.demo import toolboxes
from callgate.demo._skills import DEMO_SKILLS
from callgate.discovery import DiscoverySettings
from callgate.runtime.envelope import Status
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ONCALL = Principal(
    "olga", tenant="acme", scopes={"deploy:read", "deploy:rollback", "notes:read", "web:read"}
)
VIEWER = Principal("vic", tenant="acme", scopes={"deploy:read"})
HERE = str(Path(__file__).resolve())


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    settings = DiscoverySettings(embeddings="off", skills=(DEMO_SKILLS,))
    async with Gate(toolboxes(), store=MemoryStore(), discovery=settings) as gate:
        yield gate


async def test_a_skill_is_found_by_search_beside_the_tools(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.search_tools",
        {"query": "checkout is failing since the deploy, should we roll back?"},
        principal=ONCALL,
    )

    assert envelope.payload["skills"][0]["name"] == "release-rollback"
    assert "callgate.load_skill" in envelope.payload["next_step"]


async def test_loading_a_skill_gives_its_instructions_files_and_the_callers_tools(
    gate: Gate,
) -> None:
    full = await gate.call("callgate.load_skill", {"name": "release-rollback"}, principal=ONCALL)
    narrow = await gate.call("callgate.load_skill", {"name": "release-rollback"}, principal=VIEWER)

    assert full.status is Status.OK
    assert "roll" in full.payload["instructions"].lower()
    assert "references/checklist.md" in full.payload["files"]
    full_tools = {t["name"] for t in full.payload["tools"]}
    assert {"ops.deploy_status", "ops.deploy_rollback"} <= full_tools
    # Still subject to the caller's scopes: the viewer may not roll back.
    assert {t["name"] for t in narrow.payload["tools"]} == {"ops.deploy_status"}
    assert "ops.deploy_rollback" in narrow.payload["tools_not_available"]


async def test_a_skill_file_is_read_and_nothing_outside_the_folder_is(gate: Gate) -> None:
    ok = await gate.call(
        "callgate.read_skill_file",
        {"skill": "release-rollback", "path": "references/checklist.md"},
        principal=ONCALL,
    )
    escape = await gate.call(
        "callgate.read_skill_file",
        {"skill": "release-rollback", "path": "../campaign-budget-change/SKILL.md"},
        principal=ONCALL,
    )
    absolute = await gate.call(
        "callgate.read_skill_file",
        {"skill": "release-rollback", "path": HERE},
        principal=ONCALL,
    )

    assert ok.status is Status.OK and ok.payload["text"]
    for refused in (escape, absolute):
        assert refused.error is not None and refused.error.kind.value == "construction"
        assert "load_skill" in refused.error.message_for_model + (refused.error.next_step or "")
        assert refused.payload is None
        assert "description:" not in refused.for_model()  # nothing of the file read


async def test_an_unknown_skill_suggests_the_close_one(gate: Gate) -> None:
    envelope = await gate.call("callgate.load_skill", {"name": "release-rollbak"}, principal=ONCALL)

    assert envelope.error is not None
    assert "release-rollback" in envelope.error.message_for_model


async def test_without_skills_the_skill_tools_are_not_served() -> None:
    async with Gate(toolboxes(), store=MemoryStore()) as gate:
        names = {spec.name for spec in gate.tools()}
    assert "callgate.search_tools" in names
    assert "callgate.load_skill" not in names
