"""Several processes (CLI commands, a gateway) share one SQLite file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import callgate.store
from callgate.store import SQLStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PER_PROCESS = 300

# Each writer opens the (possibly still missing) database only after the parent
# says go, so the migrations race too; then half its records go through a
# GroupCommitter from 20 tasks and half through direct appends.
WRITER = """
import sys
from datetime import UTC, datetime

import anyio

from callgate.store import AuditRecord, GroupCommitter, SQLStore

url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])


def record(i):
    return AuditRecord(
        call_id=f"{name}-{i}", phase="final", at=datetime.now(UTC), trace_id=name, tool="t"
    )


async def main():
    print("ready", flush=True)
    sys.stdin.readline()
    async with SQLStore(url) as store, GroupCommitter(store) as committer:

        async def batched(first):
            for i in range(first, count // 2, 20):
                await committer.append(record(i))

        async def direct(first):
            for i in range(count // 2 + first, count, 20):
                await store.append_audit([record(i)])

        async with anyio.create_task_group() as tg:
            for first in range(20):
                tg.start_soon(batched, first)
                tg.start_soon(direct, first)
    print("done", flush=True)


anyio.run(main)
"""


async def _read_line(process: Process) -> bytes:
    assert process.stdout is not None
    return await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)


async def test_two_processes_append_to_one_file_and_nothing_is_lost(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared' / 'callgate.db'}"
    src = str(Path(callgate.store.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    names = ["alpha", "beta"]

    with anyio.fail_after(120):
        processes = [
            await anyio.open_process(
                [sys.executable, "-W", "error", "-c", WRITER, url, name, str(PER_PROCESS)],
                env=env,
            )
            for name in names
        ]
        try:
            for process in processes:
                assert await _read_line(process) == b"ready"
            for process in processes:
                assert process.stdin is not None
                await process.stdin.send(b"go\n")
            for process in processes:
                assert await process.wait() == 0, await _stderr(process)
        finally:
            for process in processes:
                await process.aclose()

    async with SQLStore(url) as store:
        records = await store.list_audit()
    seqs = [r.seq for r in records]
    assert len(seqs) == len(set(seqs)) == len(names) * PER_PROCESS
    assert seqs == sorted(seqs)
    assert {r.call_id for r in records} == {
        f"{name}-{i}" for name in names for i in range(PER_PROCESS)
    }


async def _stderr(process: Process) -> str:
    assert process.stderr is not None
    chunks = [chunk async for chunk in process.stderr]
    return b"".join(chunks).decode(errors="replace")
