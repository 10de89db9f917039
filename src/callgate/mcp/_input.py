"""A running tool's questions to the client: elicitation, sampling, roots.

Two wire generations, one tool-side API (:class:`ToolContext.elicit` / ``sample``
/ ``list_roots``):

- 2025-11-25: the question is a server-to-client request sent on the tool call's
  own stream (``elicitation/create``, ``sampling/createMessage``, ``roots/list``);
  the tool waits for the answer.
- 2026-07-28: no server-to-client requests. A question with no answer yet
  stops the tool (:class:`InputRequired`), and the call answers
  ``resultType: "input_required"`` with the question in ``inputRequests`` and a
  ``requestState``. The client retries the call with ``inputResponses``; the
  tool runs again from the start, and the questions it asks again get the
  answers (from this retry's ``inputResponses`` or, for earlier rounds, from the
  state). The state is sealed by the SDK's :class:`RequestStateBoundary`
  (encrypted, bound to the method, tool, arguments and principal, with a TTL);
  on top of that each state is accepted once (:class:`ReplayGuard`).

Either way, a client that did not declare the capability gets
:class:`ClientCannot` raised in the tool (which it may catch); uncaught, it
becomes ``-32021`` at 2026-07-28 and a tool execution error at 2025-11-25.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import allowed_log_levels
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import is_version_at_least
from pydantic import ValidationError

from callgate.contract import LOG_LEVELS, LogLevel
from callgate.contract.context import ClientCannot, Elicitation, InputRequired, Root
from callgate.mcp import _wire

__all__ = [
    "INPUT_REQUIRED_VERSION",
    "ClientInputSink",
    "ReplayGuard",
    "RequestSink",
]

INPUT_REQUIRED_VERSION = "2026-07-28"
"""The first protocol version whose calls ask the client through ``input_required``."""

_STATE_VERSION = 1

_CAPABILITIES: dict[str, types.ClientCapabilities] = {
    "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "roots": types.ClientCapabilities(roots=types.RootsCapability()),
}


class ReplayGuard:
    """Remembers the request states already used, so each is accepted once.

    In memory, for as long as a state can live (the sealing TTL): a server
    restart forgets them, but the ephemeral sealing key is gone then too.
    """

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._used: dict[str, float] = {}

    def use(self, nonce: str) -> bool:
        """Mark ``nonce`` used; False if it already was."""
        now = time.monotonic()
        if len(self._used) > 1024:
            self._used = {n: t for n, t in self._used.items() if t > now}
        if nonce in self._used and self._used[nonce] > now:
            return False
        self._used[nonce] = now + self._ttl
        return True


class RequestSink:
    """A running tool's progress and log messages, as notifications for one request.

    Progress goes out as ``notifications/progress`` only if the request carried a
    progress token (the SDK checks), and only while it increases, as the spec
    requires. Log messages go out as ``notifications/message`` on the request's
    own stream: at 2026-07-28 only if the request opted in with a log level in
    ``_meta`` (the SDK's rule), at 2025-11-25 from ``min_level`` up (the level
    the client set with ``logging/setLevel``; every level when it set none).
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        logger: str,
        min_level: LogLevel | None = None,
    ) -> None:
        self._ctx = ctx
        self._logger = logger
        allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
        if min_level is not None:
            allowed = allowed & frozenset(LOG_LEVELS[LOG_LEVELS.index(min_level) :])
        self._levels = allowed
        self._last_progress: float | None = None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._last_progress is not None and progress <= self._last_progress:
            return
        self._last_progress = progress
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        if level not in self._levels:
            return
        params = types.LoggingMessageNotificationParams(
            level=level,
            logger=self._logger,
            data=message if data is None else {"message": message, "data": data},
        )
        # Request-scoped: the spec allows log messages only on the stream of the
        # request they belong to (2026-07-28), and it is right at 2025-11-25 too.
        await self._ctx.session.send_notification(
            types.LoggingMessageNotification(params=params),
            related_request_id=self._ctx.request_id,
        )


def _digest(request: types.InputRequest) -> str:
    wire = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    text = json.dumps(wire, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _sampled_text(result: types.CreateMessageResult | types.CreateMessageResultWithTools) -> str:
    content = result.content
    blocks = content if isinstance(content, list) else [content]
    return "".join(block.text for block in blocks if isinstance(block, types.TextContent))


class ClientInputSink(RequestSink):
    """The sink of one request (``tools/call``, ``prompts/get``, ``resources/read``):
    progress and logs, plus questions to the client.

    Args:
        ctx: the request's context.
        logger: the logger name of its log messages.
        min_level: see :class:`RequestSink`.
        params: the request's params; at 2026-07-28 their ``inputResponses`` and
            (already unsealed) ``requestState`` answer the function's questions.
        replay: the guard every accepted state is checked against.

    Raises:
        MCPError: ``-32602`` for a state that is malformed or used before.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        logger: str,
        min_level: types.LoggingLevel | None = None,
        params: types.InputResponseRequestParams,
        replay: ReplayGuard,
    ) -> None:
        super().__init__(ctx, logger=logger, min_level=min_level)
        self._session = ctx.session
        self._request_id = ctx.request_id
        self.input_required = is_version_at_least(ctx.protocol_version, INPUT_REQUIRED_VERSION)
        """Whether questions go out as ``input_required`` (2026-07-28) rather than requests."""
        # This round's unanswered questions as JSON, by key: the InputRequired a
        # tool raises holds this very dict, so questions asked at once all count.
        self._pending: dict[str, dict[str, Any]] = {}
        self._asked = 0
        # key -> (question digest, answer as JSON): answers of earlier rounds.
        self._recorded: dict[str, tuple[str, dict[str, Any]]] = {}
        self._responses: dict[str, Any] = {}
        self.carried: dict[str, Any] = {}
        """What the server itself carried in the state of the previous round (e.g.
        the approval it asked about), see :meth:`request_state`."""
        if self.input_required:
            self._responses = dict(params.input_responses or {})
            if params.request_state is not None:
                self._recorded, self.carried = self._load(params.request_state, replay)

    @property
    def responses(self) -> Mapping[str, Any]:
        """This round's ``inputResponses`` (2026-07-28), by key."""
        return self._responses

    @staticmethod
    def _load(
        state: str, replay: ReplayGuard
    ) -> tuple[dict[str, tuple[str, dict[str, Any]]], dict[str, Any]]:
        try:
            data = json.loads(state)
            if data["v"] != _STATE_VERSION or not isinstance(data["n"], str):
                raise ValueError("version")
            recorded = {
                str(key): (str(digest), dict(answer))
                for key, (digest, answer) in dict(data["answers"]).items()
            }
            carried = dict(data.get("c") or {})
        except (ValueError, KeyError, TypeError) as exc:
            raise _wire.invalid_state() from exc
        if not replay.use(data["n"]):
            raise _wire.invalid_state()
        return recorded, carried

    def request_state(self, carry: Mapping[str, Any] | None = None) -> str:
        """The state of the next round: every answer so far, what the server
        ``carry``s to it, and a fresh nonce.

        Sealed by the SDK's boundary when the result leaves the server.
        """
        answers = {key: [digest, answer] for key, (digest, answer) in self._recorded.items()}
        state: dict[str, Any] = {
            "v": _STATE_VERSION,
            "n": secrets.token_urlsafe(16),
            "answers": answers,
        }
        if carry:
            state["c"] = dict(carry)
        return json.dumps(state, separators=(",", ":"))

    def can_ask(self, capability: str) -> bool:
        """Whether the client declared ``capability`` and can be asked now."""
        declared = self._session.check_client_capability(_CAPABILITIES[capability])
        return bool(declared and (self.input_required or self._session.can_send_request))

    async def ask_now(self, request: types.ElicitRequest, *, timeout: float) -> types.ElicitResult:
        """Ask the client on the call's own stream (2025-11-25) and wait up to ``timeout``.

        Raises:
            TimeoutError: no answer in time.
            MCPError: the client answered with an error.
        """
        with anyio.fail_after(timeout):
            return await self._session.send_request(
                request,
                types.ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=self._request_id),
            )

    def _require(self, capability: str, what: str) -> None:
        # At 2025-11-25 the question is a request on the call's stream, which some
        # transports cannot carry (e.g. a JSON-only response): then it cannot ask either.
        if not self.can_ask(capability):
            raise ClientCannot(capability, what)

    async def _ask(self, key: str | None, request: types.InputRequest) -> Any:
        """The client's answer to ``request`` as JSON (a result of its method)."""
        self._asked += 1
        if not self.input_required:
            result = await self._session.send_request(
                request,
                _RESULT_TYPES[request.method],
                metadata=ServerMessageMetadata(related_request_id=self._request_id),
            )
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)
        name = key or f"{request.method.replace('/', '_')}_{self._asked}"
        digest = _digest(request)
        if name in self._responses:
            answer = self._responses[name]
            wire = (
                answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                if not isinstance(answer, dict)
                else answer
            )
            try:  # the union parses loosely: check against this question's own type
                _RESULT_TYPES[request.method].model_validate(wire)
            except ValidationError:
                pass
            else:
                self._recorded[name] = (digest, wire)
                return wire
        recorded = self._recorded.get(name)
        if recorded is not None and recorded[0] == digest:
            return recorded[1]
        self._pending[name] = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        raise InputRequired(self._pending)

    async def elicit(self, message: str, schema: Mapping[str, Any], key: str | None) -> Elicitation:
        self._require("elicitation", "ask the user questions (elicitation)")
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=dict(schema))
        )
        result = types.ElicitResult.model_validate(await self._ask(key, request))
        return Elicitation(result.action, dict(result.content) if result.content else None)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        self._require("sampling", "sample its model (sampling)")
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams.model_validate(
                {
                    "messages": list(messages),
                    "maxTokens": max_tokens,
                    "systemPrompt": system_prompt,
                    "temperature": temperature,
                }
            )
        )
        answer = await self._ask(key, request)
        return _sampled_text(types.CreateMessageResult.model_validate(answer))

    async def list_roots(self, key: str | None) -> list[Root]:
        self._require("roots", "list its roots (roots)")
        result = types.ListRootsResult.model_validate(
            await self._ask(key, types.ListRootsRequest())
        )
        return [Root(str(root.uri), root.name) for root in result.roots]


_RESULT_TYPES: dict[
    str,
    type[types.ElicitResult] | type[types.CreateMessageResult] | type[types.ListRootsResult],
] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}
