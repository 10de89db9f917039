"""The tool-retrieval corpus of the discovery benchmark, read from BFCL.

Not a benchmark itself: ``discovery.py`` imports it.

- **Queries**: the entries of BFCL's ``multiple`` and ``live_multiple`` categories
  (``bfcl_eval/data/BFCL_v4_<category>.json``). Each offers a few functions and
  asks for one of them; the right one is the function named by the entry's
  ground truth (``possible_answer/``). The query is the text of the user's turns
  (a live entry may open with a system message, which is not the user's words).
  An entry whose ground truth calls several different functions has no single
  right answer: it is skipped and counted.
- **Pools**: every function of those two categories, pooled into one catalogue
  (the *BFCL pool*), and every function BFCL ships, its other categories and the
  multi-turn API docs included (the *all-BFCL pool*). A function is one
  (name, description) pair: the same pair in many entries is one catalogue
  entry. BFCL reuses names with reworded descriptions (``get_current_weather``
  is described 14 ways in the live entries): such names are made unique with a
  namespace from the category and the first entry defining each variant
  (``lm66.add_postgres_server``: ``lm`` for live_multiple, entry 66); a name with
  one definition keeps its plain form. Each query's right answer is the catalogue
  entry of the exact (name, description) its entry offered.
- The *one-wording pool*: the BFCL pool with one function per name (the wording
  most entries offer), as a real catalogue would have it: no reworded twin can
  take the right function's place, and a query's right answer is its name.
- **Synthetic catalogues** for scale: pool functions dealt into namespaces of
  10-60 tools (``u007.get_current_weather``), as many upstreams would give them
  to a gateway, reshuffled and dealt again until the size is reached.

Parameters are BFCL's, converted to JSON Schema by ``tests/agent/corpus.py``
(the reader of the validation benchmark and the agent tests), as a gate would
hold them.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.agent.corpus import CorpusMissing, bfcl_data_dir, to_json_schema

__all__ = [
    "CorpusMissing",
    "Function",
    "Pool",
    "Query",
    "load_pools",
    "synthetic_catalogue",
]

QUERY_CATEGORIES = ("multiple", "live_multiple")
# Short, word-free prefixes: a namespace must not add a word a query could match.
PREFIXES = {
    "multiple": "m",
    "live_multiple": "lm",
    "simple_python": "sp",
    "simple_java": "sj",
    "simple_javascript": "sjs",
    "parallel": "p",
    "parallel_multiple": "pm",
    "irrelevance": "i",
    "live_simple": "ls",
    "live_parallel": "lp",
    "live_parallel_multiple": "lpm",
    "live_irrelevance": "li",
    "live_relevance": "lr",
}


@dataclass(frozen=True)
class Function:
    """One catalogue entry."""

    name: str
    """Unique in its catalogue (namespaced where BFCL reuses the name)."""
    original: str
    """The name as BFCL writes it."""
    description: str
    parameters: dict[str, Any]
    """JSON Schema."""
    namespace: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.original, self.description)


@dataclass(frozen=True)
class Query:
    entry: str
    """The BFCL entry id."""
    text: str
    right: tuple[str, str]
    """The right function's (original name, description)."""
    offered: tuple[tuple[str, str], ...] = ()
    """Every function the entry offered (the right one among them)."""


@dataclass
class Pool:
    """A catalogue of unique functions and where each (name, description) sits."""

    label: str
    functions: list[Function]
    by_key: dict[tuple[str, str], Function] = field(default_factory=dict)
    renamed: int = 0
    """Functions given a namespace because BFCL reuses their name."""
    note: str = ""
    """How its functions were chosen, for a reader."""

    def right_name(self, query: Query) -> str:
        return self.by_key[query.right].name


@dataclass
class Corpus:
    queries: list[Query]
    bfcl_pool: Pool
    named_pool: Pool
    all_pool: Pool
    tally: dict[str, int]


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _category(path: Path) -> str:
    return path.stem.removeprefix("BFCL_v4_")


def _entry_number(entry_id: str) -> str:
    found = re.search(r"_(\d+)(?:-|$)", entry_id)
    return found.group(1) if found else "0"


def _user_text(question: Sequence[Sequence[dict[str, Any]]]) -> str:
    return "\n".join(
        str(message.get("content", ""))
        for turn in question
        for message in turn
        if message.get("role") == "user"
    )


@dataclass
class _Definition:
    original: str
    description: str
    parameters: dict[str, Any]
    namespace: str


def _schema(parameters: Any) -> dict[str, Any] | None:
    try:
        converted = to_json_schema(parameters)
    except ValueError:  # a type outside BFCL's vocabulary: not a usable tool
        return None
    if not isinstance(converted, dict):
        return None
    converted.setdefault("type", "object")
    return converted


def _collect(
    definitions: dict[tuple[str, str], _Definition],
    category: str,
    entries: Sequence[dict[str, Any]],
    uses: Counter[tuple[str, str]] | None = None,
) -> int:
    """Add the entries' functions (first definition of each pair wins), counting
    the entries offering each in ``uses``; returns how many could not be converted."""
    skipped = 0
    for entry in entries:
        namespace = PREFIXES.get(category, category[:3]) + _entry_number(entry.get("id", ""))
        for fn in entry.get("function") or []:
            key = (fn["name"], fn.get("description", ""))
            if uses is not None:
                uses[key] += 1
            if key in definitions:
                continue
            schema = _schema(fn.get("parameters", {}))
            if schema is None:
                skipped += 1
                continue
            definitions[key] = _Definition(key[0], key[1], schema, namespace)
    return skipped


def _pool(label: str, definitions: dict[tuple[str, str], _Definition]) -> Pool:
    uses = Counter(d.original for d in definitions.values())
    functions: list[Function] = []
    taken: set[str] = set()
    renamed = 0
    for d in definitions.values():
        namespace = d.namespace if uses[d.original] > 1 else ""
        name = f"{namespace}.{d.original}" if namespace else d.original
        suffix = 2
        while name in taken:  # two variants first defined in one entry
            name = f"{namespace}{'abcdefghij'[suffix % 10]}.{d.original}"
            suffix += 1
        taken.add(name)
        renamed += bool(namespace)
        functions.append(Function(name, d.original, d.description, d.parameters, namespace))
    note = (
        f"unique name + description; {renamed:,} namespaced as BFCL gives their name "
        "other descriptions too"
    )
    return Pool(label, functions, {f.key: f for f in functions}, renamed, note)


def _one_per_name(
    label: str, definitions: dict[tuple[str, str], _Definition], uses: Counter[tuple[str, str]]
) -> Pool:
    """One function per BFCL name: the wording most entries offer (the first on a
    tie). Every wording's query is answered by it."""
    best: dict[str, tuple[str, str]] = {}
    for key in definitions:
        kept = best.get(key[0])
        if kept is None or uses[key] > uses[kept]:
            best[key[0]] = key
    functions = [
        Function(name, name, definitions[key].description, definitions[key].parameters)
        for name, key in best.items()
    ]
    by_name = {fn.name: fn for fn in functions}
    note = "one per BFCL name, the wording most entries offer; it answers every wording's queries"
    return Pool(label, functions, {key: by_name[key[0]] for key in definitions}, 0, note)


def load_pools() -> Corpus:
    """The queries and both pools.

    Raises:
        CorpusMissing: ``bfcl-eval`` is not installed.
    """
    data = bfcl_data_dir()
    tally: Counter[str] = Counter()
    queries: list[Query] = []
    definitions: dict[tuple[str, str], _Definition] = {}
    uses: Counter[tuple[str, str]] = Counter()
    for category in QUERY_CATEGORIES:
        path = data / f"BFCL_v4_{category}.json"
        entries = list(_json_lines(path))
        tally["functions not converted"] += _collect(definitions, category, entries, uses)
        answers = {a["id"]: a for a in _json_lines(data / "possible_answer" / path.name)}
        for entry in entries:
            tally[f"{category} entries"] += 1
            offered = {fn["name"]: fn for fn in entry["function"]}
            truth = answers.get(entry["id"], {}).get("ground_truth", [])
            named = {name for call in truth if isinstance(call, dict) for name in call}
            if len(named) != 1:
                tally["entries skipped: not one right function"] += 1
                continue
            fn = offered.get(next(iter(named)))
            if fn is None or (fn["name"], fn.get("description", "")) not in definitions:
                tally["entries skipped: right function not offered"] += 1
                continue
            queries.append(
                Query(
                    entry["id"],
                    _user_text(entry["question"]),
                    (fn["name"], fn.get("description", "")),
                    tuple((f["name"], f.get("description", "")) for f in entry["function"]),
                )
            )
    bfcl_pool = _pool("BFCL pool (multiple + live_multiple)", definitions)
    named_pool = _one_per_name("BFCL pool, one wording per name", definitions, uses)

    everything = dict(definitions)
    for path in sorted(data.glob("BFCL_v4_*.json")):
        if _category(path) in QUERY_CATEGORIES:
            continue
        try:
            entries = list(_json_lines(path))
        except json.JSONDecodeError:
            continue  # BFCL_v4_format_sensitivity.json is one JSON object, no functions
        tally["functions not converted"] += _collect(everything, _category(path), entries)
    for path in sorted((data / "multi_turn_func_doc").glob("*.json")):
        # One function a line; each file is one API, its name the namespace.
        fake_entries = [{"id": f"mt_{path.stem}", "function": list(_json_lines(path))}]
        before = len(everything)
        tally["functions not converted"] += _collect(everything, f"mt_{path.stem}", fake_entries)
        for key in list(everything)[before:]:
            everything[key].namespace = path.stem
    all_pool = _pool("all-BFCL pool", everything)
    tally["queries"] = len(queries)
    return Corpus(queries, bfcl_pool, named_pool, all_pool, dict(tally))


def synthetic_catalogue(pool: Pool, size: int, *, seed: int = 15) -> list[Function]:
    """``size`` functions dealt from ``pool`` into namespaces of 10-60 tools
    (``u000``, ``u001``...), the pool reshuffled and dealt again as often as needed:
    a catalogue as many upstreams would make one, each function's name unique."""
    rng = random.Random(seed)
    out: list[Function] = []
    deck: list[Function] = []
    group = 0
    while len(out) < size:
        room = min(rng.randint(10, 60), size - len(out))
        namespace = f"u{group:03d}"
        seen: set[str] = set()
        later: list[Function] = []
        while room:
            if not deck:
                deck = list(pool.functions)
                rng.shuffle(deck)
            fn = deck.pop()
            if fn.original in seen:  # one upstream names each tool once
                later.append(fn)
                continue
            seen.add(fn.original)
            out.append(
                Function(
                    f"{namespace}.{fn.original}",
                    fn.original,
                    fn.description,
                    fn.parameters,
                    namespace,
                )
            )
            room -= 1
        deck.extend(later)
        group += 1
    return out


def variants(pool: Pool) -> dict[str, list[str]]:
    """The catalogue names of each BFCL name (more than one where it is reused)."""
    out: dict[str, list[str]] = defaultdict(list)
    for fn in pool.functions:
        out[fn.original].append(fn.name)
    return dict(out)
