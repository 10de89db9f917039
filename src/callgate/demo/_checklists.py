"""Runbook runs: work through a runbook's checklist across calls, behind a handle.

A run is state kept for one caller (a handle, see ``callgate.contract.handles``):
which steps of the checklist are done, by whom, when, with what note. It changes
nothing in the world, so it needs no approval; every use is authorized again
(scope ``notes:read``) and another caller's run looks like an unknown one.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, Field

from callgate.contract import Handle, HandleKind, ToolContext, Trusted, tool
from callgate.demo._state import DemoState, owned
from callgate.errors import ConstructionError

RUN = HandleKind(
    name="runbook run", prefix="run", ttl=timedelta(hours=2), created_by="ops.runbook_start"
)
"""Runs live 2 hours after their last change (the tools' descriptions say so)."""

_CHECKBOX = re.compile(r"^\s*\[ \]\s+(.+?)\s*$", re.MULTILINE)
_RUN_EXAMPLE = "run_4fQ2m9XbT1kLzP0aVw8sYc3e"


class RunStep(BaseModel):
    step: int = Field(description="The step's number, from 1.")
    text: str
    done: bool
    done_by: str | None = None
    done_at: datetime | None = None
    note: str | None = None


class RunbookRun(BaseModel):
    run: str = Field(description="The run's handle: pass it to the other runbook tools.")
    note_id: str
    title: str
    steps: list[RunStep]
    done: int = Field(description="How many steps are done.")
    total: int
    next_step: int | None = Field(description="The first step not yet done; null when all are.")
    expires_at: datetime = Field(description="When the run expires unless it changes again (UTC).")


def checklist(body: str) -> list[str]:
    """The steps of a runbook's checklist: its ``[ ] ...`` lines, in order."""
    return _CHECKBOX.findall(body)


def _run(handle: Handle) -> RunbookRun:
    steps = [RunStep(step=i, **s) for i, s in enumerate(handle.data["steps"], start=1)]
    open_steps = [s.step for s in steps if not s.done]
    return RunbookRun(
        run=handle.id,
        note_id=handle.data["note_id"],
        title=handle.data["title"],
        steps=steps,
        done=len(steps) - len(open_steps),
        total=len(steps),
        next_step=open_steps[0] if open_steps else None,
        expires_at=handle.expires_at,
    )


class ChecklistTools:
    """The runbook-run tools, bound to one demo state (for its notes and clock)."""

    def __init__(self, state: DemoState) -> None:
        self._state = state

    @tool(
        title="Start a runbook checklist run",
        scopes=["notes:read"],
        # A second start only makes another private run that expires unused: no
        # effect on anything outside the caller's own scratch state.
        idempotent=True,
        destructive=False,
        open_world=False,
        private_data=True,
        input_examples=[{"note_id": "N-1"}],
    )
    def runbook_start(self, note_id: str, tenant_id: Trusted[str], ctx: ToolContext) -> RunbookRun:
        """Start working through a runbook's checklist, step by step, across calls.

        Use it when the user is following a runbook (e.g. during an incident) and
        wants to track which checklist steps are done. It returns a run handle
        ("run_..."); pass it to ops.runbook_step_done as each step is completed and
        to ops.runbook_status to see where things stand. Runbook runs live 2 hours
        after their last change; after that, start a new run. A run is yours
        alone: nobody else can see or change it. It records progress only: it does
        not perform any step (rollbacks, emails) itself. Each call starts a new
        run, so start one per incident and keep its handle.

        Args:
            note_id: The runbook note's id, "N-" and a number, e.g. "N-1" (find it
                with ops.notes_search). The note must have a checklist.

        Returns:
            The run: its handle (run), note_id, title, steps (number, text, done),
            done and total counts, next_step (the first open step) and
            expires_at (UTC).
        """
        with self._state.transaction():
            note = owned(
                self._state.notes,
                note_id,
                tenant_id,
                kind="note",
                id_format='"N-" and a number, e.g. "N-1"',
                finder="Find the runbook with ops.notes_search.",
            )
        steps = checklist(note.body)
        if not steps:
            raise ConstructionError(
                f"Note {note.id} ({note.title!r}) has no checklist, so it cannot be run.",
                next_step="Read it with ops.notes_read and follow its text instead.",
            )
        data: dict[str, Any] = {
            "note_id": note.id,
            "title": note.title,
            "steps": [
                {"text": text, "done": False, "done_by": None, "done_at": None, "note": None}
                for text in steps
            ],
        }
        return _run(ctx.handles.create_sync(RUN, data))

    @tool(
        title="Mark a runbook step done",
        scopes=["notes:read"],
        idempotent=True,
        destructive=False,
        open_world=False,
        private_data=True,
        input_examples=[
            {"run": _RUN_EXAMPLE, "step": 1, "note": "D-1, started 14:02, first alert 14:05"}
        ],
    )
    def runbook_step_done(
        self,
        run: str,
        step: Annotated[int, Field(ge=1, le=100)],
        user_id: Trusted[str],
        ctx: ToolContext,
        note: Annotated[str | None, Field(max_length=300)] = None,
    ) -> RunbookRun:
        """Mark one step of a runbook run as done, with an optional note.

        Use it right after the user (or you, with another tool) has completed a
        checklist step. It only records that the step is done; it does not do the
        step. Steps may be done in any order. Marking a step done again replaces
        its note. Each change renews the run. Runbook runs live 2 hours after
        their last change.

        Args:
            run: The run handle from ops.runbook_start, e.g. "run_4fQ2...".
            step: The step's number, as listed in the run (from 1).
            note: What was found or done, for the record (up to 300 characters),
                e.g. "D-1, rollout 14:02, first alert 14:05".

        Returns:
            The whole run after the change, as ops.runbook_status returns it.
        """
        handle = ctx.handles.get_sync(RUN, run)
        steps = [dict(s) for s in handle.data["steps"]]
        if step > len(steps):
            raise ConstructionError(
                f"{RUN.name} {run!r} has steps 1 to {len(steps)}; there is no step {step}.",
                next_step="Call ops.runbook_status to see the steps and their numbers.",
            )
        steps[step - 1].update(
            done=True, done_by=user_id, done_at=self._state.clock().isoformat(), note=note
        )
        return _run(ctx.handles.update_sync(RUN, handle, {**handle.data, "steps": steps}))

    @tool(
        title="Show a runbook run",
        scopes=["notes:read"],
        read_only=True,
        open_world=False,
        private_data=True,
        input_examples=[{"run": _RUN_EXAMPLE}],
    )
    def runbook_status(self, run: str, ctx: ToolContext) -> RunbookRun:
        """Show which steps of a runbook run are done and which one is next.

        Use it to resume a run (e.g. after a break, or when the user asks "where
        are we?") and before reporting progress. It only reads. Runbook runs live
        2 hours after their last change; reading does not renew them.

        Args:
            run: The run handle from ops.runbook_start, e.g. "run_4fQ2...".

        Returns:
            The run: handle, note_id, title, steps (number, text, done, and for
            done steps who, when and the note), done and total counts, next_step
            (null when every step is done) and expires_at (UTC).
        """
        return _run(ctx.handles.get_sync(RUN, run))
