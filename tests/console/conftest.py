"""A real gate on a tmp SQLite store, a tool that needs approval, and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from callgate import Gate, Policy, Principal, Rule, Toolbox, Trusted
from callgate.console import approvals_app, bearer_tokens

ALICE = Principal("alice", "acme", scopes={"pay"})
"""Files requests; no approver role."""
BOB = Principal("bob", "acme", roles={"approver"})
CAROL = Principal("carol", "acme", scopes={"pay"}, roles={"approver"})
"""An approver who also files requests (she may not approve her own)."""
GREG = Principal("greg", "globex", scopes={"pay"}, roles={"approver"})
ROOT = Principal("root", "ops", roles={"admin"})
TOKENS = {"t-alice": ALICE, "t-bob": BOB, "t-carol": CAROL, "t-greg": GREG, "t-root": ROOT}


@dataclass
class Payments:
    sent: list[dict[str, Any]] = field(default_factory=list)

    def toolbox(self) -> Toolbox:
        box = Toolbox("bank")

        @box.tool(scopes={"pay"}, destructive=False, idempotent=False, open_world=False)
        def transfer(to: str, amount: int, tenant_id: Trusted[str]) -> dict[str, Any]:
            """Send money.

            Args:
                to: The recipient's account.
                amount: Whole currency units.
            """
            self.sent.append({"to": to, "amount": amount, "tenant": tenant_id})
            return {"sent": amount, "to": to}

        return box


@dataclass
class Console:
    gate: Gate
    payments: Payments
    client: httpx.AsyncClient

    async def park(self, principal: Principal = ALICE, amount: int = 5000) -> str:
        """File a pending approval as ``principal``; returns its id."""
        envelope = await self.gate.call(
            "bank.transfer", {"to": "ACC-9", "amount": amount}, principal=principal
        )
        assert envelope.status.value == "pending_approval"
        return str(envelope.approval.approval_id)

    async def get(self, url: str, token: str | None = "t-bob", **kw: Any) -> httpx.Response:
        return await self.client.get(url, headers=_auth(token), **kw)

    async def post(
        self, url: str, body: Any = None, token: str | None = "t-bob", **kw: Any
    ) -> httpx.Response:
        return await self.client.post(
            url, json=body if body is not None else {}, headers=_auth(token), **kw
        )


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture
async def console(tmp_path: Path, anyio_backend: str) -> AsyncIterator[Console]:
    payments = Payments()
    policy = Policy(
        [
            Rule(
                "require_approval", when="args.amount > 1000", reason="large transfers need a human"
            )
        ],
        approvers={"roles": ["approver"]},
    )
    gate = Gate([payments.toolbox()], store=f"sqlite:///{tmp_path / 'gate.db'}", policy=policy)
    app = approvals_app(gate, authenticate=bearer_tokens(TOKENS))
    transport = httpx.ASGITransport(app=app)
    async with gate, httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        yield Console(gate=gate, payments=payments, client=client)
