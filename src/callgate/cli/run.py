"""``callgate run``: the agent loop against the configured tools, streamed as it goes."""

from __future__ import annotations

import asyncio
import json
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from callgate.agent.loop import Agent, RunEvent, RunLimits, RunResult
from callgate.agent.model import Model
from callgate.agent.providers import PROVIDERS, MissingCredentials, make_model
from callgate.cli._common import (
    CliError,
    JsonOption,
    LocalScopesOption,
    LocalTenantOption,
    LocalUserOption,
    StoreOption,
    cli_errors,
    console,
    local_principal,
    opened,
    print_json,
)
from callgate.contract import Principal
from callgate.runtime.gate import Gate


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Printer:
    """Streams run events to the terminal, one line (or block) each."""

    def __init__(self, out: Console) -> None:
        self.out = out

    def __call__(self, event: RunEvent) -> None:
        out = self.out
        if event.kind == "text":
            out.print(Text("model  ", style="bold cyan") + Text(event.text))
        elif event.kind == "call":
            args = _short(event.data.get("arguments", {}))
            out.print(Text("call   ", style="bold") + Text(f"{event.text} {args}"))
        elif event.kind == "result":
            status = str(event.data.get("status", ""))
            style = "green" if status == "ok" else "yellow" if "pending" in status else "red"
            out.print(Text(f"  {status:<8}", style=style) + Text(_short(event.text)))
        elif event.kind == "waiting":
            out.print(Text("waiting ", style="bold yellow") + Text(event.text))
        elif event.kind == "done":
            out.print(Text("done   ", style="bold green") + Text(event.text))
        else:
            out.print(Text(f"{event.kind:<7}", style="bold red") + Text(event.text))


def _summary(out: Console, result: RunResult) -> None:
    usage = result.usage
    out.print(Text("\nanswer ", style="bold") + Text(result.output or "(none)"))
    out.print(
        f"run {result.run_id}: {result.status} ({result.reason}); "
        f"{usage.requests} model requests, {usage.input_tokens} tokens in / "
        f"{usage.output_tokens} out (~{usage.tool_definition_tokens} on tool definitions); "
        f"{usage.tool_calls} tool calls ({usage.errors} errors, {usage.approvals} approvals); "
        f"{usage.seconds:.1f} s"
    )
    if result.pending_approvals:
        ids = " ".join(result.pending_approvals)
        out.print(
            f"decide with: callgate approvals show {ids}; then: callgate run --resume {result.run_id}"
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
    principal: LocalUserOption = "local",
    tenant: LocalTenantOption = None,
    scopes: LocalScopesOption = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 20,
    max_tool_calls: Annotated[int, typer.Option("--max-tool-calls", min=1)] = 100,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Model tokens per run.")
    ] = None,
    wall_time: Annotated[float, typer.Option("--wall-time", min=0.001, metavar="SECONDS")] = 600.0,
    sequential: Annotated[
        bool, typer.Option("--sequential", help="Run every call alone, reads included.")
    ] = False,
    as_json: JsonOption = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            metavar="FILE",
            help="TOML config file (toolboxes, policy, limits); default: the demo tools.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Let a model work with the tools: every call it proposes goes through the governed
    chain. Streams the model's text, each call and its result, approvals awaited, the
    answer and what the run used."""
    from callgate.cli.app import _config, _globals, _shared_demo_state, _store

    with cli_errors():
        if (prompt is None) == (resume is None):
            raise CliError("give a PROMPT, or --resume RUN_ID (not both)")
        cfg = _config(ctx, config)
        serves_demo = (config or _globals(ctx).config) is None
        store_url = cfg.store_url(_store(ctx, store))
        limits = RunLimits(
            max_turns=max_turns,
            max_tool_calls=max_tool_calls,
            max_tokens=max_tokens,
            wall_time=wall_time,
            concurrent_reads=not sequential,
        )
        with _shared_demo_state(store_url) if serves_demo else nullcontext():
            gate = cfg.build_gate(store_url)
            who = local_principal(gate, principal, tenant, scopes, demo=serves_demo)
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
                    limits=limits,
                    on_event=None if as_json else _Printer(out),
                )
            )
    if as_json:
        print_json(_result_json(result))
        return
    _summary(out, result)


async def _stored_model(gate: Gate, run_id: str) -> tuple[str, str]:
    record = await gate.store.get_run(run_id)
    if record is None:
        raise CliError(f"no agent run {run_id!r}")
    name = str(record.state.get("model", ""))
    provider, _, model = name.partition(":")
    if provider not in PROVIDERS or not model:
        raise CliError(f"run {run_id} used the model {name!r}: give --provider and --model")
    return provider, model


def _model(provider: str | None, model: str | None, base_url: str | None) -> Model:
    if provider is None or model is None:
        raise CliError("give --provider and --model (e.g. --provider anthropic --model NAME)")
    try:
        return make_model(provider, model, base_url=base_url)
    except (MissingCredentials, ValueError, ImportError) as exc:
        raise CliError(str(exc)) from None


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
    limits: RunLimits,
    on_event: Any,
) -> RunResult:
    async with opened(gate):
        if resume is not None and (provider is None or model is None):
            stored_provider, stored_model = await _stored_model(gate, resume)
            provider = provider or stored_provider
            model = model or stored_model
        agent = Agent(
            gate,
            _model(provider, model, base_url),
            principal=who,
            system=system,
            limits=limits,
            on_event=on_event,
        )
        if resume is not None:
            try:
                return await agent.resume(resume)
            except LookupError as exc:
                raise CliError(str(exc)) from None
        assert prompt is not None
        return await agent.run(prompt)
