"""Other packages use the Gate through its seams, never through its parts.

``gate.tool(name)``, ``gate.toolboxes``, ``gate.required_scopes()``,
``gate.store_url``, ``gate.audit()``, ``gate.approvals()``, ``gate.tasks()``,
``gate.runs()``, ``gate.check()``, ``gate.kept_result()`` and the like are what
every package outside ``runtime/`` may use (docs/chain.md, Seams). Reaching into
``gate.store``, ``gate.registry``, ``gate.limits``,
``gate.runner``, ``gate.policy`` or the gate's private attributes ties them to
how the gate is built today, and lets them skip what the seam does (open the
store first, keep the callgate toolbox apart, ...).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "callgate"
PARTS = frozenset({"store", "registry", "limits", "runner", "policy"})
GATE_NAMES = frozenset({"gate", "_gate"})


def _is_gate(node: ast.expr) -> bool:
    """``gate``, ``self.gate``, ``self._gate``, ``agent.gate``, ..."""
    if isinstance(node, ast.Name):
        return node.id in GATE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in GATE_NAMES


def _is_part(attr: str) -> bool:
    return attr in PARTS or (attr.startswith("_") and not attr.startswith("__"))


def _reach_ins(package: str) -> list[str]:
    """Each reach-in into the gate under ``src/callgate/<package>``, as path:line: code."""
    found = []
    for path in sorted((SRC / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            reached = (
                isinstance(node, ast.Attribute) and _is_gate(node.value) and _is_part(node.attr)
            ) or (
                # getattr(gate, "store") is the same reach-in, spelled to dodge a grep.
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and _is_gate(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _is_part(node.args[1].value)
            )
            if reached:
                line = getattr(node, "lineno", 0)
                found.append((str(path.relative_to(SRC)), line, ast.unparse(node)))
    return [f"{path}:{line}: {code}" for path, line, code in sorted(found)]


OTHERS = sorted(
    p.name for p in SRC.iterdir() if p.is_dir() and p.name not in ("runtime", "__pycache__")
)


@pytest.mark.parametrize("package", OTHERS)
def test_other_packages_use_the_gate_only_through_its_seams(package: str) -> None:
    assert (SRC / package).is_dir()
    assert _reach_ins(package) == []


def test_the_scan_names_each_reach_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "callgate" / "somewhere"
    package.mkdir(parents=True)
    (package / "mod.py").write_text(
        "async def f(gate, self):\n"
        "    url = gate.store.url\n"
        "    spec = self._gate.registry.get('x')\n"
        "    cap = getattr(self.gate, 'limits')\n"
        "    services = gate._services\n"
        "    fine = (gate.store_url, gate.tool('x'), await gate.audit(), self.store)\n"
    )
    monkeypatch.setattr(f"{__name__}.SRC", tmp_path / "callgate")

    assert _reach_ins("somewhere") == [
        "somewhere/mod.py:2: gate.store",
        "somewhere/mod.py:3: self._gate.registry",
        "somewhere/mod.py:4: getattr(self.gate, 'limits')",
        "somewhere/mod.py:5: gate._services",
    ]
