"""One wire adapter: every outcome leaves the MCP server through ``callgate.mcp._wire``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from callgate.store import MemoryStore
from tests.mcp.test_tasks import call, serving, settled

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src" / "callgate"


def test_no_protocol_error_is_made_outside_the_wire_adapter() -> None:
    made = re.compile(r"\bMCPError\(")
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_wire.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if made.search(line)
    ]
    assert found == []


async def test_a_task_keeps_its_calls_envelope_and_never_reads_the_audit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def no_audit(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("a task learns its outcome from the Envelope, not the audit")

    monkeypatch.setattr(MemoryStore, "list_audit", no_audit)
    async with serving() as client:
        crashing = await call(client, "protocol_error_job")
        failing = await call(client, "failing_job")
        crash = await settled(client, crashing["taskId"])
        tool_error = await settled(client, failing["taskId"])

    assert crash["status"] == "failed" and crash["error"]["code"] == -32603
    # The Envelope's own text: the tool named as this server shows it, the call's reference.
    assert re.fullmatch(
        r"protocol_error_job failed with an internal error \(reference call_[0-9a-f]+\)\.\n"
        r"Next step: .*",
        crash["error"]["message"],
    )
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
    assert "always fails" in tool_error["result"]["content"][0]["text"]
