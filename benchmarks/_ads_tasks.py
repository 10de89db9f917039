"""The five tasks of the code-mode benchmark, each as a model would do it both ways.

Not a benchmark itself: ``code_mode.py`` runs them.

Each :class:`Task` has:

- ``plain``: the plan a model follows with the ``ads`` tools offered directly, as a
  generator: it yields the model's next response (one call, parallel reads, or
  the final reply) and is sent the results of that turn's calls. It sees nothing
  but those results. A page needs the previous page's cursor, so paging takes a
  turn a page; calls that do not depend on each other go in one turn, at most
  ``per_turn`` of them (models propose a handful of parallel calls, not hundreds).
- ``program``: the one program the model would send to ``callgate.run_code``.
- ``truth``: the answer computed from the dataset directly.

A plan and a program end with the same answer structure, so the three can be
compared for equality; ``text`` is the reply the model writes from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from _ads import AdsData, Day

from callgate.agent import ModelRequest, ModelResponse, ToolResults, call, calls, reply

Results = list[Any]
Plan = Generator[ModelResponse, Results, None]
Step = Generator[ModelResponse, Results, list[Any]]
Answer = dict[str, Any]

MAX_CPA = 100.0
ACCOUNT = "Coho Vineyard"
TOP = 5


class Planner:
    """A :class:`~callgate.agent.ScriptedModel` step that drives a plan (one object,
    put in the script once a turn): the plan gets the payloads of the last turn's
    results, in the order of its calls."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.started = False

    def __call__(self, request: ModelRequest) -> ModelResponse:
        if not self.started:
            self.started = True
            return next(self.plan)
        last = request.messages[-1]
        assert isinstance(last, ToolResults), "a plan's turn ends with its results"
        return self.plan.send([payload(r.name, r.content, r.is_error) for r in last.results])


def payload(name: str, content: str, is_error: bool) -> Any:
    """A result as the model reads it, parsed; a failure or a cut result stops the
    benchmark (the plans assume whole pages: a cut one ends with a notice line)."""
    if is_error:
        raise RuntimeError(f"{name} failed: {content[:500]}")
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        raise RuntimeError(f"{name}'s result is not whole JSON: ...{content[-300:]}") from None


def pages(tool: str, args: Mapping[str, Any], key: str) -> Step:
    """Page ``tool`` to the end, one call a turn; every item of every page."""
    items: list[Any] = []
    cursor = None
    while True:
        [page] = yield call(tool, {**args, **({"cursor": cursor} if cursor else {})})
        items += page[key]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def parallel(tool: str, arguments: list[dict[str, Any]], per_turn: int) -> Step:
    """Independent calls of ``tool``, ``per_turn`` a turn; their payloads in order."""
    out: list[Any] = []
    for start in range(0, len(arguments), per_turn):
        out += yield calls(*[(tool, a) for a in arguments[start : start + per_turn]])
    return out


def _ctr(impressions: int, clicks: int) -> float | None:
    return round(100 * clicks / impressions, 2) if impressions else None


def _window(days: tuple[Day, ...], n: int) -> dict[str, Any]:
    last = days[-n:]
    return {
        "impressions": sum(d.impressions for d in last),
        "clicks": sum(d.clicks for d in last),
        "spend": round(sum(d.spend_cents for d in last) / 100, 2),
        "conversions": sum(d.conversions for d in last),
    }


def _over(row: Mapping[str, Any]) -> bool:
    return bool(row["conversions"] == 0 or row["spend"] / row["conversions"] > MAX_CPA)


# -- 1. aggregate ---------------------------------------------------------------------------------
def plain_aggregate(answer: Answer, per_turn: int) -> Plan:
    rows = yield from pages("ads.performance_report", {"days": 7, "status": "active"}, "rows")
    answer.update(campaigns=len(rows), spend_usd=round(sum(r["spend"] for r in rows), 2))
    yield reply(text_aggregate(answer))


PROGRAM_AGGREGATE = """\
rows, cursor = [], None
while True:
    page = await ads.performance_report(days=7, status="active", cursor=cursor)
    rows += page["rows"]
    cursor = page["next_cursor"]
    if cursor is None:
        break
{"campaigns": len(rows), "spend_usd": round(sum(r["spend"] for r in rows), 2)}
"""


def truth_aggregate(data: AdsData) -> Answer:
    active = [c for c in data.campaigns.values() if c.status == "active"]
    cents = sum(d.spend_cents for c in active for d in c.days[-7:])
    return {"campaigns": len(active), "spend_usd": round(cents / 100, 2)}


def text_aggregate(a: Answer) -> str:
    return f"The {a['campaigns']} active campaigns spent ${a['spend_usd']:,.2f} in the last 7 days."


# -- 2. filter, then act ----------------------------------------------------------------------------
def plain_pause(answer: Answer, per_turn: int) -> Plan:
    rows = yield from pages("ads.performance_report", {"days": 30, "status": "active"}, "rows")
    over = [{"campaign_id": r["campaign_id"]} for r in rows if _over(r)]
    done = yield from parallel("ads.pause_campaign", over, per_turn)
    answer.update(checked=len(rows), paused=sorted(p["campaign_id"] for p in done if p["changed"]))
    yield reply(text_pause(answer))


PROGRAM_PAUSE = f"""\
rows, cursor = [], None
while True:
    page = await ads.performance_report(days=30, status="active", cursor=cursor)
    rows += page["rows"]
    cursor = page["next_cursor"]
    if cursor is None:
        break
paused = []
for r in rows:
    if r["conversions"] == 0 or r["spend"] / r["conversions"] > {MAX_CPA:g}:
        done = await ads.pause_campaign(campaign_id=r["campaign_id"])
        if done["changed"]:
            paused.append(r["campaign_id"])
{{"checked": len(rows), "paused": sorted(paused)}}
"""


def truth_pause(data: AdsData) -> Answer:
    active = [c for c in data.campaigns.values() if c.status == "active"]
    over = [c.id for c in active if _over(_window(c.days, 30))]
    return {"checked": len(active), "paused": sorted(over)}


def text_pause(a: Answer) -> str:
    return (
        f"Of {a['checked']} active campaigns, {len(a['paused'])} cost more than "
        f"${MAX_CPA:.0f} a conversion over 30 days and are now paused: {', '.join(a['paused'])}."
    )


# -- 3. join two tools ------------------------------------------------------------------------------
def plain_join(answer: Answer, per_turn: int) -> Plan:
    [accounts] = yield call("ads.list_accounts")
    account = next(a["id"] for a in accounts if a["name"] == ACCOUNT)
    campaigns = yield from pages("ads.list_campaigns", {"account_id": account}, "campaigns")
    ids = [{"campaign_id": c["id"], "days": 30} for c in campaigns]
    stats = yield from parallel("ads.campaign_stats", ids, per_turn)
    rows = []
    for c, s in zip(campaigns, stats, strict=True):
        impressions = sum(d["impressions"] for d in s["days"])
        clicks = sum(d["clicks"] for d in s["days"])
        rows.append({"id": c["id"], "name": c["name"], "ctr_pct": _ctr(impressions, clicks)})
    answer.update(account_id=account, campaigns=rows)
    yield reply(text_join(answer))


PROGRAM_JOIN = f"""\
import asyncio
accounts = await ads.list_accounts()
account = [a["id"] for a in accounts if a["name"] == "{ACCOUNT}"][0]
campaigns, cursor = [], None
while True:
    page = await ads.list_campaigns(account_id=account, cursor=cursor)
    campaigns += page["campaigns"]
    cursor = page["next_cursor"]
    if cursor is None:
        break
stats = await asyncio.gather(
    *[ads.campaign_stats(campaign_id=c["id"], days=30) for c in campaigns]
)
rows = []
for c, s in zip(campaigns, stats):
    impressions = sum(d["impressions"] for d in s["days"])
    clicks = sum(d["clicks"] for d in s["days"])
    ctr = round(100 * clicks / impressions, 2) if impressions else None
    rows.append({{"id": c["id"], "name": c["name"], "ctr_pct": ctr}})
{{"account_id": account, "campaigns": rows}}
"""


def truth_join(data: AdsData) -> Answer:
    account = next(aid for aid, name in data.accounts.items() if name == ACCOUNT)
    rows = []
    for c in data.campaigns.values():
        if c.account_id == account:
            w = _window(c.days, 30)
            rows.append(
                {"id": c.id, "name": c.name, "ctr_pct": _ctr(w["impressions"], w["clicks"])}
            )
    return {"account_id": account, "campaigns": rows}


def text_join(a: Answer) -> str:
    lines = [
        f"- {r['id']} {r['name']}: CTR "
        + ("n/a (no impressions)" if r["ctr_pct"] is None else f"{r['ctr_pct']:.2f}%")
        for r in a["campaigns"]
    ]
    return f"{ACCOUNT} ({a['account_id']}) has {len(lines)} campaigns:\n" + "\n".join(lines)


# -- 4. page to the end -----------------------------------------------------------------------------
def _counts(statuses: list[str]) -> Answer:
    return {s: statuses.count(s) for s in ("active", "paused", "ended")} | {"total": len(statuses)}


def plain_count(answer: Answer, per_turn: int) -> Plan:
    campaigns = yield from pages("ads.list_campaigns", {}, "campaigns")
    answer.update(_counts([c["status"] for c in campaigns]))
    yield reply(text_count(answer))


PROGRAM_COUNT = """\
counts, cursor = {"active": 0, "paused": 0, "ended": 0}, None
total = 0
while True:
    page = await ads.list_campaigns(cursor=cursor)
    for c in page["campaigns"]:
        counts[c["status"]] += 1
        total += 1
    cursor = page["next_cursor"]
    if cursor is None:
        break
counts["total"] = total
counts
"""


def truth_count(data: AdsData) -> Answer:
    return _counts([c.status for c in data.campaigns.values()])


def text_count(a: Answer) -> str:
    return (
        f"{a['total']:,} campaigns: {a['active']:,} active, {a['paused']:,} paused, "
        f"{a['ended']:,} ended."
    )


# -- 5. summarize -----------------------------------------------------------------------------------
def summary(row: Mapping[str, Any], days: Sequence[Mapping[str, Any]]) -> Answer:
    """One top campaign's line (the plan's and the truth's; the program has its own)."""
    last = sum(d["conversions"] for d in days[-7:])
    before = sum(d["conversions"] for d in days[-14:-7])
    change = round(100 * (last - before) / before) if before else None
    cpa = round(row["spend"] / row["conversions"], 2)
    ctr = _ctr(row["impressions"], row["clicks"])
    trend = "new" if change is None else f"{change:+d}% week over week"
    line = (
        f"{row['name']} ({row['campaign_id']}, {row['status']}): {row['conversions']:,} "
        f"conversions for ${row['spend']:,.2f} (CPA ${cpa:.2f}, CTR {ctr}%), {trend}"
    )
    return {"id": row["campaign_id"], "conversions": row["conversions"], "line": line}


def _top(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: (-r["conversions"], r["campaign_id"]))[:TOP]


def plain_top(answer: Answer, per_turn: int) -> Plan:
    rows = yield from pages("ads.performance_report", {"days": 30}, "rows")
    top = _top(rows)
    ids = [{"campaign_id": r["campaign_id"], "days": 14} for r in top]
    stats = yield from parallel("ads.campaign_stats", ids, per_turn)
    answer.update(top=[summary(r, s["days"]) for r, s in zip(top, stats, strict=True)])
    yield reply(text_top(answer))


PROGRAM_TOP = f"""\
import asyncio
rows, cursor = [], None
while True:
    page = await ads.performance_report(days=30, cursor=cursor)
    rows += page["rows"]
    cursor = page["next_cursor"]
    if cursor is None:
        break
top = sorted(rows, key=lambda r: (-r["conversions"], r["campaign_id"]))[:{TOP}]
stats = await asyncio.gather(
    *[ads.campaign_stats(campaign_id=r["campaign_id"], days=14) for r in top]
)
out = []
for r, s in zip(top, stats):
    last = sum(d["conversions"] for d in s["days"][-7:])
    before = sum(d["conversions"] for d in s["days"][-14:-7])
    trend = f"{{round(100 * (last - before) / before):+d}}% week over week" if before else "new"
    cpa = round(r["spend"] / r["conversions"], 2)
    ctr = round(100 * r["clicks"] / r["impressions"], 2)
    line = (
        f"{{r['name']}} ({{r['campaign_id']}}, {{r['status']}}): {{r['conversions']:,}} "
        f"conversions for ${{r['spend']:,.2f}} (CPA ${{cpa:.2f}}, CTR {{ctr}}%), {{trend}}"
    )
    out.append({{"id": r["campaign_id"], "conversions": r["conversions"], "line": line}})
{{"top": out}}
"""


def truth_top(data: AdsData) -> Answer:
    rows = [
        {"campaign_id": c.id, "name": c.name, "status": c.status, **_window(c.days, 30)}
        for c in data.campaigns.values()
    ]
    top = _top(rows)
    days = {
        c.id: [{"conversions": d.conversions} for d in c.days[-14:]]
        for c in data.campaigns.values()
    }
    return {"top": [summary(r, days[r["campaign_id"]]) for r in top]}


def text_top(a: Answer) -> str:
    return "The top campaigns by conversions over 30 days:\n" + "\n".join(
        f"{i}. {t['line']}" for i, t in enumerate(a["top"], 1)
    )


# -- the list ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    key: str
    prompt: str
    plain: Callable[[Answer, int], Plan]
    program: str
    truth: Callable[[AdsData], Answer]
    text: Callable[[Answer], str]
    writes: bool = False
    """It changes campaigns: the state after the run is compared too."""


TASKS = (
    Task(
        "1 aggregate",
        "What did all active campaigns spend in total over the last 7 days?",
        plain_aggregate,
        PROGRAM_AGGREGATE,
        truth_aggregate,
        text_aggregate,
    ),
    Task(
        "2 filter, act",
        f"Pause every active campaign whose cost per conversion over the last 30 days "
        f"is above ${MAX_CPA:.0f}.",
        plain_pause,
        PROGRAM_PAUSE,
        truth_pause,
        text_pause,
        writes=True,
    ),
    Task(
        "3 join",
        f"List the campaigns of the account {ACCOUNT} with their click-through rate "
        "over the last 30 days.",
        plain_join,
        PROGRAM_JOIN,
        truth_join,
        text_join,
    ),
    Task(
        "4 page to the end",
        "How many campaigns do we have in each status?",
        plain_count,
        PROGRAM_COUNT,
        truth_count,
        text_count,
    ),
    Task(
        "5 summarize",
        f"Which {TOP} campaigns had the most conversions over the last 30 days? One line on each.",
        plain_top,
        PROGRAM_TOP,
        truth_top,
        text_top,
    ),
)
