"""The ranking rules behind the demo's search tools."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from callgate.demo._records import CampaignRecord
from callgate.demo._search import rank_campaigns, rank_notes
from callgate.demo._seed import NOTES

_BASE = CampaignRecord(
    id="C-1",
    tenant="t",
    name="x",
    status="active",
    daily_budget=1,
    currency="USD",
    channel="search",
    start_date=date(2025, 1, 1),
)


def _campaigns(*names: str) -> list[CampaignRecord]:
    return [replace(_BASE, id=f"C-{i}", name=name) for i, name in enumerate(names, 1)]


def test_tiers_beat_length_and_input_order() -> None:
    campaigns = _campaigns(
        "Shoes Spring_Search",  # words (both, any order)
        "Outlet Spring Shoes_Search",  # contains
        "Spring_Shoes",  # exact
        "Spring Shoes_Display",  # prefix
        "Spring Boots",  # some words
        "Autumn Boots",  # no match
    )
    ranked = rank_campaigns("spring shoes", campaigns)
    assert [(m.campaign.name, m.match) for m in ranked] == [
        ("Spring_Shoes", "exact"),
        ("Spring Shoes_Display", "prefix"),
        ("Outlet Spring Shoes_Search", "contains"),
        ("Shoes Spring_Search", "words"),
        ("Spring Boots", "some_words"),
    ]


def test_ties_go_to_the_shorter_name_then_the_id() -> None:
    ranked = rank_campaigns("brand", _campaigns("Brand_Search_Long", "Brand_Video", "Brand_Audio"))
    assert [m.campaign.id for m in ranked] == ["C-2", "C-3", "C-1"]


def test_a_query_without_letters_or_digits_matches_nothing() -> None:
    assert rank_campaigns("__ --", _campaigns("Brand_Search")) == []


def test_notes_rank_title_matches_first_and_skip_stopwords() -> None:
    acme = [n for n in NOTES if n.tenant == "acme"]
    assert rank_notes("how to roll back checkout", acme)[0].id == "N-1"
    assert rank_notes("the on-call rota", acme)[0].id == "N-4"
    assert rank_notes("the", acme)  # only stopwords: searched as given, not dropped
