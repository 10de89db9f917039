"""The checks of tools against each other: look-alike names and descriptions,
mixed naming styles, and the lethal trifecta across a catalogue.

Look-alikes are found with rapidfuzz (C++, a matrix of every pair at once):
a catalogue of a few thousand tools is millions of pairs, which a pure-Python
edit distance takes minutes over.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from callgate.contract.annotations import ToolAnnotations
from callgate.lint import _words as w
from callgate.lint.facts import ToolFacts

__all__ = ["check_catalog"]

NAME_DISTANCE = 2
"""Names at most this many edits apart (and not equal) look alike..."""
NAME_MIN_LENGTH = 6
"""...when both are at least this long (short names are naturally close)."""
DESCRIPTION_SIMILARITY = 92.0
"""Descriptions at least this similar (rapidfuzz token_sort_ratio, 0-100) look alike..."""
DESCRIPTION_MIN_LENGTH = 40


def check_catalog(tools: Sequence[ToolFacts]) -> Iterator[tuple[ToolFacts, str, str]]:
    """Findings that involve more than one tool: (tool, rule id, what)."""
    yield from _case(tools)
    yield from _lookalike_names(tools)
    yield from _lookalike_descriptions(tools)
    yield from _trifecta(tools)


def _case(tools: Sequence[ToolFacts]) -> Iterator[tuple[ToolFacts, str, str]]:
    """Per namespace (a toolbox, an upstream): servers each keep their own style."""
    groups: dict[str | None, list[ToolFacts]] = {}
    for tool in tools:
        groups.setdefault(tool.namespace, []).append(tool)
    for group in groups.values():
        styles = {t.name: w.style(t.local_name) for t in group}
        counted = Counter(s for s in styles.values() if s is not None)
        if len(counted) < 2:
            continue
        usual, _ = counted.most_common(1)[0]
        for tool in group:
            found = styles[tool.name]
            if found is not None and found != usual:
                yield (
                    tool,
                    "name-case",
                    f"{tool.local_name!r} is {found} case; most of its neighbours' are {usual}",
                )


def _lookalike_names(tools: Sequence[ToolFacts]) -> Iterator[tuple[ToolFacts, str, str]]:
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    names = [t.local_name.lower() for t in tools]
    if len(names) < 2:
        return
    distances = cdist(names, names, scorer=Levenshtein.distance, score_cutoff=NAME_DISTANCE)
    for i, j in zip(*(distances <= NAME_DISTANCE).nonzero(), strict=True):
        a, b = tools[int(i)], tools[int(j)]
        distance = int(distances[i, j])
        if (
            i == j
            or names[i] == names[j]
            or min(len(names[i]), len(names[j])) < NAME_MIN_LENGTH
            or not _confusable(a.local_name, b.local_name, distance)
        ):
            continue
        yield a, "name-lookalike", f"{a.local_name!r} is {distance} edit(s) from {b.name!r}"


def _confusable(a: str, b: str, distance: int) -> bool:
    """Close names that a reader would still mix up: one word apart by a few
    letters (order / orders, set / reset), or a typo apart; not numbered
    siblings (step_1 / step_2) nor names one whole, different word apart
    (check_app_status / check_vpn_status)."""
    from rapidfuzz import fuzz

    strip = str.maketrans("", "", "0123456789")
    if a.translate(strip) == b.translate(strip):
        return False
    wa, wb = w.words(a), w.words(b)
    if len(wa) == len(wb):
        differ = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
        if len(differ) == 1:
            return fuzz.ratio(*differ[0]) >= 50
    return distance <= 1


def _lookalike_descriptions(tools: Sequence[ToolFacts]) -> Iterator[tuple[ToolFacts, str, str]]:
    from rapidfuzz import fuzz
    from rapidfuzz.process import cdist

    texts = [t.description.strip() for t in tools]
    index = [i for i, text in enumerate(texts) if len(text) >= DESCRIPTION_MIN_LENGTH]
    if len(index) < 2:
        return
    chosen = [texts[i].lower() for i in index]
    scores = cdist(
        chosen, chosen, scorer=fuzz.token_sort_ratio, score_cutoff=DESCRIPTION_SIMILARITY
    )
    for i, j in zip(*(scores >= DESCRIPTION_SIMILARITY).nonzero(), strict=True):
        if i == j:
            continue
        a, b = tools[index[int(i)]], tools[index[int(j)]]
        if a.name == b.name:
            continue
        yield a, "description-lookalike", f"described {scores[i, j]:.0f}% like {b.name!r}"


def _trifecta(tools: Sequence[ToolFacts]) -> Iterator[tuple[ToolFacts, str, str]]:
    """The runtime guard's test (callgate.runtime.trifecta) on the catalogue."""

    def effective(tool: ToolFacts) -> ToolAnnotations:
        return tool.annotations.effective(trusted=tool.trusted_source)

    private = [t.name for t in tools if t.private_data]
    untrusted = [
        t.name
        for t in tools
        if not t.trusted_source or (effective(t).open_world and effective(t).read_only)
    ]
    if not private or not untrusted:
        return
    for tool in tools:
        eff = effective(tool)
        if eff.open_world and not eff.read_only and not tool.trusted_source:
            yield (
                tool,
                "risk-trifecta",
                f"can send data out, beside private data ({', '.join(private[:3])}) and "
                f"untrusted content ({', '.join(untrusted[:3])})",
            )
