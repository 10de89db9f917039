"""Gate.outcomes: calls and failures of a set of tools, counted from the audit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from callgate import Toolbox
from callgate.errors import ConstructionError

from .conftest import ALICE, GateFactory

pytestmark = pytest.mark.anyio


def box(name: str) -> Toolbox:
    tools = Toolbox(name)

    @tools.tool(read_only=True, open_world=False)
    def ping(fail: bool = False) -> str:
        """Answer, or fail when asked to."""
        if fail:
            raise ConstructionError("asked to fail")
        return "pong"

    return tools


async def test_outcomes_count_one_prefix_only(make_gate: GateFactory) -> None:
    gate = make_gate([box("a_b"), box("aXb")])
    since = gate.clock.now() - timedelta(seconds=1)
    for fail in (False, False, True):
        await gate.call("a_b.ping", {"fail": fail}, principal=ALICE)
    await gate.call("aXb.ping", {}, principal=ALICE)
    # "_" is a LIKE wildcard in SQL: it must match itself only.
    assert await gate.outcomes("a_b.", since=since) == (3, 1)
    assert await gate.outcomes("aXb.", since=since) == (1, 0)
    assert await gate.outcomes("a_b.", since=gate.clock.now() + timedelta(hours=1)) == (0, 0)
