"""Campaign tools: find campaigns by name, set a campaign's daily budget."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from callgate.contract import Trusted, tool
from callgate.demo._models import BudgetChange, Campaign
from callgate.demo._search import rank_campaigns
from callgate.demo._state import DemoState, owned
from callgate.errors import BusinessStateError

MAX_DAILY_BUDGET = 10_000_000


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
        a daily budget, pass the id found here to ops.campaign_set_budget.

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

    @tool(
        title="Set a campaign's daily budget",
        scopes=["campaigns:write"],
        idempotent=True,
        destructive=False,
        open_world=False,
        input_examples=[{"campaign_id": "C-101", "new_daily_budget": 1500}],
    )
    def campaign_set_budget(
        self,
        campaign_id: str,
        new_daily_budget: Annotated[int, Field(ge=1, le=MAX_DAILY_BUDGET)],
        tenant_id: Trusted[str],
    ) -> BudgetChange:
        """Set the daily budget of one active campaign to an absolute amount.

        Use it when the user asks to set, raise or lower a campaign's daily budget
        and you know the campaign's id. The amount is ABSOLUTE, never relative: for
        "raise it by 10%", read the current budget with ops.campaigns_find, compute
        the new amount, and pass that. Setting the same amount twice is harmless.
        Do not use it to pause, resume or end a campaign (there is no tool for that
        here; hand over to a human). Large budgets may need a human's approval.

        Args:
            campaign_id: The campaign's id as returned by ops.campaigns_find, e.g.
                "C-101" (not its name).
            new_daily_budget: The new daily budget, an integer in whole units of the
                campaign's currency (1200 means 1,200 USD for a USD campaign; no
                cents), from 1 to 10,000,000.

        Returns:
            The campaign's id, name and currency with daily_budget_before and
            daily_budget_after, and changed=false if it already had that budget.
            Tell the user the before and after amounts.
        """
        state = self._state
        with state.lock:
            campaign = owned(
                state.campaigns,
                campaign_id,
                tenant_id,
                kind="campaign",
                id_format='"C-" and a number, e.g. "C-101"',
                finder="Find the id by name with ops.campaigns_find.",
            )
            if campaign.status != "active":
                raise BusinessStateError(
                    f"Campaign {campaign.id} ({campaign.name!r}) is {campaign.status}; only "
                    "active campaigns can have their budget changed.",
                    next_step=(
                        "Tell the user the campaign is not active. Resuming a paused "
                        "campaign is done by a person in the ads console, not by a tool."
                        if campaign.status == "paused"
                        else "Tell the user the campaign has ended; a new campaign is "
                        "needed to spend more."
                    ),
                )
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
