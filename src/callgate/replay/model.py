"""A model that answers with a recorded run's responses, in order.

Like :class:`~callgate.agent.model.ScriptedModel`, but its script is a recording:
a replay asks it once per recorded turn and gets exactly what the model answered
then, whatever the tools answer now. That is what makes a replay deterministic,
and also its limit: the model does not react to a result that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from callgate.agent.messages import ModelRequest, ModelResponse
from callgate.agent.model import ScriptExhausted
from callgate.replay.recording import Recording

__all__ = ["ReplayModel"]


@dataclass
class ReplayModel:
    """A :class:`~callgate.agent.model.Model` answering ``recording``'s responses.

    Raises:
        ScriptExhausted: (from :meth:`request`) asked more often than the run had turns.
    """

    recording: Recording
    name: str = ""
    requests: list[ModelRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"replay:{self.recording.model or self.recording.run_id}"

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        turns = self.recording.turns
        if len(self.requests) > len(turns):
            raise ScriptExhausted(
                f"run {self.recording.run_id} recorded {len(turns)} model responses; "
                f"request {len(self.requests)} has none"
            )
        return turns[len(self.requests) - 1].response
