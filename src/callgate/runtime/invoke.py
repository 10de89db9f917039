"""Running one handler for a governed call, and recording how its stray work ended.

Shared by the execute stage (the tool itself) and a previewed change's helpers
(the preview run again before applying, the verifier of a status): one place
where a governed call's code meets the gate's runner.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from callgate.contract import ToolContext
from callgate.contract.spec import ToolHandler
from callgate.runtime.call import Call
from callgate.runtime.deadline import Deadline
from callgate.runtime.recording import audit_record
from callgate.runtime.runner import LateEnd
from callgate.store import AuditRecord


def late_record(call: Call, late: LateEnd) -> AuditRecord:
    """The ``late`` audit record of ``call``: how its stray work ended.

    Its own record, after the ``final`` one: the caller's answer stands (an
    unknown outcome stays one), and this says what the tool did after all.
    """
    record = audit_record(call, phase="late")
    status = None if late.outcome is None else ("ok" if late.outcome == "ok" else "error")
    return replace(
        record,
        status=status,
        outcome=late.outcome,
        duration_ms=round(call.elapsed_ms, 3),
        detail={"late": late.facts()},
    )


async def run_tool(
    call: Call,
    tool: str,
    handler: ToolHandler,
    prepared: Any,
    injected: dict[str, Any],
    ctx: ToolContext,
    deadline: Deadline,
) -> Any:
    """Run one handler for a governed call on the gate's runner (see :meth:`Runner.run`).

    Its loop blocking goes to ``call.detail``; the end of stray work is appended
    to the call's audit trail as a ``late`` record.
    """
    services = call.services

    async def on_late(late: LateEnd) -> None:
        await services.committer.append(late_record(call, late))

    return await services.runner.run(
        tool,
        functools.partial(handler.invoke, prepared, injected, ctx),
        is_async=handler.is_async,
        deadline=deadline,
        detail=call.detail,
        on_late=on_late,
    )
