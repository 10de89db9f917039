"""The advertising dataset and toolbox of the code-mode benchmark.

Not a benchmark itself: ``code_mode.py`` imports it.

One tenant (``acme``) with 25 ad accounts and 1,000 campaigns (by default), each
with 30 days of daily stats (impressions, clicks, spend, conversions) ending on
:data:`LAST_DAY`. Everything comes from one seeded ``random.Random``, so every run
has the same data. A paused or ended campaign has zeros after the day it stopped;
about 4% of campaigns convert badly (a high cost per conversion), for the task
that pauses them.

The ``ads`` toolbox reads it as an ads platform's API would: accounts, campaigns
(paged by cursor, at most 50 a page), one campaign's daily stats, a performance
report (each campaign's totals over the last days, paged), and pausing a
campaign (the one write). :meth:`AdsData.reset` puts every status back.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from callgate import Toolbox, Trusted
from callgate.errors import BusinessStateError, ConstructionError

TENANT = "acme"
LAST_DAY = date(2025, 11, 30)
DAYS = 30
ACCOUNTS = 25
PAGE_MAX = 50

Status = Literal["active", "paused", "ended"]
Channel = Literal["search", "display", "social", "video"]

_BRANDS = (
    "Northwind Traders",
    "Contoso Coffee",
    "Fabrikam Outdoor",
    "Tailspin Toys",
    "Wingtip Travel",
    "Litware Books",
    "Adventure Works",
    "Proseware Software",
    "Lucerne Publishing",
    "Alpine Ski House",
    "Blue Yonder Airlines",
    "Coho Vineyard",
    "Fourth Coffee",
    "Humongous Insurance",
    "Trey Research",
    "Wide World Importers",
    "Woodgrove Bank",
    "Relecloud Hosting",
    "City Power & Light",
    "Margie's Travel",
    "Graphic Design Institute",
    "Consolidated Messenger",
    "School of Fine Art",
    "Bellows College",
    "Southridge Video",
)
_PRODUCTS = (
    "Spring Sale",
    "Summer Clearance",
    "Autumn Sale",
    "Holiday Gifts",
    "Brand",
    "New Arrivals",
    "Loyalty",
    "Black Friday",
    "Back to School",
    "Outlet",
    "Gift Cards",
    "Retarget",
)
# Channel: (weight, click-through rate, cost per click in USD)
_CHANNELS: dict[Channel, tuple[int, float, float]] = {
    "search": (45, 0.035, 1.20),
    "display": (20, 0.004, 0.60),
    "social": (25, 0.012, 0.90),
    "video": (10, 0.008, 0.40),
}


@dataclass(frozen=True)
class Day:
    day: date
    impressions: int
    clicks: int
    spend_cents: int
    conversions: int


@dataclass
class CampaignRow:
    id: str
    name: str
    account_id: str
    status: Status
    channel: Channel
    daily_budget: int
    days: tuple[Day, ...]
    """Oldest first, :data:`DAYS` of them, the last on :data:`LAST_DAY`."""


@dataclass
class AdsData:
    """The seeded dataset (see the module docs); statuses change as tools pause."""

    accounts: dict[str, str]
    """Account id -> name."""
    campaigns: dict[str, CampaignRow]
    initial: dict[str, Status] = field(default_factory=dict)
    pauses: int = 0
    """Campaigns the tool paused since the last reset."""

    def __post_init__(self) -> None:
        self.initial = self.statuses()

    def statuses(self) -> dict[str, Status]:
        return {c.id: c.status for c in self.campaigns.values()}

    def reset(self) -> None:
        for cid, status in self.initial.items():
            self.campaigns[cid].status = status
        self.pauses = 0


def generate(campaigns: int = 1_000, *, seed: int = 16) -> AdsData:
    """``campaigns`` campaigns dealt over :data:`ACCOUNTS` accounts, round robin."""
    rng = random.Random(seed)
    accounts = {f"A-{i + 1:02d}": _BRANDS[i] for i in range(ACCOUNTS)}
    account_ids = list(accounts)
    channels = list(_CHANNELS)
    weights = [_CHANNELS[c][0] for c in channels]
    rows: dict[str, CampaignRow] = {}
    for i in range(campaigns):
        cid = f"C-{i + 1:04d}"
        channel = rng.choices(channels, weights)[0]
        status: Status = rng.choices(("active", "paused", "ended"), (60, 25, 15))[0]
        budget = rng.randrange(50, 5_001, 50)
        _, ctr_base, cpc_base = _CHANNELS[channel]
        ctr = ctr_base * rng.lognormvariate(0, 0.3)
        cpc = cpc_base * rng.lognormvariate(0, 0.25)
        cvr = rng.lognormvariate(0, 0.35) * (0.004 if rng.random() < 0.04 else 0.04)
        stopped = {"active": DAYS, "paused": rng.randrange(DAYS), "ended": rng.randrange(20)}
        days = []
        for d in range(DAYS):
            day = LAST_DAY - timedelta(days=DAYS - 1 - d)
            if d >= stopped[status]:
                days.append(Day(day, 0, 0, 0, 0))
                continue
            day_cpc = cpc * rng.uniform(0.85, 1.15)
            clicks = max(1, int(budget * rng.uniform(0.6, 1.0) / day_cpc))
            impressions = int(clicks / (ctr * rng.uniform(0.85, 1.15)))
            conversions = int(clicks * cvr * rng.uniform(0.5, 1.5) + rng.random())
            days.append(Day(day, impressions, clicks, round(clicks * day_cpc * 100), conversions))
        name = f"{rng.choice(_PRODUCTS)}_{channel.capitalize()} {i + 1}"
        account = account_ids[i % ACCOUNTS]
        rows[cid] = CampaignRow(cid, name, account, status, channel, budget, tuple(days))
    return AdsData(accounts=accounts, campaigns=rows)


# -- what the tools return -----------------------------------------------------------------
class Account(BaseModel):
    id: str = Field(description="Account id, e.g. 'A-01'.")
    name: str


class Campaign(BaseModel):
    id: str = Field(description="Campaign id, e.g. 'C-0001'.")
    name: str
    account_id: str
    status: Status
    channel: Channel
    daily_budget: int = Field(description="Whole USD a day.")


class CampaignPage(BaseModel):
    campaigns: list[Campaign]
    next_cursor: str | None = Field(description="Pass it to get the next page; None at the end.")


class DailyStats(BaseModel):
    date: date
    impressions: int
    clicks: int
    spend: float = Field(description="USD, two decimals.")
    conversions: int


class CampaignStats(BaseModel):
    campaign_id: str
    currency: str
    days: list[DailyStats] = Field(description="Oldest first, the last day is yesterday.")


class ReportRow(BaseModel):
    campaign_id: str
    name: str
    status: Status
    impressions: int
    clicks: int
    spend: float = Field(description="USD, two decimals.")
    conversions: int


class ReportPage(BaseModel):
    days: int
    rows: list[ReportRow]
    next_cursor: str | None = Field(description="Pass it to get the next page; None at the end.")


class Paused(BaseModel):
    campaign_id: str
    name: str
    status_before: Status
    status: Status
    changed: bool = Field(description="False when it was paused already.")


# -- the toolbox ------------------------------------------------------------------------------
PageSize = Annotated[int, Field(ge=1, le=PAGE_MAX)]
Days = Annotated[int, Field(ge=1, le=DAYS)]


def _cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode()


def _offset(kind: str, cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        seen, offset = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        if seen == kind:
            return int(offset)
    except ValueError:
        pass
    raise ConstructionError(
        f"{cursor!r} is not a cursor of this listing.",
        next_step="Pass the next_cursor of the previous page as it is, or none for the first page.",
    )


def _page(kind: str, offset: int, limit: int, total: int) -> str | None:
    return _cursor(kind, offset + limit) if offset + limit < total else None


def _dollars(cents: int) -> float:
    return round(cents / 100, 2)


def ads_toolbox(data: AdsData) -> Toolbox:
    """The ``ads`` toolbox over ``data`` (one tenant's, :data:`TENANT`)."""
    box = Toolbox(
        "ads",
        description="Advertising: your organization's ad accounts and campaigns, their "
        "daily performance, and pausing a campaign.",
    )

    def campaign(campaign_id: str, tenant_id: str) -> CampaignRow:
        row = data.campaigns.get(campaign_id) if tenant_id == TENANT else None
        if row is None:
            raise ConstructionError(
                f"No campaign {campaign_id!r}.",
                next_step='Campaign ids look like "C-0001": list them with ads.list_campaigns.',
            )
        return row

    @box.tool(read_only=True, open_world=False, title="List ad accounts")
    def list_accounts(tenant_id: Trusted[str]) -> list[Account]:
        """List your organization's ad accounts, with their ids and names.

        Returns:
            Every account (there are a few dozen at most).
        """
        if tenant_id != TENANT:
            return []
        return [Account(id=aid, name=name) for aid, name in data.accounts.items()]

    @box.tool(read_only=True, open_world=False, title="List campaigns")
    def list_campaigns(
        tenant_id: Trusted[str],
        status: Status | None = None,
        account_id: str | None = None,
        cursor: str | None = None,
        limit: PageSize = PAGE_MAX,
    ) -> CampaignPage:
        """List your campaigns, oldest first, one page at a time.

        Args:
            status: Only campaigns with this status (active, paused or ended).
            account_id: Only the campaigns of this account, e.g. "A-01".
            cursor: The next_cursor of the previous page; none for the first page.
            limit: Campaigns a page, at most 50.

        Returns:
            A page of campaigns (id, name, account_id, status, channel,
            daily_budget) and next_cursor, None on the last page.
        """
        rows = [
            c
            for c in data.campaigns.values()
            if tenant_id == TENANT
            and (status is None or c.status == status)
            and (account_id is None or c.account_id == account_id)
        ]
        kind = f"campaigns/{status}/{account_id}"
        offset = _offset(kind, cursor)
        return CampaignPage(
            campaigns=[
                Campaign(
                    id=c.id,
                    name=c.name,
                    account_id=c.account_id,
                    status=c.status,
                    channel=c.channel,
                    daily_budget=c.daily_budget,
                )
                for c in rows[offset : offset + limit]
            ],
            next_cursor=_page(kind, offset, limit, len(rows)),
        )

    @box.tool(read_only=True, open_world=False, title="One campaign's daily stats")
    def campaign_stats(
        campaign_id: str, tenant_id: Trusted[str], days: Days = DAYS
    ) -> CampaignStats:
        """Get one campaign's stats day by day: impressions, clicks, spend, conversions.

        Args:
            campaign_id: The campaign's id, e.g. "C-0001".
            days: How many days back from yesterday, 1 to 30.

        Returns:
            One row a day, oldest first.
        """
        row = campaign(campaign_id, tenant_id)
        return CampaignStats(
            campaign_id=row.id,
            currency="USD",
            days=[
                DailyStats(
                    date=d.day,
                    impressions=d.impressions,
                    clicks=d.clicks,
                    spend=_dollars(d.spend_cents),
                    conversions=d.conversions,
                )
                for d in row.days[-days:]
            ],
        )

    @box.tool(read_only=True, open_world=False, title="Performance report")
    def performance_report(
        tenant_id: Trusted[str],
        days: Days = 7,
        status: Status | None = None,
        cursor: str | None = None,
        limit: PageSize = PAGE_MAX,
    ) -> ReportPage:
        """Each campaign's totals over the last days (impressions, clicks, spend,
        conversions), one page at a time.

        Args:
            days: The window, 1 to 30 days back from yesterday.
            status: Only campaigns with this status now (active, paused or ended).
            cursor: The next_cursor of the previous page; none for the first page.
            limit: Campaigns a page, at most 50.

        Returns:
            The window's days, a page of rows (campaign_id, name, status and the
            totals; spend in USD) and next_cursor, None on the last page.
        """
        rows = [
            c
            for c in data.campaigns.values()
            if tenant_id == TENANT and (status is None or c.status == status)
        ]
        kind = f"report/{days}/{status}"
        offset = _offset(kind, cursor)
        out = []
        for c in rows[offset : offset + limit]:
            window = c.days[-days:]
            out.append(
                ReportRow(
                    campaign_id=c.id,
                    name=c.name,
                    status=c.status,
                    impressions=sum(d.impressions for d in window),
                    clicks=sum(d.clicks for d in window),
                    spend=_dollars(sum(d.spend_cents for d in window)),
                    conversions=sum(d.conversions for d in window),
                )
            )
        return ReportPage(days=days, rows=out, next_cursor=_page(kind, offset, limit, len(rows)))

    @box.tool(read_only=False, destructive=False, idempotent=True, open_world=False)
    def pause_campaign(campaign_id: str, tenant_id: Trusted[str]) -> Paused:
        """Pause one active campaign: it stops serving ads and spending at once.

        Args:
            campaign_id: The campaign's id, e.g. "C-0001".

        Returns:
            The status before and after; changed is false if it was paused already.
        """
        row = campaign(campaign_id, tenant_id)
        before = row.status
        if before == "ended":
            raise BusinessStateError(
                f"Campaign {row.id} has ended; only an active campaign can be paused.",
                next_step="Leave it: an ended campaign spends nothing.",
            )
        row.status = "paused"
        data.pauses += before != "paused"
        return Paused(
            campaign_id=row.id,
            name=row.name,
            status_before=before,
            status=row.status,
            changed=before != "paused",
        )

    return box
