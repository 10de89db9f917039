"""The demo's domain records, as the in-process state holds them.

Frozen dataclasses: a change replaces the record under the state's lock, so a
reader never sees half of an update.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

CampaignStatus = Literal["active", "paused", "ended"]
Channel = Literal["search", "display", "social", "video"]
DeployState = Literal["running", "failed", "rolled_back"]


@dataclass(kw_only=True, frozen=True)
class CampaignRecord:
    id: str
    tenant: str
    name: str
    status: CampaignStatus
    daily_budget: int
    """Whole units of ``currency`` per day (no minor units)."""
    currency: str
    channel: Channel
    start_date: date
    end_date: date | None = None
    owner: str | None = None
    """The campaign owner's user id: large budget increases need their approval."""


@dataclass(kw_only=True, frozen=True)
class DeploymentRecord:
    id: str
    tenant: str
    service: str
    environment: str
    version: str
    previous_version: str | None
    state: DeployState
    started_at: datetime
    started_by: str
    rolled_back_at: datetime | None = None
    rolled_back_by: str | None = None
    rollback_reason: str | None = None


@dataclass(kw_only=True, frozen=True)
class NoteRecord:
    id: str
    tenant: str
    title: str
    summary: str
    """One line, shown in search results instead of the body."""
    body: str
    author: str
    updated_at: datetime
    tags: tuple[str, ...] = ()


@dataclass(kw_only=True, frozen=True)
class OutboxMessage:
    """An email the demo accepted; nothing is ever delivered."""

    message_id: str
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    queued_at: datetime
