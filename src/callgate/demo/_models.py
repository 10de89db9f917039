"""What the demo tools return: pydantic models, so every tool has an output schema."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field

from callgate.demo._records import CampaignStatus, Channel, DeployState
from callgate.demo._search import Match


class Campaign(BaseModel):
    id: str = Field(description="Campaign id, e.g. 'C-101'.")
    name: str
    status: CampaignStatus
    daily_budget: int = Field(description="Whole units of `currency` per day (no cents).")
    currency: str = Field(description="ISO 4217 code, e.g. 'USD'.")
    channel: Channel
    start_date: date
    end_date: date | None = Field(description="None while the campaign has no end date.")
    match: Match = Field(
        description="How the name matched the query: exact, prefix, contains, words "
        "(all query words, any order) or some_words."
    )


class BudgetImpact(BaseModel):
    """What a budget change would do; nothing is changed by computing it."""

    campaign_id: str
    name: str
    status: CampaignStatus
    currency: str = Field(description="ISO 4217 code, e.g. 'USD'.")
    daily_budget_before: int = Field(description="The current daily budget (whole units).")
    daily_budget_after: int = Field(description="The daily budget after the change.")
    change: int = Field(description="after minus before; negative for a decrease.")
    increase_pct: float = Field(
        description="The change in percent of the current budget (80.0 is +80%); negative "
        "for a decrease. Rounded away from zero to 2 decimals."
    )
    owner: str | None = Field(
        default=None,
        description="The campaign owner, whose approval an increase of more than 50% needs.",
    )


class BudgetChange(BaseModel):
    """What an applied budget change did."""

    campaign_id: str
    name: str
    currency: str
    daily_budget_before: int
    daily_budget_after: int
    changed: bool = Field(description="False when the budget already had that value.")


class Deployment(BaseModel):
    id: str = Field(description="Deployment id, e.g. 'D-1'.")
    service: str
    environment: str
    version: str
    previous_version: str | None = Field(
        description="What a rollback returns to; None for a service's first deployment."
    )
    state: DeployState
    started_at: datetime
    started_by: str
    rolled_back_at: datetime | None = None
    rolled_back_by: str | None = None
    rollback_reason: str | None = None


class Rollback(BaseModel):
    deploy_id: str
    service: str
    from_version: str
    to_version: str
    state: DeployState
    rolled_back_at: datetime
    rolled_back_by: str
    reason: str


class NoteHit(BaseModel):
    id: str = Field(description="Note id, e.g. 'N-1'; pass it to ops.notes_read.")
    title: str
    summary: str
    updated_at: datetime
    tags: list[str]


class Note(BaseModel):
    id: str
    title: str
    author: str
    updated_at: datetime
    tags: list[str]
    body: str


class QueuedEmail(BaseModel):
    message_id: str = Field(description="Id of the queued message, e.g. 'msg-0001'.")
    status: Literal["queued"]
    sender: str
    to: list[str]
    subject: str
    queued_at: datetime
