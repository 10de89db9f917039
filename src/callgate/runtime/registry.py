"""The tools a gate can call, by full name, kept in step with their toolboxes."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

from callgate.contract import Principal, Toolbox, ToolSpec
from callgate.errors import UserError


class DuplicateToolbox(UserError, ValueError):
    """Two toolboxes of one gate share a name."""


class Registry:
    """The gate's tools by full name.

    The table is rebuilt on the first lookup after a toolbox changed, not on
    every change: a gateway adding an upstream's thousand tools one by one
    would otherwise rebuild it a thousand times.
    """

    def __init__(self, toolboxes: Iterable[Toolbox] = ()) -> None:
        self._toolboxes: dict[str, Toolbox] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._stale = False
        self.generation = 0
        """Goes up whenever a toolbox is added or changes (what derived views key on)."""
        for box in toolboxes:
            self.add(box)

    def add(self, box: Toolbox) -> None:
        """Serve ``box``'s tools, including tools it gains later.

        Raises:
            DuplicateToolbox: a toolbox of that name is served already.
        """
        if box.name in self._toolboxes:
            raise DuplicateToolbox(f"a toolbox named {box.name!r} is already registered")
        self._toolboxes[box.name] = box
        box.on_change(_weak_listener(self))
        self._stale = True
        self.generation += 1

    def _changed(self, _box: Toolbox) -> None:
        self._stale = True
        self.generation += 1

    def _current(self) -> dict[str, ToolSpec]:
        if self._stale:
            # Cleared first: a change while the table is built marks it stale again.
            self._stale = False
            self._specs = {
                spec.name: spec for box in self._toolboxes.values() for spec in box.by_name.values()
            }
        return self._specs

    def get(self, name: str) -> ToolSpec | None:
        return self._current().get(name)

    def specs(self, principal: Principal | None = None) -> list[ToolSpec]:
        """All tools in name order; with a principal, only those its scopes allow."""
        specs = self._current()
        out = [specs[name] for name in sorted(specs)]
        if principal is not None:
            out = [
                spec
                for spec in out
                if spec.scopes <= principal.scopes
                and (spec.tenants is None or principal.tenant in spec.tenants)
            ]
        return out

    @property
    def toolboxes(self) -> list[Toolbox]:
        return [self._toolboxes[name] for name in sorted(self._toolboxes)]


def _weak_listener(registry: Registry) -> Callable[[Toolbox], None]:
    """A change listener that does not keep ``registry`` alive. A bound method
    would: the toolbox would hold the registry and the registry the toolbox, a
    cycle only the garbage collector frees, with everything the toolbox's tools
    hold (for tau2's tools, a 25,000-model database each eval run). A toolbox
    served by many registries in turn (a module-level one, a gate per request)
    no longer keeps them all."""
    ref = weakref.ref(registry)

    def changed(box: Toolbox) -> None:
        alive = ref()
        if alive is not None:
            alive._changed(box)

    return changed
