"""Scoring the rankings of the discovery benchmark, and reading its misses.

Not a benchmark itself: ``discovery.py`` imports it. A *ranking* is the list of
catalogue names a searcher returned for one query, best first (at most
:data:`DEPTH`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from _bfcl_pool import Pool, Query
from _harness import table

from callgate.discovery.text import terms

DEPTH = 10
"""Results asked of every searcher: MRR counts the right function up to this rank."""
SAME_NAME = "another wording of the right function (same BFCL name)"
NEAR_DUPLICATE = "a near-duplicate under another name (descriptions share >= half their terms)"

Rankings = Sequence[list[str]]


def rank_of(name: str, ranked: list[str]) -> int | None:
    return ranked.index(name) + 1 if name in ranked else None


def scores(pool: Pool, queries: Sequence[Query], ranked: Rankings) -> dict[str, float]:
    """Recall@1, recall@5, MRR@10, and recall@1/@5 counting any wording of the right
    name; and recall@1/@5 of each BFCL category."""
    original = {fn.name: fn.original for fn in pool.functions}
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for query, names in zip(queries, ranked, strict=True):
        category = query.entry.rsplit("_", 1)[0]
        counts[category] += 1
        rank = rank_of(pool.right_name(query), names)
        if rank is not None:
            for key in ("recall@1", f"{category} recall@1"):
                sums[key] += rank == 1
            for key in ("recall@5", f"{category} recall@5"):
                sums[key] += rank <= 5
            sums["mrr@10"] += 1 / rank
        same = [i for i, name in enumerate(names) if original.get(name) == query.right[0]]
        sums["by_name_recall@1"] += bool(same) and same[0] == 0
        sums["by_name_recall@5"] += bool(same) and same[0] < 5
    n = len(queries) or 1
    out = {
        key: sums[key] / n
        for key in ("recall@1", "recall@5", "mrr@10", "by_name_recall@1", "by_name_recall@5")
    }
    for category, count in sorted(counts.items()):
        for k in ("recall@1", "recall@5"):
            out[f"{category} {k}"] = sums[f"{category} {k}"] / count
    return out


def _overlap(a: str, b: str) -> float:
    left, right = set(terms(a)), set(terms(b))
    return len(left & right) / max(1, len(left | right))


def misses(
    pool: Pool, queries: Sequence[Query], rankings: Mapping[str, Rankings]
) -> dict[str, Any]:
    """The hybrid's misses at rank 1 in ``pool``, each with what came first instead,
    and how the fusion did against its two inputs."""
    by_name = {fn.name: fn for fn in pool.functions}
    found = []
    firsts: Counter[str] = Counter()
    for i, query in enumerate(queries):
        right = pool.right_name(query)
        ranks = {mode: rank_of(right, ranked[i]) for mode, ranked in rankings.items()}
        first = {mode for mode, rank in ranks.items() if rank == 1}
        firsts["bm25 or dense first"] += bool(first & {"bm25", "dense"})
        if ranks["hybrid"] == 1:
            continue
        for mode in ("bm25", "dense"):
            firsts[f"{mode} first, hybrid not"] += mode in first
        names = rankings["hybrid"][i]
        top = by_name[names[0]] if names else None
        right_fn = by_name[right]
        if top is None:
            kind = "nothing found"
        elif top.original == right_fn.original:
            kind = SAME_NAME
        elif _overlap(top.description, right_fn.description) >= 0.5:
            kind = NEAR_DUPLICATE
        elif top.key in query.offered:
            kind = "another function offered by the same BFCL entry"
        else:
            kind = "a function of another entry"
        query_terms = set(terms(query.text))
        found.append(
            {
                "entry": query.entry,
                "query": query.text,
                "right": right,
                "right_description": right_fn.description,
                "returned": names[:3],
                "returned_description": top.description if top else "",
                "kind": kind,
                "ranks": ranks,
                "shares_a_word": bool(
                    query_terms & set(terms(f"{right_fn.original} {right_fn.description}"))
                ),
            }
        )
    return {"queries": len(queries), "fusion": dict(firsts), "misses": found}


def rank_band(rank: int | None) -> str:
    if rank is None:
        return f"not in the first {DEPTH}"
    return "2nd" if rank == 2 else ("3rd-5th" if rank <= 5 else f"6th-{DEPTH}th")


def print_misses(label: str, analysis: Mapping[str, Any], show: int) -> None:
    found = analysis["misses"]
    total = analysis["queries"]
    print(f"\n#### {label}: the hybrid misses {len(found)} of {total} queries at rank 1\n")
    kinds = Counter(m["kind"] for m in found)
    print(
        table(
            ["first result instead of the right function", "queries"],
            [[k, str(n)] for k, n in kinds.most_common()],
            numeric=frozenset({1}),
        )
    )
    bands = Counter(rank_band(m["ranks"]["hybrid"]) for m in found)
    print("\nThe right function was then: " + ", ".join(f"{b} {n}" for b, n in bands.most_common()))
    no_word = sum(not m["shares_a_word"] for m in found)
    print(
        f"Misses whose query shares no term with the right function's name or description: {no_word}"
    )
    fusion = analysis["fusion"]
    if "dense first, hybrid not" in fusion or any(m["ranks"].get("dense") for m in found):
        print(
            f"Fusion: BM25 alone had the right function first in "
            f"{fusion.get('bm25 first, hybrid not', 0)} of these misses, dense alone in "
            f"{fusion.get('dense first, hybrid not', 0)}; either had it first for "
            f"{fusion.get('bm25 or dense first', 0)} of {total} queries (the hybrid: "
            f"{total - len(found)})."
        )
    real = [m for m in found if m["kind"] != SAME_NAME]
    for m in random.Random(15).sample(real, min(show, len(real))):
        text = " ".join(m["query"].split())
        ranks = ", ".join(f"{mode} {r or '-'}" for mode, r in m["ranks"].items())
        print(
            f'\n- {m["entry"]} ({m["kind"]}; right one at {ranks}): "{text[:220]}"\n'
            f"  right: {m['right']}: {m['right_description'][:140]}\n"
            f"  first: {m['returned'][0] if m['returned'] else '-'}: "
            f"{m['returned_description'][:140]}"
        )
