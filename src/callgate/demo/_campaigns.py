"""Campaign tools: find campaigns by name; change a daily budget by preview / apply."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated

from pydantic import Field

from callgate.contract import Toolbox, Trusted, tool
from callgate.demo._models import BudgetChange, BudgetImpact, Campaign
from callgate.demo._records import CampaignRecord
from callgate.demo._search import rank_campaigns
from callgate.demo._state import DemoState, owned
from callgate.errors import BusinessStateError

MAX_DAILY_BUDGET = 10_000_000
BUDGET_PREVIEW_TTL = 600.0
"""Seconds a budget preview id stays valid (unless it awaits an approval)."""

DailyBudget = Annotated[int, Field(ge=1, le=MAX_DAILY_BUDGET)]


class CampaignTools:
    """The campaign tools, bound to one demo state."""

    def __init__(self, state: DemoState) -> None:
        self._state = state

    @tool(
        title="Find campaigns by name",
        scopes=["campaigns:read"],
        read_only=True,
        open_world=False,
        concise=["id", "name", "status", "daily_budget", "currency"],
        input_examples=[
            {"query": "Autumn Sale_Search"},
            {"query": "autumn retarget", "limit": 5, "response_format": "detailed"},
        ],
    )
    def campaigns_find(
        self,
        query: Annotated[str, Field(min_length=1, max_length=200)],
        tenant_id: Trusted[str],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> list[Campaign]:
        """Find your organization's advertising campaigns by name and get their ids.

        Use it first whenever the user names a campaign: every other campaign tool
        takes the campaign id (like "C-101"), not the name. It only reads; to change
        a daily budget, pass the id found here to ops.budget_change_preview.

        Campaign names are often near-duplicates ("Autumn Sale_Search" and "Autumn
        Sale_Search_Retarget" are different campaigns). Results are ranked: exact
        name first (case and separators like "_" or spaces do not count), then names
        that start with the query, then names that contain it, then names that
        contain its words. If the user's words fit more than one result, confirm the
        id with the user before changing anything.

        Args:
            query: Part or all of a campaign name, e.g. "Autumn Sale_Search" or
                "autumn retarget". Free text, case-insensitive.
            limit: Maximum number of campaigns to return (1-50).

        Returns:
            A list of campaigns, best match first, each with id, name, status
            ("active", "paused" or "ended"), daily_budget (an integer in whole units
            of the campaign's currency, e.g. 1200 with currency "USD" is 1,200 USD a
            day; no cents) and currency. response_format "detailed" adds channel,
            start_date, end_date and how the name matched. An empty list means no
            campaign of yours matches: try fewer or shorter words.
        """
        ranked = rank_campaigns(query, self._state.campaigns_of(tenant_id))
        return [
            Campaign(
                id=m.campaign.id,
                name=m.campaign.name,
                status=m.campaign.status,
                daily_budget=m.campaign.daily_budget,
                currency=m.campaign.currency,
                channel=m.campaign.channel,
                start_date=m.campaign.start_date,
                end_date=m.campaign.end_date,
                match=m.match,
            )
            for m in ranked[:limit]
        ]


def increase_pct(before: int, after: int) -> float:
    """``after`` relative to ``before`` in percent, rounded away from zero to 2 decimals.

    Rounding away from zero keeps every increase above a threshold above it (an
    increase of 50.001% shows as 50.01, never as 50.0).
    """
    exact = Fraction(after - before, before) * 100 * 100
    rounded = math.ceil(exact) if exact > 0 else math.floor(exact)
    return rounded / 100


class BudgetChangeTools:
    """The functions of the ``budget_change`` change, bound to one demo state."""

    def __init__(self, state: DemoState) -> None:
        self._state = state

    def _active(self, campaign_id: str, tenant_id: str) -> CampaignRecord:
        """The tenant's campaign ``campaign_id``, which must be active (call in a transaction).

        Raises:
            ConstructionError: there is no such campaign.
            PermissionDenied: it belongs to another tenant.
            BusinessStateError: it is paused or ended.
        """
        campaign = owned(
            self._state.campaigns,
            campaign_id,
            tenant_id,
            kind="campaign",
            id_format='"C-" and a number, e.g. "C-101"',
            finder="Find the id by name with ops.campaigns_find.",
        )
        if campaign.status != "active":
            raise BusinessStateError(
                f"Campaign {campaign.id} ({campaign.name!r}) is {campaign.status}; only "
                "active campaigns can have their budget changed. Nothing was changed.",
                next_step=(
                    "Tell the user the campaign is not active. Resuming a paused "
                    "campaign is done by a person in the ads console, not by a tool."
                    if campaign.status == "paused"
                    else "Tell the user the campaign has ended; a new campaign is "
                    "needed to spend more."
                ),
            )
        return campaign

    def budget_change_preview(
        self,
        campaign_id: str,
        new_daily_budget: DailyBudget,
        tenant_id: Trusted[str],
    ) -> BudgetImpact:
        """Preview setting one active campaign's daily budget to an absolute amount.

        Use it when the user asks to set, raise or lower a campaign's daily budget
        and you know the campaign's id (find it by name with ops.campaigns_find).
        The amount is ABSOLUTE, never relative: for "raise it by 10%", read the
        current budget with ops.campaigns_find, compute the new amount, and pass
        that. Do not use it to pause, resume or end a campaign (no tool does that
        here; hand over to a human). An increase of more than 50% over the current
        daily budget needs the campaign owner's approval: the answer then says so
        and names the approval request that was filed.

        Args:
            campaign_id: The campaign's id as returned by ops.campaigns_find, e.g.
                "C-101" (not its name).
            new_daily_budget: The new daily budget, an integer in whole units of the
                campaign's currency (1500 means 1,500 USD a day for a USD campaign;
                no cents), from 1 to 10,000,000.

        Returns:
            preview_id and expires_at, next_step (what to do now), approval (with
            its approval_id, when a human must approve first) and the impact:
            campaign_id, name, status, currency, daily_budget_before,
            daily_budget_after, change (after minus before; negative for a
            decrease), increase_pct (the change in percent of the current
            budget; negative for a decrease) and owner (who approves large
            increases). Show the user the before and after amounts and let them
            confirm before applying.
        """
        with self._state.transaction():
            campaign = self._active(campaign_id, tenant_id)
        before = campaign.daily_budget
        if before == new_daily_budget:
            raise BusinessStateError(
                f"Campaign {campaign.id} ({campaign.name!r}) is already at that budget: "
                f"{before:,} {campaign.currency} a day. Nothing to change.",
                next_step="Tell the user the budget already has that value; do not apply anything.",
            )
        return BudgetImpact(
            campaign_id=campaign.id,
            name=campaign.name,
            status=campaign.status,
            currency=campaign.currency,
            daily_budget_before=before,
            daily_budget_after=new_daily_budget,
            change=new_daily_budget - before,
            increase_pct=increase_pct(before, new_daily_budget),
            owner=campaign.owner,
        )

    def budget_change_apply(
        self,
        campaign_id: str,
        new_daily_budget: DailyBudget,
        tenant_id: Trusted[str],
    ) -> BudgetChange:
        """Set a campaign's daily budget to the amount shown by its preview.

        Use it only after ops.budget_change_preview, once the user has seen the
        before and after amounts and confirmed them. If the preview said a human
        must approve the change, call it after the approval was given; before
        that it answers pending_approval, and after a denial it is refused. The
        campaign must still be active.

        Args:
            campaign_id: The previewed campaign's id.
            new_daily_budget: The previewed daily budget.

        Returns:
            campaign_id, name, currency, daily_budget_before, daily_budget_after and
            changed (false when the campaign already had that budget). Tell the user
            the before and after amounts.
        """
        state = self._state
        with state.transaction():
            campaign = self._active(campaign_id, tenant_id)
            before = campaign.daily_budget
            if before != new_daily_budget:
                campaign = state.update(state.campaigns, campaign, daily_budget=new_daily_budget)
        return BudgetChange(
            campaign_id=campaign.id,
            name=campaign.name,
            currency=campaign.currency,
            daily_budget_before=before,
            daily_budget_after=campaign.daily_budget,
            changed=before != campaign.daily_budget,
        )

    def budget_change_verify(
        self,
        campaign_id: str,
        new_daily_budget: DailyBudget,
        tenant_id: Trusted[str],
    ) -> bool:
        """Whether the campaign's daily budget is now the previewed amount.

        Used by ops.budget_change_status to reconcile an apply whose outcome is
        unknown (it timed out): it reads the live campaign and changes nothing.

        Args:
            campaign_id: The previewed campaign's id.
            new_daily_budget: The previewed daily budget.

        Returns:
            True when the campaign's daily budget equals new_daily_budget.
        """
        with self._state.transaction():
            campaign = owned(
                self._state.campaigns,
                campaign_id,
                tenant_id,
                kind="campaign",
                id_format='"C-" and a number, e.g. "C-101"',
                finder="Find the id by name with ops.campaigns_find.",
            )
            return campaign.daily_budget == new_daily_budget


def add_budget_change(
    toolbox: Toolbox, state: DemoState, *, ttl: float = BUDGET_PREVIEW_TTL
) -> None:
    """Declare the ``budget_change`` change on ``toolbox``.

    It serves ``<toolbox>.budget_change_preview``, ``_apply`` and ``_status``.

    Args:
        toolbox: The toolbox to add the three tools to (the demo's ``ops``).
        state: The demo state the functions read and change.
        ttl: Seconds a preview id stays valid (tests shorten it).
    """
    functions = BudgetChangeTools(state)
    budget = toolbox.change(
        "budget_change",
        scopes={"campaigns:write"},
        ttl=ttl,
        destructive=False,
        title="Change a campaign's daily budget",
    )
    budget.preview(functions.budget_change_preview)
    budget.apply(functions.budget_change_apply)
    budget.verify(functions.budget_change_verify)
