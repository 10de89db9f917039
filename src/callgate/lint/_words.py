"""Word lists and text tests the rules share (heuristics, kept in one place)."""

from __future__ import annotations

import re


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

VERBS = _set("""get list find search query fetch read show describe lookup look view count check
    validate verify compare calculate compute convert estimate predict analyze analyse
    summarize translate generate render format parse extract resolve detect classify
    create add insert make new post put set update edit modify change patch rename move
    copy apply preview approve reject cancel close open start stop run execute call invoke
    send notify email message publish share upload download import export sync refresh
    delete remove drop purge destroy revoke wipe erase clear reset restore archive
    book reserve order buy sell pay refund transfer charge schedule assign unassign
    enable disable lock unlock login logout register subscribe unsubscribe follow
    plan recommend rank sort filter merge split join build deploy install uninstall
    test evaluate score record log track monitor watch ping fork clone commit push pull
    play pause resume sleep wait retry submit exchange return mark toggle grant deny
    retrieve multiply divide subtract sum solve simulate draw plot identify locate match
    lookup search_for recognize transcribe train load save store select collect""")
DESTRUCTIVE = _set("""delete remove drop purge destroy revoke wipe erase clear reset truncate terminate
    kill uninstall overwrite cancel unsubscribe""")
LISTING = _set("list search all history browse scan")
"""Words that make a name a listing by themselves..."""
LOOKUP = _set("find query lookup get fetch retrieve")
"""...and words that do with a plural object (find_orders, not find_user_id)."""
PAGING = _set("""limit max_results maxresults max_items page page_size pagesize per_page perpage
    page_token pagetoken cursor offset top count n size max next_token""")
NOT_PLURAL = _set(
    "details status info infos settings stats news address process class analysis basis series species bus access"
)
RESULT_LISTS = _set("items results data records rows entries hits matches list values objects")
CONCISE = _set("response_format detail detail_level verbosity fields view format")
TRUSTED = _set("""tenant tenant_id tenantid org_id organization_id org api_key apikey access_token
    auth_token token password passwd secret client_secret caller current_user requester
    acting_user session_token""")
IDENTIFIED = _set("""user customer account order product item file project repo repository issue
    document doc campaign ticket employee patient member group team invoice payment
    reservation booking flight device host vm instance cluster folder channel""")
FORMATS = (
    ("date", re.compile(r"(^|_)(date|day|birthday|dob)($|_)")),
    ("date-time", re.compile(r"(^|_)(time|datetime|timestamp|at|since|until|start|end)($|_)")),
    ("email", re.compile(r"(^|_)e?mail($|_)")),
    ("uri", re.compile(r"(^|_)(url|uri|link|href|website)($|_)")),
)
WHEN = re.compile(
    r"\buse (this|it|when|to|for|only|instead)\b|\bwhen\b|\binstead\b|\bdo not\b|\bdon't\b"
    r"|\bonly (for|if|when)\b|\bunless\b|\bbefore\b|\bafter\b|\bif you\b|\bfor (example|instance)\b",
    re.IGNORECASE,
)
LISTED_VALUES = re.compile(
    r"\b(one of|either|must be|can be|should be|is one of|possible values|allowed values"
    r"|valid values|options are|choose from|accepted values)\b[^.;]{0,12}?['\"`]",
    re.IGNORECASE,
)
"""Prose that lists a closed set of values (a quoted value soon after)..."""
EXAMPLES = re.compile(r"\bsuch as\b|\be\.g\.|\betc\b|\bfor example\b|\blike ['\"]", re.IGNORECASE)
"""...unless they are examples of an open set."""
EXAMPLE_GIVEN = re.compile(
    r"\be\.g\.|\bfor example\b|\bsuch as\b|\blike\b|\bexample\b|['\"`][^'\"`]+['\"`]",
    re.IGNORECASE,
)
"""A description that shows a value (quoted, or after e.g.)."""
NEXT_STEP = re.compile(
    r"\b(use|try|call|ask|check|first|instead|retry|wait|provide|give|pass|choose|pick"
    r"|must|should|need|needs|set|add|remove|run|see|contact|request|expected|allowed"
    r"|valid|one of|at most|at least)\b",
    re.IGNORECASE,
)
MODE_FLAG = re.compile(
    r"(^|_)(asc|ascending|desc|descending|reverse|sort|order|mode|verbose|detailed|style)($|_)"
)


def words(name: str) -> list[str]:
    """``getUserID`` -> ``["get", "user", "id"]``; ``orders_find`` -> ``["orders", "find"]``."""
    return [w.lower() for w in WORD.findall(name)]


def style(name: str) -> str | None:
    """``snake``, ``camel``, ``kebab``, or None for one lowercase word (fits any)."""
    if "-" in name and "_" not in name:
        return "kebab"
    if "_" in name:
        return "snake" if name == name.lower() else "mixed"
    if any(c.isupper() for c in name[1:]):
        return "camel"
    return None
