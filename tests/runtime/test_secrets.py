"""Secrets reach the tool and nothing else: not the approver, not the model, not the store."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from callgate import Gate, Policy, Principal, Rule, Secret, Toolbox, Trusted
from callgate.config import ConfigError, load_config
from callgate.contract import REDACTED
from callgate.mcp import build_server
from callgate.runtime.approvals import approval_json

pytestmark = pytest.mark.anyio

KEY = "sk-live-4f9c2e7a1b"
ALICE = Principal("alice", "acme", scopes={"pay"})
CONFIRM = Policy(
    [
        Rule(
            "require_approval",
            tools=["psp.*"],
            reason="charges need a human",
            approved_by="requester",
        )
    ]
)


class Psp:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def toolbox(self) -> Toolbox:
        box = Toolbox("psp")

        @box.tool(scopes={"pay"}, idempotent=False, open_world=False)
        def charge(amount: int, api_key: Trusted[str], tenant_id: Trusted[str]) -> str:
            """Charge a card.

            Args:
                amount: In cents.
            """
            self.keys.append(api_key)
            return f"charged {amount}"

        @box.tool(scopes={"pay"}, idempotent=False, open_world=False)
        def refund(amount: int, psp_token: Secret[str]) -> str:
            """Refund a charge.

            Args:
                amount: In cents.
            """
            self.keys.append(psp_token)
            raise RuntimeError(f"PSP refused the request made with {psp_token}")

        return box


def _stored_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in directory.iterdir() if p.name.startswith("gate.db"))


async def test_a_secret_from_the_gate_is_redacted_in_approvals_and_never_stored(
    tmp_path: Path,
) -> None:
    psp = Psp()
    store = f"sqlite:///{tmp_path / 'gate.db'}"
    async with Gate([psp.toolbox()], store=store, policy=CONFIRM, secrets={"api_key": KEY}) as gate:
        parked = await gate.call("psp.charge", {"amount": 500}, principal=ALICE)
        approval_id = parked.approval.approval_id
        approvals = await gate.approvals()
        record = await approvals.get(approval_id)
        assert record is not None
        shown = approval_json(record)
        await approvals.approve(approval_id, by=ALICE)
        ran = await gate.call("psp.charge", {"amount": 500}, principal=ALICE)
    assert record.arguments == {"amount": 500, "api_key": REDACTED, "tenant_id": "acme"}
    assert KEY not in repr(shown)
    assert ran.ok and psp.keys == [KEY]  # the tool itself got the real key
    assert KEY.encode() not in _stored_bytes(tmp_path)


async def test_a_secret_field_is_scrubbed_from_the_audit_of_a_failing_tool(
    tmp_path: Path,
) -> None:
    psp = Psp()
    async with Gate(
        [psp.toolbox()], store=f"sqlite:///{tmp_path / 'gate.db'}", context={"psp_token": KEY}
    ) as gate:
        env = await gate.call("psp.refund", {"amount": 5}, principal=ALICE)
        [final] = [r for r in await gate.audit() if r.phase == "final"]
    assert env.error is not None and KEY not in env.error.message_for_model
    assert psp.keys == [KEY]
    assert f"made with {REDACTED}" in final.detail["exception"]["message"]
    assert KEY not in repr(final.detail)
    assert KEY.encode() not in _stored_bytes(tmp_path)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_approval_question_in_the_mcp_client_never_shows_a_secret(mode: str) -> None:
    psp = Psp()
    shown: list[str] = []

    async def confirm(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        shown.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Gate(
        [psp.toolbox()], policy=CONFIRM, secrets={"api_key": KEY}, store="memory:"
    ) as gate:
        server = build_server(gate, principal=ALICE)
        async with Client(server, mode=mode, elicitation_callback=confirm) as client:
            with anyio.fail_after(10):
                result = await client.call_tool("psp__charge", {"amount": 700})
    assert not result.is_error
    assert len(shown) == 1
    assert KEY not in shown[0] and f'"api_key": "{REDACTED}"' in shown[0]
    assert psp.keys == [KEY]


async def test_config_secrets_come_from_the_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "psp.py").write_text(
        "from callgate import Toolbox, Trusted\n"
        'box = Toolbox("psp")\n'
        "@box.tool(read_only=True, open_world=False)\n"
        "def key_is(expected: str, api_key: Trusted[str]) -> bool:\n"
        '    """Whether the key the tool got is the expected one."""\n'
        "    return api_key == expected\n"
    )
    path = tmp_path / "callgate.toml"
    path.write_text('toolboxes = ["./psp.py:box"]\n[secrets]\napi_key = { env = "PSP_KEY" }\n')
    config = load_config(path)
    monkeypatch.delenv("PSP_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"secrets\.api_key: the environment variable PSP_KEY"):
        config.build_gate("memory://")
    monkeypatch.setenv("PSP_KEY", KEY)
    async with config.build_gate("memory://") as gate:
        env = await gate.call("psp.key_is", {"expected": KEY}, principal=ALICE)
    # The tool got the variable's value (not its name, not nothing).
    assert env.ok and env.payload is True
    literal = tmp_path / "literal.toml"
    literal.write_text(f'[secrets]\napi_key = "{KEY}"\n')
    with pytest.raises(ConfigError, match="secrets"):
        load_config(literal)


async def test_a_previewed_change_keeps_no_secret_and_applies_with_the_real_one(
    tmp_path: Path,
) -> None:
    seen: list[tuple[str, str]] = []
    box = Toolbox("psp")
    payout = box.change("payout_change", scopes={"pay"}, destructive=False)

    @payout.preview
    def preview(amount: int, api_key: Secret[str]) -> dict[str, int]:
        """Preview a payout."""
        seen.append(("preview", api_key))
        return {"amount": amount}

    @payout.apply
    def apply(amount: int, api_key: Secret[str]) -> str:
        """Pay out."""
        seen.append(("apply", api_key))
        return "paid"

    async with Gate(
        [box], store=f"sqlite:///{tmp_path / 'gate.db'}", secrets={"api_key": KEY}
    ) as gate:
        preview_env = await gate.call("psp.payout_change_preview", {"amount": 9}, principal=ALICE)
        preview_id = preview_env.payload["preview_id"]
        stored = await gate.store.get_preview(preview_id)
        applied = await gate.call(
            "psp.payout_change_apply", {"preview_id": preview_id}, principal=ALICE
        )
    assert stored is not None and stored.arguments == {"amount": 9, "api_key": REDACTED}
    assert applied.ok, applied.error
    # The preview, the re-check before applying, and the apply each got the real key.
    assert seen == [("preview", KEY), ("preview", KEY), ("apply", KEY)]
    assert KEY.encode() not in _stored_bytes(tmp_path)
