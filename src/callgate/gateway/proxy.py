"""An upstream's tools as a callgate toolbox: every proxied call runs the chain.

:class:`UpstreamToolbox` is a :class:`~callgate.Toolbox` whose specs are made
from the upstream's ``tools/list`` (refreshed when it announces a change) and
whose handlers call the upstream. The chain knows nothing of upstreams: it
validates against the upstream's schema, injects, authorizes, classifies,
decides and records as for any tool; here the upstream's answer becomes a
payload or one of the taxonomy's errors:

- ``isError`` results: ``construction``, the upstream's own text as the message;
- a protocol error from the upstream (the call refused): ``construction``, its message;
- not connected (nothing sent): ``transient``, naming the upstream and when it
  is tried again;
- the connection lost with the request out: ``transient`` for a read (retried
  by the chain within its budgets), ``unknown_outcome`` for anything else
  (never retried);
- any other failure once the request went out (the upstream's internal error,
  an answer the SDK cannot read): ``unrecoverable`` for a read,
  ``unknown_outcome`` for anything else;
- an answer over the upstream's ``max_answer_bytes`` (refused while it was read):
  ``construction`` for a read (ask for less, as for a result too large to shape),
  ``unknown_outcome`` for anything else, with its size and the limit.

Pinned and injected arguments are trusted fields the chain sets; values the
gateway read from its environment are scrubbed from whatever comes back.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp import Client, MCPError

from callgate.contract import Toolbox, ToolContext, ToolSpec
from callgate.contract.annotations import RiskTier, ToolAnnotations
from callgate.contract.content import Content, Text
from callgate.contract.context import InputRequired, TrustedField
from callgate.contract.resources import (
    Message,
    PromptArgument,
    PromptSpec,
    ResourceContents,
    ResourceSpec,
)
from callgate.contract.toolbox import ListingKeeper
from callgate.errors import (
    ConstructionError,
    ToolError,
    TransientError,
    UnknownOutcomeError,
    UnrecoverableError,
)
from callgate.gateway._forwarding import forwarding_for, scrub
from callgate.gateway._transports import TooLarge, safe_reason, too_large
from callgate.gateway.connection import Connection, UpstreamLost, UpstreamUnavailable
from callgate.gateway.listing import Listing
from callgate.gateway.settings import Resolved, ToolRule, UpstreamSettings
from callgate.mcp import _wire
from callgate.runtime.validation import ArgumentValidator

__all__ = ["UpstreamHandler", "UpstreamToolbox", "local_names"]

logger = logging.getLogger(__name__)

MAX_MESSAGE = 2000
"""Characters of an upstream's error text passed on to the model."""
WIRE_SEPARATOR = 2
"""Characters of the default wire separator (``__``), kept free in a local name's budget."""
MAX_WIRE = 64
PROMPT_SEPARATOR = "__"
"""Between an upstream's name and its prompt's: ``everything__simple-prompt``."""
RESOURCE_SEPARATOR = "+"
"""Before an upstream's resource URI: ``fs+file:///notes.txt`` (a URI still, its
scheme ``fs+file``), so two upstreams serving ``file:///`` do not collide."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")

_VOUCHED = {
    RiskTier.READ: ToolAnnotations(
        read_only=True, destructive=False, idempotent=True, open_world=False
    ),
    RiskTier.WRITE_IDEMPOTENT: ToolAnnotations(
        read_only=False, destructive=False, idempotent=True, open_world=False
    ),
    RiskTier.WRITE_HIGH_RISK: ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=True
    ),
}
"""The behaviour an operator vouches for by giving a tool a risk tier."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def local_names(
    box: str, tools: list[str], rules: Mapping[str, ToolRule]
) -> tuple[dict[str, str], dict[str, str]]:
    """callgate's local name for each upstream tool name, deterministically.

    A name is kept when it is host-safe and fits ``box__name`` in 64 characters;
    otherwise unsafe characters become ``_`` and an over-long name is cut and
    given a digest of the original. A name taken already (after the cut, or by a
    rename) gets the digest too. The same tools always get the same names,
    whatever order the upstream lists them in.

    Returns:
        upstream name -> local name, and the names that were changed (for the report).
    """
    budget = max(9, MAX_WIRE - len(box) - WIRE_SEPARATOR)
    names: dict[str, str] = {}
    changed: dict[str, str] = {}
    taken: set[str] = set()
    renamed = {rule.rename for rule in rules.values() if rule.rename}
    for tool in sorted(tools):
        rule = rules.get(tool)
        if rule is not None and rule.rename:
            names[tool] = rule.rename
            taken.add(rule.rename)

    # Names that are fine as they are keep them; the others are made fine after.
    def fits(tool: str) -> bool:
        return len(tool) <= budget and not _UNSAFE.search(tool)

    for tool in sorted(tools, key=lambda name: (not fits(name), name)):
        if tool in names:
            continue
        local = _UNSAFE.sub("_", tool).strip("_") or "tool"
        if len(local) > budget:
            local = f"{local[: budget - 9]}_{_digest(tool)}"
        if local in taken or local in renamed:
            local = f"{local[: budget - 9]}_{_digest(tool)}"
        names[tool] = local
        taken.add(local)
        if local != tool:
            changed[tool] = local
    return names, changed


def _text_of(result: types.CallToolResult) -> str:
    parts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    text = "\n".join(part for part in parts if part).strip()
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 40] + f" ... [{len(text) - MAX_MESSAGE + 40:,} characters cut]"
    return text


def payload_of(result: types.CallToolResult, structured: bool) -> Any:
    """The Envelope payload of an upstream's successful result."""
    if structured and result.structured_content is not None:
        return result.structured_content
    return {
        "content": [
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in result.content
        ]
    }


@dataclass(kw_only=True, frozen=True)
class UpstreamHandler:
    """Runs one upstream tool (see the module docs for what its failures become)."""

    connection: Connection
    tool: str
    """The tool's name at the upstream."""
    shown: str
    """How people are told which server failed."""
    structured: bool
    read_only: bool
    secrets: frozenset[str] = frozenset()
    """Values the gateway read from its environment for this upstream: an answer
    that repeats one (a server echoing its API key) reads ``[secret]`` instead."""

    @property
    def is_async(self) -> bool:
        return True

    def prepare(self, arguments: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        # The JSON Schema is the upstream's whole contract: nothing more to coerce.
        return dict(arguments), dict(arguments)

    async def invoke(self, prepared: Any, injected: Mapping[str, Any], ctx: ToolContext) -> Any:
        # Pinned and injected arguments are trusted fields: the chain set them
        # (the approver saw them, policy read them, the audit has them).
        arguments = {**prepared, **injected}
        asked: list[InputRequired] = []
        forwarding = forwarding_for(ctx, asked, self.secrets)
        left = (ctx.deadline - datetime.now(UTC)).total_seconds()
        wait = max(0.0, min(left, self.connection.settings.connect_timeout))
        failure: Exception | None = None
        try:
            result = await self.connection.call(self.tool, arguments, forwarding, wait=wait)
        except UpstreamUnavailable as exc:
            when = (
                f"it is tried again in about {exc.retry_in:.0f} s"
                if exc.retry_in is not None and exc.retry_in >= 1
                else "it is being reconnected now"
            )
            raise TransientError(
                f"The upstream server {self.shown!r} is unavailable ({exc.reason}); {when}. "
                "Nothing was sent to it.",
                next_step="Wait and try again later, or use another tool meanwhile.",
                retry_after=exc.retry_in,
            ) from None
        except UpstreamLost:
            if self.read_only:
                raise TransientError(
                    f"The connection to the upstream server {self.shown!r} was lost during "
                    "the call; nothing was changed by this read.",
                    next_step="Try again in a moment.",
                ) from None
            raise UnknownOutcomeError(
                f"The connection to the upstream server {self.shown!r} was lost while it ran "
                "this call: the change may or may not have been made.",
                next_step="Do not retry. First check with a read tool whether the change happened.",
            ) from None
        except MCPError as exc:
            if (size := too_large(exc)) is not None:
                raise self._too_large(size) from None
            if exc.code != types.INTERNAL_ERROR:  # refused as asked: nothing ran
                raise ConstructionError(
                    f"The upstream server {self.shown!r} refused the call: "
                    f"{str(scrub(str(exc), self.secrets))[:MAX_MESSAGE]}",
                    next_step="Fix the arguments as the message says and call again.",
                ) from None
            failure = exc
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:
            failure = exc
        if failure is not None:
            # The request went out and failed in the upstream (an internal error)
            # or after it (an answer not in MCP's shape, structured content its own
            # output schema refuses, the SDK giving up): it may well have run.
            logger.warning(
                "upstream %s: call of %r failed after it was sent: %s",
                self.shown,
                self.tool,
                safe_reason(failure, self.secrets),
            )
            if self.read_only:
                raise UnrecoverableError(
                    f"The upstream server {self.shown!r} failed to answer this call properly.",
                    next_step="Do not retry. Tell the user the tool's server misbehaved.",
                ) from None
            raise UnknownOutcomeError(
                f"The upstream server {self.shown!r} failed to answer this call properly: "
                "the change may or may not have been made.",
                next_step="Do not retry. First check with a read tool whether the change happened.",
            ) from None
        if asked:
            raise asked[0]
        if self.secrets:
            result = scrub(result, self.secrets)
        if result.is_error:
            raise ConstructionError(
                _text_of(result) or f"The upstream server {self.shown!r} reported an error.",
                next_step="This is the upstream tool's own message: fix the arguments as it "
                "says, or tell the user what failed.",
            )
        return payload_of(result, self.structured)

    def _too_large(self, size: TooLarge) -> ToolError:
        """The upstream answered, too much to read: it ran the call, and a read can
        ask for less; a write's outcome is whatever the unread answer said."""
        logger.warning(
            "upstream %s: the answer to a call of %r was refused: at least %d bytes, "
            "over max_answer_bytes (%d)",
            self.shown,
            self.tool,
            size.seen,
            size.limit,
        )
        sizes = (
            f"at least {size.seen:,} bytes, over its limit of {size.limit:,} bytes "
            "(max_answer_bytes)"
        )
        if self.read_only:  # as the chain answers a result too large to shape
            return ConstructionError(
                f"The upstream server {self.shown!r} answered this call with too much data: "
                f"{sizes}. The answer was not read.",
                next_step="Ask for less: call it again with a narrower query, a filter or a "
                "smaller page, or tell the user the answer is too large.",
            )
        return UnknownOutcomeError(
            f"The upstream server {self.shown!r} ran this call, but its answer was too large "
            f"to read: {sizes}. Whether the change was made is not known.",
            next_step="Do not retry. First check with a read tool that asks for little (a "
            "narrow query, one page) whether the change happened.",
        )


def _message(message: types.PromptMessage) -> Message:
    block = message.content.model_dump(mode="json", by_alias=True, exclude_none=True)
    content = Content.from_payload({"content": [block]})
    if content is None or not content.blocks:  # a block callgate has no type for
        return Message(role=message.role, content=Text(json.dumps(block)))
    return Message(role=message.role, content=content.blocks[0])


def _model_schema(schema: Mapping[str, Any], hidden: set[str]) -> dict[str, Any]:
    """The upstream's input schema without the arguments the gateway sets."""
    out = dict(schema)
    properties = out.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {k: v for k, v in properties.items() if k not in hidden}
    required = out.get("required")
    if isinstance(required, list):
        out["required"] = [name for name in required if name not in hidden]
    out.setdefault("type", "object")
    return out


def _annotations(tool: types.Tool) -> ToolAnnotations:
    given = tool.annotations
    if given is None:
        return ToolAnnotations()
    return ToolAnnotations(
        read_only=given.read_only_hint,
        destructive=given.destructive_hint,
        idempotent=given.idempotent_hint,
        open_world=given.open_world_hint,
    )


class UpstreamToolbox(Toolbox):
    """The tools of one upstream MCP server, kept in step with it.

    The gate opens it with itself (:meth:`open` starts the connection and waits
    for the first listing at most ``startup_wait`` seconds) and closes it.
    """

    def __init__(self, settings: UpstreamSettings, resolved: Resolved) -> None:
        super().__init__(
            settings.name,
            description=f"Tools of the MCP server {settings.target}.",
            trusted=settings.trusted,
            tenants=settings.tenants,
        )
        self.settings = settings
        self.connection = Connection(settings, resolved, on_listing=self._listed)
        self.skipped: dict[str, str] = {}
        """Upstream tools not served, with the reason (a schema that is no JSON Schema)."""

    async def open(self, kept: ListingKeeper) -> None:
        await self.connection.start(kept)

    async def aclose(self) -> None:
        await self.connection.aclose()

    def required_scopes(self) -> frozenset[str]:
        # The configured scopes count before the upstream has listed anything: a
        # local principal is built at start-up, before the first listing.
        configured = set(self.settings.scopes)
        for rule in self.settings.tools.values():
            configured.update(rule.scopes or ())
        return super().required_scopes() | configured

    def _listed(self, listing: Listing) -> None:
        settings = self.settings
        served = [tool for tool in listing.tools if settings.exposes(tool.name)]
        names, changed = local_names(self.name, [t.name for t in served], settings.tools)
        specs: list[ToolSpec] = []
        skipped: dict[str, str] = {}
        for tool in sorted(served, key=lambda t: names[t.name]):
            try:
                specs.append(self._spec(tool, names[tool.name]))
            except Exception as exc:  # an upstream's schema we cannot serve
                skipped[tool.name] = f"{type(exc).__name__}: {exc}"[:300]
                logger.warning("upstream %s: tool %r not served: %s", self.name, tool.name, exc)
        for upstream, local in changed.items():
            logger.warning(
                "upstream %s: tool %r is served as %r (host-safe, at most 64 characters)",
                self.name,
                upstream,
                f"{self.name}.{local}",
            )
        self.skipped = skipped
        self.connection.stats.renamed = changed
        self.connection.stats.tools = len(specs)
        resources = [self._resource(item.uri, item) for item in listing.resources]
        resources += [self._resource(item.uri_template, item) for item in listing.templates]
        prompts = [self._prompt(item) for item in listing.prompts]
        self.replace_all(specs, resources=resources, prompts=prompts)

    def _wait(self) -> float:
        return self.settings.connect_timeout

    async def _send(self, send: Callable[[Client], Awaitable[Any]], what: str) -> Any:
        """A resource read or prompt get: its failures as protocol errors (they are
        not tool calls: the reader is told, and the read is audited as failed)."""
        try:
            result = await self.connection.request(send, None, wait=self._wait())
            return scrub(result, self.connection.secrets) if self.connection.secrets else result
        except (UpstreamUnavailable, UpstreamLost) as exc:
            raise _wire.internal(
                f"The upstream server {self.name!r} could not {what} ({exc}); "
                "try again in a moment."
            ) from None
        except MCPError as exc:
            if (size := too_large(exc)) is None:
                raise
            raise _wire.internal(
                f"The upstream server {self.name!r} answered too much to {what}: at least "
                f"{size.seen:,} bytes, over its limit of {size.limit:,} bytes "
                "(max_answer_bytes); ask for less."
            ) from None

    def _resource(self, uri: str, item: types.Resource | types.ResourceTemplate) -> ResourceSpec:
        """The upstream's resource (or template) ``uri`` as ``upstream+uri``; a read
        answers with every content the upstream gave, each at its ``upstream+`` URI."""
        upstream = self

        async def read(**bound: str) -> list[ResourceContents]:
            target = uri
            for variable, value in bound.items():
                target = target.replace("{" + variable + "}", value)
            result: types.ReadResourceResult = await upstream._send(
                lambda client: client.read_resource(target), f"read {target}"
            )
            return [upstream._contents(content) for content in result.contents]

        return ResourceSpec(
            uri=f"{self.name}{RESOURCE_SEPARATOR}{uri}",
            name=item.name,
            toolbox=self.name,
            title=item.title,
            description=item.description or "",
            mime_type=item.mime_type or "text/plain",
            scopes=frozenset(self.settings.scopes),
            tenants=self.settings.tenants,
            function=read,
        )

    def _contents(
        self, content: types.TextResourceContents | types.BlobResourceContents
    ) -> ResourceContents:
        """One content of the upstream's read, its URI as the gateway serves it
        (``upstream+uri``: a client reads it again through the gateway if the
        upstream lists it or one of its templates matches), its MIME type as given."""
        uri = f"{self.name}{RESOURCE_SEPARATOR}{content.uri}"
        if isinstance(content, types.BlobResourceContents):
            blob = base64.b64decode(content.blob)
            return ResourceContents(uri=uri, mime_type=content.mime_type, blob=blob)
        return ResourceContents(uri=uri, mime_type=content.mime_type, text=content.text)

    def _prompt(self, item: types.Prompt) -> PromptSpec:
        upstream = self

        async def get(**arguments: str) -> list[Message]:
            result: types.GetPromptResult = await upstream._send(
                lambda client: client.get_prompt(item.name, dict(arguments)),
                f"render the prompt {item.name}",
            )
            return [_message(message) for message in result.messages]

        return PromptSpec(
            name=f"{self.name}{PROMPT_SEPARATOR}{item.name}",
            toolbox=self.name,
            title=item.title,
            description=item.description or "",
            arguments=tuple(
                PromptArgument(
                    name=arg.name, description=arg.description or "", required=bool(arg.required)
                )
                for arg in item.arguments or ()
            ),
            scopes=frozenset(self.settings.scopes),
            tenants=self.settings.tenants,
            function=get,
        )

    def _spec(self, tool: types.Tool, local: str) -> ToolSpec:
        settings = self.settings
        rule = settings.tools.get(tool.name, ToolRule())
        hidden = set(rule.pinned) | set(rule.inject)
        schema = _model_schema(tool.input_schema, hidden)
        ArgumentValidator(schema)  # refuses a schema that is no JSON Schema, now
        annotations = _annotations(tool)
        vouched: bool | None = None
        if rule.risk is not None:
            annotations = _VOUCHED[rule.risk]
            vouched = True
        effective = annotations.effective(trusted=bool(vouched) or settings.trusted)
        scopes = rule.scopes if rule.scopes is not None else settings.scopes
        return ToolSpec(
            name=f"{self.name}.{local}",
            toolbox=self.name,
            title=tool.title,
            description=rule.description or tool.description or "",
            input_schema=schema,
            output_schema=tool.output_schema,
            annotations=annotations,
            trusted_source=settings.trusted,
            annotations_vouched=vouched,
            scopes=frozenset(scopes),
            handler=UpstreamHandler(
                connection=self.connection,
                tool=tool.name,
                shown=self.name,
                structured=tool.output_schema is not None,
                read_only=bool(effective.read_only),
                secrets=self.connection.secrets,
            ),
            trusted_fields={
                **{arg: TrustedField(source=src) for arg, src in rule.inject.items()},
                **{arg: TrustedField(pinned=True, value=v) for arg, v in rule.pinned.items()},
            },
            risk_override=rule.risk,
            timeout=rule.timeout or settings.timeout,
            tags=frozenset({f"upstream:{self.name}"}),
        )
