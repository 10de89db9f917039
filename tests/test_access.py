"""Identities normalized once, and every access decision taken in one place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callgate import ApprovalError, Gate, InvalidIdentity, Policy, Principal, Rule, Status
from callgate.access import Action, check
from callgate.cli.app import app
from callgate.config import ConfigError, load_config
from callgate.runtime.policy import Approvers, PolicyError
from callgate.store import MemoryStore
from tests.runtime.change_tools import Bank, build

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[1] / "src" / "callgate"
ALICE = Principal("alice@acme.example", "acme", scopes={"bank:write"})
PAY = {"to": "bob", "amount": 5000}


def _policy(**rule: object) -> Policy:
    return Policy([Rule("require_approval", tools=["bank.pay"], reason="big payment", **rule)])  # type: ignore[arg-type]


async def _park(gate: Gate, principal: Principal = ALICE) -> str:
    env = await gate.call("bank.pay", PAY, principal=principal)
    assert env.status is Status.PENDING_APPROVAL, env
    return str(env.approval.approval_id)


# Identities -----------------------------------------------------------------------
def test_identities_are_stripped_and_case_folded_once_where_a_principal_is_built() -> None:
    who = Principal("  Alice@ACME.example\t", " Acme ", scopes=[" deploy:Read "], roles=["OnCall"])
    assert (who.user, who.tenant) == ("alice@acme.example", "acme")
    assert who.scopes == {"deploy:Read"}  # scopes keep their case (OAuth)
    assert who.roles == {"oncall"}
    # Full-width letters fold to the same identity.
    assert Principal("ａｌｉｃｅ@acme.example").user == "alice@acme.example"


@pytest.mark.parametrize(
    "user",
    ["", "   ", "alice\n@acme.example", "ali\u200bce@acme.example", "alice\x00", "a" * 300],
)
def test_empty_invisible_or_control_characters_are_not_an_identity(user: str) -> None:
    with pytest.raises(InvalidIdentity):
        Principal(user, "acme")


def test_a_tenant_or_role_is_checked_like_a_user() -> None:
    with pytest.raises(InvalidIdentity, match="tenant"):
        Principal("alice", "acme\u202e")
    with pytest.raises(InvalidIdentity, match="roles"):
        Principal("alice", roles="admin")  # one string, not a collection


# Four eyes ------------------------------------------------------------------------
async def test_whitespace_or_case_does_not_make_the_requester_someone_else() -> None:
    async with Gate([build(Bank())], store=MemoryStore(), policy=_policy()) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        for spelling in (" alice@acme.example", "ALICE@acme.example ", "alice@ACME.example"):
            with pytest.raises(ApprovalError) as refused:
                await approvals.approve(approval_id, by=Principal(spelling, "acme"))
            assert refused.value.code == "self_approval"
        record = await approvals.get(approval_id)
    assert record is not None and record.state == "pending"


async def test_another_tenant_cannot_decide_even_with_the_right_role() -> None:
    policy = _policy(approvers=Approvers(roles={"approver"}))
    async with Gate([build(Bank())], store=MemoryStore(), policy=policy) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        refusals = []
        for who in (
            Principal("mallory@globex.example", "globex", roles={"approver"}),
            Principal("mallory@globex.example", roles={"approver"}),  # no tenant at all
        ):
            with pytest.raises(ApprovalError) as refused:
                await approvals.deny(approval_id, by=who, reason="mine now")
            refusals.append(refused.value.code)
        record = await approvals.get(approval_id)
    assert refusals == ["other_tenant", "other_tenant"]
    assert record is not None and record.state == "pending"


async def test_a_rule_names_its_approvers_by_role_or_by_name() -> None:
    policy = _policy(approvers={"roles": ["finance"], "users": ["Dana@acme.example"]})
    async with Gate([build(Bank())], store=MemoryStore(), policy=policy) as gate:
        approvals = await gate.approvals()
        first = await _park(gate)
        with pytest.raises(ApprovalError) as refused:
            await approvals.approve(first, by=Principal("carol@acme.example", "acme"))
        assert refused.value.code == "not_an_approver"
        assert "role finance or dana@acme.example" in str(refused.value)
        by_role = await approvals.approve(
            first, by=Principal("erin@acme.example", "acme", roles={"Finance"})
        )
        await gate.call("bank.pay", PAY, principal=ALICE)  # uses it
        second = await _park(gate)
        by_name = await approvals.approve(second, by=Principal(" dana@acme.example", "acme"))
    assert by_role.decided_by == "erin@acme.example"
    assert by_name.decided_by == "dana@acme.example"


async def test_every_matching_rule_s_approver_set_must_be_satisfied() -> None:
    policy = Policy(
        [
            Rule(
                "require_approval",
                tools=["bank.pay"],
                name="finance",
                approvers={"roles": ["finance"]},
            ),
            Rule("require_approval", tools=["bank.*"], name="risk", approvers={"roles": ["risk"]}),
        ]
    )
    async with Gate([build(Bank())], store=MemoryStore(), policy=policy) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        with pytest.raises(ApprovalError, match="rule risk"):
            await approvals.approve(approval_id, by=Principal("erin", "acme", roles={"finance"}))
        both = Principal("fred", "acme", roles={"finance", "risk"})
        record = await approvals.approve(approval_id, by=both)
    assert record.state == "approved"
    assert [s["rule"] for s in record.approvers] == ["finance", "risk"]


async def test_the_policy_default_approvers_apply_where_a_rule_names_none() -> None:
    policy = Policy(
        [Rule("require_approval", tools=["bank.pay"])], approvers={"roles": ["approver"]}
    )
    async with Gate([build(Bank())], store=MemoryStore(), policy=policy) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        with pytest.raises(ApprovalError) as refused:
            await approvals.approve(approval_id, by=Principal("carol", "acme"))
        ok = await approvals.approve(approval_id, by=Principal("bob", "acme", roles={"approver"}))
    assert refused.value.code == "not_an_approver" and ok.state == "approved"


async def test_an_owner_that_cannot_be_determined_lets_nobody_approve() -> None:
    policy = _policy(approvers=Approvers(owner="impact.owner"))  # bank.pay has no impact
    async with Gate([build(Bank())], store=MemoryStore(), policy=policy) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        record = await approvals.get(approval_id)
        with pytest.raises(ApprovalError) as refused:
            await approvals.approve(approval_id, by=Principal("bob", "acme", roles={"admin"}))
    assert record is not None and "could not be determined" in record.approvers[0]["unresolved"]
    assert refused.value.code == "not_an_approver"


def test_approvers_are_checked_when_the_policy_is_built() -> None:
    with pytest.raises(PolicyError, match="name nobody"):
        Approvers()
    with pytest.raises(PolicyError, match="invalid CEL"):
        Approvers(owner="impact.")
    with pytest.raises(PolicyError, match="require_approval only"):
        Rule("deny", approvers={"roles": ["x"]})
    with pytest.raises(PolicyError, match="unknown keys"):
        Policy.from_dict({"rules": [{"effect": "require_approval", "approvers": {"role": ["x"]}}]})


async def test_refused_attempts_to_decide_are_audited() -> None:
    async with Gate([build(Bank())], store=MemoryStore(), policy=_policy()) as gate:
        approval_id = await _park(gate)
        approvals = await gate.approvals()
        attempts = [
            Principal(" alice@acme.example", "acme"),
            Principal("mallory@globex.example", "globex"),
        ]
        for who in attempts:
            with pytest.raises(ApprovalError):
                await approvals.approve(approval_id, by=who, note="let me")
        records = [r for r in await gate.audit() if r.phase == "decision"]
    assert [(r.user, r.tenant, r.decision, r.outcome) for r in records] == [
        ("alice@acme.example", "acme", "refused", "permission"),
        ("mallory@globex.example", "globex", "refused", "permission"),
    ]
    assert [r.detail["refused"] for r in records] == ["self_approval", "other_tenant"]
    assert all(r.call_id == approval_id and r.tool == "bank.pay" for r in records)
    assert all(r.detail["attempted"] == "approve" for r in records)
    assert "requested it and cannot decide it" in (records[0].decision_reason or "")


async def test_a_bare_name_cannot_decide() -> None:
    async with Gate([build(Bank())], store=MemoryStore(), policy=_policy()) as gate:
        approval_id = await _park(gate)
        with pytest.raises(TypeError, match="Principal"):
            await (await gate.approvals()).approve(approval_id, by="bob")  # type: ignore[arg-type]


# One place ------------------------------------------------------------------------
def test_records_compare_owners_in_their_canonical_form() -> None:
    class Row:
        user = " Alice@acme.example"  # written before identities were canonical
        tenant = "ACME"
        approved_by = "another"
        approvers: tuple[dict[str, object], ...] = ()

    assert check(ALICE, Action.READ_OWN, Row())
    assert not check(Principal("alice@acme.example", "globex"), Action.READ_OWN, Row())
    assert check(Principal("bob", "acme"), Action.VIEW_APPROVAL, Row())
    assert not check(Principal("bob", "globex"), Action.VIEW_APPROVAL, Row())
    assert check(Principal("root", "ops", roles={"admin"}), Action.VIEW_APPROVAL, Row())
    assert check(Principal("bob", "acme"), Action.DECIDE_APPROVAL, Row()).code == "ok"

    class Legacy(Row):
        approvers = ({"roles": [" Finance"], "users": ["Dana@ACME.example "]},)

    # Approver sets stored before canonical identities still name the same people.
    assert check(Principal("erin", "acme", roles={"finance"}), Action.DECIDE_APPROVAL, Legacy())
    assert check(Principal("dana@acme.example", "acme"), Action.DECIDE_APPROVAL, Legacy())
    refused = check(Principal("carol", "acme"), Action.DECIDE_APPROVAL, Legacy())
    assert refused.code == "not_an_approver"


def test_no_tenant_is_not_a_tenant_everyone_without_one_shares() -> None:
    class Row:
        user = "alice"
        tenant = None
        approved_by = "another"
        approvers: tuple[dict[str, object], ...] = ()

    assert check(Principal("alice", None), Action.VIEW_APPROVAL, Row())
    assert check(Principal("root", None, roles={"admin"}), Action.VIEW_APPROVAL, Row())
    refused = check(Principal("bob", None), Action.VIEW_APPROVAL, Row())
    assert not refused and refused.code == "not_found"
    assert check(Principal("bob", None), Action.READ_OWN, Row()).code == "not_found"


_HAND_WRITTEN = re.compile(
    r"\.(user|tenant)\s*[!=]=\s*\w+\.(principal\.)?(user|tenant)\b"
    r"|\(\s*\w+\.user\s*,\s*\w+\.tenant\s*\)\s*[!=]="
)


def test_no_ownership_check_is_written_outside_the_access_module() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "access.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _HAND_WRITTEN.search(line):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert offenders == []


def test_approvers_come_from_the_config_file_with_errors_naming_the_key(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        "[policy.approvers]\nroles = ['approver']\n\n"
        "[[policy.rules]]\neffect = 'require_approval'\ntools = ['ops.*']\n"
        "approvers = { owner = 'impact.owner', users = ['Dana@acme.example'] }\n"
    )
    policy = load_config(good).policy
    assert policy.approvers is not None and policy.approvers.roles == {"approver"}
    [rule] = policy.rules
    assert rule.approvers is not None
    assert (rule.approvers.owner, rule.approvers.users) == ("impact.owner", {"dana@acme.example"})

    bad = tmp_path / "bad.toml"
    bad.write_text("[[policy.rules]]\neffect = 'require_approval'\napprovers = { owner = '(' }\n")
    with pytest.raises(ConfigError, match=r"policy\.rules\[0\]\.approvers: .*invalid CEL"):
        load_config(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[[policy.rules]]\neffect = 'require_approval'\napprovers = { role = ['x'] }\n")
    with pytest.raises(ConfigError, match=r"approvers\.role"):
        load_config(typo)


@pytest.mark.parametrize("user", ["", "  ", "bob\x1b[2K"])
def test_the_cli_refuses_an_identity_that_is_not_one_in_one_line(user: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            *("call", "ops.campaigns_find", "--principal", user, "--tenant", "acme"),
            *("--store", "memory://", "--args", '{"query": "x"}'),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("callgate: error: --principal/--tenant/--roles: user ")
    assert len(result.stderr.splitlines()) == 1
