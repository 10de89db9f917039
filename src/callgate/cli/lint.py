"""``callgate lint``: the tool design rules over a config's tools or a file of
tool definitions, for people and for CI (``--json``, the exit code)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from callgate.cli._common import (
    EXIT_FAILED,
    CliError,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    print_json,
    visible,
)
from callgate.cli._context import ConfigOption, load

if TYPE_CHECKING:
    from rich.console import Console

    from callgate.lint import LintReport, LintSettings, ToolFacts

FailOn = Literal["error", "warning", "info"]
_STYLES = {"error": "bold red", "warning": "yellow", "info": "dim"}


def lint(
    ctx: typer.Context,
    config: ConfigOption = None,
    schemas: Annotated[
        list[Path] | None,
        typer.Option(
            "--schemas",
            metavar="FILE",
            help="Lint the tool definitions in a JSON file instead of the config's tools: an MCP "
            "tools/list result, a list of tools or OpenAI-style functions, or `callgate tools "
            "--json`. Each file is one catalogue; repeat for more.",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on",
            metavar="SEVERITY",
            help="Exit 1 when a finding not waived is at least this severe: error, warning or info.",
        ),
    ] = "error",
    disable: Annotated[
        list[str] | None,
        typer.Option(
            "--disable", metavar="RULE", help="Leave a rule out (repeatable); see --rules."
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="List info findings and waived ones too.")
    ] = False,
    rules: Annotated[
        bool, typer.Option("--rules", help="List the rules (id, severity, why) and exit.")
    ] = False,
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Check the tools' design: names, descriptions, parameters, schemas, results, risk.

    Each finding names the rule, the tool, what was found, why it matters and how
    to fix it. Without --schemas, the config's tools are linted (the demo's by
    default; upstream servers are started to list theirs), the gate's own
    callgate.* tools left out, with the config's [lint] waivers applied. Exit
    code: 0 clean, 1 a finding at --fail-on or worse, 2 the command could not
    run. Linting opens no store: --store is accepted like every command's, and
    not read.
    """
    from callgate.lint import RULES, parse_lint
    from callgate.lint import lint as run_lint

    del store  # linting reads definitions only
    with cli_errors():
        if fail_on not in _STYLES:
            raise CliError(f"--fail-on must be error, warning or info, not {fail_on!r}")
        if rules:
            _print_rules(as_json)
            return
        try:
            extra = parse_lint({"disable": list(disable or [])}, "--disable")
        except ValueError as exc:
            raise CliError(str(exc).removeprefix("--disable: lint.disable: ")) from None
        catalogues: list[tuple[str, list[ToolFacts], LintSettings]]
        if schemas:
            catalogues = [(str(path), _read_schemas(path), extra) for path in schemas]
        else:
            cfg = load(ctx, config)
            catalogues = [(cfg.label, _config_tools(cfg), cfg.lint.merged(extra))]
        reports = [(label, run_lint(tools, settings)) for label, tools, settings in catalogues]
        limit: FailOn = fail_on  # type: ignore[assignment]  # checked above
        failed = any(report.failed(fail_on=limit) for _, report in reports)
        if as_json:
            out = [{"catalogue": label, **report.as_json()} for label, report in reports]
            print_json(out[0] if len(out) == 1 else out)
        else:
            for label, report in reports:
                _print_report(console(), label, report, show_all=show_all, rules=RULES)
    if failed:
        raise typer.Exit(EXIT_FAILED)


def _config_tools(cfg: Any) -> list[ToolFacts]:
    from callgate.lint import facts_from_spec

    gate = cfg.build_gate("memory://")
    if gate.upstreams():
        asyncio.run(_listed(gate))
    return [
        facts_from_spec(spec, cfg.policy) for spec in gate.tools() if spec.toolbox != "callgate"
    ]


async def _listed(gate: Any) -> None:
    from callgate.cli._common import opened

    async with opened(gate):
        pass


def _read_schemas(path: Path) -> list[ToolFacts]:
    from callgate.lint import facts_from_schema

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{path}: not a JSON file ({exc})") from None
    if isinstance(data, dict):
        data = data.get(
            "tools",
            data.get("result", {}).get("tools") if isinstance(data.get("result"), dict) else None,
        )
    if not isinstance(data, list):
        raise CliError(f"{path}: expected a list of tools, or an object with a 'tools' list")
    tools = []
    for n, item in enumerate(data, 1):
        if not isinstance(item, dict):
            raise CliError(f"{path}: tool {n} is not an object")
        try:
            tools.append(facts_from_schema(item, source=str(path)))
        except ValueError as exc:
            raise CliError(f"{path}: tool {n}: {exc}") from None
    return tools


def _print_rules(as_json: bool) -> None:
    from callgate.lint import RULES

    if as_json:
        print_json([vars(rule) for rule in RULES.values()])
        return
    out = console()
    for rule in RULES.values():
        out.print(
            f"[{_STYLES[rule.severity]}]{rule.severity:<7}[/] [bold]{rule.id}[/] ({rule.area})"
        )
        out.print(f"        why: {rule.why}", markup=False)
        out.print(f"        fix: {rule.fix}", markup=False)


def _print_report(
    out: Console, label: str, report: LintReport, *, show_all: bool, rules: Any
) -> None:
    from rich.text import Text

    shown = [f for f in report.findings if show_all or (f.waived is None and f.severity != "info")]
    by_tool: dict[str, list[Any]] = {}
    for finding in shown:
        by_tool.setdefault(finding.tool, []).append(finding)
    for tool, findings in by_tool.items():
        out.print(Text(visible(tool), style="bold"))
        for f in findings:
            # A waiver's reason is the config's text: never read as markup.
            tag = f"waived ({f.waived})" if f.waived else f.severity
            style = "dim" if f.waived else _STYLES[f.severity]
            out.print(Text.assemble("  ", (f"{tag:<7}", style), f" {f.rule}: "), end="")
            out.print(visible(f.message), markup=False)
            out.print(f"          fix: {f.fix}", markup=False, style="dim")
    counts = report.counts()
    waived = len(report.findings) - len(report.active)
    summary = (
        f"{label}: {_n(report.tools, 'tool')}; {_n(counts['error'], 'error')}, "
        f"{_n(counts['warning'], 'warning')}, {counts['info']} info"
    )
    if waived:
        summary += f", {waived} waived"
    hidden = 0 if show_all else counts["info"] + waived
    if hidden:
        summary += f" (--all lists the {hidden} info and waived)"
    out.print(summary, markup=False)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
