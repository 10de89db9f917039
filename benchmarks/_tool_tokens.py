"""Tool-definition tokens per request, every tool against the meta-tools.

Not a benchmark itself: ``discovery.py`` prints its table.

A request carries the definitions the agent loop builds (``Agent._ask``: one
``{"name", "description", "input_schema"}`` per tool), counted with
``callgate.agent.tools.estimate_tokens``. With disclosure the model is offered the
meta-tools instead, whatever the catalogue: their definitions are taken from a
gate (``tool_defs`` with ``meta_tools``), so they are exactly what a gate sends.

The catalogues: the demo toolbox (``callgate.demo``), three real MCP servers
nobody here wrote (server-everything and server-filesystem from npm,
mcp-server-time from PyPI, as ``scripts/upstreams.sh`` installs them into .cache/;
their ``tools/list`` is read once through the official SDK's ``Client`` over
stdio and named ``<server>.<tool>`` as the gateway names them), all four
together, and 1,000 BFCL functions.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
from _bfcl_pool import Function

from callgate import Gate, Principal
from callgate.agent.tools import estimate_tokens, tool_defs
from callgate.discovery.meta import meta_tools

ROOT = Path(__file__).resolve().parents[1]
UPSTREAMS_SCRIPT = ROOT / "scripts" / "upstreams.sh"

Definition = dict[str, Any]


def definition(name: str, description: str, schema: Mapping[str, Any]) -> Definition:
    """One tool as the agent loop counts it."""
    return {"name": name, "description": description, "input_schema": dict(schema)}


async def gate_definitions() -> tuple[list[Definition], list[Definition]]:
    """The demo's tools (for a principal holding every scope they ask for) and
    the meta-tools a gate offers instead."""
    from callgate.demo import toolboxes

    async with Gate(toolboxes(), store="memory://") as gate:
        principal = Principal(
            "bench@acme.example",
            tenant="acme",
            scopes=sorted(gate.required_scopes()),
            attributes={"domain": "acme.example"},
        )
        tools = tool_defs(gate, principal)
        meta = tool_defs(gate, principal, names=[], builtins=meta_tools(gate.discovery))
    return (
        [definition(t.name, t.description, t.input_schema) for t in tools],
        [definition(t.name, t.description, t.input_schema) for t in meta],
    )


def server_paths() -> dict[str, str] | str:
    """Where ``scripts/upstreams.sh`` keeps the servers (installing them if needed),
    or why they cannot be had."""
    try:
        subprocess.run(
            ["bash", str(UPSTREAMS_SCRIPT), "install"],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        done = subprocess.run(
            ["bash", str(UPSTREAMS_SCRIPT), "paths"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        stderr = getattr(exc, "stderr", "") or ""
        return f"the real MCP servers could not be installed ({exc}; {stderr.strip()[-300:]})"
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


async def list_tools(
    command: str, args: Sequence[str], prefix: str, errlog: TextIO
) -> list[Definition]:
    """A stdio server's ``tools/list`` (every page), through the official SDK client."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    out: list[Definition] = []
    params = StdioServerParameters(command=command, args=list(args))
    with anyio.fail_after(60):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    out.append(
                        definition(
                            f"{prefix}.{tool.name}", tool.description or "", tool.input_schema
                        )
                    )
                cursor = page.next_cursor
                if not cursor:
                    return out


async def upstream_definitions(
    paths: Mapping[str, str], root: Path, errlog: TextIO
) -> dict[str, list[Definition]]:
    node = paths["node"]
    return {
        "server-everything": await list_tools(
            node, [paths["everything"], "stdio"], "everything", errlog
        ),
        "server-filesystem": await list_tools(node, [paths["filesystem"], str(root)], "fs", errlog),
        "mcp-server-time": await list_tools(
            paths["time"], ["--local-timezone", "UTC"], "time", errlog
        ),
    }


def token_rows(
    functions_1k: Sequence[Function], *, upstreams: bool
) -> tuple[list[str], list[list[str]], list[str], dict[str, Any]]:
    """The table's headers and rows, notes under it, and the figures."""

    async def gather() -> tuple[list[Definition], list[Definition], dict[str, Any] | str]:
        demo, meta = await gate_definitions()
        found: dict[str, Any] | str = "skipped (--no-upstreams or --quick)"
        if upstreams:
            paths = server_paths()
            if isinstance(paths, str):
                found = paths
            else:
                with tempfile.TemporaryDirectory(prefix="callgate-bench-fs-") as root:
                    found = await upstream_definitions(paths, Path(root), quiet)
        return demo, meta, found

    # The servers' start-up chatter on stderr is not the benchmark's output.
    with open(os.devnull, "w") as quiet:
        demo, meta, servers = anyio.run(gather)
    catalogues: list[tuple[str, list[Definition]]] = [("demo (callgate.demo)", demo)]
    if isinstance(servers, dict):
        catalogues += list(servers.items())
        together = demo + [d for defs in servers.values() for d in defs]
        catalogues.append(("demo + the 3 servers", together))
    bfcl = [definition(f.name, f.description, f.parameters) for f in functions_1k]
    catalogues.append(("1,000 BFCL functions", bfcl))

    meta_tokens = estimate_tokens(meta)
    rows, figures = [], []
    for label, defs in catalogues:
        every = estimate_tokens(defs)
        one = statistics.median(estimate_tokens(d) for d in defs)
        figures.append(
            {
                "catalogue": label,
                "tools": len(defs),
                "all_tools_tokens": every,
                "meta_tools_tokens": meta_tokens,
                "median_tool_tokens": one,
            }
        )
        ratio = every / meta_tokens
        rows.append(
            [
                label,
                f"{len(defs):,}",
                f"{every:,}",
                f"{meta_tokens:,}",
                f"{ratio:,.1f}x" if ratio >= 1 else f"{ratio:.2f}x",
                f"{one:,.0f}",
            ]
        )
    headers = [
        "catalogue",
        "tools",
        "every tool (tokens)",
        f"the {len(meta)} meta-tools (tokens)",
        "every tool / meta-tools",
        "one tool, median (tokens)",
    ]
    notes = []
    if isinstance(servers, str):
        notes.append(f"The real MCP servers' rows: {servers}.")
    notes.append(
        f"Meta-tools: {', '.join(d['name'] for d in meta)}. With disclosure each request "
        "carries them; a tool the model has described is added to later requests (about "
        "the median above each)."
    )
    report = {"meta_tools": [d["name"] for d in meta], "rows": figures, "notes": notes}
    return headers, rows, notes, report
