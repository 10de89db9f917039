"""The agent loop's own cost per turn, without a model: a scripted one answers at once.

Each turn the scripted model proposes 10 read-only calls; the loop runs them
through the gate (concurrently, being reads), pairs the results and asks again.
Side by side in one run, interleaved: the same 10 calls made directly with
``asyncio.gather(gate.call(...))`` (the governed chain alone). The difference per
turn is the loop's overhead: building requests and tool definitions, scheduling,
mapping Envelopes to results, counting usage, the trace. The run's state and trace
are saved once per run (in the store, SQLite here), counted separately.

Also: the tokens tool definitions cost per request (estimated at 4 characters a
token from the JSON each provider format sends), for the demo toolset and for 100
BFCL tools, in each provider's format (the adapters' own conversion).

    python benchmarks/agent_loop.py [--turns 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from callgate import Gate, Principal, Toolbox
from callgate.agent import ModelResponse, ScriptedModel, calls, reply
from callgate.agent.loop import Agent, RunLimits
from callgate.agent.tools import estimate_tokens, tool_defs

CALLS_PER_TURN = 10
ROOT = Path(__file__).resolve().parents[1]
ALICE = Principal("bench", tenant="t", scopes={"bench:read"})


def toolbox() -> Toolbox:
    box = Toolbox("bench")

    @box.tool(scopes={"bench:read"}, read_only=True, open_world=False)
    async def lookup(key: str) -> dict[str, str]:
        """Look a key up.

        Args:
            key: Any key.
        """
        return {"key": key, "value": key.upper()}

    return box


def _turn() -> ModelResponse:
    return calls(*[("bench.lookup", {"key": f"k{i}"}) for i in range(CALLS_PER_TURN)])


async def loop_turns(gate: Gate, turns: int) -> float:
    """Seconds per turn of the agent loop (scripted model, 10 reads a turn)."""
    script: list[Any] = [_turn() for _ in range(turns)] + [reply("done")]
    model = ScriptedModel(script)
    agent = Agent(
        gate,
        model,
        principal=ALICE,
        limits=RunLimits(max_turns=turns + 1, max_tool_calls=10**6, wall_time=None),
    )
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.status == "completed", result.reason
    return elapsed / turns


async def direct_turns(gate: Gate, turns: int) -> float:
    """Seconds per turn of the same calls made directly through the gate."""
    # A fresh session each round, as the loop's (reads carry no idempotency key).
    prefix = secrets.token_hex(4)
    started = time.perf_counter()
    for turn in range(turns):
        await asyncio.gather(
            *[
                gate.call(
                    "bench.lookup",
                    {"key": f"k{i}"},
                    principal=ALICE,
                    session_id=f"direct:{prefix}:{turn}",
                )
                for i in range(CALLS_PER_TURN)
            ]
        )
    return (time.perf_counter() - started) / turns


async def definition_tokens() -> list[tuple[str, str, int, int]]:
    """(toolset, format, tools, estimated tokens per request)."""
    rows: list[tuple[str, str, int, int]] = []
    from callgate.demo import toolboxes

    async def demo_defs() -> tuple[Any, ...]:
        async with Gate(toolboxes(), store="memory://") as gate:
            scopes = {s for spec in gate.tools() for s in spec.scopes}
            return tool_defs(gate, Principal("local", tenant="acme", scopes=scopes))

    demo = await demo_defs()
    sets = {"demo": demo}
    sys.path.insert(0, str(ROOT))
    from tests.agent.corpus import CorpusMissing, bfcl

    try:
        corpus = bfcl()
    except CorpusMissing as missing:
        print(f"agent_loop.py: no BFCL rows ({missing})", file=sys.stderr)
    else:
        from callgate.agent.messages import ToolDef

        sets["100 BFCL"] = tuple(
            ToolDef(name=t.name, description=t.description, input_schema=t.schema)
            for t in corpus.unique_tools[:100]
        )
    formats = provider_formats()
    for label, defs in sets.items():
        for name, convert in formats.items():
            try:
                rows.append((label, name, len(defs), estimate_tokens(convert(defs))))
            except Exception as exc:  # a missing SDK: say so, keep the other rows
                rows.append((label, f"{name} (unavailable: {type(exc).__name__})", len(defs), 0))
    return rows


def provider_formats() -> dict[str, Any]:
    """Each provider format's tool list, built by its adapter's own conversion (the
    same functions its requests use; private, so this follows them as they change)."""
    from callgate.agent.messages import ModelRequest, UserMessage

    def request(defs: Any, *, strict: bool = False) -> ModelRequest:
        return ModelRequest(
            messages=(UserMessage(content="x"),),
            tools=tuple(replace(d, strict=strict) for d in defs),
        )

    def anthropic_tools(defs: Any) -> Any:
        from callgate.agent import anthropic as adapter

        req = request(defs)
        names = adapter._name_map(req)
        return [adapter._tool_param(tool, names) for tool in req.tools]

    def openai_tools(defs: Any, *, strict: bool = False) -> Any:
        from callgate.agent import openai_chat as adapter
        from callgate.agent._openai_common import Tools

        tools = Tools(request(defs, strict=strict), strict=strict)
        return [adapter._tool(tool) for tool in tools.tools]

    def gemini_tools(defs: Any) -> Any:
        from callgate.agent import gemini as adapter

        req = request(defs)
        names = adapter.NameMap(adapter._names_in(req), adapter.GEMINI_NAMES)
        config = adapter._config(req, names)
        return [t.model_dump(mode="json", exclude_none=True) for t in config.tools or []]

    return {
        "callgate (name, description, input_schema)": lambda defs: [
            {"name": d.name, "description": d.description, "input_schema": dict(d.input_schema)}
            for d in defs
        ],
        "Anthropic tools": anthropic_tools,
        "OpenAI function tools": openai_tools,
        "OpenAI function tools, strict": lambda defs: openai_tools(defs, strict=True),
        "Gemini function declarations": gemini_tools,
    }


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="callgate-agent-bench-"))
    store = f"sqlite:///{workdir / 'bench.db'}"
    loop_times: list[float] = []
    direct_times: list[float] = []
    async with Gate([toolbox()], store=store) as gate:
        await loop_turns(gate, 5)  # warm-up
        await direct_turns(gate, 5)
        for _ in range(args.rounds):
            loop_times.append(await loop_turns(gate, args.turns))
            direct_times.append(await direct_turns(gate, args.turns))
    loop_us = statistics.median(loop_times) * 1e6
    direct_us = statistics.median(direct_times) * 1e6
    print(
        f"## Agent loop overhead per turn ({CALLS_PER_TURN} parallel read-only calls, SQLite audit)\n"
    )
    print("| path | µs per turn (median of rounds) |")
    print("| --- | ---: |")
    print(f"| agent loop, scripted model | {loop_us:,.0f} |")
    print(f"| the same calls through gate.call directly | {direct_us:,.0f} |")
    print(
        f"| loop overhead | {loop_us - direct_us:,.0f} ({(loop_us - direct_us) / CALLS_PER_TURN:,.0f} per call) |"
    )
    print(f"\n({args.rounds} rounds of {args.turns} turns each, interleaved)\n")
    print("## Tokens of tool definitions per request (estimated: 4 characters a token)\n")
    print("| toolset | format | tools | tokens |")
    print("| --- | --- | ---: | ---: |")
    for label, name, count, tokens in await definition_tokens():
        print(f"| {label} | {name} | {count} | {tokens:,} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
