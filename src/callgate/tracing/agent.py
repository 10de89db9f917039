"""Spans of agent runs and model turns, for :mod:`callgate.agent.loop`.

A run is an ``invoke_agent`` span; each model request in it a ``chat {model}``
span; the run's tool calls are ``execute_tool`` spans under the run (their
audit records carry the run's trace id). With tracing off the loop gets
:data:`NO_RUN` and :data:`NO_TURN`, which do nothing, and nothing of
OpenTelemetry is imported.

Never recorded: prompts, messages, answers, arguments. Token counts, finish
reasons and model names are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from callgate.tracing import current

if TYPE_CHECKING:
    from callgate.agent.messages import ModelRequest, ModelResponse
    from callgate.agent.runs import RunState
    from callgate.contract import Principal


class RunSpan(Protocol):
    def ended(self, status: str, reason: str, run: RunState) -> None:
        """Describe how the run ended (its status, reason and usage)."""


class TurnSpan(Protocol):
    def answered(self, response: ModelResponse) -> ModelResponse:
        """Describe the model's answer (finish reason, tokens); returns it."""


class _NoSpan:
    def ended(self, status: str, reason: str, run: RunState) -> None:
        return None

    def answered(self, response: ModelResponse) -> ModelResponse:
        return response

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NO_RUN = NO_TURN = _NoSpan()


def _model(name: str) -> dict[str, Any]:
    """GenAI attributes of a model named like ``anthropic:claude-x`` (or just ``scripted``)."""
    provider, _, model = name.rpartition(":")
    attributes: dict[str, Any] = {"gen_ai.request.model": model or name}
    if provider:
        attributes["gen_ai.provider.name"] = provider
    return attributes


def agent_run(
    model: str, run_id: str, principal: Principal, *, resumed: bool
) -> AbstractContextManager[RunSpan]:
    """The span of one agent run (or its resumption), current while the run goes."""
    tracer = current()
    if tracer is None:
        return NO_RUN
    return _run_span(tracer.tracer, model, run_id, principal, resumed=resumed)


def model_turn(model: str, request: ModelRequest, turn: int) -> AbstractContextManager[TurnSpan]:
    """The span of one model request of a run."""
    tracer = current()
    if tracer is None:
        return NO_TURN
    return _turn_span(tracer.tracer, model, request, turn)


class _Described:
    def __init__(self, span: Any) -> None:
        self.span = span

    def ended(self, status: str, reason: str, run: RunState) -> None:
        usage = run.usage
        self.span.set_attributes(
            {
                "callgate.run.status": status,
                "callgate.run.reason": reason[:500],
                "callgate.run.turns": run.turn,
                "callgate.run.tool_calls": usage.tool_calls,
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
            }
        )
        if status == "failed":
            from opentelemetry.trace import StatusCode

            self.span.set_status(StatusCode.ERROR, "run failed")

    def answered(self, response: ModelResponse) -> ModelResponse:
        attributes: dict[str, Any] = {
            "gen_ai.response.finish_reasons": [response.stop_reason],
            "gen_ai.usage.input_tokens": response.usage.input_tokens,
            "gen_ai.usage.output_tokens": response.usage.output_tokens,
            "callgate.tool_calls": len(response.message.tool_calls),
        }
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        self.span.set_attributes(attributes)
        return response


@contextmanager
def _run_span(
    tracer: Any, model: str, run_id: str, principal: Principal, *, resumed: bool
) -> Iterator[RunSpan]:
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": run_id,
        **_model(model),
        "callgate.run.id": run_id,
        "callgate.run.resumed": resumed,
        "callgate.user": principal.user,
    }
    if principal.tenant is not None:
        attributes["callgate.tenant"] = principal.tenant
    with tracer.start_as_current_span(
        "invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield _Described(span)


@contextmanager
def _turn_span(tracer: Any, model: str, request: ModelRequest, turn: int) -> Iterator[TurnSpan]:
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        **_model(model),
        "callgate.turn": turn,
        "callgate.tools_offered": len(request.tools),
    }
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    name = attributes["gen_ai.request.model"]
    # A failed request ends the span with the exception's type as its error (not its
    # text: a provider's error may quote the request).
    with tracer.start_as_current_span(
        f"chat {name}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield _Described(span)
        except Exception as exc:
            from opentelemetry.trace import StatusCode

            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
