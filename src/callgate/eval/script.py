"""A task's script as a :class:`~callgate.agent.model.ScriptedModel`.

Scripts are fixed, but some arguments are only known during the run (a preview
id). A string ``"${tool.path}"`` in a scripted call's arguments is replaced,
when that turn is made, by the value at ``path`` in the last successful result
of ``tool`` in the request's messages: what a model would copy from what it read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from callgate.agent.messages import Message, ModelRequest, ModelResponse, ToolResults
from callgate.agent.model import ScriptedModel, Step, calls, reply
from callgate.eval.tasks import Step as TaskStep

__all__ = ["dig", "scripted_model"]

_REF = re.compile(r"^\$\{(?P<tool>[^}]+?)\.(?P<path>[^.}][^}]*)\}$")


def dig(value: Any, path: str) -> Any:
    """The value at the dotted ``path`` in ``value`` (list indexes as numbers).

    Raises:
        LookupError: the path does not lead anywhere.
    """
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, list) and part.lstrip("-").isdigit():
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            raise LookupError(f"no {part!r} in the result")
    return value


def _last_result(messages: Sequence[Message], tool: str) -> Any:
    for message in reversed(messages):
        if not isinstance(message, ToolResults):
            continue
        for result in reversed(message.results):
            if result.name == tool and not result.is_error:
                # The payload is JSON text, possibly followed by a truncation notice.
                value, _ = json.JSONDecoder().raw_decode(result.content.lstrip())
                return value
    raise LookupError(f"no successful result of {tool} yet")


def _split_ref(text: str, messages: Sequence[Message]) -> Any:
    # Tool names contain dots too: try the longest tool name that has a result.
    inner = text[2:-1]
    parts = inner.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        tool, path = ".".join(parts[:cut]), ".".join(parts[cut:])
        try:
            return dig(_last_result(messages, tool), path)
        except (LookupError, ValueError):
            continue
    return text  # unresolved: sent as written, and the gate says what is wrong


def _resolve(value: Any, messages: Sequence[Message]) -> Any:
    if isinstance(value, str) and _REF.match(value):
        return _split_ref(value, messages)
    if isinstance(value, Mapping):
        return {k: _resolve(v, messages) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, messages) for v in value]
    return value


def _turn(step: TaskStep) -> Step:
    if step.reply is not None:
        return reply(step.reply)
    if not any(_has_ref(args) for _, args in step.calls):
        return calls(*step.calls, text=step.text)

    def answer(request: ModelRequest) -> ModelResponse:
        resolved = [(name, _resolve(args, request.messages)) for name, args in step.calls]
        return calls(*resolved, text=step.text)

    return answer


def _has_ref(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_REF.match(value))
    if isinstance(value, Mapping):
        return any(_has_ref(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_ref(v) for v in value)
    return False


def scripted_model(steps: Sequence[TaskStep], *, name: str = "scripted") -> ScriptedModel:
    """A fresh scripted model answering with ``steps``, turn by turn."""
    return ScriptedModel([_turn(s) for s in steps], name=name)
