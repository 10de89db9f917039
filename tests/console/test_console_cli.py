"""``callgate serve`` prints the console's URL and a sign-in link; ``callgate
console link`` mints one for another person; ``callgate console`` serves the
console alone. Real processes, a real SQLite store, a plain HTTP client."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import Process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CALLGATE = [sys.executable, "-m", "callgate"]
LINK = re.compile(r"sign in to the console as (\S+) \(once, within 15 minutes\): (\S+)\n")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def running(*args: str) -> AsyncIterator[tuple[str, str, str]]:
    """``callgate ARGS --port 0``: yields (console URL, signed-in user, link)."""
    process = await anyio.open_process([*CALLGATE, *args, "--port", "0"])
    try:
        yield await _announced(process)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            await process.wait()
        await process.aclose()


async def _announced(process: Process) -> tuple[str, str, str]:
    assert process.stderr is not None
    seen = ""
    with anyio.fail_after(60):
        async for chunk in process.stderr:
            seen += chunk.decode(errors="replace")
            found = LINK.search(seen)
            if found:
                console = re.search(r"console at (\S+)\n", seen)
                assert console, seen
                return console.group(1), found.group(1), found.group(2)
    raise AssertionError(f"no sign-in link was printed:\n{seen}")


async def sign_in(client: httpx.AsyncClient, link: str) -> httpx.Response:
    token = link.split("token=", 1)[1]
    assert (await client.get(link)).status_code == 200
    signed = await client.post(link.split("?", 1)[0], data={"token": token})
    assert signed.status_code == 303, signed.text
    return await client.get(httpx.URL(link).join(signed.headers["location"]))


async def test_serve_prints_the_console_and_a_link_and_console_link_signs_in_another(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'served.db'}"
    async with running("serve", "--store", store) as (console, user, link):
        assert console.endswith("/console") and "/mcp" not in console
        async with httpx.AsyncClient() as client:
            inbox = await sign_in(client, link)
            assert inbox.status_code == 200 and user in inbox.text
            # The link worked once.
            again = await client.post(link.split("?")[0], data={"token": link.split("=")[-1]})
            assert again.status_code == 401
        minted = await anyio.run_process(
            [
                *CALLGATE,
                "console",
                "link",
                "--principal",
                "bob@acme.example",
                "--tenant",
                "acme",
                "--roles",
                "approver",
                "--store",
                store,
                "--url",
                console,
            ],
            check=False,
        )
        assert minted.returncode == 0, minted.stderr.decode()
        bobs = minted.stdout.decode().strip()
        assert bobs.startswith(f"{console}/login?token=")
        async with httpx.AsyncClient() as client:
            page = await sign_in(client, bobs)
            assert "bob@acme.example" in page.text


async def test_console_alone_serves_the_store_of_a_gateway(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'alone.db'}"
    args = ("console", "--store", store, "--principal", "ann@acme.example", "--roles", "auditor")
    async with running(*args) as (console, user, link):
        assert user == "ann@acme.example"
        async with httpx.AsyncClient() as client:
            await sign_in(client, link)
            audit = await client.get(f"{console}/audit")
            assert audit.status_code == 200 and "No record matches" in audit.text
            health = await client.get(f"{console}/health")
            assert "ok" in health.text


def test_console_link_fails_with_a_clear_error_for_a_bad_principal(tmp_path: Path) -> None:
    result = subprocess.run(
        [*CALLGATE, "console", "link", "--principal", " ", "--store", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "user" in result.stderr.lower()
