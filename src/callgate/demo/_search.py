"""Small, predictable text matching for the demo's search tools.

Names are compared by their words (letters and digits), so ``Autumn Sale Search``
matches ``Autumn Sale_Search`` exactly: separators and case do not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from callgate.demo._records import CampaignRecord, NoteRecord

Match = Literal["exact", "prefix", "contains", "words", "some_words"]

_TIER: dict[Match, int] = {"exact": 0, "prefix": 1, "contains": 2, "words": 3, "some_words": 4}
_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "by", "for", "how", "in", "is", "of", "on", "or", "the", "to", "what"}
)


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


@dataclass(kw_only=True, frozen=True)
class CampaignMatch:
    campaign: CampaignRecord
    match: Match
    matched_words: int


def _word_hits(query_words: Sequence[str], name_words: Sequence[str]) -> int:
    return sum(1 for q in query_words if any(w.startswith(q) for w in name_words))


def match_campaign(query: str, campaign: CampaignRecord) -> CampaignMatch | None:
    """How ``campaign``'s name matches ``query``, or None when it does not."""
    query_words = words(query)
    name_words = words(campaign.name)
    q, name = " ".join(query_words), " ".join(name_words)
    if not q:
        return None
    hits = _word_hits(query_words, name_words)
    match: Match | None
    if name == q:
        match = "exact"
    elif name.startswith(q):
        match = "prefix"
    elif q in name:
        match = "contains"
    elif hits == len(query_words):
        match = "words"
    elif hits:
        match = "some_words"
    else:
        match = None
    return CampaignMatch(campaign=campaign, match=match, matched_words=hits) if match else None


def rank_campaigns(query: str, campaigns: Iterable[CampaignRecord]) -> list[CampaignMatch]:
    """Matching campaigns, best first: exact name, prefix, substring, all words, some words.

    Ties go to the name with more matched words, then the shorter name, then the id.
    """
    found = [m for c in campaigns if (m := match_campaign(query, c)) is not None]
    return sorted(
        found,
        key=lambda m: (
            _TIER[m.match],
            -m.matched_words,
            len(m.campaign.name),
            m.campaign.id,
        ),
    )


def _note_score(query_words: Sequence[str], note: NoteRecord) -> int:
    title, summary = words(note.title), words(note.summary)
    tags = [w for tag in note.tags for w in words(tag)]
    body = note.body.casefold()
    score = 0
    for q in query_words:
        score += 3 if any(w.startswith(q) for w in title) else 0
        score += 2 if any(w.startswith(q) for w in tags) else 0
        score += 2 if any(w.startswith(q) for w in summary) else 0
        score += 1 if q in body else 0
    return score


def rank_notes(query: str, notes: Iterable[NoteRecord]) -> list[NoteRecord]:
    """Notes mentioning the query's words, best first (title over tags over body)."""
    query_words = [w for w in words(query) if w not in _STOPWORDS] or words(query)
    scored = [(s, n) for n in notes if (s := _note_score(query_words, n)) > 0]
    scored.sort(key=lambda pair: (-pair[0], -pair[1].updated_at.timestamp(), pair[1].id))
    return [note for _, note in scored]
