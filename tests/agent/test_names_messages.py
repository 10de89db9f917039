"""Provider-safe tool names map back exactly; messages survive JSON."""

from __future__ import annotations

import pytest

from callgate.agent.messages import (
    AssistantMessage,
    Text,
    ToolCall,
    ToolResult,
    ToolResults,
    UserMessage,
    call_ids,
    message_from_json,
    message_to_json,
    unique_call_ids,
)
from callgate.agent.names import ANTHROPIC_NAMES, GEMINI_NAMES, OPENAI_NAMES, NameMap


@pytest.mark.parametrize("rule", [ANTHROPIC_NAMES, OPENAI_NAMES, GEMINI_NAMES])
def test_names_map_to_accepted_names_and_back(rule: object) -> None:
    names = [
        "ops.deploy_status",
        "ops__deploy_status",  # would collide with the readable form of the first
        "math.factorial",
        "x" * 200,
        "spaces in name",
        "1starts_with_digit",
        "ok_name",
    ]
    mapping = NameMap(names, rule)  # type: ignore[arg-type]
    safe = [mapping.to_provider(n) for n in names]
    assert all(rule.accepts(s) for s in safe)  # type: ignore[attr-defined]
    assert len(set(safe)) == len(names)
    assert [mapping.from_provider(s) for s in safe] == names
    assert mapping.to_provider("ok_name") == "ok_name"  # valid names stay as they are
    # Deterministic: another request with the same names maps them the same way.
    assert [NameMap(names, rule).to_provider(n) for n in names] == safe  # type: ignore[arg-type]
    assert mapping.from_provider("invented_by_model") == "invented_by_model"


def test_messages_round_trip_through_json() -> None:
    messages = [
        UserMessage(content="Roll back D-1?"),
        AssistantMessage(
            parts=(
                Text(text="Checking."),
                ToolCall(id="c1", name="ops.deploy_status", arguments={"deploy_id": "D-1"}),
                ToolCall(id="c2", name="ops.x", raw_arguments="{not json"),
            )
        ),
        ToolResults(
            results=(
                ToolResult(call_id="c1", name="ops.deploy_status", content='{"state": "failed"}'),
                ToolResult(call_id="c2", name="ops.x", content="bad JSON", is_error=True),
            )
        ),
    ]
    assert [message_from_json(message_to_json(m)) for m in messages] == messages
    with pytest.raises(ValueError, match="unknown message role"):
        message_from_json({"role": "robot"})


def test_every_call_of_a_run_gets_an_id_no_other_call_has() -> None:
    earlier = [AssistantMessage(parts=(ToolCall(id="call_0", name="a"),))]
    message = AssistantMessage(
        parts=(
            Text(text="Checking."),
            ToolCall(id="call_1", name="a"),
            ToolCall(id="call_1", name="b"),  # the same id twice in a turn
            ToolCall(id="call_0", name="c"),  # an id of an earlier turn
            ToolCall(id="", name="d"),  # none
        )
    )

    fixed = unique_call_ids(message, call_ids(earlier))

    ids = [call.id for call in fixed.tool_calls]
    assert ids[0] == "call_1"  # a unique id is the provider's, kept for its reply
    assert len(set(ids) | {"call_0"}) == 5
    assert [call.name for call in fixed.tool_calls] == ["a", "b", "c", "d"]
    assert fixed.parts[0] == Text(text="Checking.")
    assert unique_call_ids(fixed, call_ids(earlier)) == fixed  # stable once unique
