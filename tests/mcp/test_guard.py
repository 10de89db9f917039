"""Nothing a handler raises by accident reaches an MCP client as its text."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from callgate import Gate
from callgate.mcp import build_server
from tests.mcp.tools import ALICE, build_gate
from tests.runtime.outage import DRIVER_WORDS, driver_error

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_unexpected_failure_is_an_internal_error_with_a_reference_only(
    mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with build_gate() as gate:
        server = build_server(gate, principal=ALICE)

        def broken(*_: Any, **__: Any) -> Any:
            raise driver_error()  # a store gone away under a handler that did not expect it

        monkeypatch.setattr(Gate, "tools", broken)
        with anyio.fail_after(5):
            async with Client(server, mode=mode) as client:
                with pytest.raises(MCPError) as failed:
                    await client.list_tools()
    error = failed.value.error
    assert error.code == types.INTERNAL_ERROR
    assert "reference err_" in error.message
    assert not any(word in error.message for word in DRIVER_WORDS)
    # The operator's log has what the client was not told, under the same reference.
    reference = error.message.split("reference ")[1].split(")")[0]
    [logged] = [r for r in caplog.records if reference in r.getMessage()]
    assert logged.exc_info is not None and "database is locked" in str(logged.exc_info[1])
