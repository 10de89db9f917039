"""The walk-through of docs/evals.md: two look-alike tools, one vaguely described."""

from callgate import Toolbox, Trusted

support = Toolbox("support", description="The support desk's tickets.")
CLOSED: dict[str, str] = {}


@support.tool(destructive=False, idempotent=True, open_world=False)
def tickets_close(ticket_id: str, tenant_id: Trusted[str]) -> dict[str, str]:
    """Close a ticket.

    Args:
        ticket_id: The ticket, e.g. "T-7".
    """
    CLOSED[ticket_id] = "resolved"
    return {"ticket_id": ticket_id, "state": "resolved"}


@support.tool(destructive=False, idempotent=True, open_world=False)
def tickets_archive(ticket_id: str, tenant_id: Trusted[str]) -> dict[str, str]:
    """Archive a ticket the customer no longer needs: it leaves the queue unresolved.

    Args:
        ticket_id: The ticket, e.g. "T-7".
    """
    CLOSED[ticket_id] = "archived"
    return {"ticket_id": ticket_id, "state": "archived"}
