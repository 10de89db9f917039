"""``Gate.call_sync`` from a plain script: the process exits, and the gate is closed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from callgate import Gate
from callgate.store import AuditRecord

SCRIPT = '''
import sys
from callgate import Gate, Principal, Toolbox

box = Toolbox("ops")


@box.tool(read_only=True, open_world=False)
def ping() -> str:
    """Answer pong."""
    return "pong"


alice = Principal("alice", tenant="acme")
first = Gate([box], store=sys.argv[1])
second = Gate([box], store=sys.argv[2])
print(first.call_sync("ops.ping", {}, principal=alice).payload)
print(second.call_sync("ops.ping", {}, principal=alice).payload)
'''


@pytest.mark.slow
def test_a_script_that_never_closes_its_gates_exits_and_leaves_them_closed(
    tmp_path: Path,
) -> None:
    stores = [f"sqlite:///{tmp_path / name}" for name in ("one.db", "two.db")]
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)

    # A hang is the failure this guards against: the bound only ends the test.
    done = subprocess.run(
        [sys.executable, str(script), *stores],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pong", "pong"]
    assert done.stderr == ""
    for store in stores:
        records = asyncio.run(_audit(store))
        assert [(r.tool, r.outcome) for r in records] == [("ops.ping", "ok")]


async def _audit(store: str) -> list[AuditRecord]:
    async with Gate([], store=store) as gate:
        return list(await gate.audit())
