"""Tools every gate serves: reading the rest of a truncated result."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from callgate import access
from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.contract import Toolbox, ToolContext
from callgate.errors import ConstructionError
from callgate.runtime.approvals import effective_state
from callgate.runtime.cursor import BadCursor, Cursor
from callgate.runtime.limits import Limits
from callgate.runtime.registry import Registry
from callgate.runtime.shaping import CHARS_PER_TOKEN, notice, page
from callgate.store import Store

BUILTIN_TOOLBOX = "callgate"


class ResultPage(BaseModel):
    items: list[Any] | str
    """The next part of the result: list items, or a slice of the (JSON) text."""
    unit: str
    offset: int
    shown: int
    total: int
    next_cursor: str | None
    notice: str


def fits(content: Any, cursor: Cursor) -> bool:
    """Whether a cursor's position makes sense for the stored content (edited ones don't)."""
    if cursor.key is not None:
        if not isinstance(content, dict) or cursor.key not in content:
            return False
        target = content[cursor.key]
        return isinstance(target, list if cursor.unit == "items" else str)
    return cursor.unit == "chars" or isinstance(content, list)


def builtin_toolbox(
    store: Store, limits: Limits, registry: Registry, *, clock: Clock = SYSTEM_CLOCK
) -> Toolbox:
    box = Toolbox(BUILTIN_TOOLBOX, description="Tools of the gateway itself.")

    @box.tool(read_only=True, open_world=False, title="Read more of a truncated result")
    async def read_more(cursor: str, ctx: ToolContext) -> ResultPage:
        """Read the next part of a tool result that was truncated.

        Use it when a result says it was truncated and gives a cursor, and you need
        more than what was shown. Do not use it to re-run a tool: it only
        reads a result kept from an earlier call, for about a day.

        Args:
            cursor: The cursor given in the truncation notice, copied exactly.
        """
        try:
            parsed = Cursor.decode(cursor)
        except BadCursor:
            raise ConstructionError(
                "That cursor is not valid.",
                next_step="Copy the cursor exactly from the latest truncation notice.",
            ) from None
        stored = await store.get_result(parsed.ref)
        principal = ctx.principal
        source = registry.get(stored.tool) if stored is not None else None
        # A cursor is a handle, not a permission: only the caller who got the result,
        # still allowed to call the tool that made it, may read on. Anything else
        # looks exactly like an expired result (no hint that it exists).
        if (
            stored is None
            or not access.check(principal, access.Action.READ_OWN, stored)
            or (source is not None and not source.scopes <= principal.scopes)
            or not fits(stored.content, parsed)
        ):
            raise ConstructionError(
                "That result has expired or does not exist.",
                next_step="Call the original tool again to get a fresh result.",
            )
        budget = limits.max_result_tokens * CHARS_PER_TOKEN
        pg = page(
            stored.content,
            offset=parsed.offset,
            # Leave room for the page's own fields so the whole answer fits too.
            budget_chars=budget - min(400, budget // 4),
            key=parsed.key,
            unit=parsed.unit,
            text=stored.text,  # the very text the first page was cut from, if kept
        )
        next_cursor = (
            Cursor(ref=parsed.ref, offset=pg.next_offset, unit=pg.unit, key=pg.key).encode()
            if pg.next_offset is not None
            else None
        )
        items = pg.payload[pg.key] if pg.key is not None else pg.payload
        return ResultPage(
            items=items,
            unit=pg.unit,
            offset=parsed.offset,
            shown=pg.shown,
            total=pg.total,
            next_cursor=next_cursor,
            notice=notice(pg, None, "") + " Pass next_cursor to read on."
            if next_cursor
            else f"end of result: items {parsed.offset:,} to {parsed.offset + pg.shown:,} "
            f"of {pg.total:,} shown.",
        )

    @box.tool(read_only=True, open_world=False, title="Check an approval request")
    async def approval_status(approval_id: str, ctx: ToolContext) -> dict[str, Any]:
        """Tell where a request that needed a human's approval stands.

        Use it when a call answered pending_approval and the user asks whether it went
        through. States: pending, approved (call the tool again with the same arguments
        to run it), denied (with the reason), used (it ran; its result is included),
        expired.

        Args:
            approval_id: The id from the pending_approval answer, like apr_....
        """
        record = await store.get_approval(approval_id)
        principal = ctx.principal
        # Another user's request looks exactly like a missing one.
        if record is None or not access.check(principal, access.Action.READ_OWN, record):
            raise ConstructionError(
                f"No approval request {approval_id!r} of yours.",
                next_step="Use the approval_id exactly as it was given.",
            )
        state = effective_state(record, clock.now())
        out: dict[str, Any] = {
            "approval_id": record.id,
            "tool": ctx.shown(record.tool),
            "state": state,
            "reason": record.reason,
            "expires_at": record.expires_at.isoformat(),
        }
        if record.decided_by:
            out["decided_by"] = record.decided_by
            out["note"] = record.note
        if state == "approved":
            out["next_step"] = (
                f"Call {ctx.shown(record.tool)} again with exactly the same arguments."
            )
        if record.result is not None:
            out["result"] = {
                "status": record.result.get("status"),
                "payload": record.result.get("payload"),
                "error": record.result.get("error"),
            }
        return out

    return box
