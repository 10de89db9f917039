"""The agent loop against a scripted OpenAI-compatible server with the quirks real ones have.

The server answers ``POST /v1/chat/completions`` through ``httpx.MockTransport``
from a script of turns, and checks each request the way llama-cpp-python's server
does: an assistant message with ``"content": null`` (or none) beside tool calls is
refused with a 500, a request whose prompt plus ``max_tokens`` passes its context
with a 400 ``context_length_exceeded``. The real SDK, the real adapter, the real
loop and gate run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import httpx
import pytest
from pydantic import Field

from callgate import Gate, Principal, Toolbox
from callgate.agent.loop import Agent, RunLimits
from callgate.agent.openai_chat import OpenAIChatModel
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme", scopes={"ops:read", "ops:write"})
BASE_URL = "http://127.0.0.1:8080/v1"

Turn = Callable[[dict[str, Any]], dict[str, Any]]


class Server:
    """A llama-cpp-python-like server: a script of turns, its refusals, and what it got."""

    def __init__(
        self,
        *turns: Turn | dict[str, Any] | httpx.Response,
        context: int = 100_000,
        null_content: bool = False,
        refuses_required: bool = True,
    ) -> None:
        self.turns = list(turns)
        self.context = context
        self.null_content = null_content  # True: read it, as vLLM and OpenAI do
        # llama-cpp-python's chatml-function-calling asserts tool_choice is "auto" or a
        # named function: "required" fails the assertion, a 500 with no more to say.
        self.refuses_required = refuses_required
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = json.loads(request.content)
        self.requests.append(body)
        for message in body["messages"]:
            if message["role"] == "assistant" and message.get("content") is None:
                if self.null_content and "content" in message:
                    continue
                # What its chat templates do with a missing or null content.
                return httpx.Response(500, json={"error": {"message": "Internal Server Error"}})
        if self.refuses_required and body.get("tool_choice") == "required":
            return httpx.Response(500, json={"error": {"message": "Internal Server Error"}})
        prompt = len(json.dumps(body["messages"])) // 4
        wanted = prompt + int(body.get("max_tokens", 16))
        if wanted > self.context:
            return httpx.Response(
                400,
                json={
                    "error": {
                        "message": f"This model's maximum context length is {self.context} "
                        f"tokens. However, you requested {wanted} tokens ({prompt} in the "
                        f"messages, {wanted - prompt} in the completion). Please reduce the "
                        "length of the messages or completion.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
            )
        turn = self.turns.pop(0)
        if isinstance(turn, httpx.Response):
            return turn  # an error the server answers with
        answer = turn(body) if callable(turn) else turn
        return httpx.Response(200, json=answer)

    def model(self) -> OpenAIChatModel:
        model = OpenAIChatModel("smollm2", base_url=BASE_URL)
        model.client = model.client.with_options(
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self)), max_retries=0
        )
        return model


def completion(message: dict[str, Any], finish: str | None = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_764_576_000,
        "model": "smollm2",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def tool_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return completion({"content": None, "tool_calls": list(calls)}, "tool_calls")


def function(name: str, arguments: Any, **call: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **call}


def answer(text: str) -> dict[str, Any]:
    return completion({"content": text})


class Ops:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def toolbox(self) -> Toolbox:
        box = Toolbox("ops")

        @box.tool(scopes={"ops:read"}, read_only=True, open_world=False)
        def status(deploy_id: str) -> dict[str, str]:
            """Show a deployment's state.

            Args:
                deploy_id: The deployment, like D-1.
            """
            return {"deploy_id": deploy_id, "state": f"state of {deploy_id}"}

        @box.tool(scopes={"ops:write"}, idempotent=False, open_world=False)
        def note(text: str) -> str:
            """Add a note to the log.

            Args:
                text: What to write.
            """
            self.notes.append(text)
            return f"noted: {text}"

        return box


@pytest.fixture
def ops() -> Ops:
    return Ops()


async def run(ops: Ops, server: Server, prompt: str = "go", **options: Any) -> Any:
    async with Gate([ops.toolbox()], store=MemoryStore()) as gate:
        result = await Agent(gate, server.model(), principal=ALICE, **options).run(prompt)
        saved = await gate.store.get_run(result.run_id)
    return result, saved


def sent_after_calls(server: Server) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The assistant message with the calls and the tool messages, as the server got them."""
    messages = server.requests[-1]["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    return assistant, [m for m in messages if m["role"] == "tool"]


async def test_a_tool_call_turn_goes_back_with_text_a_compatible_server_reads(ops: Ops) -> None:
    server = Server(
        tool_calls(function("ops__status", '{"deploy_id": "D-1"}', id="call_1")),
        answer("D-1 is fine."),
    )

    result, _ = await run(ops, server)

    assert result.status == "completed", result.reason
    assert result.output == "D-1 is fine."
    assistant, _ = sent_after_calls(server)
    assert assistant["content"] == ""


async def test_calls_sharing_an_id_each_get_their_own_result(ops: Ops) -> None:
    server = Server(
        tool_calls(
            function("ops__status", '{"deploy_id": "D-1"}', id="call_0"),
            function("ops__status", '{"deploy_id": "D-2"}', id="call_0"),
        ),
        answer("Both checked."),
        null_content=True,  # this test is about ids only
    )

    result, _ = await run(ops, server)

    assert result.status == "completed", result.reason
    assert [c.payload["deploy_id"] for c in result.calls] == ["D-1", "D-2"]
    assistant, results = sent_after_calls(server)
    ids = [call["id"] for call in assistant["tool_calls"]]
    assert ids[0] == "call_0" and len(set(ids)) == 2  # the first keeps the server's id
    assert [r["tool_call_id"] for r in results] == ids
    assert "D-1" in results[0]["content"] and "D-2" in results[1]["content"]


async def test_two_writes_sharing_an_id_both_run_and_both_succeed(ops: Ops) -> None:
    server = Server(
        tool_calls(
            function("ops__note", '{"text": "first"}', id="same"),
            function("ops__note", '{"text": "second"}', id="same"),
        ),
        answer("Noted."),
        null_content=True,  # this test is about ids only
    )

    result, _ = await run(ops, server)

    assert ops.notes == ["first", "second"]
    assert [(c.status, c.payload) for c in result.calls] == [
        ("ok", "noted: first"),
        ("ok", "noted: second"),
    ]


async def test_calls_without_ids_are_paired_by_generated_ids_sent_both_ways(ops: Ops) -> None:
    server = Server(
        tool_calls(
            function("ops__status", '{"deploy_id": "D-1"}'),
            function("ops__status", '{"deploy_id": "D-2"}', id=None),
        ),
        answer("Both checked."),
        null_content=True,  # this test is about ids only
    )

    result, _ = await run(ops, server)

    assert result.status == "completed", result.reason
    assistant, results = sent_after_calls(server)
    ids = [call["id"] for call in assistant["tool_calls"]]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2
    assert [r["tool_call_id"] for r in results] == ids
    assert "D-1" in results[0]["content"] and "D-2" in results[1]["content"]


async def test_arguments_sent_as_an_object_are_taken_as_they_are(ops: Ops) -> None:
    server = Server(
        tool_calls(function("ops__status", {"deploy_id": "D-1"}, id="c1")),
        answer("D-1 checked."),
    )

    result, saved = await run(ops, server)

    assert result.status == "completed", result.reason
    assert result.calls[0].status == "ok" and result.calls[0].payload["deploy_id"] == "D-1"
    assistant, _ = sent_after_calls(server)
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"deploy_id": "D-1"}
    assert saved is not None and saved.status == "completed"


@pytest.mark.parametrize("arguments", [["D-1"], 7, True])
async def test_arguments_of_another_shape_are_an_error_for_the_model(
    ops: Ops, arguments: Any
) -> None:
    server = Server(
        tool_calls(function("ops__status", arguments, id="c1")),
        answer("I could not check."),
    )

    result, saved = await run(ops, server)

    assert result.status == "completed", result.reason
    assert result.calls[0].status == "error" and result.calls[0].error_kind == "construction"
    _, results = sent_after_calls(server)
    assert results[0]["content"].startswith("ERROR: ")
    assert saved is not None


async def test_an_answer_the_adapter_cannot_read_fails_the_run_and_it_is_saved(ops: Ops) -> None:
    broken = completion({})
    broken["choices"][0]["message"] = "not an object"
    server = Server(broken)

    result, saved = await run(ops, server)

    assert result.status == "failed"
    assert "could not be read" in result.reason
    assert saved is not None and saved.status == "failed"


@pytest.mark.parametrize(
    ("answer_", "status", "says"),
    [
        ({**completion({}), "choices": []}, "failed", "empty"),
        (completion({"content": None}), "failed", "empty"),
        (completion({"content": ""}), "failed", "empty"),
        (completion({"content": "   "}, None), "failed", "empty"),
        (completion({"content": "D-1 is in a sta"}, "length"), "stopped", "--max-output-tokens"),
        (
            completion(
                {
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}}
                    ],
                },
                "tool_calls",
            ),
            "failed",
            "no call callgate can make",
        ),
        (completion({"content": "Done?"}, "something_new"), "failed", "does not know"),
        (completion({"content": None, "refusal": "I can't."}), "failed", "refused"),
    ],
)
async def test_an_answer_without_a_finished_text_is_not_a_success(
    ops: Ops, answer_: dict[str, Any], status: str, says: str
) -> None:
    result, saved = await run(ops, Server(answer_))

    assert result.status == status
    assert says in result.reason
    assert saved is not None and saved.status == status


async def test_a_context_too_small_for_the_output_budget_says_what_to_lower(ops: Ops) -> None:
    result, _ = await run(ops, Server(context=2048))

    assert result.status == "failed"
    assert "context_length_exceeded" in result.reason
    assert "lower the output budget (4096 tokens a request; --max-output-tokens" in result.reason


async def test_a_lower_output_budget_fits_a_small_context(ops: Ops) -> None:
    server = Server(answer("Hello."), context=2048)

    result, _ = await run(ops, server, limits=RunLimits(max_tokens_per_request=512))

    assert result.status == "completed", result.reason
    assert server.requests[0]["max_tokens"] == 512


async def test_a_500_for_a_request_the_server_cannot_handle_fails_the_run_saying_so(
    ops: Ops,
) -> None:
    result, saved = await run(ops, Server(), tool_choice="any")

    assert result.status == "failed"
    assert result.reason == (
        "the model request failed: OpenAI-compatible server error 500 at "
        "http://127.0.0.1:8080/v1/chat/completions: Internal Server Error"
    )
    assert saved is not None and saved.status == "failed"


async def test_a_forced_tool_goes_as_a_named_function_the_server_accepts(ops: Ops) -> None:
    from callgate.agent import ForcedTool

    server = Server(tool_calls(function("ops__note", '{"text": "hi"}', id="c1")))

    result, _ = await run(ops, server, tool_choice=ForcedTool("ops.note"))

    assert result.status == "completed" and ops.notes == ["hi"]
    assert server.requests[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "ops__note"},
    }


async def test_a_server_that_ignores_max_tokens_and_runs_out_is_a_stop_not_an_answer(
    ops: Ops,
) -> None:
    # It wrote past the 64 tokens asked for until its own context ended.
    server = Server(completion({"content": "D-1 is " + "fine " * 500}, "length"))

    result, _ = await run(ops, server, limits=RunLimits(max_tokens_per_request=64))

    assert server.requests[0]["max_tokens"] == 64
    assert result.status == "stopped"
    assert "cut off at the output token limit (64 tokens a request)" in result.reason


async def test_the_tools_reach_a_server_that_lists_them_only_in_a_system_message(
    ops: Ops,
) -> None:
    # llama-cpp-python's chatml-function-calling renders the tools inside the system
    # message: with none, its model saw no tool at all (prompts of 25 tokens).
    server = Server(answer("Hello."), answer("Hello."))

    await run(ops, server)
    await run(ops, server, system="Be brief.")

    without, given = (request["messages"][0] for request in server.requests)
    assert without == {"role": "system", "content": ""}
    assert given == {"role": "system", "content": "Be brief."}


async def test_an_agents_temperature_goes_with_every_request(ops: Ops) -> None:
    server = Server(
        tool_calls(function("ops__status", '{"deploy_id": "D-1"}', id="c1")), answer("Up.")
    )
    default = Server(answer("Up."))

    await run(ops, server, temperature=0.0)
    await run(ops, default)

    assert [request["temperature"] for request in server.requests] == [0.0, 0.0]
    assert "temperature" not in default.requests[0]


async def test_arguments_written_until_the_context_ran_out_are_not_sent_back_whole(
    ops: Ops,
) -> None:
    # llama-cpp-python ignores max_tokens while it writes arguments: a small model
    # that never closes its string writes until the context is full.
    runaway = '{"deploy_id": "D-' + "1234567890" * 600
    fits = '{"deploy_id": "D-1"}'
    server = Server(
        tool_calls(
            function("ops__status", runaway, id="c1"), function("ops__status", fits, id="c2")
        ),
        answer("D-1 is up."),
        context=1500,  # tokens: about what the runaway alone takes
    )

    result, saved = await run(ops, server, limits=RunLimits(max_tokens_per_request=256))

    assert result.status == "completed", result.reason
    assistant, results = sent_after_calls(server)
    sent = assistant["tool_calls"][0]["function"]["arguments"]
    assert sent.startswith(runaway[:1000])
    assert sent.endswith(f"… ({len(runaway) - 1000:,} more characters, not repeated)")
    assert assistant["tool_calls"][1]["function"]["arguments"] == fits  # it ran: kept whole
    assert "not valid JSON" in results[0]["content"]
    # The run's trace keeps what the model wrote.
    [first, _] = [e for e in saved.trace if e["type"] == "tool_call"]
    assert first["call"]["raw_arguments"] == runaway


async def test_a_prompt_that_filled_the_context_stops_the_run(ops: Ops) -> None:
    # llama-cpp-python's 400 when the model wrote arguments until the window was full
    # (the prompt it counts has grown to the whole window), or when the conversation
    # alone is longer than the window: the error does not say which.
    filled = httpx.Response(
        400,
        json={
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, "
                "you requested 4608 tokens (4096 in the messages, 512 in the completion). "
                "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    )

    result, _ = await run(ops, Server(filled))

    assert result.status == "stopped"  # a limit, as a cut-off answer: exit code 4
    assert "the run ran out of context" in result.reason
    assert "offer fewer tools" in result.reason
    assert "the model wrote until the window was full" in result.reason
    assert "lower the output budget" not in result.reason  # it would not have helped


async def test_large_bounds_are_not_sent_to_a_compatible_server_but_still_hold() -> None:
    # llama-cpp-python's server crashed (segmentation fault) building the grammar for
    # the demo's email body (maxLength 20,000; 1,000 was fine) and for an email pattern.
    box = Toolbox("mail")
    sent: list[str] = []

    @box.tool(open_world=False, idempotent=False)
    def send(
        body: Annotated[str, Field(max_length=20_000)],
        to: Annotated[
            list[Annotated[str, Field(max_length=254, pattern=r"^[a-z]+@[a-z]+\.[a-z]{2,}$")]],
            Field(max_length=500),
        ],
    ) -> str:
        """Send a message.

        Args:
            body: The text, 1-20,000 characters.
            to: The recipients.
        """
        sent.append(body)
        return "sent"

    long = json.dumps({"body": "x" * 20_001, "to": ["a@b.example"]})
    server = Server(tool_calls(function("mail__send", long, id="c1")), answer("Too long."))
    async with Gate([box], store=MemoryStore()) as gate:
        result = await Agent(gate, server.model(), principal=ALICE).run("go")

    [tool] = server.requests[0]["tools"]
    properties = tool["function"]["parameters"]["properties"]
    assert "maxLength" not in properties["body"] and "maxItems" not in properties["to"]
    assert properties["to"]["items"] == {"type": "string", "maxLength": 254}  # no pattern
    assert result.status == "completed" and sent == []  # the gate still refused it
    _, [refused] = sent_after_calls(server)
    assert refused["content"].startswith("ERROR: Argument 'body'")
