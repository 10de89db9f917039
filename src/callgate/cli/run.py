"""``callgate run``: the agent loop against the configured tools, streamed as it goes.

Exit code: 0 the run completed, 1 it failed (the model could not be reached or
refused the request), 4 a limit stopped it, 3 it waits for an approval (resume
it with ``--resume``), 2 the CLI could not run.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import anyio
import typer

from callgate.agent.providers import PROVIDERS, MissingCredentials, make_model, provider_of
from callgate.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_WAITING,
    CliError,
    CodeModeOption,
    DiscoveryOption,
    JsonOption,
    StoreOption,
    cli_errors,
    console,
    opened,
    print_json,
)
from callgate.cli._context import (
    ConfigOption,
    RolesOption,
    ScopesOption,
    TenantOption,
    UserOption,
    config_path,
    demo_state_if,
    load,
    principal_from_options,
    store_option,
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
    from rich.console import Console
    from rich.table import Table

    from callgate.agent.loop import RunEvent, RunLimits, RunResult
    from callgate.agent.messages import ModelRequest, ModelResponse
    from callgate.agent.model import Model
    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

EXIT_CODES = {
    "completed": EXIT_OK,
    "waiting_approval": EXIT_WAITING,
    "failed": EXIT_FAILED,
    "stopped": EXIT_STOPPED,
}
"""The exit code of ``callgate run`` for each way a run ends."""


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _readable(text: str) -> str:
    """A result as the terminal shows it: JSON spaced out so that it wraps at words
    (the model reads it compact), anything else as it is."""
    first, _, rest = text.partition("\n")
    try:
        value = json.loads(first)
    except ValueError:
        return text
    spaced = json.dumps(value, ensure_ascii=False)
    return f"{spaced}\n{rest}" if rest else spaced


def _line(label: str, style: str, text: str, *, width: int = 7) -> Table:
    """``label`` (in a column at least ``width`` wide) and ``text`` beside it: every
    line of ``text`` after the first, wrapped or not, stays under the first."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(min_width=width, no_wrap=True, style=style)
    grid.add_column(overflow="fold")
    grid.add_row(label, Text(text))
    return grid


class _Printer:
    """Streams run events to the terminal, one line (or block) each."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self._numbers: dict[str, int] = {}
        """Each call's number in the run, by call id: its result carries it."""

    def _number(self, event: RunEvent) -> str:
        call_id = str(event.data.get("call_id", ""))
        number = self._numbers.setdefault(call_id, len(self._numbers) + 1)
        return f"#{number}"

    def __call__(self, event: RunEvent) -> None:
        out = self.out
        if event.kind == "start":
            # First, so that a slow model's silence already names the run to look up.
            again = "resumed" if event.data.get("resumed") else "started"
            out.print(_line("run", "dim", f"{event.run_id} {again} with {event.text}"))
        elif event.kind == "text":
            out.print(_line("model", "bold cyan", event.text))
        elif event.kind == "call":
            raw = event.data.get("raw_arguments")
            # Arguments that were not a JSON object are shown as the model sent them.
            args = _short(raw) if isinstance(raw, str) else _short(event.data.get("arguments", {}))
            out.print(_line("call", "bold", f"{self._number(event)} {event.text} {args}"))
        elif event.kind == "result":
            # Labelled with its call: concurrent reads end in any order.
            status = str(event.data.get("status", ""))
            style = "green" if status == "ok" else "yellow" if "pending" in status else "red"
            shown = _short(_readable(event.text))
            text = f"{self._number(event)} {event.data.get('name', '')}: {shown}"
            out.print(_line(f"  {status}", style, text, width=10))
        elif event.kind == "waiting":
            out.print(_line("waiting", "bold yellow", event.text))
        elif event.kind == "done":
            out.print(_line("done", "bold green", event.text))
        else:
            out.print(_line(event.kind, "bold red", event.text))


class _Waiting:
    """The model, with a spinner on the terminal while a request waits for its answer
    (a local model may take a minute to answer)."""

    def __init__(self, model: Model, out: Console) -> None:
        self._model = model
        self._out = out
        self.name = model.name
        # The loop names tools in every text the model reads as the model's adapter
        # does (``ops__deploy_status``): the wrapper must not hide its rule.
        self.name_rule = getattr(model, "name_rule", None)
        self.base_url = getattr(model, "base_url", None)

    async def request(self, request: ModelRequest) -> ModelResponse:
        with self._status():
            return await self._model.request(request)

    @contextmanager
    def _status(self) -> Iterator[None]:
        if not self._out.is_interactive:
            yield
            return
        with self._out.status(f"waiting for {self.name}…", spinner="dots"):
            yield


def resume_command(run_id: str, options: dict[str, str | None]) -> str:
    """The command that resumes ``run_id``, with the ``options`` it ran with that
    a resume needs too (the store, the config, who): the provider, model and URL
    are kept with the run. A value holding a password is shown as ``...``."""
    words = ["callgate", "run", "--resume", run_id]
    for option, value in options.items():
        if value is None:
            continue
        if urlsplit(value).password:
            value = "..."
        words += [option, value]
    return shlex.join(words)


def _summary(out: Console, result: RunResult, resume_with: dict[str, str | None]) -> None:
    from rich.text import Text

    usage = result.usage
    out.print(Text("\nanswer ", style="bold") + Text(result.output or "(none)"))
    out.print(
        Text(
            f"run {result.run_id}: {result.status} ({result.reason}); "
            f"{usage.requests} model requests, {usage.input_tokens} tokens in "
            f"(~{usage.tool_definition_tokens} of them tool definitions, estimated) / "
            f"{usage.output_tokens} out; "
            f"{usage.tool_calls} tool calls ({usage.errors} errors, {usage.approvals} approvals); "
            f"{usage.seconds:.1f} s"
        )
    )
    if result.pending_approvals:
        ids = " ".join(result.pending_approvals)
        out.print(
            Text(
                f"decide with: callgate approvals show {ids}; "
                f"then: {resume_command(result.run_id, resume_with)}"
            )
        )


def _result_json(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "status": result.status,
        "reason": result.reason,
        "output": result.output,
        "pending_approvals": list(result.pending_approvals),
        "usage": result.usage.to_json(),
        "calls": [dict(c.__dict__) for c in result.calls],
    }


def run(
    ctx: typer.Context,
    prompt: Annotated[
        str | None,
        typer.Argument(metavar="PROMPT", help="What to ask the model (not with --resume)."),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            metavar="NAME",
            help=f"One of: {', '.join(PROVIDERS)}. With --resume: the run's own by default.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", metavar="MODEL", help="The provider's model name."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="The API's base URL (openai-compatible servers: e.g. http://127.0.0.1:11434/v1).",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN_ID",
            help="Continue a run that waited for an approval.",
            show_default=False,
        ),
    ] = None,
    system: Annotated[
        str | None, typer.Option("--system", metavar="TEXT", help="The system prompt.")
    ] = None,
    tool: Annotated[
        str | None,
        typer.Option(
            "--tool",
            metavar="NAME",
            help="Make the model call this tool (e.g. ops.deploy_status): the run ends "
            "after that call. For extraction, and for models too weak to choose. A resume "
            "keeps the run's own.",
            show_default=False,
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature",
            min=0.0,
            max=2.0,
            metavar="T",
            help="Sampling temperature (default: the provider's; 0 steadies a small "
            "local model). A resume keeps the run's own.",
            show_default=False,
        ),
    ] = None,
    principal: UserOption = None,
    tenant: TenantOption = None,
    scopes: ScopesOption = None,
    roles: RolesOption = None,
    max_turns: MaxTurnsOption = 20,
    max_tool_calls: MaxToolCallsOption = 100,
    max_tokens: MaxTokensOption = None,
    max_output_tokens: MaxOutputTokensOption = 4096,
    wall_time: WallTimeOption = 600.0,
    sequential: Annotated[
        bool, typer.Option("--sequential", help="Run every call alone, reads included.")
    ] = False,
    discovery: DiscoveryOption = None,
    code_mode: CodeModeOption = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    store: StoreOption = None,
) -> None:
    """Let a model work with the tools, every call through the governed chain.

    Streams the model's text, each call it proposes and its result, approvals
    awaited, the answer and what the run used. Exit code: 0 the run completed,
    1 it failed, 4 a limit stopped it, 3 it waits for an approval (then
    --resume RUN_ID), 2 the CLI could not run.
    """
    from rich.console import Console

    with cli_errors():
        if (prompt is None) == (resume is None):
            raise CliError("give a PROMPT, or --resume RUN_ID (not both)")
        cfg = load(ctx, config, discovery=discovery, code_mode=code_mode)
        serves_demo = config_path(ctx, config) is None
        store = store_option(ctx, store)
        limits = run_limits(
            max_turns,
            max_tool_calls,
            max_tokens,
            max_output_tokens,
            wall_time,
            concurrent_reads=not sequential,
        )
        with demo_state_if(serves_demo, cfg.store_url(store)):
            gate = cfg.build_gate(store)
            who = principal_from_options(
                gate,
                cfg.principal,
                user=principal,
                tenant=tenant,
                scopes=scopes,
                roles=roles,
            )
            out = console()
            result = asyncio.run(
                _run(
                    gate,
                    who,
                    prompt=prompt,
                    resume=resume,
                    provider=provider,
                    model=model,
                    base_url=base_url,
                    system=system,
                    tool=tool,
                    temperature=temperature,
                    limits=limits,
                    on_event=None if as_json else _Printer(out),
                    progress=Console(stderr=True, highlight=False),
                    code_mode=code_mode,
                )
            )
    if as_json:
        print_json(_result_json(result))
    else:
        resume_with = {
            "--config": str(config_path(ctx, config)) if config_path(ctx, config) else None,
            "--store": store,
            "--principal": principal,
            "--tenant": tenant,
            "--roles": roles,
            "--scopes": scopes,
        }
        _summary(out, result, resume_with)
    raise typer.Exit(EXIT_CODES.get(result.status, EXIT_FAILED))


@dataclass(frozen=True)
class _Started:
    """What a run was started with: its model's name, the provider and model that
    build it again (None if no provider here does), the base URL (None if the
    provider's own, or not kept: it held a secret), the temperature and the
    forced tool."""

    name: str
    provider: str | None
    model: str | None
    base_url: str | None
    temperature: float | None
    tool: str | None


async def _started(gate: Gate, run_id: str) -> _Started:
    record = await (await gate.runs()).get_run(run_id)
    if record is None:
        raise CliError(f"no agent run {run_id!r}")
    state = record.state
    name = str(state.get("model", ""))
    provider, model = provider_of(name) or (None, None)
    temperature = state.get("temperature")
    return _Started(
        name=name,
        provider=provider,
        model=model,
        base_url=str(state["base_url"]) if state.get("base_url") else None,
        temperature=float(temperature) if temperature is not None else None,
        tool=str(state["forced_tool"]) if state.get("forced_tool") else None,
    )


def _model(provider: str | None, model: str | None, base_url: str | None) -> Model:
    if provider is None or model is None:
        raise CliError("give --provider and --model (e.g. --provider anthropic --model NAME)")
    try:
        return make_model(provider, model, base_url=base_url)
    except (MissingCredentials, ValueError) as exc:
        raise CliError(str(exc)) from None
    except ImportError:
        extra = PROVIDERS[provider].extra
        raise CliError(
            f"--provider {provider} needs callgate's extra {extra!r} (its SDK), which is not "
            f"installed: in the callgate checkout, run .venv/bin/python -m pip install -e "
            f"'.[{extra}]' (see the README's Install)"
        ) from None


async def _run(
    gate: Gate,
    who: Principal,
    *,
    prompt: str | None,
    resume: str | None,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    system: str | None,
    tool: str | None,
    temperature: float | None,
    limits: RunLimits,
    on_event: Any,
    progress: Console,
    code_mode: bool = False,
) -> RunResult:
    from callgate.agent.loop import Agent
    from callgate.agent.messages import ForcedTool

    async with opened(gate):
        if resume is not None:
            # The run's own model, at the URL it used, unless the options say otherwise.
            started = await _started(gate, resume)
            if provider in (None, started.provider):
                base_url = base_url or started.base_url
            provider = provider or started.provider
            model = model or started.model
            temperature = started.temperature if temperature is None else temperature
            tool = tool or started.tool
            if provider is None or model is None:
                raise CliError(
                    f"run {resume} used the model {started.name!r}: give --provider and --model"
                )
        agent = Agent(
            gate,
            # Off the loop: the first use imports the provider's SDK (about a second),
            # which the gate's stall watch would report as blocking code.
            _Waiting(await anyio.to_thread.run_sync(_model, provider, model, base_url), progress),
            principal=who,
            system=system,
            tool_choice=ForcedTool(tool) if tool is not None else "auto",
            temperature=temperature,
            limits=limits,
            on_event=on_event,
            code_mode=code_mode,
        )
        if resume is not None:
            try:
                return await agent.resume(resume)
            except LookupError as exc:
                raise CliError(str(exc)) from None
        assert prompt is not None
        try:
            return await agent.run(prompt)
        except ValueError as exc:  # the forced tool is not one of the tools here
            raise CliError(str(exc)) from None
