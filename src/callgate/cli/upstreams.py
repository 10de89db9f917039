"""``callgate upstreams``: the MCP servers a config puts behind the gateway, probed."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import typer

from callgate.cli._common import CliError, JsonOption, StoreOption, cli_errors, console, print_json
from callgate.cli._context import ConfigOption, load, store_option

COUNTED = timedelta(hours=24)
"""How far back ``callgate upstreams`` counts calls and failures in the audit."""

if TYPE_CHECKING:
    from callgate.gateway.proxy import UpstreamToolbox
    from callgate.runtime.gate import Gate


def upstreams(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Connect to each upstream MCP server of the config and show how it is.

    For each: where it is, its trust, its state (ready, starting, down), the
    protocol version it speaks, its server name, the tools it serves (renamed
    and skipped ones named), its last error, and the calls of its tools and how
    many failed over the last 24 hours, from the audit of the store (every
    gateway process writing to it counts). Each upstream gets its startup_wait
    (5 s by default) to answer. Exits 1 when an upstream is not ready, 2 when
    the config or the store is bad.
    """
    with cli_errors():
        cfg = load(ctx, config, demo_default=False)
        gate = cfg.build_gate(cfg.store_url(store_option(ctx, store)))
        if not gate.upstreams():
            raise CliError("the config has no [[upstreams]] (docs/gateway.md)")
        reports = asyncio.run(_probe(gate))
    if as_json:
        print_json(reports)
    else:
        _print(reports)
    if any(report["state"] != "ready" for report in reports):
        raise typer.Exit(1)


async def _probe(gate: Gate) -> list[dict[str, Any]]:
    from callgate.cli._common import opened

    async with opened(gate):
        since = gate.clock.now() - COUNTED
        reports = []
        for box in _boxes(gate):
            report = upstream_report(gate, box)
            report["calls"], report["failures"] = await gate.outcomes(f"{box.name}.", since=since)
            reports.append(report)
        return reports


def _boxes(gate: Gate) -> list[UpstreamToolbox]:
    from callgate.gateway.proxy import UpstreamToolbox

    return [box for box in gate.upstreams() if isinstance(box, UpstreamToolbox)]


def upstream_states(gate: Gate) -> dict[str, str]:
    """Each upstream's state now (ready, starting, down), by name."""
    return {box.name: box.connection.state.value for box in _boxes(gate)}


def upstream_report(gate: Gate, box: UpstreamToolbox) -> dict[str, Any]:
    """What is known of one upstream now (no secret: the URL without credentials)."""
    connection = box.connection
    stats = connection.stats
    retry_in = None
    if stats.next_retry_at is not None and connection.state.value == "down":
        retry_in = round(max(0.0, stats.next_retry_at - time.monotonic()), 1)
    return {
        "name": box.name,
        "transport": box.settings.transport,
        "target": box.settings.target,
        "trust": "trusted" if box.settings.trusted else "untrusted",
        "state": connection.state.value,
        "protocol": stats.protocol,
        "server": stats.server,
        "tools": [spec.name for spec in gate.tools() if spec.toolbox == box.name],
        "tools_kept": stats.tools_kept,
        "renamed": dict(stats.renamed),
        "skipped": dict(box.skipped),
        "last_error": stats.last_error,
        "retry_in": retry_in,
        "calls": stats.calls,
        "failures": stats.failures,
        "counted_hours": COUNTED.total_seconds() / 3600,
    }


def status_lines(gate: Gate) -> list[str]:
    """One line per upstream, for ``callgate serve``'s start-up summary."""
    lines = []
    for box in _boxes(gate):
        report = upstream_report(gate, box)
        kept = " as last listed" if report["tools_kept"] else ""
        facts = f"{report['state']}, {len(report['tools'])} tools{kept}"
        if report["protocol"]:
            facts += f", protocol {report['protocol']}"
        if report["state"] != "ready" and report["last_error"]:
            facts += f"; {report['last_error']} (retried in the background)"
        lines.append(f"upstream {box.name} ({report['target']}, {report['trust']}): {facts}")
    return lines


def _print(reports: list[dict[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    columns = ("upstream", "state", "protocol", "tools", "calls 24 h", "failed", "trust")
    for column in (*columns, "last error", "where"):
        table.add_column(column, overflow="fold")
    for report in reports:
        state = report["state"]
        if report["tools_kept"]:
            state += " (tools as last listed)"
        if report["retry_in"] is not None:
            state += f" (retry in {report['retry_in']:g} s)"
        # What an upstream said (its error, its tools' names) is text, never markup.
        table.add_row(
            Text(report["name"]),
            Text(state),
            Text(report["protocol"] or "-"),
            str(len(report["tools"])),
            f"{report['calls']:,}",
            f"{report['failures']:,}",
            Text(report["trust"]),
            Text(report["last_error"] or "-"),
            Text(report["target"]),
        )
    out = console()
    out.print(table)
    for report in reports:
        for upstream, local in report["renamed"].items():
            out.print(f"{report['name']}: tool {upstream!r} is served as {local!r}", markup=False)
        for upstream, reason in report["skipped"].items():
            out.print(f"{report['name']}: tool {upstream!r} is not served: {reason}", markup=False)
