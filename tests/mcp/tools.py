"""A small toolbox and gate for the MCP server tests."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from callgate import Gate, Policy, Principal, Rule, Toolbox, Trusted

ALICE = Principal("alice", tenant="acme", scopes={"orders:read", "orders:write"})


class Order(BaseModel):
    id: str
    tenant: str
    lines: int


def build_toolbox() -> Toolbox:
    shop = Toolbox("shop")

    @shop.tool(scopes={"orders:read"}, read_only=True, open_world=False)
    def order_get(order_id: str, tenant_id: Trusted[str]) -> Order:
        """Get one order of your organization.

        Args:
            order_id: The order id, e.g. "O-1".
        """
        return Order(id=order_id, tenant=tenant_id, lines=3)

    @shop.tool(scopes={"orders:read"}, read_only=True, open_world=False)
    def order_count(status: Literal["open", "closed"]) -> int:
        """Count the orders in one status.

        Args:
            status: open or closed.
        """
        return {"open": 7, "closed": 35}[status]

    @shop.tool(scopes={"orders:read"}, read_only=True, open_world=False)
    def order_lines(n: int) -> list[dict[str, object]]:
        """List order lines.

        Args:
            n: How many lines.
        """
        return [{"line": i, "text": "x" * 200} for i in range(n)]

    @shop.tool(scopes={"orders:write"}, destructive=True, idempotent=False, open_world=False)
    def refund(order_id: str, amount: int) -> dict[str, object]:
        """Refund part of an order.

        Args:
            order_id: The order id.
            amount: Whole currency units.
        """
        return {"refunded": amount, "order": order_id}

    @shop.tool(scopes={"admin"}, destructive=True, idempotent=False, open_world=False)
    def purge() -> str:
        """Delete every order."""
        return "purged"

    return shop


def build_gate() -> Gate:
    policy = Policy(
        [Rule("require_approval", tools=["shop.refund"], when="args.amount > 100", reason="big")]
    )
    return Gate([build_toolbox()], store="memory://", policy=policy)
