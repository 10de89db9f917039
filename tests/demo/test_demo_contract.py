"""The demo's contracts: names, scopes, risk, schemas and examples others build on."""

from __future__ import annotations

import pytest

from callgate import Effect, Gate, Principal, RiskTier, Status, ToolSpec
from callgate.demo import demo_policy, toolboxes
from callgate.store import MemoryStore

EXPECTED = {
    "ops.budget_change_apply": ("campaigns:write", RiskTier.WRITE_HIGH_RISK),
    "ops.budget_change_preview": ("campaigns:write", RiskTier.READ),
    "ops.budget_change_status": ("campaigns:write", RiskTier.READ),
    "ops.campaigns_find": ("campaigns:read", RiskTier.READ),
    "ops.deploy_rollback": ("deploy:rollback", RiskTier.WRITE_HIGH_RISK),
    "ops.deploy_status": ("deploy:read", RiskTier.READ),
    "ops.notes_read": ("notes:read", RiskTier.READ),
    "ops.notes_search": ("notes:read", RiskTier.READ),
    "ops.runbook_start": ("notes:read", RiskTier.WRITE_IDEMPOTENT),
    "ops.runbook_status": ("notes:read", RiskTier.READ),
    "ops.runbook_step_done": ("notes:read", RiskTier.WRITE_IDEMPOTENT),
    "ops.send_email": ("email:send", RiskTier.WRITE_HIGH_RISK),
    "ops.web_fetch": ("web:read", RiskTier.READ),
}
CHANGE_TOOLS = {"ops.budget_change_apply", "ops.budget_change_preview", "ops.budget_change_status"}
"""Declared with ``toolbox.change``: the runtime writes parts of their descriptions."""
RUN_TOOLS = {"ops.runbook_status", "ops.runbook_step_done"}
"""Their examples need a run handle, which only ops.runbook_start makes (tested apart)."""


def _specs() -> dict[str, ToolSpec]:
    (box,) = toolboxes()
    return {spec.name: spec for spec in box}


def test_one_ops_toolbox_with_the_specified_tools_scopes_and_risk() -> None:
    boxes = toolboxes()
    assert [box.name for box in boxes] == ["ops"]
    specs = _specs()
    assert sorted(specs) == sorted(EXPECTED)
    for name, (scope, risk) in EXPECTED.items():
        assert specs[name].scopes == {scope}, name
        assert specs[name].risk is risk, name


def test_annotations_match_the_spec() -> None:
    specs = _specs()
    email = specs["ops.send_email"].effective_annotations
    assert (email.open_world, email.destructive, email.idempotent) == (True, False, False)
    rollback = specs["ops.deploy_rollback"].effective_annotations
    assert (rollback.destructive, rollback.idempotent, rollback.open_world) == (True, False, False)
    apply = specs["ops.budget_change_apply"].effective_annotations
    assert (apply.idempotent, apply.destructive, apply.open_world) == (True, False, False)
    preview = specs["ops.budget_change_preview"].effective_annotations
    assert (preview.read_only, preview.open_world) == (True, False)
    assert specs["ops.notes_search"].private_data
    assert specs["ops.notes_read"].private_data
    assert not specs["ops.campaigns_find"].private_data


def test_trusted_fields_are_not_in_the_model_facing_schema() -> None:
    specs = _specs()
    for spec in specs.values():
        for trusted in spec.trusted_fields:
            assert trusted not in spec.input_schema["properties"], spec.name
        if spec.name in {"ops.budget_change_apply", "ops.budget_change_status"}:
            # They take only the preview id; the previewed arguments are stored.
            assert list(spec.input_schema["properties"]) == ["preview_id"], spec.name
        elif spec.name == "ops.runbook_status":
            # Its run handle is bound to the caller by the runtime (ctx.handles).
            assert list(spec.input_schema["properties"]) == ["run"]
        elif spec.name != "ops.web_fetch":  # public pages: nobody's data
            assert spec.trusted_fields, spec.name
    assert set(specs["ops.budget_change_preview"].trusted_fields) == {"tenant_id"}
    assert set(specs["ops.deploy_rollback"].trusted_fields) == {"tenant_id", "user_id"}
    assert set(specs["ops.send_email"].trusted_fields) == {"user_id"}


def test_only_campaigns_find_offers_concise_and_detailed() -> None:
    specs = _specs()
    with_format = [n for n, s in specs.items() if "response_format" in s.input_schema["properties"]]
    assert with_format == ["ops.campaigns_find"]


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(set(EXPECTED) - CHANGE_TOOLS - RUN_TOOLS))
async def test_every_input_example_runs_through_the_gate(
    name: str, alice: Principal, anyio_backend: str
) -> None:
    (box,) = toolboxes()
    spec = box.get(name)
    assert spec is not None
    assert spec.input_examples, name
    async with Gate([box], store=MemoryStore(), policy=demo_policy()) as gate:
        for example in spec.input_examples:
            env = await gate.call(name, example, principal=alice)
            assert env.status is Status.OK, (example, env.error)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_descriptions_say_what_comes_back_and_every_argument_is_described(name: str) -> None:
    spec = _specs()[name]
    if name != "ops.budget_change_status":  # its title and text come from the runtime
        assert spec.title
        assert "Returns:" in spec.description
    assert "Use it" in spec.description
    for arg, schema in spec.input_schema["properties"].items():
        assert schema.get("description"), f"{name}.{arg}"


def test_campaigns_find_description_warns_about_near_duplicates() -> None:
    description = _specs()["ops.campaigns_find"].description
    assert "near-duplicates" in description
    assert "confirm the" in description
    assert "whole units" in description


def test_budget_change_descriptions_state_the_ttl_absolute_amounts_and_the_approval() -> None:
    specs = _specs()
    preview = specs["ops.budget_change_preview"].description
    assert "ABSOLUTE" in preview
    assert "valid for 10 minutes" in preview
    assert "more than 50%" in preview
    apply = specs["ops.budget_change_apply"].description
    assert "ops.budget_change_preview" in apply
    assert "ops.budget_change_status" in apply
    find = specs["ops.campaigns_find"].description
    assert "ops.budget_change_preview" in find


@pytest.mark.anyio
async def test_the_preview_example_runs_through_the_gate(
    alice: Principal, anyio_backend: str
) -> None:
    async with Gate(toolboxes(), store=MemoryStore(), policy=demo_policy()) as gate:
        preview = await gate.call(
            "ops.budget_change_preview",
            {"campaign_id": "C-101", "new_daily_budget": 1500},
            principal=alice,
        )
        assert preview.status is Status.OK, preview.error
        for tool in ("ops.budget_change_apply", "ops.budget_change_status"):
            env = await gate.call(
                tool, {"preview_id": preview.payload["preview_id"]}, principal=alice
            )
            assert env.status is Status.OK, (tool, env.error)


def test_each_toolboxes_call_has_its_own_state() -> None:
    first, second = toolboxes(), toolboxes()
    assert first[0] is not second[0]
    spec_a, spec_b = first[0].get("campaigns_find"), second[0].get("campaigns_find")
    assert spec_a is not None and spec_b is not None
    assert spec_a.handler is not spec_b.handler


def test_every_policy_rule_has_a_name_and_a_reason() -> None:
    policy = demo_policy()
    assert policy.default is Effect.ALLOW
    assert {rule.name for rule in policy.rules} == {
        "external-email-needs-approval",
        "budget-increase-over-50pct",
        "rollback-needs-oncall",
    }
    for rule in policy.rules:
        assert rule.reason, rule.name
        assert rule.tools, rule.name


def test_the_demo_shows_the_lethal_trifecta() -> None:
    from callgate.runtime.trifecta import static_check

    report = static_check(_specs().values())
    assert report == {
        "private_data": [
            "ops.notes_read",
            "ops.notes_search",
            "ops.runbook_start",
            "ops.runbook_status",
            "ops.runbook_step_done",
        ],
        "untrusted_content": ["ops.web_fetch"],
        "exfiltration": ["ops.send_email"],
    }


@pytest.mark.anyio
async def test_reading_notes_and_the_web_then_emailing_needs_approval() -> None:
    alice = Principal(
        "alice@acme.example",
        tenant="acme",
        scopes={"notes:read", "web:read", "email:send"},
        attributes={"domain": "acme.example"},
    )
    mail = {"to": ["bob@acme.example"], "subject": "notes", "body": "the notes"}
    async with Gate(toolboxes(), store=MemoryStore(), policy=demo_policy()) as gate:
        inside = await gate.call("ops.send_email", mail, principal=alice, session_id="s")
        await gate.call("ops.notes_read", {"note_id": "N-2"}, principal=alice, session_id="s")
        page = await gate.call(
            "ops.web_fetch",
            {"url": "https://competitor.example/pricing"},
            principal=alice,
            session_id="s",
        )
        after = await gate.call("ops.send_email", mail, principal=alice, session_id="s")
    assert inside.ok and page.ok
    assert after.status is Status.PENDING_APPROVAL
    assert after.decision is not None and after.decision.rule == "lethal-trifecta"
