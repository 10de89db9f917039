"""What registering a tool costs: ``Toolbox.tool`` on 1,000 varied functions.

The functions are made from five shapes, each with its own names and
docstrings (ints; strings with ``Annotated`` constraints and a ``Literal``;
a pydantic model in, another out; optional lists with a bounded int, async;
a ``dict[str, float]``), written as a module would write them: every function
has its own ``Field(...)`` objects, and the module uses
``from __future__ import annotations`` (string hints) unless ``--eager-hints``.

Reported, as microseconds per tool (median of the rounds, min-max after it):

- ``toolbox``: ``Toolbox(...)`` and ``box.tool(fn)`` for each function;
- ``+ Gate``: that, then ``Gate([box])`` (in-memory store);
- ``+ build_server``: that, then ``build_server(gate, ...)`` (the MCP server);
- ``into a served toolbox``: ``Gate`` and ``build_server`` over an empty toolbox
  first, then the tools added one by one, as a gateway adds an upstream's tools
  when its list changes (every addition notifies the gate and the server).

``--against SRC`` times another checkout's package too (``SRC`` is its ``src``
directory, e.g. from ``git archive main``), the two alternating round by round
in fresh processes, and prints both and their ratio:

    python benchmarks/registration.py [--tools 1000] [--rounds 7]
    python benchmarks/registration.py --against /tmp/before/src
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_US = 100.0

SHAPES = [
    '''
    def {name}(count_{i}: int, step_{i}: int = 2) -> int:
        """Add a step to a count ({i}).

        Args:
            count_{i}: Where to start.
            step_{i}: How much to add.
        """
        return count_{i} + step_{i}
    ''',
    '''
    def {name}(
        city_{i}: Annotated[str, Field(min_length=2, max_length=40, pattern="^[A-Z]")],
        unit_{i}: Literal["c", "f"] = "c",
    ) -> str:
        """Tomorrow's weather in a city ({i}).

        Args:
            city_{i}: The city, capitalized.
            unit_{i}: Celsius or Fahrenheit.
        """
        return city_{i}
    ''',
    '''
    def {name}(order_{i}: Order, dry_run_{i}: bool = False) -> Receipt:
        """Place an order ({i}).

        Args:
            order_{i}: What to order.
            dry_run_{i}: Check without placing it.
        """
        return Receipt(order_id="o", total=1.0)
    ''',
    '''
    async def {name}(
        tags_{i}: list[str] | None = None,
        limit_{i}: Annotated[int, Field(ge=1, le=100)] = 10,
        cursor_{i}: str | None = None,
    ) -> list[dict[str, str]]:
        """Search the notes by tag ({i}).

        Args:
            tags_{i}: Tags the notes must have.
            limit_{i}: At most this many notes.
            cursor_{i}: Where the previous page ended.
        """
        return []
    ''',
    '''
    def {name}(weights_{i}: dict[str, float], threshold_{i}: float = 0.5) -> dict[str, bool]:
        """Which weights pass a threshold ({i})."""
        return {{k: v >= threshold_{i} for k, v in weights_{i}.items()}}
    ''',
]

PRELUDE = """
from typing import Annotated, Literal

from pydantic import BaseModel, Field


class Line(BaseModel):
    sku: str
    quantity: int = 1


class Order(BaseModel):
    lines: list[Line]
    note: str | None = None


class Receipt(BaseModel):
    order_id: str
    total: float
"""


def make_functions(count: int, *, eager_hints: bool) -> list[Callable[..., Any]]:
    """``count`` distinct functions of the five shapes, defined by one module."""
    parts = [] if eager_hints else ["from __future__ import annotations\n"]
    parts.append(PRELUDE)
    names = [f"tool_{i:05d}" for i in range(count)]
    for i, name in enumerate(names):
        parts.append(textwrap.dedent(SHAPES[i % len(SHAPES)]).format(name=name, i=i))
    module = types.ModuleType("bench_tools")
    sys.modules[module.__name__] = module  # pydantic resolves the models' string hints there
    exec(compile("\n".join(parts), "<bench_tools>", "exec"), module.__dict__)
    return [getattr(module, name) for name in names]


def one_round(functions: list[Callable[..., Any]]) -> dict[str, float]:
    """Seconds for each way of registering ``functions``."""
    from callgate import Gate, Principal, Toolbox
    from callgate.mcp import build_server

    principal = Principal("bench", tenant="t")
    out: dict[str, float] = {}

    gc.collect()
    start = time.perf_counter()
    box = Toolbox("bench")
    for fn in functions:
        box.tool(fn)
    out["toolbox"] = time.perf_counter() - start

    gc.collect()
    start = time.perf_counter()
    box = Toolbox("bench")
    for fn in functions:
        box.tool(fn)
    Gate([box], store="memory://")
    out["+ Gate"] = time.perf_counter() - start

    gc.collect()
    start = time.perf_counter()
    box = Toolbox("bench")
    for fn in functions:
        box.tool(fn)
    gate = Gate([box], store="memory://")
    build_server(gate, principal=principal)
    out["+ build_server"] = time.perf_counter() - start

    box = Toolbox("bench")
    gate = Gate([box], store="memory://")
    build_server(gate, principal=principal)
    gc.collect()
    start = time.perf_counter()
    for fn in functions:
        box.tool(fn)
    out["into a served toolbox"] = time.perf_counter() - start
    return out


def measure(tools: int, rounds: int, eager_hints: bool) -> dict[str, list[float]]:
    functions = make_functions(tools, eager_hints=eager_hints)
    one_round(functions[:50])  # imports and first-use caches out of the figures
    results: dict[str, list[float]] = {}
    for _ in range(rounds):
        for key, seconds in one_round(functions).items():
            results.setdefault(key, []).append(seconds / tools * 1e6)
    return results


def _child(src: str | None, args: argparse.Namespace) -> dict[str, list[float]]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    command = [sys.executable, __file__, "--json", "--tools", str(args.tools), "--rounds", "1"]
    if args.eager_hints:
        command.append("--eager-hints")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--eager-hints", action="store_true", help="no string annotations")
    parser.add_argument("--against", metavar="SRC", help="another checkout's src directory")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.tools, args.rounds, args.eager_hints)))
        return
    hints = "eager hints" if args.eager_hints else "string hints"
    print(f"## Registering {args.tools:,} tools (µs per tool, median (min-max), {hints})\n")
    if args.against is None:
        results = measure(args.tools, args.rounds, args.eager_hints)
        print(f"| what | µs per tool | {args.tools:,} tools (ms) |")
        print("|---|---:|---:|")
        for key, values in results.items():
            total = statistics.median(values) * args.tools / 1000
            print(f"| {key} | {_cell(values)} | {total:,.0f} |")
        verdict = "met" if statistics.median(results["+ build_server"]) < TARGET_US else "missed"
        print(f"\ntarget: under {TARGET_US:.0f} µs per tool with build_server: {verdict}")
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    for index in range(args.rounds):
        print(f"round {index + 1}/{args.rounds}", file=sys.stderr)
        for src, into in ((args.against, before), (here, after)):
            for key, values in _child(src, args).items():
                into.setdefault(key, []).extend(values)
    print(f"before: {args.against}; after: {here}; alternating, one process a round each\n")
    print("| what | before | after | after/before |")
    print("|---|---:|---:|---:|")
    for key in after:
        ratio = [a / b for a, b in zip(after[key], before[key], strict=True)]
        print(
            f"| {key} | {_cell(before[key])} | {_cell(after[key])} | "
            f"{statistics.median(ratio):.3f} |"
        )


if __name__ == "__main__":
    main()
