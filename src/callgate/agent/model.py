"""What the agent loop needs of a model, and a scripted one for tests.

A :class:`Model` takes a :class:`ModelRequest` and answers a
:class:`ModelResponse`; provider adapters (Anthropic, OpenAI, Gemini, any
OpenAI-compatible server) implement it over the official SDKs.
:class:`ScriptedModel` answers from a script instead: it is how callgate's tests,
and users' tests of their own agents, run the loop without a provider.

Example:
    model = ScriptedModel([
        call("ops.deploy_status", {"deploy_id": "D-1"}),
        reply("D-1 is running."),
    ])
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from callgate.agent.messages import (
    ModelRequest,
    ModelResponse,
    Part,
    StopReason,
    Text,
    ToolCall,
    Usage,
)
from callgate.errors import RuntimeFailure, UserError

__all__ = ["Model", "ModelError", "ScriptExhausted", "ScriptedModel", "call", "calls", "reply"]


class ModelError(RuntimeFailure):
    """A model request failed: the provider refused it, or could not be reached.

    ``retryable`` says whether trying again later may work (rate limits,
    overload, timeouts); ``status`` is the HTTP status, when there was one;
    ``cut_off`` that the run ran out of context (no room left for an answer).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        cut_off: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.cut_off = cut_off
        """The prompt filled the whole context window (the conversation was too
        long, or the model wrote until it was full) and the server refused to go
        on: a limit, as with a cut-off answer (the loop stops the run)."""
        self.retry_after = retry_after
        """Seconds the provider asked to wait before trying again (its
        ``Retry-After``), when it said and the error is retryable."""


class ScriptExhausted(UserError, RuntimeError):
    """A :class:`ScriptedModel` was asked more often than its script answers."""


@runtime_checkable
class Model(Protocol):
    """A model the loop can ask. ``name`` is for traces, e.g. ``anthropic:claude-x``.

    A model whose provider renames tools (``ops.deploy_status`` ->
    ``ops__deploy_status``) also has a ``name_rule`` attribute (a
    :class:`~callgate.agent.names.NameRule`): the loop then names tools that way
    in every text the model reads (next steps, hints, descriptions). The provider
    adapters also have ``base_url`` (the endpoint given, None for the provider's
    own), which a paused run keeps so that ``callgate run --resume`` needs no more.
    """

    name: str

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one request.

        Raises:
            ModelError: the provider refused the request or could not be reached.
        """
        ...


Step = ModelResponse | Callable[[ModelRequest], ModelResponse]
"""One scripted answer: fixed, or computed from the request it answers."""

_ids = itertools.count(1)


def _call_id() -> str:
    return f"call_{next(_ids):04d}"


def calls(*tool_calls: tuple[str, Mapping[str, Any]], text: str = "") -> ModelResponse:
    """A scripted turn that proposes several tool calls at once (ids made up)."""
    parts: list[Part] = [Text(text=text)] if text else []
    parts += [ToolCall(id=_call_id(), name=n, arguments=dict(a)) for n, a in tool_calls]
    return ModelResponse(parts=tuple(parts), stop_reason="tool_use", usage=Usage())


def call(name: str, arguments: Mapping[str, Any] | None = None, *, text: str = "") -> ModelResponse:
    """A scripted turn that proposes one tool call."""
    return calls((name, arguments or {}), text=text)


def reply(text: str, *, stop_reason: StopReason = "end_turn") -> ModelResponse:
    """A scripted turn that answers in text."""
    return ModelResponse(parts=(Text(text=text),), stop_reason=stop_reason, usage=Usage())


@dataclass
class ScriptedModel:
    """A :class:`Model` that answers from a script, turn by turn, and records what
    it was asked.

    Args:
        steps: the answers, in order: :class:`ModelResponse` (see :func:`call`,
            :func:`calls`, :func:`reply`) or functions of the request.
        name: the model name in traces.
        tokens: input/output tokens to report per request (a fixed count; real
            providers report theirs).

    Raises:
        ScriptExhausted: (from :meth:`request`) the script ran out: the loop
            asked more often than the test expected.
    """

    steps: list[Step] = field(default_factory=list)
    name: str = "scripted"
    tokens: tuple[int, int] = (0, 0)
    requests: list[ModelRequest] = field(default_factory=list)

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        name: str = "scripted",
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        self.steps = list(steps)
        self.name = name
        self.tokens = tokens
        self.requests = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if not self.steps:
            raise ScriptExhausted(
                f"ScriptedModel {self.name!r} has no answer left for request "
                f"{len(self.requests)}; add a step to its script"
            )
        step = self.steps.pop(0)
        response = step(request) if callable(step) else step
        if self.tokens != (0, 0) and response.usage == Usage():
            response = ModelResponse(
                parts=response.parts,
                stop_reason=response.stop_reason,
                usage=Usage(input_tokens=self.tokens[0], output_tokens=self.tokens[1]),
                model=response.model,
                raw=response.raw,
            )
        return response
