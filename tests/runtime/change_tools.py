"""A toolbox with a previewed change and plain tools for the approval tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from callgate import BusinessStateError, Toolbox, Trusted


@dataclass
class Bank:
    balances: dict[str, int] = field(default_factory=lambda: {"acme:A-1": 100, "globex:G-1": 50})
    applied: list[tuple[str, int]] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    apply_delay: float = 0.0


def build(bank: Bank, *, ttl: float = 600.0, timeout: float | None = None) -> Toolbox:
    box = Toolbox("bank")
    limit = box.change(
        "limit_change", scopes={"bank:write"}, ttl=ttl, destructive=False, timeout=timeout
    )

    @limit.preview
    def preview(account: str, new_limit: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Preview setting an account's limit to an absolute value."""
        key = f"{tenant_id}:{account}"
        if key not in bank.balances:
            raise BusinessStateError(f"No account {account}.")
        before = bank.balances[key]
        return {
            "before": before,
            "after": new_limit,
            "increase_pct": (new_limit - before) * 100 / before,
        }

    @limit.apply
    def apply(account: str, new_limit: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Set the limit."""
        if bank.apply_delay:
            time.sleep(bank.apply_delay)
        with bank.lock:
            key = f"{tenant_id}:{account}"
            before = bank.balances[key]
            bank.balances[key] = new_limit
            bank.applied.append((key, new_limit))
        return {"before": before, "after": new_limit}

    @limit.verify
    def verify(account: str, new_limit: int, tenant_id: Trusted[str]) -> bool:
        """Whether the limit is in effect."""
        return bank.balances.get(f"{tenant_id}:{account}") == new_limit

    @box.tool(scopes={"bank:write"}, idempotent=False)
    async def pay(to: str, amount: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Pay someone."""
        await anyio.lowlevel.checkpoint()
        bank.sent.append(f"{tenant_id}:{to}:{amount}")
        return {"paid": amount, "to": to}

    return box
