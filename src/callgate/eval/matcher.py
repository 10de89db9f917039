"""``--model matcher``: a deterministic stand-in for a model that reads the tool
descriptions, for evals of tool design without a model server.

It follows the task's script (its arguments, its replies) but chooses each
scripted call's tool itself, among the tools the loop offers that take the same
arguments (the look-alikes of the scripted tool): the one whose name and
description match the task's prompt best, by BM25 over the same terms as
callgate's tool search (:func:`callgate.discovery.text.terms`, stemmed). A tie
keeps the order the tools are offered in. So a vague description loses to a
neighbour's that says what the prompt asks, and a better description wins it
back: what a real model does more or less reliably, this does every time.

It is not a model: it never reads results, never corrects itself, and cannot
choose a tool whose arguments differ from the script's. Run real models
(``--model PROVIDER:MODEL``) before trusting a change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.agent.messages import ModelRequest, ModelResponse, ToolCall, ToolDef, UserMessage
from callgate.agent.model import Model, ScriptedModel
from callgate.eval.script import scripted_model
from callgate.eval.tasks import Task

__all__ = ["MatchingModel", "matching_model"]


class MatchingModel:
    """Answers like ``inner`` (the task's scripted model), each tool call's name
    replaced by the best match for the prompt among its look-alikes."""

    def __init__(self, inner: ScriptedModel, *, name: str = "matcher") -> None:
        self._inner = inner
        self.name = name

    async def request(self, request: ModelRequest) -> ModelResponse:
        answer = await self._inner.request(request)
        prompt = _prompt(request)
        parts = [
            _rechosen(part, request.tools, prompt) if isinstance(part, ToolCall) else part
            for part in answer.parts
        ]
        return ModelResponse(
            parts=tuple(parts),
            stop_reason=answer.stop_reason,
            usage=answer.usage,
            model=self.name,
            raw=answer.raw,
        )


def matching_model(task: Task) -> Model:
    """The matcher for one run of ``task`` (a fresh script each run)."""
    return MatchingModel(scripted_model(task.script))


def _prompt(request: ModelRequest) -> str:
    for message in request.messages:
        if isinstance(message, UserMessage):
            return message.content
    return ""


def _rechosen(call: ToolCall, tools: Sequence[ToolDef], prompt: str) -> ToolCall:
    by_name = {t.name: t for t in tools}
    scripted = by_name.get(call.name)
    if scripted is None:
        return call
    shape = _parameters(scripted.input_schema)
    rivals = [t for t in tools if _parameters(t.input_schema) == shape]
    if len(rivals) < 2:
        return call
    best = _best(rivals, prompt)
    if best.name == call.name:
        return call
    return ToolCall(id=call.id, name=best.name, arguments=call.arguments)


def _parameters(schema: Mapping[str, Any]) -> frozenset[str]:
    props = schema.get("properties")
    return frozenset(props) if isinstance(props, Mapping) else frozenset()


def _best(tools: Sequence[ToolDef], prompt: str) -> ToolDef:
    import bm25s

    from callgate.discovery.text import name_words, terms

    corpus = [terms(f"{name_words(t.name)} {t.description}") for t in tools]
    model = bm25s.BM25(k1=1.2, b=0.75)
    model.index(corpus, show_progress=False)
    wanted = [term for term in terms(prompt) if term in model.vocab_dict]
    if not wanted:
        return tools[0]
    scores = list(model.get_scores(wanted))
    top = max(scores)
    return tools[scores.index(top)]
