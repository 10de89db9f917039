"""Killing the process mid-call leaves a visible record, never silence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from callgate.store import SQLStore
from tests.pg import POSTGRES_URL, drop_schema

CHILD = Path(__file__).with_name("crash_child.py")
pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}", ""
        return
    schema = f"test_crash_{uuid.uuid4().hex[:12]}"
    yield POSTGRES_URL, schema
    anyio.run(drop_schema, schema)


def _child(mode: str, url: str, schema: str, marker: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), mode, url, schema, str(marker)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CHILD.parents[2])},
    )


async def _records(url: str, schema: str) -> list:  # type: ignore[type-arg]
    store = SQLStore(url, schema=schema or None)
    async with store:
        return await store.list_audit()


async def test_kill_during_a_side_effect_leaves_an_intent_without_outcome(
    database: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = database
    marker = tmp_path / "started"
    proc = _child("during", url, schema, marker)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None, "the child died before the tool started"
            assert time.monotonic() < deadline, "the tool never started"
            await anyio.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.communicate(timeout=10)
    records = await _records(url, schema)
    assert [(r.phase, r.tool) for r in records] == [("intent", "crash.pay")]
    assert records[0].outcome is None and records[0].decision == "allow"


async def test_a_returned_result_is_already_audited(
    database: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = database
    proc = _child("after", url, schema, tmp_path / "unused")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    call_id = out.strip()
    records = await _records(url, schema)
    assert [(r.call_id, r.phase, r.outcome) for r in records] == [(call_id, "final", "ok")]
