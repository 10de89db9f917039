"""A small bank whose tools the tracing tests call."""

from __future__ import annotations

from callgate import Policy, Principal, Rule, Toolbox, Trusted

API_KEY = "sk-live-9d1e77c0ffee"
"""A credential the gate injects (``secrets``): it must appear in no span."""

ACCOUNT = "ACC-SECRET-4711"
"""An argument value the model fills in: it must appear in no span either."""

ALICE = Principal("alice", "acme", scopes={"bank"})

POLICY = Policy(
    [
        Rule("deny", tools=["bank.close_account"], reason="closing accounts is not allowed here"),
        Rule("require_approval", tools=["bank.pay"], reason="payments need a human"),
    ]
)


def bank() -> Toolbox:
    box = Toolbox("bank")

    @box.tool(scopes={"bank"}, read_only=True)
    def balance(account: str, api_key: Trusted[str], tenant_id: Trusted[str]) -> dict[str, int]:
        """Read an account's balance.

        Args:
            account: The account number, e.g. ACC-1.
        """
        assert api_key == API_KEY
        return {"balance": 120}

    @box.tool(scopes={"bank"}, idempotent=False)
    def pay(account: str, amount: int) -> str:
        """Pay from an account.

        Args:
            account: The account number, e.g. ACC-1.
            amount: In cents.
        """
        return f"paid {amount}"

    @box.tool(scopes={"bank"}, destructive=True)
    def close_account(account: str) -> str:
        """Close an account.

        Args:
            account: The account number, e.g. ACC-1.
        """
        return "closed"

    return box
