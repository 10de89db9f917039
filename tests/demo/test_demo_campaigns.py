"""ops.campaigns_find and the budget change's domain rules through the gate."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from callgate import Envelope, ErrorKind, Gate, Principal, Status
from callgate.demo._campaigns import BudgetChangeTools, increase_pct
from callgate.demo._state import DemoState

pytestmark = pytest.mark.anyio


async def test_find_ranks_exact_name_before_near_duplicates(gate: Gate, alice: Principal) -> None:
    env = await gate.call("ops.campaigns_find", {"query": "Autumn Sale_Search"}, principal=alice)
    assert env.status is Status.OK
    assert [c["id"] for c in env.payload][:2] == ["C-101", "C-102"]
    assert env.payload[0]["name"] == "Autumn Sale_Search"
    assert env.payload[1]["name"] == "Autumn Sale_Search_Retarget"


async def test_find_lists_every_match_tier_in_order(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.campaigns_find",
        {"query": "Autumn Sale_Search", "response_format": "detailed"},
        principal=alice,
    )
    assert [(c["id"], c["match"]) for c in env.payload] == [
        ("C-101", "exact"),
        ("C-102", "prefix"),
        ("C-103", "some_words"),  # "autumn" and "sale"
        ("C-104", "some_words"),  # only "search"
    ]


@pytest.mark.parametrize(
    ("query", "first", "match"),
    [
        ("Autumn", "C-101", "prefix"),
        ("sale display", "C-103", "contains"),
        ("display autumn", "C-103", "words"),
        ("autumn retarget", "C-102", "words"),
        ("gift", "C-106", "contains"),
    ],
)
async def test_find_best_match(
    gate: Gate, alice: Principal, query: str, first: str, match: str
) -> None:
    env = await gate.call(
        "ops.campaigns_find", {"query": query, "response_format": "detailed"}, principal=alice
    )
    assert (env.payload[0]["id"], env.payload[0]["match"]) == (first, match)


async def test_find_ignores_case_and_separators_for_exact_matches(
    gate: Gate, alice: Principal
) -> None:
    env = await gate.call(
        "ops.campaigns_find",
        {"query": "autumn sale search", "response_format": "detailed"},
        principal=alice,
    )
    assert (env.payload[0]["id"], env.payload[0]["match"]) == ("C-101", "exact")


async def test_find_concise_by_default_detailed_on_request(gate: Gate, alice: Principal) -> None:
    concise = await gate.call("ops.campaigns_find", {"query": "Brand"}, principal=alice)
    assert concise.payload == [
        {
            "id": "C-104",
            "name": "Brand_Search",
            "status": "active",
            "daily_budget": 2500,
            "currency": "USD",
        }
    ]
    detailed = await gate.call(
        "ops.campaigns_find", {"query": "Brand", "response_format": "detailed"}, principal=alice
    )
    (campaign,) = detailed.payload
    assert campaign["channel"] == "search"
    assert campaign["start_date"] == "2024-01-08"
    assert campaign["end_date"] is None


async def test_find_only_returns_the_callers_tenant(
    gate: Gate, alice: Principal, hiro: Principal
) -> None:
    acme = await gate.call("ops.campaigns_find", {"query": "Autumn Sale"}, principal=alice)
    assert "C-201" not in {c["id"] for c in acme.payload}
    globex = await gate.call("ops.campaigns_find", {"query": "Autumn Sale"}, principal=hiro)
    assert [c["id"] for c in globex.payload] == ["C-201"]
    assert globex.payload[0]["currency"] == "JPY"


async def test_a_tenant_id_sent_by_the_model_is_ignored(gate: Gate, alice: Principal) -> None:
    env = await gate.call(
        "ops.campaigns_find",
        {"query": "Autumn Sale_Search", "tenant_id": "globex"},
        principal=alice,
    )
    assert env.status is Status.OK
    ids = {c["id"] for c in env.payload}
    assert "C-101" in ids
    assert "C-201" not in ids
    (record,) = [r for r in await gate.audit() if r.call_id == env.call_id and r.phase == "final"]
    assert "tenant_id" in record.dropped_fields


async def test_find_respects_limit_and_reports_no_match_as_empty(
    gate: Gate, alice: Principal
) -> None:
    env = await gate.call("ops.campaigns_find", {"query": "search", "limit": 2}, principal=alice)
    assert len(env.payload) == 2
    env = await gate.call("ops.campaigns_find", {"query": "zebra"}, principal=alice)
    assert env.status is Status.OK
    assert env.payload == []


async def _preview(gate: Gate, principal: Principal, campaign_id: Any, budget: Any) -> Envelope:
    return await gate.call(
        "ops.budget_change_preview",
        {"campaign_id": campaign_id, "new_daily_budget": budget},
        principal=principal,
    )


async def _apply(gate: Gate, principal: Principal, preview: Envelope) -> Envelope:
    assert preview.status is Status.OK, preview.error
    return await gate.call(
        "ops.budget_change_apply",
        {"preview_id": preview.payload["preview_id"]},
        principal=principal,
    )


async def test_preview_computes_the_impact_and_changes_nothing(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await _preview(gate, alice, "C-101", 1500)
    assert env.status is Status.OK
    assert env.payload["impact"] == {
        "campaign_id": "C-101",
        "name": "Autumn Sale_Search",
        "status": "active",
        "currency": "USD",
        "daily_budget_before": 1200,
        "daily_budget_after": 1500,
        "change": 300,
        "increase_pct": 25.0,
        "owner": "bob@acme.example",
    }
    assert env.payload["preview_id"].startswith("pv_")
    assert "approval" not in env.payload
    assert "ops.budget_change_apply" in env.payload["next_step"]
    assert state.campaigns["C-101"].daily_budget == 1200


async def test_a_decrease_has_a_negative_change_and_percentage(
    gate: Gate, alice: Principal
) -> None:
    env = await _preview(gate, alice, "c-104", 2000)
    impact = env.payload["impact"]
    assert (impact["campaign_id"], impact["change"], impact["increase_pct"]) == (
        "C-104",
        -500,
        -20.0,
    )


def test_increase_pct_rounds_away_from_zero_so_a_threshold_cannot_be_slipped_under() -> None:
    assert increase_pct(1200, 2160) == 80.0
    assert increase_pct(100_000, 150_001) == 50.01
    assert increase_pct(100_000, 150_000) == 50.0
    assert increase_pct(3, 4) == 33.34
    assert increase_pct(3, 2) == -33.34


async def test_apply_sets_the_budget_and_campaigns_find_sees_it(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await _apply(gate, alice, await _preview(gate, alice, "C-101", 1500))
    assert env.status is Status.OK, env.error
    assert env.payload == {
        "campaign_id": "C-101",
        "name": "Autumn Sale_Search",
        "currency": "USD",
        "daily_budget_before": 1200,
        "daily_budget_after": 1500,
        "changed": True,
    }
    assert state.campaigns["C-101"].daily_budget == 1500
    found = await gate.call("ops.campaigns_find", {"query": "Autumn Sale_Search"}, principal=alice)
    assert found.payload[0]["daily_budget"] == 1500


async def test_preview_with_a_name_instead_of_an_id_points_to_campaigns_find(
    gate: Gate, alice: Principal
) -> None:
    env = await _preview(gate, alice, "Autumn Sale_Search", 1500)
    assert env.status is Status.ERROR
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "C-101" in env.error.message_for_model
    assert env.error.next_step is not None
    assert "ops.campaigns_find" in env.error.next_step


async def test_preview_of_another_tenants_campaign_is_denied(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    env = await _preview(gate, alice, "C-201", 1500)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "another tenant" in env.error.message_for_model
    assert state.campaigns["C-201"].daily_budget == 45_000


@pytest.mark.parametrize(("campaign_id", "status"), [("C-103", "paused"), ("C-105", "ended")])
async def test_preview_of_an_inactive_campaign_is_a_business_state_error(
    gate: Gate, alice: Principal, campaign_id: str, status: str
) -> None:
    env = await _preview(gate, alice, campaign_id, 2000)
    assert env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert f"is {status}" in env.error.message_for_model


async def test_preview_of_the_current_budget_says_it_is_already_there(
    gate: Gate, alice: Principal
) -> None:
    env = await _preview(gate, alice, "C-101", 1200)
    assert env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert "already at that budget" in env.error.message_for_model
    assert "1,200 USD" in env.error.message_for_model


@pytest.mark.parametrize("budget", [0, -5, 10_000_001])
async def test_preview_out_of_range_names_the_field(
    gate: Gate, alice: Principal, budget: int
) -> None:
    env = await _preview(gate, alice, "C-101", budget)
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "new_daily_budget" in env.error.message_for_model


async def test_relative_amounts_are_rejected(gate: Gate, alice: Principal) -> None:
    env = await _preview(gate, alice, "C-101", "+10%")
    assert env.error is not None
    assert env.error.kind is ErrorKind.CONSTRUCTION
    assert "integer" in env.error.message_for_model


async def test_a_budget_change_needs_the_write_scope(
    gate: Gate, carol: Principal, state: DemoState
) -> None:
    env = await _preview(gate, carol, "C-101", 1500)
    assert env.error is not None
    assert env.error.kind is ErrorKind.PERMISSION
    assert "campaigns:write" in env.error.message_for_model
    assert state.campaigns["C-101"].daily_budget == 1200


async def test_apply_after_the_campaign_was_paused_changes_nothing(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview = await _preview(gate, alice, "C-101", 1500)
    state.update(state.campaigns, state.campaigns["C-101"], status="paused")
    env = await _apply(gate, alice, preview)
    assert env.error is not None
    assert env.error.kind is ErrorKind.BUSINESS_STATE
    assert "is paused" in env.error.message_for_model
    assert state.campaigns["C-101"].daily_budget == 1200


async def test_apply_when_the_budget_changed_meanwhile_is_refused(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    preview = await _preview(gate, alice, "C-101", 1500)
    state.update(state.campaigns, state.campaigns["C-101"], daily_budget=1500)
    env = await _apply(gate, alice, preview)
    # The world no longer matches what was previewed: nothing is applied.
    assert env.error is not None and env.error.kind is ErrorKind.BUSINESS_STATE
    assert state.campaigns["C-101"].daily_budget == 1500


def test_verify_reads_the_live_budget(state: DemoState) -> None:
    tools = BudgetChangeTools(state)
    assert tools.budget_change_verify("C-101", 1200, "acme") is True
    assert tools.budget_change_verify("C-101", 1500, "acme") is False
    state.update(state.campaigns, state.campaigns["C-101"], daily_budget=1500)
    assert tools.budget_change_verify("C-101", 1500, "acme") is True


async def test_concurrent_budget_changes_all_land(
    gate: Gate, alice: Principal, state: DemoState
) -> None:
    async def change(campaign_id: str, amount: int) -> None:
        env = await _apply(gate, alice, await _preview(gate, alice, campaign_id, amount))
        assert env.status is Status.OK, env.error

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(change, "C-101", 1300)
            tg.start_soon(change, "C-102", 500)
            tg.start_soon(change, "C-104", 2600)
            tg.start_soon(change, "C-106", 3100)
    budgets = {
        cid: state.campaigns[cid].daily_budget for cid in ("C-101", "C-102", "C-104", "C-106")
    }
    assert budgets == {"C-101": 1300, "C-102": 500, "C-104": 2600, "C-106": 3100}
