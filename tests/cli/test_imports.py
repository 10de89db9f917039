"""The CLI's modules import one another one way: commands use the helpers, never
the reverse, so no module needs one that is still half imported."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "callgate" / "cli"
PACKAGE = "callgate.cli"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The CLI modules ``path`` imports anywhere in it (in functions and for types too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            # ``from callgate.cli import render`` imports the module render; the
            # package itself is already imported when one of its modules runs.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if node.module != PACKAGE:
                names.append(node.module)
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each import cycle, as ``a -> b -> a``."""
    cycles = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return cycles


def test_no_cli_module_imports_one_that_imports_it() -> None:
    files = {
        (PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"): path
        for path in CLI.glob("*.py")
    }
    graph = {module: _imports(path, set(files)) - {module} for module, path in files.items()}

    assert f"{PACKAGE}.serve" in graph[f"{PACKAGE}.app"]  # the scan sees the imports
    assert _cycles(graph) == []


def test_a_cycle_is_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert _cycles(graph) == ["a -> b -> c -> a"]
