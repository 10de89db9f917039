"""The options that bound an agent run, shared by ``callgate run`` and ``callgate eval run``
(both build a :class:`~callgate.agent.runs.RunLimits` from them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from callgate.agent.runs import RunLimits

__all__ = [
    "MaxOutputTokensOption",
    "MaxTokensOption",
    "MaxToolCallsOption",
    "MaxTurnsOption",
    "WallTimeOption",
    "run_limits",
]

MaxTurnsOption = Annotated[
    int,
    typer.Option(
        "--max-turns",
        min=1,
        metavar="N",
        help="Model requests per run; the run stops when it reaches them.",
    ),
]
MaxToolCallsOption = Annotated[
    int,
    typer.Option(
        "--max-tool-calls",
        min=1,
        metavar="N",
        help="Tool calls per run; a turn that would pass it is not run, and the run stops.",
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        metavar="N",
        help="Model tokens (input and output) per run; default: no limit.",
        show_default=False,
    ),
]
MaxOutputTokensOption = Annotated[
    int,
    typer.Option(
        "--max-output-tokens",
        min=1,
        metavar="N",
        help="Output tokens the model may write per request (lower it for a small context "
        "or a slow local model).",
    ),
]
WallTimeOption = Annotated[
    float,
    typer.Option(
        "--wall-time",
        min=0.001,
        metavar="SECONDS",
        help="Seconds of activity per run (waiting for an approval does not count).",
    ),
]


def run_limits(
    max_turns: int,
    max_tool_calls: int,
    max_tokens: int | None,
    max_output_tokens: int,
    wall_time: float,
    *,
    concurrent_reads: bool = True,
) -> RunLimits:
    """The limits the options above give (``--sequential``: no concurrent reads)."""
    from callgate.agent.runs import RunLimits

    return RunLimits(
        max_turns=max_turns,
        max_tool_calls=max_tool_calls,
        max_tokens=max_tokens,
        max_tokens_per_request=max_output_tokens,
        wall_time=wall_time,
        concurrent_reads=concurrent_reads,
    )
