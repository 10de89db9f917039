"""A program waiting for a person: kept in the store, taken up again once decided.

When a tool call inside a program is parked for approval, the program stops
where it is: the sandbox's snapshot (its whole state, mid-``await``) is dumped
and kept with what the host knows of the run (the answers of the other calls
already made, the parked call's exact inputs and position, what was printed),
as a run record of the store (``program:<digest>``), so any process can take
it up. The outer ``callgate.run_code`` call answers ``pending_approval`` with
the inner call's approval.

Calling ``run_code`` again with the same code, for the same caller (and
session), continues the program: the parked call is made again with the same
inputs and idempotency key (the chain finds the decided approval), its answer
given to the program at the point it stopped; a denied approval is raised
there as a ``PermissionError``. :meth:`callgate.Gate.resume` with the approval's
id does the same (a ``program-approval:<id>`` record points to the program).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from callgate import access
from callgate.clock import Clock
from callgate.contract import Principal
from callgate.store.base import RunRecord, RunRecords, RunStatus

__all__ = ["Parked", "Suspended", "finish", "load", "program_id", "program_waiting_on", "save"]

PROGRAM = "program:"
PROGRAM_APPROVAL = "program-approval:"


def program_id(principal: Principal, session_id: str | None, code: str) -> str:
    """The record of a program: the same code of the same caller and session."""
    blob = json.dumps([principal.tenant, principal.user, session_id, code])
    return PROGRAM + hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Parked:
    """A call of the program waiting for an approval: what makes it again."""

    tool: str
    """The tool's full name."""
    arguments: dict[str, Any]
    position: int
    approval_id: str


@dataclass
class Suspended:
    """What is kept of a waiting program (see the module docs)."""

    run: str
    """The first ``run_code`` call's id: the run's write keys are made of it."""
    session_id: str
    """The session of its calls (the caller's, else one of its own)."""
    outer_session: str | None
    """The caller's session of the ``run_code`` call (part of the program's id)."""
    code: str
    snapshot: bytes
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Settled answers of calls the program has not taken yet, by sandbox call id."""
    parked: dict[int, Parked] = field(default_factory=dict)
    calls: int = 0
    done: list[str] = field(default_factory=list)
    printed: str = ""

    def state(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "session_id": self.session_id,
            "outer_session": self.outer_session,
            "code": self.code,
            "snapshot": base64.b64encode(self.snapshot).decode("ascii"),
            "answers": {str(k): v for k, v in self.answers.items()},
            "parked": {str(k): vars(p) for k, p in self.parked.items()},
            "calls": self.calls,
            "done": self.done,
            "printed": self.printed,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Suspended:
        return cls(
            run=state["run"],
            session_id=state["session_id"],
            outer_session=state["outer_session"],
            code=state["code"],
            snapshot=base64.b64decode(state["snapshot"]),
            answers={int(k): v for k, v in state["answers"].items()},
            parked={int(k): Parked(**v) for k, v in state["parked"].items()},
            calls=state["calls"],
            done=list(state["done"]),
            printed=state["printed"],
        )


async def load(store: RunRecords, principal: Principal, pid: str) -> Suspended | None:
    """The program ``pid`` of ``principal`` if it waits (else None: run it afresh)."""
    record = await store.get_run(pid)
    if record is None or record.status != "waiting_approval":
        return None
    if not access.check(principal, access.Action.READ_OWN, record):
        return None
    return Suspended.from_state(record.state)


async def save(
    store: RunRecords, clock: Clock, principal: Principal, pid: str, program: Suspended
) -> None:
    """Keep the waiting ``program``, and a pointer from each approval it waits on."""
    now = clock.now()
    await store.save_run(_record(pid, principal, "waiting_approval", program.state(), now))
    for parked in program.parked.values():
        pointer = {"program": pid, "code": program.code, "session": program.outer_session}
        await store.save_run(
            _record(
                PROGRAM_APPROVAL + parked.approval_id, principal, "waiting_approval", pointer, now
            )
        )


async def finish(
    store: RunRecords, clock: Clock, principal: Principal, pid: str, status: RunStatus
) -> None:
    """The program ended (its snapshot is dropped): the same code runs afresh next time."""
    await store.save_run(_record(pid, principal, status, {}, clock.now()))


def _record(
    key: str, principal: Principal, status: RunStatus, state: dict[str, Any], now: datetime
) -> RunRecord:
    return RunRecord(
        id=key,
        user=principal.user,
        tenant=principal.tenant,
        status=status,
        created_at=now,
        updated_at=now,
        state=state,
    )


async def program_waiting_on(
    store: RunRecords, principal: Principal, approval_id: str
) -> tuple[str, str | None] | None:
    """(code, the caller's session) of ``principal``'s program that waits on ``approval_id``, if any."""
    record = await store.get_run(PROGRAM_APPROVAL + approval_id)
    if record is None or not access.check(principal, access.Action.READ_OWN, record):
        return None
    waiting = await store.get_run(record.state["program"])
    if waiting is None or waiting.status != "waiting_approval":
        return None
    return record.state["code"], record.state["session"]
