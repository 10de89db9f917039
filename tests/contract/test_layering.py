"""The contract modules import one way: ``context`` builds on ``handles`` and
``identity``, which never import ``context`` back, not even for type checking."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"


def _module_path(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _imports(module: str) -> set[str]:
    """The callgate modules ``module`` imports anywhere in its file (TYPE_CHECKING
    blocks and function bodies too). ``from package import name`` counts as the
    submodule when ``name`` is one, else as the package."""
    path = _module_path(module)
    assert path is not None, module
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _module_path(sub) else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("callgate") and _module_path(name)}


def _reachable(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        for imported in _imports(todo.pop()) - seen:
            seen.add(imported)
            todo.append(imported)
    return seen


def test_context_imports_handles_and_identity() -> None:
    assert {"callgate.contract.handles", "callgate.contract.identity"} <= _imports(
        "callgate.contract.context"
    )


def test_handles_and_identity_never_reach_context() -> None:
    for module in ("callgate.contract.handles", "callgate.contract.identity"):
        assert "callgate.contract.context" not in _reachable(module), module
