"""Conformance fixture tools that ask the client: sampling, elicitation, roots.

Part of ``callgate.mcp.fixture`` (see its docstring for the scenarios); kept apart
because these tools exercise one MCP feature, asking the client for input.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from callgate.contract import ToolContext
from callgate.contract.context import ClientCannot

_USER_INFO = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

SEP1034_DEFAULTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
"""The form of elicitation-sep1034-defaults: a default for every primitive type."""

SEP1330_ENUMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}
"""The form of elicitation-sep1330-enums: the five enum shapes."""


def _form(properties: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


async def test_sampling(ctx: ToolContext, prompt: str) -> str:
    """Ask the client's model (scenario tools-call-sampling).

    Args:
        prompt: The prompt to send to the LLM.
    """
    return f"LLM response: {await ctx.sample(prompt, max_tokens=100)}"


async def test_elicitation(ctx: ToolContext, message: str) -> str:
    """Ask the user for a name and an email (scenario tools-call-elicitation).

    Args:
        message: The message to show the user.
    """
    answer = await ctx.elicit(message, _USER_INFO)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Ask with a default for every field (scenario elicitation-sep1034-defaults)."""
    answer = await ctx.elicit(
        "Please review and update the form fields with defaults", SEP1034_DEFAULTS
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Ask with every enum shape (scenario elicitation-sep1330-enums)."""
    answer = await ctx.elicit("Please select options from the enum fields", SEP1330_ENUMS)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Ask the user's name (input-required-result-basic-elicitation and others)."""
    answer = await ctx.elicit("What is your name?", _form({"name": "string"}), key="user_name")
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    """Ask the client's model a question (input-required-result-basic-sampling)."""
    text = await ctx.sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    return f"Sampling response: {text}"


async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    """List the client's roots (input-required-result-basic-list-roots)."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.uri for root in roots)


async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Ask two questions, one per round (input-required-result-multi-round)."""
    name = await ctx.elicit("Step 1: What is your name?", _form({"name": "string"}), key="step1")
    color = await ctx.elicit(
        "Step 2: What is your favorite color?", _form({"color": "string"}), key="step2"
    )
    return (
        f"Hello, {(name.content or {}).get('name')}! "
        f"Your favorite color is {(color.content or {}).get('color')}."
    )


async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Ask for a confirmation; the answer rides a sealed state
    (input-required-result-request-state)."""
    answer = await ctx.elicit("Please confirm", _form({"ok": "boolean"}), key="confirm")
    return f"state-ok: action={answer.action}"


async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Ask for a confirmation (input-required-result-tampered-state: the server
    must reject a retry whose requestState was altered)."""
    answer = await ctx.elicit("Please confirm", _form({"ok": "boolean"}), key="confirm")
    return f"Confirmed: action={answer.action}"


async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    """Ask the user if the client can, and its model (input-required-result-capability-check)."""
    parts = []
    try:
        answer = await ctx.elicit("What is your name?", _form({"name": "string"}), key="user_name")
        parts.append(f"name={(answer.content or {}).get('name')}")
    except ClientCannot:
        parts.append("no elicitation")
    parts.append(await ctx.sample("Generate a greeting", max_tokens=50, key="greeting"))
    return "; ".join(parts)


async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    """Ask the user, the model and the roots in one round
    (input-required-result-multiple-input-requests)."""
    name, greeting, roots = await ctx.ask_all(
        ctx.elicit("What is your name?", _form({"name": "string"}), key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"),
    )
    return (
        f"{greeting} {(name.content or {}).get('name')}; "
        f"roots: {', '.join(root.uri for root in roots)}"
    )


async def test_missing_capability(ctx: ToolContext) -> str:
    """Sample the client's model without checking it can (server-stateless: a client
    that did not declare sampling gets -32021)."""
    return await ctx.sample("Say hello", max_tokens=20)


async def test_streaming_elicitation(ctx: ToolContext) -> str:
    """Ask the user something (server-stateless: the answer comes as input_required,
    never as a request on the response stream)."""
    answer = await ctx.elicit("Anything to add?", _form({"note": "string"}), key="note")
    return f"Noted: action={answer.action}"


_CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Delete it?"}},
    "required": ["confirm"],
}


async def confirm_delete(ctx: ToolContext, filename: str) -> str:
    """Delete a file once the user confirms (tasks-mrtr-input; nothing is deleted).

    Args:
        filename: The file to delete.
    """
    answer = await ctx.elicit(f"Delete {filename}?", _CONFIRM, key="confirm_delete")
    if answer.accepted and (answer.content or {}).get("confirm") is True:
        return f"Deleted {filename}."
    return f"Kept {filename}: not confirmed."


async def multi_input(ctx: ToolContext) -> str:
    """Ask two questions at once (tasks-mrtr-partial-fulfillment: the client may
    answer them one at a time)."""
    first, second = await ctx.ask_all(
        ctx.elicit("First name?", _form({"name": "string"}), key="first"),
        ctx.elicit("Second name?", _form({"name": "string"}), key="second"),
    )
    return f"{(first.content or {}).get('name')} and {(second.content or {}).get('name')}"


TASKS_ASK_CLIENT: tuple[Callable[..., Awaitable[str]], ...] = (confirm_delete, multi_input)
"""Tools that ask the client and run as tasks where the client declares the extension."""


async def test_tool_with_task(ctx: ToolContext) -> str:
    """Ask the user's name in the foreground, then finish as a task
    (tasks-mrtr-composition)."""
    answer = await ctx.elicit("What is your name?", _form({"name": "string"}), key="user_name")
    name = (answer.content or {}).get("name", "stranger")
    await ctx.run_in_background()
    await ctx.report_progress(1, 1, "greeted")
    return f"Hello, {name}! (finished in the background)"


ASKS_CLIENT: tuple[Callable[..., Awaitable[str]], ...] = (
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    test_input_required_result_elicitation,
    test_input_required_result_sampling,
    test_input_required_result_list_roots,
    test_input_required_result_multi_round,
    test_input_required_result_request_state,
    test_input_required_result_tampered_state,
    test_input_required_result_capabilities,
    test_input_required_result_multiple_inputs,
    test_missing_capability,
    test_streaming_elicitation,
)
"""Tools that ask the client (elicitation, sampling, roots); they change nothing."""
