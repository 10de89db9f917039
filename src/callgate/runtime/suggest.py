"""Close-match suggestions for names and values the model got slightly wrong."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, candidates: Iterable[str], *, n: int = 3) -> list[str]:
    """Candidates resembling ``word``, best first (case-insensitive)."""
    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)
    out = [lowered[h] for h in hits]
    # A name given without its toolbox prefix, or with a wrong one, is a near miss too.
    tail = word.rsplit(".", 1)[-1].lower()
    for cand in pool:
        if cand not in out and cand.rsplit(".", 1)[-1].lower() == tail:
            out.insert(0, cand)
    return out[:n]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` or an empty string."""
    hits = close_matches(word, candidates)
    if not hits:
        return ""
    if len(hits) == 1:
        return f" Did you mean {hits[0]!r}?"
    return " Did you mean " + ", ".join(repr(h) for h in hits[:-1]) + f" or {hits[-1]!r}?"
