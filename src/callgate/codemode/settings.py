"""What ``[code_mode]`` asks for: :class:`CodeModeSettings`, read by :func:`parse_code_mode`.

Example (TOML)::

    [code_mode]
    enabled = true          # offer callgate.run_code (the agent loop: --code-mode)
    max_seconds = 30        # wall time of one program, its tool calls included
    max_cpu_seconds = 5     # time the program itself computes (tool calls excluded)
    max_memory_mb = 64      # the sandbox's heap
    max_recursion = 200     # nested function calls inside the program
    max_calls = 50          # tool calls one program may make
    max_output_kb = 64      # what it returns; what it prints (cut past it)
    workers = 2             # sandbox processes kept warm
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callgate._tables import parse_table

__all__ = ["CodeModeSettings", "parse_code_mode"]


@dataclass(kw_only=True, frozen=True)
class CodeModeSettings:
    """Whether programs run, and the limits of each (see the module docs)."""

    enabled: bool = False
    max_seconds: float = 30.0
    max_cpu_seconds: float = 5.0
    max_memory_mb: int = 64
    max_recursion: int = 200
    max_calls: int = 50
    max_output_kb: int = 64
    max_code_kb: int = 64
    """Longest program accepted (its source)."""
    workers: int = 2


class _CodeModeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    max_seconds: float = Field(30.0, gt=0, le=3600)
    max_cpu_seconds: float = Field(5.0, gt=0, le=3600)
    max_memory_mb: int = Field(64, ge=1, le=16384)
    max_recursion: int = Field(200, ge=10, le=10000)
    max_calls: int = Field(50, ge=1, le=10000)
    max_output_kb: int = Field(64, ge=1, le=65536)
    max_code_kb: int = Field(64, ge=1, le=1024)
    workers: int = Field(2, ge=1, le=64)


def parse_code_mode(raw: Mapping[str, Any], label: str) -> CodeModeSettings:
    """``[code_mode]`` of a config file, checked.

    Raises:
        InvalidArgument: an unknown key or a bad value (the message names it).
    """
    parsed = parse_table(_CodeModeFile, raw, label, "code_mode")
    return CodeModeSettings(**parsed.model_dump())
