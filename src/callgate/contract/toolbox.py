"""Toolbox: a named group of tools, and the ``tool`` decorator."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, Unpack, cast, overload, runtime_checkable

from callgate.contract.change import ChangeBuilder
from callgate.contract.function import spec_from_function
from callgate.contract.naming import check_toolbox_name
from callgate.contract.options import TOOL_OPTIONS, ChangeOptions, ToolOptions, check_options
from callgate.contract.resources import (
    DuplicatePrompt,
    DuplicateResource,
    PromptFunction,
    PromptSpec,
    ResourceFunction,
    ResourceSpec,
    prompt_from_function,
    resource_from_function,
)
from callgate.contract.spec import ToolSpec
from callgate.errors import InvalidArgument, UserError

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound=ResourceFunction)
P = TypeVar("P", bound=PromptFunction)

_OPTIONS_ATTR = "__callgate_tool__"


class DuplicateTool(UserError, ValueError):
    """Two tools of one toolbox share a name."""


class ListingKeeper(Protocol):
    """Where a connected toolbox keeps what the other side last listed (the
    gate's store), so that a gate started while that side is down still knows it."""

    async def save_listing(self, name: str, key: str, listing: Any) -> None: ...

    async def get_listing(self, name: str, key: str) -> Any | None: ...


@runtime_checkable
class ConnectedToolbox(Protocol):
    """A toolbox that holds a connection (an upstream MCP server's tools): the gate
    opens it when the gate opens and closes it when the gate closes. ``open`` must
    return within a bounded time even when the other side does not answer."""

    async def open(self, kept: ListingKeeper) -> None: ...

    async def aclose(self) -> None: ...


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
def tool(fn: F | None = None, /, **options: Unpack[ToolOptions]) -> F | Callable[[F], F]:
    """Mark a function as a tool; a Toolbox built with it (``Toolbox("ops", tools=[fn])``)
    or ``toolbox.add(fn)`` turns it into a ToolSpec. The function is returned unchanged.

    Raises:
        InvalidDefinition: an option that is not one of :class:`ToolOptions`.
    """
    check_options(options, TOOL_OPTIONS, "@tool")

    def mark(func: F) -> F:
        setattr(func, _OPTIONS_ATTR, dict(options))
        return func

    return mark(fn) if fn is not None else mark


class Toolbox:
    """A named set of tools. Tool names are ``<toolbox>.<function name>``.

    ``trusted`` says whether the annotations of its tools are believed: local
    Python code is trusted by default; tools proxied from an untrusted upstream
    are not (they are then treated as destructive and open-world). ``tenants``
    limits which tenants may call its tools (checked on every call).
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        trusted: bool = True,
        tenants: Iterable[str] | None = None,
        tools: Iterable[Callable[..., Any] | ToolSpec] = (),
    ) -> None:
        self.name = check_toolbox_name(name)
        self.description = description
        self.trusted = trusted
        self.tenants = frozenset(tenants) if tenants is not None else None
        self._specs: dict[str, ToolSpec] = {}
        self._resources: dict[str, ResourceSpec] = {}
        self._prompts: dict[str, PromptSpec] = {}
        self._listeners: list[Callable[[Toolbox], None]] = []
        for item in tools:
            if isinstance(item, ToolSpec):
                self.add_spec(item)
            else:
                self.add(item)

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(self, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
    def tool(  # type: ignore[misc]  # mypy mis-reads the keyword-only overload
        self, fn: F | None = None, /, **options: Unpack[ToolOptions]
    ) -> F | Callable[[F], F]:
        """Register a function as a tool of this toolbox (usable bare or with options).

        A sync function runs in a worker thread; an async one on the gate's event
        loop, so it must not block: blocking code (``time.sleep``, a sync client,
        a long computation) belongs in a sync function. An async tool that blocks
        the loop is named in the log and its call's audit detail.

        Raises:
            InvalidDefinition: an option that is not one of :class:`ToolOptions`, or
                a function that cannot be described (see ``spec_from_function``).
            DuplicateTool: a tool of that name exists already.
        """
        check_options(options, TOOL_OPTIONS, f"Toolbox({self.name!r}).tool")

        def register(func: F) -> F:
            self.add(func, **options)
            return func

        return register(fn) if fn is not None else register

    def change(self, name: str, **options: Unpack[ChangeOptions]) -> ChangeBuilder:
        """Declare a previewed change: ``<name>_preview``, ``_apply`` and ``_status``.

        Decorate the impact function with ``.preview`` and the performing one with
        ``.apply``; see ``callgate.contract.change``. The options are those of
        :class:`ChangeOptions`; ``ttl`` is how long a preview id stays valid
        (stated in the tool descriptions).

        Raises:
            InvalidDefinition: an option that is not one of :class:`ChangeOptions`.
            InvalidArgument: ``ttl`` is not positive.
        """
        return ChangeBuilder(self, name, **options)

    def add(self, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> ToolSpec:
        """Register ``fn``; options given here override those of ``@tool``.

        Raises:
            DuplicateTool: a tool of that name exists already.
            InvalidDefinition: the function cannot be described, or an option is
                unknown (see ``spec_from_function``).
        """
        marked = cast(ToolOptions, getattr(fn, _OPTIONS_ATTR, {}))
        merged: ToolOptions = {**marked, **options}
        spec = spec_from_function(fn, toolbox=self.name, trusted_source=self.trusted, **merged)
        return self.add_spec(spec)

    def add_spec(self, spec: ToolSpec) -> ToolSpec:
        """Register a ready-made spec (e.g. one proxied from an upstream server).

        Raises:
            DuplicateTool: a tool of that name exists already.
            InvalidArgument: the spec belongs to another toolbox.
        """
        if spec.toolbox != self.name:
            raise InvalidArgument(f"tool {spec.name!r} belongs to toolbox {spec.toolbox!r}")
        if spec.name in self._specs:
            raise DuplicateTool(f"toolbox {self.name!r} already has a tool {spec.name!r}")
        if self.tenants is not None and spec.tenants is None:
            spec = dataclasses.replace(spec, tenants=self.tenants)
        self._specs[spec.name] = spec
        self._changed()
        return spec

    def replace_all(
        self,
        specs: Iterable[ToolSpec],
        *,
        resources: Iterable[ResourceSpec] | None = None,
        prompts: Iterable[PromptSpec] | None = None,
    ) -> None:
        """Serve exactly ``specs`` from now on, in one change (an upstream's new
        listing); also exactly ``resources`` and ``prompts`` when given.

        Raises:
            DuplicateTool: two specs share a name (nothing changes).
            InvalidArgument: a spec belongs to another toolbox (nothing changes).
        """
        table: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.toolbox != self.name:
                raise InvalidArgument(f"tool {spec.name!r} belongs to toolbox {spec.toolbox!r}")
            if spec.name in table:
                raise DuplicateTool(f"toolbox {self.name!r} already has a tool {spec.name!r}")
            if self.tenants is not None and spec.tenants is None:
                spec = dataclasses.replace(spec, tenants=self.tenants)
            table[spec.name] = spec
        same = table.keys() == self._specs.keys() and all(
            table[name].contract_hash == self._specs[name].contract_hash for name in table
        )
        self._specs = table
        if resources is not None:
            by_uri = {spec.uri: spec for spec in resources}
            same = same and by_uri == self._resources
            self._resources = by_uri
        if prompts is not None:
            by_name = {spec.name: spec for spec in prompts}
            same = same and by_name == self._prompts
            self._prompts = by_name
        if not same:  # the same contracts: no change to announce
            self._changed()

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str = "text/plain",
        scopes: Iterable[str] = (),
        completions: Mapping[str, Iterable[str]] | None = None,
    ) -> Callable[[R], R]:
        """Expose a function's return value as read-only context at ``uri``.

        The function returns ``str`` (text) or ``bytes`` (a blob), sync or async,
        or a sequence of ``ResourceContents`` when one read answers with several
        (each with its own URI and MIME type; see ``callgate.contract.resources``).
        ``uri`` may be a URI template (``notes://{note_id}``): each ``{variable}``
        matches one path segment and is passed as a keyword argument. Reading
        needs ``scopes`` (none by default). The function is returned unchanged.

        Raises:
            DuplicateResource: the toolbox has a resource at ``uri`` already.
            InvalidDefinition: the parameters are not the template's variables.
        """

        def register(func: R) -> R:
            self.add_resource(
                resource_from_function(
                    func,
                    uri,
                    toolbox=self.name,
                    name=name,
                    title=title,
                    description=description,
                    mime_type=mime_type,
                    scopes=scopes,
                    tenants=self.tenants,
                    completions=completions,
                )
            )
            return func

        return register

    def add_resource(self, spec: ResourceSpec) -> ResourceSpec:
        """Register a ready-made resource spec.

        Raises:
            DuplicateResource: the toolbox has a resource at that URI already.
        """
        if spec.uri in self._resources:
            raise DuplicateResource(f"toolbox {self.name!r} already has a resource {spec.uri!r}")
        self._resources[spec.uri] = spec
        self._changed()
        return spec

    @overload
    def prompt(self, fn: P, /) -> P: ...
    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] = (),
        completions: Mapping[str, Iterable[str]] | None = None,
    ) -> Callable[[P], P]: ...
    def prompt(
        self,
        name: Any = None,
        *,
        title: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] = (),
        completions: Mapping[str, Iterable[str]] | None = None,
    ) -> Any:
        """Register a reusable prompt (usable bare, or with a name and options).

        The function takes string arguments (those without a default are
        required; a ``Literal`` type lists the values completion offers) and
        returns a ``str`` (one user message) or a list of ``Message``. Prompt
        names are not prefixed with the toolbox name. The function is returned
        unchanged.

        Raises:
            DuplicatePrompt: the toolbox has a prompt of that name already.
            InvalidDefinition: a parameter is positional-only or variadic.
        """

        def register(func: P) -> P:
            self.add_prompt(
                prompt_from_function(
                    func,
                    toolbox=self.name,
                    name=name if isinstance(name, str) else None,
                    title=title,
                    description=description,
                    scopes=scopes,
                    tenants=self.tenants,
                    completions=completions,
                )
            )
            return func

        return register(name) if callable(name) else register

    def add_prompt(self, spec: PromptSpec) -> PromptSpec:
        """Register a ready-made prompt spec.

        Raises:
            DuplicatePrompt: the toolbox has a prompt of that name already.
        """
        if spec.name in self._prompts:
            raise DuplicatePrompt(f"toolbox {self.name!r} already has a prompt {spec.name!r}")
        self._prompts[spec.name] = spec
        self._changed()
        return spec

    @property
    def resources(self) -> list[ResourceSpec]:
        """The resources and resource templates in URI order."""
        return [self._resources[uri] for uri in sorted(self._resources)]

    @property
    def prompts(self) -> list[PromptSpec]:
        """The prompts in name order."""
        return [self._prompts[name] for name in sorted(self._prompts)]

    def required_scopes(self) -> frozenset[str]:
        """Every scope a tool, resource or prompt of this toolbox requires (a
        toolbox whose tools come later, an upstream's, includes what they will)."""
        scopes: set[str] = set()
        scopes.update(scope for spec in self._specs.values() for scope in spec.scopes)
        scopes.update(scope for resource in self.resources for scope in resource.scopes)
        scopes.update(scope for prompt in self.prompts for scope in prompt.scopes)
        return frozenset(scopes)

    def remove(self, name: str) -> None:
        """Remove a tool by full or local name.

        Raises:
            KeyError: no such tool.
        """
        full = name if name in self._specs else f"{self.name}.{name}"
        del self._specs[full]
        self._changed()

    def on_change(self, listener: Callable[[Toolbox], None]) -> None:
        """Call ``listener`` whenever a tool, resource or prompt is added or removed."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener(self)

    @property
    def specs(self) -> list[ToolSpec]:
        """The tools in name order (deterministic listings)."""
        return [self._specs[key] for key in sorted(self._specs)]

    @property
    def by_name(self) -> MappingProxyType[str, ToolSpec]:
        """The tools by full name, in no promised order: a live read-only view,
        cheaper than ``specs`` for whoever keeps tables of many tools in step."""
        return MappingProxyType(self._specs)

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name) or self._specs.get(f"{self.name}.{name}")

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Toolbox({self.name!r}, tools={len(self)})"
