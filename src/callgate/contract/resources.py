"""Read-only context a toolbox exposes besides its tools: resources and prompts.

A resource is data the host reads by URI (a schema, a note, a file), a prompt a
reusable message template the user picks. Neither has side effects, so neither
goes through the governed tool chain; who may see them is still decided by
``scopes`` and the toolbox's tenants, and every read is audited by whoever
serves them (see ``callgate.mcp``).

A function that declares a ``ToolContext`` parameter gets one, as tools do: it
may ask the client (``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``) and
report progress. The parameter is not a prompt argument or template variable.

Example:
    box = Toolbox("notes")

    @box.resource("notes://{note_id}", mime_type="text/markdown")
    def note(note_id: str) -> str:
        return load(note_id)

    @box.resource("notes://{note_id}/all")
    def with_picture(note_id: str) -> list[ResourceContents]:
        text, png = load(note_id), picture(note_id)
        return [
            ResourceContents(uri=f"notes://{note_id}", mime_type="text/markdown", text=text),
            ResourceContents(uri=f"pictures://{note_id}", mime_type="image/png", blob=png),
        ]

    @box.prompt(description="Summarize one note.")
    def summarize(note_id: str) -> list[Message]:
        note = EmbeddedResource(uri=f"notes://{note_id}", text=load(note_id))
        return [Message(content=note), Message(content=Text("Summarize it."))]
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.to_thread

from callgate.contract.content import Block, Text
from callgate.contract.context import ToolContext
from callgate.contract.docstrings import parse_docstring
from callgate.contract.identity import Principal
from callgate.errors import InvalidDefinition, UserError

__all__ = [
    "DuplicatePrompt",
    "DuplicateResource",
    "FunctionRunner",
    "Message",
    "MissingPromptArgument",
    "PromptArgument",
    "PromptSpec",
    "ResourceContents",
    "ResourceSpec",
    "prompt_from_function",
    "resource_from_function",
]

FunctionRunner = Callable[[Callable[..., Any], Mapping[str, Any]], Awaitable[Any]]
"""Runs a resource or prompt function with its keyword arguments (a server's own
deadline and thread caps); by default a sync function runs in a worker thread."""

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class DuplicateResource(UserError, ValueError):
    """Two resources of one toolbox share a URI (or URI template)."""


class DuplicatePrompt(UserError, ValueError):
    """Two prompts of one toolbox share a name."""


class MissingPromptArgument(UserError, ValueError):
    """A prompt was rendered without one of its required arguments."""

    def __init__(self, prompt: str, missing: Sequence[str]) -> None:
        super().__init__(f"prompt {prompt!r} needs the argument(s) {', '.join(missing)}")
        self.prompt = prompt
        self.missing = tuple(missing)


@dataclass(kw_only=True, frozen=True)
class ResourceContents:
    """One item of a resource read: ``text`` or ``blob``, exactly one of them.

    A read answers with one or more of them. A resource function that returns
    str or bytes gets one, with the URI read and the resource's MIME type; one
    that returns a sequence of them (a directory, a template that matches
    several files) gets those, each with its own ``uri`` and ``mime_type``, in
    order, and none for an empty sequence.
    """

    uri: str
    mime_type: str | None = None
    """None: not stated (MCP's ``mimeType`` is optional)."""
    text: str | None = None
    blob: bytes | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError(f"resource contents of {self.uri!r} need exactly one of text, blob")


@dataclass(kw_only=True, frozen=True)
class Message:
    """One message of a rendered prompt; its content is a block as tools return them
    (``Text``, ``Image``, ``Audio``, ``EmbeddedResource`` from ``callgate.contract``)."""

    role: Literal["user", "assistant"] = "user"
    content: Block


ResourceValue = str | bytes | Sequence[ResourceContents]
"""What a resource function returns: text, a blob, or the read's contents one by one."""
ResourceFunction = Callable[..., ResourceValue | Awaitable[ResourceValue]]
PromptFunction = Callable[..., str | Sequence[Message] | Awaitable[str | Sequence[Message]]]


@dataclass(kw_only=True, frozen=True)
class ResourceSpec:
    """A resource, or a family of them when ``uri`` is a URI template.

    A template's variables (``{id}`` in ``test://template/{id}/data``) match one
    path segment each and reach the function as keyword arguments.
    """

    uri: str
    name: str
    toolbox: str
    title: str | None = None
    description: str = ""
    mime_type: str = "text/plain"
    scopes: frozenset[str] = frozenset()
    tenants: frozenset[str] | None = None
    completions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Known values of template variables, offered by completion."""
    context_param: str | None = None
    """The function's ``ToolContext`` parameter, if it declares one."""
    function: ResourceFunction = field(compare=False, repr=False)

    @property
    def variables(self) -> tuple[str, ...]:
        """The template's variables in order; empty for a plain resource."""
        return tuple(_VARIABLE.findall(self.uri))

    @property
    def is_template(self) -> bool:
        return bool(self.variables)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables ``uri`` binds, or None when it is not this resource."""
        if not self.is_template:
            return {} if uri == self.uri else None
        pattern = "".join(
            f"(?P<{part}>[^/?#]+)" if index % 2 else re.escape(part)
            for index, part in enumerate(_VARIABLE.split(self.uri))
        )
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found else None

    def visible_to(self, principal: Principal) -> bool:
        return self.scopes <= principal.scopes and (
            self.tenants is None or principal.tenant in self.tenants
        )

    async def read(
        self, uri: str, context: ToolContext | None = None, *, run: FunctionRunner | None = None
    ) -> tuple[ResourceContents, ...]:
        """Call the function for ``uri``: a str becomes one text, bytes one blob
        (both at ``uri``, with this resource's MIME type); a sequence of
        :class:`ResourceContents` is the read's contents as they are, in order.

        Args:
            uri: the URI asked for (this resource's, or one its template matches).
            context: passed to the function's ``ToolContext`` parameter.
            run: how to run the function (see :data:`FunctionRunner`).

        Raises:
            LookupError: ``uri`` is not this resource.
            TypeError: the function returned something else (a sequence holding
                anything but ResourceContents too), or it needs a context and got none.
        """
        bound = self.match(uri)
        if bound is None:
            raise LookupError(f"{uri!r} is not the resource {self.uri!r}")
        kwargs = _with_context(bound, self.context_param, context)
        value = await (run or _call)(self.function, kwargs)
        if isinstance(value, str):
            return (ResourceContents(uri=uri, mime_type=self.mime_type, text=value),)
        if isinstance(value, bytes | bytearray):
            return (ResourceContents(uri=uri, mime_type=self.mime_type, blob=bytes(value)),)
        if isinstance(value, Sequence) and all(isinstance(v, ResourceContents) for v in value):
            return tuple(value)
        raise TypeError(
            f"resource {self.uri!r} returned {type(value).__name__}, not str, bytes "
            "or a sequence of ResourceContents"
        )


@dataclass(kw_only=True, frozen=True)
class PromptArgument:
    """A prompt parameter; prompt arguments are always strings."""

    name: str
    description: str = ""
    required: bool = True
    choices: tuple[str, ...] = ()
    """Known values, offered by completion (from a ``Literal`` type or ``completions=``)."""


@dataclass(kw_only=True, frozen=True)
class PromptSpec:
    """A reusable prompt; its arguments are the function's parameters."""

    name: str
    toolbox: str
    title: str | None = None
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()
    scopes: frozenset[str] = frozenset()
    tenants: frozenset[str] | None = None
    context_param: str | None = None
    """The function's ``ToolContext`` parameter, if it declares one."""
    function: PromptFunction = field(compare=False, repr=False)

    def visible_to(self, principal: Principal) -> bool:
        return self.scopes <= principal.scopes and (
            self.tenants is None or principal.tenant in self.tenants
        )

    async def render(
        self,
        arguments: Mapping[str, str],
        context: ToolContext | None = None,
        *,
        run: FunctionRunner | None = None,
    ) -> tuple[Message, ...]:
        """The prompt's messages for ``arguments`` (unknown arguments are ignored).

        Args:
            arguments: the prompt's arguments, as the client sent them.
            context: passed to the function's ``ToolContext`` parameter.
            run: how to run the function (see :data:`FunctionRunner`).

        Raises:
            MissingPromptArgument: a required argument is absent.
            TypeError: the function returned something else than str or
                messages, or it needs a context and got none.
        """
        missing = [a.name for a in self.arguments if a.required and a.name not in arguments]
        if missing:
            raise MissingPromptArgument(self.name, missing)
        known = {a.name for a in self.arguments}
        given = {k: v for k, v in arguments.items() if k in known}
        kwargs = _with_context(given, self.context_param, context)
        value = await (run or _call)(self.function, kwargs)
        if isinstance(value, str):
            return (Message(content=Text(value)),)
        if isinstance(value, Sequence) and all(isinstance(m, Message) for m in value):
            return tuple(value)
        raise TypeError(
            f"prompt {self.name!r} returned {type(value).__name__}, not str or messages"
        )


def _with_context(
    kwargs: Mapping[str, str], param: str | None, context: ToolContext | None
) -> dict[str, Any]:
    if param is None:
        return dict(kwargs)
    if context is None:
        raise TypeError(f"this function needs a ToolContext for its parameter {param!r}")
    return {**kwargs, param: context}


async def _call(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    # Sync functions may do I/O (read a file, a database): keep the event loop free.
    return await anyio.to_thread.run_sync(lambda: fn(**kwargs))


def _choices(hint: Any) -> tuple[str, ...]:
    if typing.get_origin(hint) is Literal:
        return tuple(str(value) for value in typing.get_args(hint))
    return ()


def _is_string(hint: Any) -> bool:
    if hint is str:
        return True
    if typing.get_origin(hint) is Literal:
        return all(isinstance(value, str) for value in typing.get_args(hint))
    args = typing.get_args(hint)
    # ``str | None``: an optional argument the client may leave out.
    return type(None) in args and all(a is type(None) or _is_string(a) for a in args)


def _parameters(
    fn: Callable[..., Any],
) -> tuple[list[inspect.Parameter], dict[str, Any], str | None]:
    """The parameters of ``fn``, each a plain keyword taking a string (MCP sends
    strings), and the name of its ``ToolContext`` parameter (not among them)."""
    hints = typing.get_type_hints(fn)
    params: list[inspect.Parameter] = []
    context: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if hints.get(param.name) is ToolContext:
            context = param.name
            continue
        params.append(param)
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise InvalidDefinition(
                f"{fn.__qualname__}: parameter {param.name!r} must be a plain keyword"
            )
        if param.name in hints and not _is_string(hints[param.name]):
            raise InvalidDefinition(
                f"{fn.__qualname__}: parameter {param.name!r} must be a str (or a Literal of "
                f"strings): clients send every argument as a string"
            )
    return params, hints, context


def _completions(
    given: Mapping[str, Iterable[str]] | None, names: Iterable[str], where: str
) -> dict[str, tuple[str, ...]]:
    out = {name: tuple(values) for name, values in (given or {}).items()}
    unknown = set(out) - set(names)
    if unknown:
        raise InvalidDefinition(f"{where}: completions for unknown argument(s) {sorted(unknown)}")
    return out


def resource_from_function(
    fn: ResourceFunction,
    uri: str,
    *,
    toolbox: str,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str = "text/plain",
    scopes: Iterable[str] = (),
    tenants: frozenset[str] | None = None,
    completions: Mapping[str, Iterable[str]] | None = None,
) -> ResourceSpec:
    """Describe ``fn`` as the resource at ``uri`` (see ``Toolbox.resource``).

    Raises:
        InvalidDefinition: the function's parameters are not the template's variables.
    """
    variables = _VARIABLE.findall(uri)
    if len(set(variables)) != len(variables):
        raise InvalidDefinition(f"URI template {uri!r} repeats a variable")
    params, hints, context = _parameters(fn)
    if {p.name for p in params} != set(variables):
        raise InvalidDefinition(
            f"{fn.__qualname__}: parameters {[p.name for p in params]} must be the "
            f"variables of {uri!r}: {variables}"
        )
    summary, _ = parse_docstring(fn.__doc__)
    known = {p.name: _choices(hints.get(p.name)) for p in params if _choices(hints.get(p.name))}
    known.update(_completions(completions, variables, uri))
    return ResourceSpec(
        uri=uri,
        name=name or fn.__name__,
        toolbox=toolbox,
        title=title,
        description=description if description is not None else summary,
        mime_type=mime_type,
        scopes=frozenset(scopes),
        tenants=tenants,
        completions=known,
        context_param=context,
        function=fn,
    )


def prompt_from_function(
    fn: PromptFunction,
    *,
    toolbox: str,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    tenants: frozenset[str] | None = None,
    completions: Mapping[str, Iterable[str]] | None = None,
) -> PromptSpec:
    """Describe ``fn`` as a prompt (see ``Toolbox.prompt``).

    Parameters without a default are required arguments; the docstring's
    ``Args:`` section describes them.

    Raises:
        InvalidDefinition: a parameter is not a plain keyword, or ``completions`` names
            an unknown argument.
    """
    params, hints, context = _parameters(fn)
    summary, arg_docs = parse_docstring(fn.__doc__)
    given = _completions(completions, [p.name for p in params], fn.__qualname__)
    arguments = tuple(
        PromptArgument(
            name=p.name,
            description=arg_docs.get(p.name, ""),
            required=p.default is inspect.Parameter.empty,
            choices=given.get(p.name) or _choices(hints.get(p.name)),
        )
        for p in params
    )
    return PromptSpec(
        name=name or fn.__name__,
        toolbox=toolbox,
        title=title,
        description=description if description is not None else summary,
        arguments=arguments,
        scopes=frozenset(scopes),
        tenants=tenants,
        context_param=context,
        function=fn,
    )
