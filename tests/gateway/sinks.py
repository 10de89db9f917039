"""The gateway's callers in the tests: a sink that records what the upstream sent
through the gateway, and one whose client can also answer questions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.contract.context import Elicitation, LogLevel, Root


class Recording:
    """A caller that keeps the progress and log messages it was sent."""

    def __init__(self) -> None:
        self.progressed: list[tuple[float, float | None, str | None]] = []
        self.logged: list[tuple[str, str]] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progressed.append((progress, total, message))

    async def log(self, level: LogLevel, message: str, data: Any) -> None:
        self.logged.append((level, message))


class Answering(Recording):
    """A caller whose client can ask its user (who says yes) and sample its model."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def elicit(self, message: str, schema: Mapping[str, Any], key: str | None) -> Elicitation:
        self.asked.append(message)
        return Elicitation("accept", {"ok": True})

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        return "sampled"

    async def list_roots(self, key: str | None) -> list[Root]:
        return []
