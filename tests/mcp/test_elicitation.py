"""Tools that ask the client (elicitation, sampling, roots), with the SDK client in memory.

At 2025-11-25 the questions are server-to-client requests on the call's stream; at
2026-07-28 the call answers ``input_required`` with a sealed ``requestState`` and the
client retries with ``inputResponses``. The SDK client drives both; the raw session
is used where a test needs to see (or tamper with) a round.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.context import ClientRequestContext

from callgate import Gate, Principal, Toolbox
from callgate.contract import ToolContext
from callgate.contract.context import ClientCannot, Elicitation
from callgate.errors import ErrorKind
from callgate.mcp import build_server
from callgate.store import MemoryStore
from tests.conformance.fixture import FIXTURE_TOOLBOX, fixture_toolboxes

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
CALLER = Principal("mcp-client", tenant="acme")
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class FakeClient:
    """The client's side: a user who answers forms, a model, and roots; records what came."""

    def __init__(self, action: str = "accept", name: str = "Alice") -> None:
        self.action = action
        self.name = name
        self.asked: list[str] = []

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        fields = params.requested_schema.get("properties", {})
        content: dict[str, Any] = {
            key: self.name if spec.get("type") == "string" else True for key, spec in fields.items()
        }
        return types.ElicitResult(action="accept", content=content)

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        self.asked.append(content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text="Bonjour"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult.model_validate(
            {"roots": [{"uri": "file:///work", "name": "work"}]}
        )


def own_toolbox() -> Toolbox:
    box = Toolbox("asks")

    @box.tool(read_only=True)
    async def greet_user(ctx: ToolContext) -> dict[str, Any]:
        """Ask the user's name and greet them."""
        answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
        return {"action": answer.action, "content": dict(answer.content or {})}

    @box.tool(read_only=True)
    async def two_questions(ctx: ToolContext, topic: str) -> str:
        """Ask twice, each in its own round.

        Args:
            topic: Any text.
        """
        first = await ctx.elicit(f"First, about {topic}?", NAME_FORM)
        second = await ctx.elicit("Second?", NAME_FORM)
        return f"{(first.content or {}).get('name')}/{(second.content or {}).get('name')}"

    @box.tool(read_only=True)
    def sync_asker(ctx: ToolContext) -> str:
        """A sync tool asking from its worker thread."""
        answer = ctx.elicit_sync("What is your name?", NAME_FORM, key="user_name")
        roots = ctx.list_roots_sync()
        text = ctx.sample_sync("Say hi", max_tokens=10)
        return f"{(answer.content or {}).get('name')} {roots[0].uri} {text}"

    return box


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    async with Gate([*fixture_toolboxes(), own_toolbox()], store=MemoryStore()) as gate:
        yield gate


def client(gate: Gate, mode: str, fake: FakeClient | None, *, sampling: bool = True) -> Client:
    server = build_server(gate, principal=CALLER, unprefixed=[FIXTURE_TOOLBOX])
    if fake is None:
        return Client(server, mode=mode)
    return Client(
        server,
        mode=mode,
        elicitation_callback=fake.elicit,
        sampling_callback=fake.sample if sampling else None,
        list_roots_callback=fake.roots,
    )


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_asks_the_user_and_gets_the_answer(gate: Gate, mode: str) -> None:
    fake = FakeClient()
    async with client(gate, mode, fake) as mcp:
        result = await mcp.call_tool("test_elicitation", {"message": "Who are you?"})
    assert not result.is_error
    assert fake.asked == ["Who are you?"]
    assert text(result) == (
        'User response: action=accept, content={"username": "Alice", "email": "Alice"}'
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_question_reaches_the_tool(gate: Gate, mode: str, action: str) -> None:
    async with client(gate, mode, FakeClient(action=action)) as mcp:
        result = await mcp.call_tool("asks__greet_user", {})
    assert result.structured_content == {"action": action, "content": {}}


@pytest.mark.parametrize("mode", MODES)
async def test_the_user_the_model_and_the_roots_answer_together(gate: Gate, mode: str) -> None:
    fake = FakeClient()
    async with client(gate, mode, fake) as mcp:
        result = await mcp.call_tool("test_input_required_result_multiple_inputs", {})
    assert text(result) == "Bonjour Alice; roots: file:///work"
    assert sorted(fake.asked) == ["Generate a greeting", "What is your name?", "roots"]


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_returns_the_models_text(gate: Gate, mode: str) -> None:
    async with client(gate, mode, FakeClient()) as mcp:
        result = await mcp.call_tool("test_sampling", {"prompt": "Say hi"})
    assert text(result) == "LLM response: Bonjour"


@pytest.mark.parametrize("mode", MODES)
async def test_each_round_asks_only_the_new_question(gate: Gate, mode: str) -> None:
    fake = FakeClient()
    async with client(gate, mode, fake) as mcp:
        result = await mcp.call_tool("asks__two_questions", {"topic": "cats"})
    assert text(result) == "Alice/Alice"
    assert fake.asked == ["First, about cats?", "Second?"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_tool_asks_from_its_thread(gate: Gate, mode: str) -> None:
    fake = FakeClient()
    async with client(gate, mode, fake) as mcp:
        result = await mcp.call_tool("asks__sync_asker", {})
    assert text(result) == "Alice file:///work Bonjour"
    assert fake.asked == ["What is your name?", "roots", "Say hi"]


async def test_without_the_capability_the_tool_fails_at_2025_11_25(gate: Gate) -> None:
    async with client(gate, "legacy", None) as mcp:
        result = await mcp.call_tool("test_elicitation", {"message": "Who?"})
    assert result.is_error
    assert "this client cannot ask the user questions (elicitation)" in text(result)


async def test_without_the_capability_the_call_is_refused_at_2026_07_28(gate: Gate) -> None:
    async with client(gate, "2026-07-28", FakeClient(), sampling=False) as mcp:
        with pytest.raises(MCPError) as caught:
            await mcp.call_tool("test_missing_capability", {})
    assert caught.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_may_do_without_a_missing_capability(gate: Gate, mode: str) -> None:
    fake = FakeClient()
    server = build_server(gate, principal=CALLER, unprefixed=[FIXTURE_TOOLBOX])
    async with Client(server, mode=mode, sampling_callback=fake.sample) as mcp:
        result = await mcp.call_tool("test_input_required_result_capabilities", {})
    assert text(result) == "no elicitation; Bonjour"


async def test_questions_not_asked_are_closed_when_one_cannot_be(gate: Gate) -> None:
    # ask_all stops at the first question the client cannot answer; the rest
    # were never awaited and must not warn (warnings are errors here).
    fake = FakeClient()
    server = build_server(gate, principal=CALLER, unprefixed=[FIXTURE_TOOLBOX])
    async with Client(server, mode="legacy", sampling_callback=fake.sample) as mcp:
        result = await mcp.call_tool("test_input_required_result_multiple_inputs", {})
    assert result.is_error
    assert "this client cannot ask the user questions (elicitation)" in text(result)
    assert fake.asked == []


# 2026-07-28 rounds, driven by hand ---------------------------------------------------


async def first_round(mcp: Client, tool: str = "asks__greet_user") -> types.InputRequiredResult:
    result = await mcp.session.call_tool(tool, {}, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult)
    return result


ALICE = {"user_name": types.ElicitResult(action="accept", content={"name": "Alice"})}


async def test_input_required_carries_the_question_and_a_sealed_state(gate: Gate) -> None:
    async with client(gate, "2026-07-28", FakeClient()) as mcp:
        first = await first_round(mcp)
        assert first.input_requests is not None
        request = first.input_requests["user_name"]
        assert isinstance(request, types.ElicitRequest)
        assert request.params.message == "What is your name?"
        assert first.request_state is not None
        # Encrypted: nothing of the state's content is readable.
        assert "answers" not in first.request_state
        done = await mcp.session.call_tool(
            "asks__greet_user",
            {},
            input_responses=ALICE,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, types.CallToolResult)
    assert done.structured_content == {"action": "accept", "content": {"name": "Alice"}}


async def test_a_tampered_state_is_rejected(gate: Gate) -> None:
    async with client(gate, "2026-07-28", FakeClient()) as mcp:
        first = await first_round(mcp)
        assert first.request_state is not None
        state = first.request_state
        tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        for bad in (tampered, state + "-TAMPERED", "v1.garbage", json.dumps({"v": 1})):
            with pytest.raises(MCPError) as caught:
                await mcp.session.call_tool(
                    "asks__greet_user",
                    {},
                    input_responses=ALICE,  # type: ignore[arg-type]
                    request_state=bad,
                    allow_input_required=True,
                )
            assert caught.value.code == types.INVALID_PARAMS


async def test_a_replayed_state_is_rejected(gate: Gate) -> None:
    async with client(gate, "2026-07-28", FakeClient()) as mcp:
        first = await first_round(mcp)

        async def retry() -> Any:
            return await mcp.session.call_tool(
                "asks__greet_user",
                {},
                input_responses=ALICE,  # type: ignore[arg-type]
                request_state=first.request_state,
                allow_input_required=True,
            )

        assert isinstance(await retry(), types.CallToolResult)
        with pytest.raises(MCPError) as caught:
            await retry()
    assert caught.value.code == types.INVALID_PARAMS


async def test_a_state_is_bound_to_its_tool_and_arguments(gate: Gate) -> None:
    async with client(gate, "2026-07-28", FakeClient()) as mcp:
        first = await mcp.session.call_tool(
            "asks__two_questions", {"topic": "cats"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        with pytest.raises(MCPError) as caught:
            await mcp.session.call_tool(
                "asks__two_questions",
                {"topic": "dogs"},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert caught.value.code == types.INVALID_PARAMS


async def test_an_earlier_answer_comes_back_only_from_the_sealed_state(gate: Gate) -> None:
    # Round 2 answers the first question; round 3 answers only the second, and the
    # first answer comes from the state minted in round 2.
    async with client(gate, "2026-07-28", FakeClient()) as mcp:
        args = {"topic": "cats"}
        one = await mcp.session.call_tool("asks__two_questions", args, allow_input_required=True)
        assert isinstance(one, types.InputRequiredResult) and one.input_requests
        (key1,) = one.input_requests
        answer = types.ElicitResult(action="accept", content={"name": "A"})
        two = await mcp.session.call_tool(
            "asks__two_questions",
            args,
            input_responses={key1: answer},
            request_state=one.request_state,
            allow_input_required=True,
        )
        assert isinstance(two, types.InputRequiredResult) and two.input_requests
        (key2,) = two.input_requests
        assert key2 != key1
        three = await mcp.session.call_tool(
            "asks__two_questions",
            args,
            input_responses={key2: types.ElicitResult(action="accept", content={"name": "B"})},
            request_state=two.request_state,
            allow_input_required=True,
        )
    assert isinstance(three, types.CallToolResult)
    assert text(three) == "A/B"


# Without a client --------------------------------------------------------------------


async def test_without_a_sink_asking_is_a_construction_error(gate: Gate) -> None:
    env = await gate.call(
        f"{FIXTURE_TOOLBOX}.test_elicitation", {"message": "Who?"}, principal=CALLER
    )
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert env.error.message_for_model == (
        "this client cannot ask the user questions (elicitation)"
    )


def test_client_cannot_names_the_capability() -> None:
    error = ClientCannot("roots", "list its roots (roots)")
    assert error.capability == "roots"
    assert Elicitation("decline").accepted is False
