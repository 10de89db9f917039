"""The tools a gate can call, by full name, kept in step with their toolboxes."""

from __future__ import annotations

from collections.abc import Iterable

from callgate.contract import Principal, Toolbox, ToolSpec


class DuplicateToolbox(ValueError):
    """Two toolboxes of one gate share a name."""


class Registry:
    def __init__(self, toolboxes: Iterable[Toolbox] = ()) -> None:
        self._toolboxes: dict[str, Toolbox] = {}
        self._specs: dict[str, ToolSpec] = {}
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
        box.on_change(lambda _box: self._rebuild())
        self._rebuild()

    def _rebuild(self) -> None:
        self._specs = {spec.name: spec for box in self._toolboxes.values() for spec in box}

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def specs(self, principal: Principal | None = None) -> list[ToolSpec]:
        """All tools in name order; with a principal, only those its scopes allow."""
        out = [self._specs[name] for name in sorted(self._specs)]
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
