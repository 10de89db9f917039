"""search_tools, describe_tools and call_tool through a real gate: the right tool
found in English and Chinese, nothing outside the caller's reach found or called."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from callgate import Gate, Policy, Principal, Rule
from callgate.discovery import DiscoveryRule, DiscoverySettings
from callgate.runtime.envelope import Envelope, Status
from callgate.store import MemoryStore
from tests.discovery.catalogue import catalogue

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
BILLER = Principal("bob", tenant="acme", scopes={"billing:write"})
GLOBEX = Principal("gina", tenant="globex")
OFF = DiscoverySettings(embeddings="off")


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with Gate(catalogue(), store=MemoryStore(), discovery=OFF) as gate:
        yield gate


async def found(gate: Gate, query: str, who: Principal = ALICE, **more: Any) -> list[str]:
    envelope = await gate.call("callgate.search_tools", {"query": query, **more}, principal=who)
    assert envelope.status is Status.OK, envelope.error
    return [tool["name"] for tool in envelope.payload["tools"]]


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("send an email to a customer", "mail.send_email"),
        ("which emails are in my inbox", "mail.list_inbox"),
        ("roll back the release", "ops.deploy_rollback"),
        ("is deployment D-7 still running", "ops.deploy_status"),
        ("restart the web server", "ops.restartServer"),
        ("restart_server", "ops.restartServer"),
        ("mail.archive_message", "mail.archive_message"),
        ("搜索客户投诉", "helpdesk.ticket_search"),
        ("回复工单", "helpdesk.ticket_reply"),
    ],
)
async def test_english_and_chinese_queries_find_the_right_tool_first(
    gate: Gate, query: str, tool: str
) -> None:
    assert (await found(gate, query))[0] == tool


async def test_results_are_a_name_and_one_line_and_say_what_to_do_next(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.search_tools", {"query": "email", "limit": 2}, principal=ALICE
    )

    tools = envelope.payload["tools"]
    assert len(tools) == 2
    assert set(tools[0]) == {"name", "summary"}
    assert "\n" not in tools[0]["summary"]
    assert "callgate.describe_tools" in envelope.payload["next_step"]
    assert "BM25 alone" in envelope.payload["note"] or "off" in envelope.payload["note"]


async def test_nothing_matching_says_so_rather_than_guessing(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.search_tools", {"query": "quantum entanglement"}, principal=ALICE
    )

    assert envelope.payload["tools"] == []
    assert "search again" in envelope.payload["next_step"]


async def test_a_tool_outside_the_callers_scopes_is_never_found(gate: Gate) -> None:
    assert "billing.refund_invoice" not in await found(gate, "refund an invoice", limit=20)
    assert (await found(gate, "refund an invoice", BILLER))[0] == "billing.refund_invoice"


async def test_a_tool_of_another_tenant_is_never_found(gate: Gate) -> None:
    assert "partner.partner_invoice_list" not in await found(gate, "partner invoices", limit=20)
    assert await found(gate, "partner invoices", GLOBEX) == ["partner.partner_invoice_list"]


async def test_call_tool_cannot_reach_what_search_hides(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.call_tool",
        {"name": "billing.refund_invoice", "arguments": {"invoice_id": "I-1", "amount": 5}},
        principal=ALICE,
    )

    assert envelope.status is Status.ERROR
    assert envelope.error is not None and envelope.error.kind.value == "permission"


async def test_describe_gives_full_definitions_and_refuses_unknown_or_hidden_names(
    gate: Gate,
) -> None:
    envelope = await gate.call(
        "callgate.describe_tools",
        {"names": ["mail.send_email", "billing.refund_invoice", "mail.send_mail"]},
        principal=ALICE,
    )

    (tool,) = envelope.payload["tools"]
    assert tool["name"] == "mail.send_email"
    assert set(tool["input_schema"]["properties"]) == {"to", "subject", "body"}
    assert "recipient" in tool["description"]
    assert envelope.payload["not_found"] == ["billing.refund_invoice", "mail.send_mail"]
    assert "mail.send_email" in envelope.payload["next_step"]  # the close match


async def test_call_tool_answers_as_the_named_tool_and_is_audited_as_it(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.call_tool",
        {"name": "ops.deploy_status", "arguments": {"deploy_id": "D-1"}},
        principal=ALICE,
    )

    assert envelope.status is Status.OK
    assert envelope.tool == "ops.deploy_status"
    assert envelope.payload == {"id": "D-1"}
    audit = await gate.audit(call_id=envelope.call_id)
    assert {record.tool for record in audit} == {"ops.deploy_status"}


async def test_call_tool_validates_the_named_tools_arguments(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.call_tool",
        {"name": "ops.deploy_status", "arguments": {"deploy": "D-1"}},
        principal=ALICE,
    )

    assert envelope.error is not None and envelope.error.kind.value == "construction"
    assert "deploy_id" in envelope.for_model()


async def test_call_tool_with_a_wrong_name_suggests_the_close_one(gate: Gate) -> None:
    envelope = await gate.call(
        "callgate.call_tool", {"name": "mail.send_mail", "arguments": {}}, principal=ALICE
    )

    assert envelope.error is not None
    assert "mail.send_email" in envelope.error.message_for_model


async def test_call_tool_without_a_name_is_a_clear_construction_error(gate: Gate) -> None:
    envelope = await gate.call("callgate.call_tool", {"arguments": {}}, principal=ALICE)

    assert envelope.error is not None and envelope.error.kind.value == "construction"
    assert "name" in envelope.for_model()


async def test_call_tool_of_call_tool_is_refused(gate: Gate) -> None:
    inner = {"name": "ops.deploy_status", "arguments": {"deploy_id": "D-1"}}
    envelope = await gate.call(
        "callgate.call_tool",
        {"name": "callgate.call_tool", "arguments": inner},
        principal=ALICE,
    )

    assert envelope.status is Status.ERROR


async def test_call_tool_keeps_the_policy_an_approval_is_asked_as_for_a_direct_call() -> None:
    policy = Policy([Rule("require_approval", tools=["ops.deploy_rollback"], reason="prod")])
    async with Gate(catalogue(), store=MemoryStore(), policy=policy, discovery=OFF) as gate:
        arguments = {"deploy_id": "D-1", "reason": "errors"}
        via: Envelope = await gate.call(
            "callgate.call_tool",
            {"name": "ops.deploy_rollback", "arguments": arguments},
            principal=ALICE,
        )
        direct = await gate.call("ops.deploy_rollback", arguments, principal=ALICE)

    assert via.status is Status.PENDING_APPROVAL
    assert via.approval is not None and direct.approval is not None
    assert via.approval.approval_id == direct.approval.approval_id  # the same parked call


async def test_rules_pin_hide_and_require_a_mention() -> None:
    settings = DiscoverySettings(
        embeddings="off",
        rules=(
            DiscoveryRule(action="hide", tools=("mail.archive_*",)),
            DiscoveryRule(action="pin", tools=("ops.deploy_status",)),
            DiscoveryRule(action="mention", risk=("write_high_risk",)),
        ),
    )
    async with Gate(catalogue(), store=MemoryStore(), discovery=settings) as gate:
        archive = await found(gate, "archive a message", limit=20)
        pinned = await found(gate, "deployment state", limit=20)
        vague = await found(gate, "undo the bad release", limit=20)
        named = await found(gate, "deploy rollback of D-1", limit=20)

    assert "mail.archive_message" not in archive
    assert "ops.deploy_status" not in pinned  # offered directly, not searched
    assert "ops.deploy_rollback" not in vague
    assert named[0] == "ops.deploy_rollback"


async def test_a_toolbox_added_later_is_found_by_the_next_search(gate: Gate) -> None:
    from callgate import Toolbox

    box = Toolbox("weather")

    @box.tool(read_only=True, open_world=True)
    def forecast(city: str) -> str:
        """Tomorrow's weather forecast for a city.

        Args:
            city: The city.
        """
        return "sunny"

    assert "weather.forecast" not in await found(gate, "weather forecast")
    gate.registry.add(box)
    assert (await found(gate, "weather forecast"))[0] == "weather.forecast"
