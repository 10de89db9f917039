"""What a tool may learn about the call it serves, and the trusted-field markers.

The caller, :class:`~callgate.contract.identity.Principal`, is defined with the
identity rules in :mod:`callgate.contract.identity`, so that the handles this
module builds on can use it without importing this module back; it is importable
from here too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import (
    Annotated,
    Any,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    get_args,
    runtime_checkable,
)

import anyio.from_thread

from callgate.contract.handles import Handles, HandleStore
from callgate.contract.identity import Principal
from callgate.contract.naming import FULL_NAMES, ToolNames
from callgate.errors import ConstructionError, ErrorKind, InvalidArgument, ToolError

logger = logging.getLogger(__name__)


@dataclass(kw_only=True, frozen=True)
class TrustedField:
    """Marks a parameter the server fills in; the model never sees or sets it.

    ``source`` names where the value comes from (``tenant``, ``user``,
    ``scopes``, ``session_id`` or a key of ``Principal.attributes`` / the gate's
    context). By default the parameter's own name is used, with ``tenant_id``
    and ``user_id`` meaning the principal's tenant and user.
    """

    source: str | None = None
    secret: bool = False
    """The value is a credential (an API key, a token): it reaches the tool and
    nothing else. Wherever a person or a model sees a call's inputs (approval
    requests in the CLI, the console and MCP elicitations) it reads
    :data:`REDACTED`, and it is never stored in clear (approvals, previews, audit)."""
    pinned: bool = False
    """The value is ``value``, fixed by whoever configured the tool (a gateway
    operator's pinned argument), whoever calls."""
    value: Any = None
    """The pinned value (with ``pinned``)."""


T = TypeVar("T")

Trusted: TypeAlias = Annotated[T, TrustedField()]
"""``tenant_id: Trusted[str]``: a trusted field filled from the principal."""

Secret: TypeAlias = Annotated[T, TrustedField(secret=True)]
"""``api_key: Secret[str]``: a trusted field holding a credential, filled from the
gate's context (``Gate(secrets=...)``, the config's ``[secrets]``) and redacted
everywhere a person or model could see it."""

REDACTED = "[secret]"
"""What a secret value reads as wherever inputs are shown or stored."""


LogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""The syslog levels MCP log messages use, least severe first."""

LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)


class ToolSink(Protocol):
    """Where a running tool's progress and log messages go (e.g. an MCP client).

    Passed by whoever runs the call (``Gate.call(..., sink=...)``). Delivery is
    best effort: a sink that raises does not fail the tool.
    """

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The tool has done ``progress`` (of ``total``, when known)."""
        ...

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        """The tool logs ``message`` (with JSON-able ``data``) at ``level``."""
        ...


ElicitAction: TypeAlias = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class Elicitation:
    """The user's answer to :meth:`ToolContext.elicit`.

    ``action`` is ``accept`` (``content`` holds the form's values), ``decline``
    (the user said no) or ``cancel`` (the user dismissed the question).
    """

    action: ElicitAction
    content: Mapping[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


@dataclass(frozen=True)
class Root:
    """A root the client exposes (a directory or other URI the user works in)."""

    uri: str
    name: str | None = None


SamplingMessages: TypeAlias = str | Sequence[Mapping[str, Any]]
"""What :meth:`ToolContext.sample` sends: one user text, or messages in MCP's JSON
shape (``{"role": "user", "content": {"type": "text", "text": ...}}``)."""


class ClientCannot(ConstructionError):
    """The caller's client cannot do what the tool asked of it (answer a question,
    sample its model, list its roots), or no client is attached at all.

    A tool may catch it to do without; uncaught, the call fails with its message.
    ``capability`` names the MCP client capability that is missing.
    """

    def __init__(self, capability: str, what: str) -> None:
        super().__init__(
            f"this client cannot {what}",
            next_step="Do not retry with this client; ask the user directly instead.",
        )
        self.capability = capability


class InputRequired(ToolError):
    """Raised inside a tool when its question must first go to the client and the
    call will be made again with the answer (MCP 2026-07-28 ``input_required``).

    Tools should not catch it. A tool that asks questions runs again from the
    start once they are answered, so it should ask before it changes anything.
    """

    kind = ErrorKind.BUSINESS_STATE

    def __init__(self, requests: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__(
            "The tool needs input from the client first; the client is asked and "
            "the call is made again with the answer."
        )
        self.requests: Mapping[str, Mapping[str, Any]] = requests if requests is not None else {}
        """The questions waiting for the client, by key (each the JSON of the
        client's request). The sink may keep adding to it until the call ends: a
        tool that asks several questions at once raises for the first."""


@runtime_checkable
class ClientRequests(Protocol):
    """A sink that can also ask the caller's client: a user (elicitation), its
    model (sampling) or its roots. Raise :class:`ClientCannot` when it cannot."""

    async def elicit(
        self, message: str, schema: Mapping[str, Any], key: str | None
    ) -> Elicitation: ...

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str: ...

    async def list_roots(self, key: str | None) -> list[Root]: ...


def _client(sink: ToolSink | None, capability: str, what: str) -> ClientRequests:
    if isinstance(sink, ClientRequests):
        return sink
    raise ClientCannot(capability, what)


def _messages(messages: SamplingMessages) -> list[Mapping[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": {"type": "text", "text": messages}}]
    return list(messages)


async def _deliver(what: str, send: Callable[[], Awaitable[None]]) -> None:
    try:
        await send()
    except Exception:  # best effort: a gone client must not fail the tool
        logger.warning("could not deliver a tool's %s", what, exc_info=True)


BackgroundHook: TypeAlias = Callable[[], bool]
"""Moves the call it belongs to into the background; True once it runs there.
Callable from any thread."""

_BACKGROUND: ContextVar[BackgroundHook | None] = ContextVar("callgate_background", default=None)


@contextlib.contextmanager
def background_hook(hook: BackgroundHook) -> Iterator[None]:
    """Calls started inside this block may move to the background with ``hook``
    (:meth:`ToolContext.run_in_background`); for whoever runs calls (the MCP
    Tasks runner), not for tools."""
    token = _BACKGROUND.set(hook)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


@dataclass(kw_only=True, frozen=True)
class ToolContext:
    """What a tool function receives if it declares a ``ToolContext`` parameter.

    Progress and log messages reach the caller (an MCP client: notifications/progress
    and notifications/message) when it passed a sink; otherwise they go nowhere.
    Async tools await :meth:`report_progress` and :meth:`log`; sync tools, which run
    in a worker thread, use :meth:`report_progress_sync` and :meth:`log_sync`.

    A tool may also ask the caller's client: its user (:meth:`elicit`), its model
    (:meth:`sample`) or its roots (:meth:`list_roots`); several at once with
    :meth:`ask_all`; sync tools use the ``_sync`` variants. Without a client that
    can, these raise :class:`ClientCannot`. Over MCP 2026-07-28 a tool that asks
    runs again from the start once the client answers, so ask before changing
    anything, and ask the same questions in the same order.

    State kept across calls goes in :attr:`handles` (opaque ids with a TTL, bound
    to the caller; see :mod:`callgate.contract.handles`).
    """

    call_id: str
    trace_id: str
    tool: str
    principal: Principal
    session_id: str | None
    idempotency_key: str | None
    deadline: datetime
    """When the gate will stop waiting for the tool (UTC)."""
    attempt: int
    """1 on the first try, higher on retries."""
    sink: ToolSink | None = field(default=None, repr=False, compare=False)
    """Where progress and log messages go; None drops them."""
    handle_store: HandleStore | None = field(default=None, repr=False, compare=False)
    """Where :attr:`handles` live (the gate's store); None outside a gate."""
    background: BackgroundHook | None = field(
        default_factory=_BACKGROUND.get, repr=False, compare=False
    )
    """How this call moves to the background, if its caller can take that."""
    names: ToolNames = field(default=FULL_NAMES, repr=False, compare=False)
    """How the caller names tools (see :meth:`shown`)."""

    def shown(self, name: str) -> str:
        """The name the caller knows the tool ``name`` by: write it in a message
        that tells the model to call another tool (``ops__campaigns_find`` over
        MCP, where the gate knows ``ops.campaigns_find``). A name without a
        toolbox is one of this tool's toolbox.
        """
        if "." not in name and "." in self.tool:
            name = f"{self.tool.rsplit('.', 1)[0]}.{name}"
        return self.names.shown(name)

    async def run_in_background(self) -> bool:
        """Let the rest of this call run in the background, if its caller can take that.

        Over MCP, for a tool tagged ``task:ask-first`` called by a client that
        declared the Tasks extension, the call becomes a task now: the client
        gets the task and polls it, while the tool goes on. Everything the tool
        asked before came back synchronously (``input_required`` rounds), so ask
        what you need first, then call this before the long part. Elsewhere the
        call simply goes on in the foreground.

        Returns:
            True when the call now runs in the background (also when it already
            did: a task), False when it goes on in the foreground.
        """
        hook = self.background
        return hook() if hook is not None else False

    def run_in_background_sync(self) -> bool:
        """:meth:`run_in_background` for a sync tool (from its worker thread)."""
        hook = self.background
        return hook() if hook is not None else False

    @property
    def handles(self) -> Handles:
        """The caller's handles: create, get, update and close state kept across calls.

        Raises:
            RuntimeError: the tool runs outside a gate (no store to keep them in).
        """
        if self.handle_store is None:
            raise RuntimeError("handles need a store: run the tool through a Gate")
        return Handles(self.handle_store, self.principal)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far the tool is (``progress`` of ``total``, if known).

        Progress must increase from one report to the next; a report that does
        not may be dropped.
        """
        sink = self.sink
        if sink is not None:
            await _deliver("progress", lambda: sink.progress(progress, total, message))

    async def log(self, level: LogLevel, message: str, data: Any = None) -> None:
        """Send a log message to the caller (who may filter by level).

        Raises:
            InvalidArgument: ``level`` is not one of :data:`LOG_LEVELS`.
        """
        if level not in LOG_LEVELS:
            raise InvalidArgument(
                f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}"
            )
        sink = self.sink
        if sink is not None:
            await _deliver("log message", lambda: sink.log(level, message, data))

    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> Elicitation:
        """Ask the user a question through the client (MCP elicitation, form mode).

        Args:
            message: what to ask, shown to the user.
            schema: a flat JSON Schema object of the form's fields (strings,
                numbers, booleans, enums), as MCP elicitation allows.
            key: a stable name for the question within this tool (MCP 2026-07-28
                ``inputRequests`` key); by default its position among the questions.

        Raises:
            ClientCannot: no client is attached, or it cannot ask its user.
        """
        client = _client(self.sink, "elicitation", "ask the user questions (elicitation)")
        return await client.elicit(message, schema, key)

    async def sample(
        self,
        messages: SamplingMessages,
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
    ) -> str:
        """Have the client's model answer ``messages`` (MCP sampling); its text.

        Raises:
            ClientCannot: no client is attached, or it cannot sample its model.
        """
        client = _client(self.sink, "sampling", "sample its model (sampling)")
        return await client.sample(_messages(messages), max_tokens, system_prompt, temperature, key)

    async def ask_all(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions at once: their answers, in order.

        ``questions`` are calls of :meth:`elicit`, :meth:`sample` and
        :meth:`list_roots`, not yet awaited. Where the client answers
        questions in rounds (MCP 2026-07-28), all the unanswered ones go out in
        one round instead of one round each.

        Raises:
            ClientCannot: the client cannot answer one of them.
        """
        answers: list[Any] = []
        waiting: InputRequired | None = None
        for index, question in enumerate(questions):
            try:
                answers.append(await question)
            except InputRequired as exc:
                # The sink collects every question of the round in one place:
                # the first exception carries them all once the loop is done.
                waiting = waiting or exc
                answers.append(None)
            except BaseException:
                for unasked in questions[index + 1 :]:
                    if isinstance(unasked, Coroutine):
                        unasked.close()  # never awaited: no warning
                raise
        if waiting is not None:
            raise waiting
        return answers

    async def list_roots(self, *, key: str | None = None) -> list[Root]:
        """The roots the client exposes (MCP roots/list).

        Raises:
            ClientCannot: no client is attached, or it does not expose roots.
        """
        client = _client(self.sink, "roots", "list its roots (roots)")
        return await client.list_roots(key)

    def elicit_sync(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> Elicitation:
        """:meth:`elicit` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(lambda: self.elicit(message, schema, key=key))

    def sample_sync(
        self,
        messages: SamplingMessages,
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
    ) -> str:
        """:meth:`sample` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(
            lambda: self.sample(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                key=key,
            )
        )

    def list_roots_sync(self, *, key: str | None = None) -> list[Root]:
        """:meth:`list_roots` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(lambda: self.list_roots(key=key))

    def report_progress_sync(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """:meth:`report_progress` for a sync tool (called from its worker thread)."""
        if self.sink is not None:
            _from_thread(lambda: self.report_progress(progress, total, message))

    def log_sync(self, level: LogLevel, message: str, data: Any = None) -> None:
        """:meth:`log` for a sync tool (called from its worker thread).

        Raises:
            InvalidArgument: ``level`` is not one of :data:`LOG_LEVELS`.
        """
        if level not in LOG_LEVELS:
            raise InvalidArgument(
                f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}"
            )
        if self.sink is not None:
            _from_thread(lambda: self.log(level, message, data))


def _from_thread(send: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        anyio.from_thread.run(send)
    except Exception:  # not in a worker thread, or the loop is gone: best effort
        logger.warning("could not deliver a sync tool's message", exc_info=True)
