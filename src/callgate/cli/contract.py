"""``callgate contract``: keep the tools' contracts, and tell a breaking change
from a compatible one before it ships.

``snapshot`` writes the tools as a config's gate serves them (the demo's without
``--config``): the form ``callgate tools --json`` prints, under a header. ``diff
OLD NEW`` compares two catalogues, each a snapshot, an MCP ``tools/list`` result
(JSON) or a config file (``.toml``, whose gate is built and asked), with the
rules of :mod:`callgate.contract.diff`. It exits 0 when nothing breaks (or with
``--allow-breaking``), 1 when something does, 2 when a file cannot be used.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callgate.cli._common import (
    EXIT_FAILED,
    CliError,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    print_json,
    visible,
)
from callgate.cli._context import ConfigOption, load

if TYPE_CHECKING:
    from rich.console import Console

    from callgate.config import GateConfig
    from callgate.contract.diff import ContractDiff, ToolContract
    from callgate.runtime.gate import Gate

__all__ = ["contract_app"]

contract_app = typer.Typer(
    name="contract",
    help="Snapshot the tools' contracts and tell breaking changes from compatible ones.",
    no_args_is_help=True,
)


@contract_app.command()
def snapshot(
    ctx: typer.Context,
    config: ConfigOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="Write the snapshot to FILE instead of stdout.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Write the contracts of the tools the config serves, as JSON.

    Commit the file, and let CI run `callgate contract diff` between it and the
    config to catch a breaking change. Upstream MCP servers of the config are
    started (or connected to) to list their tools; no store is opened: --store
    is accepted like every command's, and not read.
    """
    del store  # a snapshot needs no store
    with cli_errors():
        tools = _served(load(ctx, config))
        document = {"callgate_contract_snapshot": 1, "tools": tools}
        if out is None:
            print_json(document)
            return
        text = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--out {out}: cannot write it ({exc.strerror})") from None
    console().print(
        f"Wrote the contracts of {len(tools)} tools to {out}", highlight=False, markup=False
    )


@contract_app.command()
def diff(
    old: Annotated[
        Path,
        typer.Argument(
            metavar="OLD",
            help="The contracts before the change: a snapshot or tools/list result (JSON), or a config (.toml).",
        ),
    ],
    new: Annotated[
        Path,
        typer.Argument(
            metavar="NEW", help="The contracts after the change, in any of the same forms."
        ),
    ],
    as_json: JsonOption = False,
    allow_breaking: Annotated[
        bool,
        typer.Option("--allow-breaking", help="Exit 0 even when a change is breaking."),
    ] = False,
    store: StoreOption = None,
) -> None:
    """Compare two versions of the tools and name each breaking change.

    OLD and NEW are each a snapshot (`callgate contract snapshot`, `callgate
    tools --json`), an MCP tools/list result (JSON) or a config file (.toml).
    Exit code 0: nothing breaks (or --allow-breaking); 1: a change breaks a
    caller or a consumer; 2: a file cannot be used. --store is accepted like
    every command's, and not read.
    """
    from callgate.contract.diff import diff_catalogues

    del store  # comparing needs no store
    with cli_errors():
        result = diff_catalogues(_catalogue(old, "OLD"), _catalogue(new, "NEW"))
    if as_json:
        print_json({"old": str(old), "new": str(new), **result.to_json()})
    else:
        _print(console(), result, allow_breaking=allow_breaking)
    if result.breaking and not allow_breaking:
        raise typer.Exit(EXIT_FAILED)


def _served(cfg: GateConfig) -> list[dict[str, Any]]:
    """What ``callgate tools --json`` prints of the config's tools, by name."""
    gate = cfg.build_gate("memory://")  # listing needs no store: the real one stays untouched
    if gate.upstreams():
        # Upstream tools are known once their servers answer: connect, list, close.
        asyncio.run(_listed(gate))
    specs = sorted(gate.tools(), key=lambda s: s.name)
    return [{**s.describe(), "trusted_fields": sorted(s.trusted_fields)} for s in specs]


async def _listed(gate: Gate) -> None:
    async with opened(gate):
        pass


def _catalogue(path: Path, label: str) -> dict[str, ToolContract]:
    """The tools of one side of a diff.

    Raises:
        CliError: the file cannot be read, is not JSON, or holds no catalogue.
        ConfigError: a ``.toml`` file is no usable config.
    """
    from callgate.contract.diff import read_catalogue
    from callgate.errors import InvalidArgument

    data: Any
    if path.suffix == ".toml":
        from callgate.config import load_config

        data = _served(load_config(path))
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{label} {path}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise CliError(f"{label} {path}: not UTF-8 text") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{label} {path}: not JSON ({exc.msg}, line {exc.lineno}); expected a "
                "snapshot, a tools/list result or a .toml config"
            ) from None
    try:
        return read_catalogue(data)
    except InvalidArgument as exc:
        raise CliError(f"{label} {path}: {exc}") from None


SEVERITY_STYLES = {"breaking": "bold red", "compatible": "green", "note": "cyan"}


def _print(out: Console, result: ContractDiff, *, allow_breaking: bool) -> None:
    """Each changed tool (those with a breaking change first) and its changes, one
    line each (folded on a narrow console), then the counts and the verdict."""
    from rich.table import Table
    from rich.text import Text

    from callgate.contract.diff import RULES, Severity

    total = len(result.tools) + len(result.unchanged)
    if not result.tools:
        out.print(Text(f"No changes: the {total} tools have the same contracts.", style="green"))
        return
    rule_width = max(len(c.rule) for t in result.tools for c in t.changes)
    for tool in result.tools:
        head = Text.assemble((visible(tool.name), "bold"), f"  {tool.status}")
        if tool.status == "changed":
            said = [f"{n} {s.value}" for s in Severity if (n := tool.count(s))]
            head.append(f": {', '.join(said)}", style="dim")
        out.print(head)
        rows = Table.grid(padding=(0, 2), pad_edge=True)
        rows.add_column(no_wrap=True, width=len("compatible") + 2)  # with the indent
        rows.add_column(no_wrap=True, width=rule_width)
        rows.add_column(overflow="fold")
        for change in tool.changes:
            severity = change.severity.value
            text = Text()
            if change.path:
                text.append(f"{visible(change.path)}: ", style="bold")
            text.append(f"{visible(change.what)}; ")
            text.append(RULES[change.rule][1], style="dim")
            rows.add_row(Text(severity, style=SEVERITY_STYLES[severity]), change.rule, text)
        out.print(rows)
    totals = result.counts
    out.print(
        f"{len(result.tools)} of {total} tools changed: {totals['breaking']} breaking, "
        f"{totals['compatible']} compatible, {_plural(totals['note'], 'note')}.",
        highlight=False,
    )
    if not result.breaking:
        out.print(Text("No breaking changes.", style="bold green"))
    elif allow_breaking:
        out.print(Text("Breaking changes, allowed by --allow-breaking.", style="bold yellow"))
    else:
        out.print(
            Text(
                "Breaking changes: what works with OLD may fail with NEW "
                "(exit 1; --allow-breaking accepts them).",
                style="bold red",
            )
        )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
