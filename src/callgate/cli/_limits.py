"""The options that bound an agent run, shared by ``callgate run`` and ``callgate eval run``
(both build a :class:`~callgate.agent.runs.RunLimits` from them)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = [
    "MaxOutputTokensOption",
    "MaxTokensOption",
    "MaxToolCallsOption",
    "MaxTurnsOption",
    "WallTimeOption",
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
