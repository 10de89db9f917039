"""The caller's tools as a program sees them: modules of async functions.

Each toolbox the caller may use is a module named after it (``ops``), each of
its tools an async function with keyword-only parameters, typed from the tool's
JSON Schema (``await ops.deploy_status(deploy_id="D-1")``). The
:class:`Catalogue` maps those Python names back to the tools' full names, and
writes the stubs the model reads: one signature and one line of description
per tool.

Names that are not Python identifiers (an upstream's ``get-time``) are written
with underscores; a toolbox named like a module the sandbox already has
(``time``, ``json``) is given a ``_tools`` suffix. The stubs show the names
to use.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.contract import ToolSpec

__all__ = ["Catalogue", "python_type"]

# Modules the sandbox offers itself: a toolbox must not hide one.
_SANDBOX_MODULES_TEXT = """
abc asyncio base64 binascii bisect builtins collections contextlib copy csv dataclasses
datetime decimal enum fractions functools hashlib heapq io itertools json math operator os
pathlib random re statistics string struct sys textwrap time tomllib typing
typing_extensions uuid zoneinfo
"""
_SANDBOX_MODULES = frozenset(_SANDBOX_MODULES_TEXT.split())
_NOT_IDENTIFIER = re.compile(r"\W")


def identifier(name: str) -> str:
    """``name`` as a Python identifier: other characters become ``_``."""
    out = _NOT_IDENTIFIER.sub("_", name) or "_"
    if out[0].isdigit():
        out = "_" + out
    if keyword.iskeyword(out):
        out += "_"
    return out


def python_type(schema: Any, depth: int = 0) -> str:
    """A type hint for a JSON Schema (approximate past two levels: ``Any``)."""
    if not isinstance(schema, Mapping) or depth > 2:
        return "Any"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        values = schema["enum"][:12]
        if all(isinstance(v, str | int | bool) or v is None for v in values):
            return f"Literal[{', '.join(repr(v) for v in values)}]"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            parts = list(dict.fromkeys(python_type(o, depth + 1) for o in options))
            return " | ".join(parts)
    kind = schema.get("type")
    if isinstance(kind, list):
        parts = list(dict.fromkeys(python_type({**schema, "type": k}, depth) for k in kind))
        return " | ".join(parts)
    simple = {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "null": "None",
    }
    if kind in simple:
        return simple[kind]
    if kind == "array":
        return f"list[{python_type(schema.get('items'), depth + 1)}]"
    if kind == "object" or "properties" in schema:
        return "dict[str, Any]"
    return "Any"


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.strip().split("\n\n")[0].split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Function:
    module: str
    name: str
    spec: ToolSpec

    @property
    def path(self) -> str:
        """How the program calls it: ``ops.deploy_status``."""
        return f"{self.module}.{self.name}"

    def stub(self) -> str:
        schema = self.spec.input_schema
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        required = set(schema.get("required", ())) if isinstance(schema, Mapping) else set()
        params: list[str] = []
        optional: list[str] = []
        for pname, sub in (properties or {}).items():
            hint = python_type(sub)
            if pname in required:
                params.append(f"{pname}: {hint}")
            else:
                optional.append(f"{pname}: {hint} = ...")
        signature = ", ".join(["*", *params, *optional]) if params or optional else ""
        doc = _one_line(self.spec.description or self.spec.title or "")
        return f'async def {self.name}({signature}) -> Any:\n    """{doc}"""'


@dataclass(frozen=True)
class Catalogue:
    """The functions one caller's program may call (see the module docs)."""

    functions: tuple[Function, ...]
    by_path: dict[str, Function] = field(repr=False, default_factory=dict)

    @classmethod
    def of(cls, specs: Iterable[ToolSpec]) -> Catalogue:
        functions: list[Function] = []
        modules: dict[str, str] = {}  # toolbox -> module name
        taken: set[str] = set()
        for spec in sorted(specs, key=lambda s: s.name):
            box = spec.toolbox
            module = modules.get(box)
            if module is None:
                module = identifier(box)
                if module in _SANDBOX_MODULES or module.startswith("_"):
                    module += "_tools"
                while module in taken:
                    module += "_"
                taken.add(module)
                modules[box] = module
            local = spec.name.removeprefix(f"{box}.")
            name = identifier(local)
            used = {f.name for f in functions if f.module == module}
            while name in used:
                name += "_"
            functions.append(Function(module, name, spec))
        return cls(tuple(functions), {f.path: f for f in functions})

    @property
    def modules(self) -> dict[str, list[Function]]:
        out: dict[str, list[Function]] = {}
        for function in self.functions:
            out.setdefault(function.module, []).append(function)
        return out

    def get(self, path: str) -> Function | None:
        return self.by_path.get(path)

    def stubs(self) -> str:
        """Every module's functions, as the model reads them."""
        if not self.functions:
            return "# No tools are available to you."
        parts = []
        for module, functions in self.modules.items():
            body = "\n\n".join(function.stub() for function in functions)
            parts.append(f"# module {module}\n{body}")
        return "\n\n".join(parts)
