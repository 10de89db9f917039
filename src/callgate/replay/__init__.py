"""Replay a recorded agent run against the gate as it is now, and report what changed.

Example:
    async with Gate([ops], store="sqlite:///callgate.db", policy=policy) as gate:
        report = await replay(gate, "run_abc")
    print(report.summary())

See docs/replay.md.
"""

from callgate.replay.model import ReplayModel
from callgate.replay.recording import RecordedCall, RecordedTurn, Recording, recording_of
from callgate.replay.replayer import replay
from callgate.replay.report import (
    CallReplay,
    Difference,
    DifferenceKind,
    ReplayReport,
    structural_diff,
)

__all__ = [
    "CallReplay",
    "Difference",
    "DifferenceKind",
    "RecordedCall",
    "RecordedTurn",
    "Recording",
    "ReplayModel",
    "ReplayReport",
    "recording_of",
    "replay",
    "structural_diff",
]
