"""``callgate tools``: what a model and an operator can see of each tool."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callgate.cli._common import JsonOption, StoreOption, cli_errors, console, print_json
from callgate.cli._context import ConfigOption, load

if TYPE_CHECKING:
    from callgate.config import GateConfig
    from callgate.runtime.gate import Gate


def tools(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    trusted_only: Annotated[
        bool,
        typer.Option(
            "--trusted-only", help="Only tools whose annotations come from a trusted source."
        ),
    ] = False,
    trifecta: Annotated[
        bool,
        typer.Option(
            "--trifecta",
            help="Report whether the toolset lets private data, untrusted content and a way "
            "out meet (the lethal trifecta), and which tools bring each.",
        ),
    ] = False,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            metavar="QUERY",
            help="Rank the tools (and skills) for QUERY as callgate.search_tools would for "
            "the config's principal: to check what a model would find.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=100, metavar="N", help="Results of --search.")
    ] = 10,
    store: StoreOption = None,
) -> None:
    """List the tools: name, risk tier, scopes and a summary, one line each.

    On a terminal too narrow for the table, each tool takes two lines: its
    facts, then its summary. --json gives every detail, the model-facing input
    schema and the full description included. Listing tools opens no store:
    --store is accepted like every command's, and not read. Upstream MCP servers
    of the config are started (or connected to) to list their tools.
    """
    from callgate.cli import render
    from callgate.runtime.trifecta import static_check

    del store  # listing needs no store; an in-memory one keeps the real one untouched
    with cli_errors():
        cfg = load(ctx, config)
        gate = cfg.build_gate("memory://")
        if search is not None:
            outcome = asyncio.run(_searched(gate, cfg, search, limit))
            if as_json:
                print_json(outcome)
            else:
                render.print_search(console(), outcome)
            return
        if gate.upstreams():
            # Upstream tools are known once their servers answer: connect, list, close.
            asyncio.run(_listed(gate))
        specs = [s for s in gate.tools() if s.trusted_source or not trusted_only]
        if trifecta:
            report = static_check(specs)
            if as_json:
                print_json({"trifecta": report is not None, "tools": report or {}})
            else:
                render.print_trifecta(console(), report)
            return
        if as_json:
            print_json(
                [{**s.describe(), "trusted_fields": sorted(s.trusted_fields)} for s in specs]
            )
        else:
            render.print_tools(console(), specs)


async def _listed(gate: Gate) -> None:
    from callgate.cli._common import opened

    async with opened(gate):
        pass


async def _searched(gate: Gate, cfg: GateConfig, query: str, limit: int) -> dict[str, Any]:
    from callgate.cli._common import opened
    from callgate.config import local_principal

    async with opened(gate):
        who = local_principal(gate, cfg.principal)
        await gate.discovery.wait_for_vectors()
        found = await gate.discovery.search(who, query, limit=limit)
    return {
        "query": query,
        "dense": found.dense,
        "note": found.note,
        "results": [
            {
                "rank": rank,
                "kind": hit.document.kind,
                "name": hit.document.name,
                "summary": hit.document.summary,
                "bm25_rank": hit.bm25_rank,
                "dense_rank": hit.dense_rank,
            }
            for rank, hit in enumerate(found.hits, 1)
        ],
    }
