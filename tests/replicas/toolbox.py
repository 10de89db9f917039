"""The tools the replica tests serve from two ``callgate serve`` processes.

Every run of a side effect is appended to one ledger file (its path in
``$CALLGATE_TEST_LEDGER``), shared by the processes: the ledger is the world the
tests check ("ran exactly once"), whichever replica ran the tool.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from callgate import Toolbox, Trusted

LEDGER_ENV = "CALLGATE_TEST_LEDGER"
RELEASE_SUFFIX = ".release"
"""A file next to the ledger, named like it plus this: the long task ends once it exists."""


def ledger() -> Path:
    return Path(os.environ[LEDGER_ENV])


def note(line: str) -> None:
    """Append one line to the ledger (whole lines, whichever process writes)."""
    with ledger().open("a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(f"{line}\n")


def runs(path: Path) -> list[str]:
    """The ledger's lines (what ran, in order)."""
    return path.read_text().splitlines() if path.exists() else []


def toolboxes() -> list[Toolbox]:
    box = Toolbox("rep")

    @box.tool(scopes={"rep:write"}, idempotent=False)
    def pay(account: str, amount: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Pay an amount into an account (a side effect; policy may park it)."""
        note(f"pay {tenant_id}:{account} {amount} pid={os.getpid()}")
        return {"account": account, "paid": amount}

    @box.tool(scopes={"rep:read"}, read_only=True)
    def balance(account: str) -> dict[str, object]:
        """Read an account's balance (a read: no side effect)."""
        return {"account": account, "balance": 100}

    @box.tool(scopes={"rep:write"}, idempotent=False, tags={"task"}, timeout=120)
    def reconcile(batch: str) -> dict[str, object]:
        """Reconcile a batch: long; runs as a task where the client declares Tasks."""
        note(f"reconcile-start {batch} pid={os.getpid()}")
        release = ledger().with_name(ledger().name + RELEASE_SUFFIX)
        for _ in range(1200):
            if release.exists():
                break
            time.sleep(0.05)
        note(f"reconcile-end {batch} pid={os.getpid()}")
        return {"batch": batch, "reconciled": True}

    limit = box.change("limit_change", scopes={"rep:write"}, ttl=600, destructive=False)

    @limit.preview
    def preview(account: str, new_limit: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Preview setting an account's limit to an absolute value."""
        return {"account": account, "before": 100, "after": new_limit}

    @limit.apply
    def apply(account: str, new_limit: int, tenant_id: Trusted[str]) -> dict[str, object]:
        """Set the limit (slowly: concurrent applies overlap)."""
        time.sleep(0.3)
        note(f"limit {tenant_id}:{account} {new_limit} pid={os.getpid()}")
        return {"account": account, "before": 100, "after": new_limit}

    return [box]
