"""The search index over tools and skills: BM25, dense vectors, rank fusion.

A :class:`Document` is what is searched: a tool (from its contract) or a skill.
:class:`SearchIndex` holds the current set and answers :meth:`SearchIndex.search`:

- **BM25** (the ``bm25s`` library, sparse matrices) over the document's name,
  title, description, parameter names and descriptions and tags, turned into
  terms by :func:`callgate.discovery.text.terms`; the name counts three times,
  title and tags twice, so a query naming a tool finds it first.
- **Dense vectors** from an :class:`~callgate.discovery.embeddings.Encoder`
  (optional): cosine similarity between the query and each document's vector,
  the mean of two encodings: of everything indexed, and of the name's words with
  the description alone. The short text keeps a long parameter list from
  drowning what the tool is for; the mean of the two found the right tool first
  for 1.3 points more BFCL queries than either alone (docs/benchmarks.md).
- **Fusion** of the two scores, each scaled onto [0, 1] over the documents
  taking part (BM25 from 0 to its best, cosines from their lowest to their
  best), half each. On BFCL this beat reciprocal rank fusion, which keeps only
  ranks and so loses how far ahead a clear winner is.

Only documents a caller may see take part (``allowed``): the filter is applied
before ranking, so a hidden tool never takes a place in the results.

Work per document is kept by its ``digest`` (a tool's contract hash): an
:meth:`~SearchIndex.update` with one changed tool among 10,000 re-reads that
one; the BM25 matrix itself is rebuilt (a fraction of a second at 10,000 tools,
see docs/benchmarks.md). Vectors are encoded in batches apart from updates
(:meth:`~SearchIndex.encode_missing`) and until every document has one, search
is BM25 alone and :attr:`SearchIndex.dense_ready` says so.

Thread-safe: updates replace an immutable snapshot under a lock; searches read
whichever snapshot is current.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from callgate.discovery.text import name_words, terms

if TYPE_CHECKING:
    import numpy as np

    from callgate.contract import ToolSpec
    from callgate.discovery.embeddings import Encoder

__all__ = [
    "Document",
    "Hit",
    "SearchIndex",
    "SearchMode",
    "function_document",
    "tool_document",
]

SearchMode = Literal["hybrid", "bm25", "dense"]

BM25_WEIGHT = 0.5
"""BM25's share of the fused score. Measured on BFCL (docs/benchmarks.md):
shares from 0.4 to 0.6 all beat reciprocal rank fusion, 0.5 best."""
CANDIDATES = 50
"""How many of each ranking are fused."""
VECTOR_RECIPE = "full+short"
"""How a document's vector is made (see the module docs): part of the key under
which vectors are cached, so vectors made another way are never mixed in."""


@dataclass(frozen=True, kw_only=True)
class Document:
    """One searchable thing: a tool or a skill."""

    key: str
    """Unique in an index: ``tool:<full name>``, ``skill:<name>``."""
    kind: Literal["tool", "skill"]
    name: str
    """The tool's full name (``ops.deploy_status``) or the skill's name."""
    summary: str
    """One line for search results."""
    fields: tuple[tuple[str, int], ...]
    """The texts BM25 counts, each with its weight (how many times it counts)."""
    digest: str
    """Changes whenever anything indexed changes (a tool's contract hash)."""
    namespace: str = ""
    """The toolbox (or upstream) of a tool; ``skills`` for a skill."""
    tags: frozenset[str] = frozenset()
    risk: str | None = None
    """A tool's risk tier (``read``, ``write``, ``high``...), None for a skill."""
    description: str = ""

    @property
    def text(self) -> str:
        """Everything indexed, each field once, most telling first."""
        return ". ".join(text for text, _ in self.fields if text)

    @property
    def dense_texts(self) -> tuple[str, str]:
        """What a dense encoder reads: :attr:`text`, and the name's words with the
        description (the two vectors are averaged)."""
        local = self.name.removeprefix(f"{self.namespace}.") if self.namespace else self.name
        short = ". ".join(part for part in (name_words(local), self.description) if part)
        return self.text, short


def _schema_fields(parameters: Mapping[str, Any] | None) -> tuple[str, str]:
    """(parameter names, parameter descriptions) of a JSON Schema object, one level
    of nesting included: what a query is likely to mention (``email``, ``city``)."""
    names: list[str] = []
    descriptions: list[str] = []

    def walk(schema: Mapping[str, Any], depth: int) -> None:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        for name, sub in properties.items():
            names.append(str(name))
            if not isinstance(sub, Mapping):
                continue
            text = sub.get("description")
            if isinstance(text, str):
                descriptions.append(text)
            enum = sub.get("enum")
            if isinstance(enum, list):
                descriptions.append(" ".join(str(v) for v in enum[:20]))
            if depth < 1:
                walk(sub, depth + 1)
                items = sub.get("items")
                if isinstance(items, Mapping):
                    walk(items, depth + 1)

    if parameters:
        walk(parameters, 0)
    return " ".join(names), " ".join(descriptions)


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def function_document(
    name: str,
    description: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    namespace: str = "",
    tags: Iterable[str] = (),
    title: str | None = None,
    kind: Literal["tool", "skill"] = "tool",
    risk: str | None = None,
    digest: str | None = None,
) -> Document:
    """The document of a function given as JSON Schema (any catalogue's tools)."""
    tag_set = frozenset(tags)
    param_names, param_texts = _schema_fields(parameters)
    local = name.removeprefix(f"{namespace}.") if namespace else name
    fields = (
        (local, 3),
        (title or "", 2),
        (" ".join(sorted(tag_set)), 2),
        (description, 1),
        (param_names, 1),
        (param_texts, 1),
        (namespace, 1),
    )
    if digest is None:
        blob = json.dumps([name, description, parameters, sorted(tag_set), title], default=str)
        digest = "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
    return Document(
        key=f"{kind}:{name}",
        kind=kind,
        name=name,
        summary=_one_line(title + ": " + description if title and description else description),
        fields=tuple((text, weight) for text, weight in fields if text),
        digest=digest,
        namespace=namespace,
        tags=tag_set,
        risk=risk,
        description=description,
    )


def tool_document(spec: ToolSpec) -> Document:
    """The document of one of a gate's tools (the model-facing schema: trusted
    fields are not searchable, as the model never fills them)."""
    return function_document(
        spec.name,
        spec.description,
        spec.input_schema,
        namespace=spec.toolbox,
        tags=spec.tags,
        title=spec.title,
        risk=spec.risk.value,
        digest=spec.contract_hash,
    )


@dataclass(frozen=True)
class Hit:
    """One search result."""

    document: Document
    score: float
    """The fused score (higher is better); comparable only within one search."""
    bm25_rank: int | None = None
    dense_rank: int | None = None


@dataclass
class _Snapshot:
    documents: tuple[Document, ...] = ()
    positions: dict[str, int] = field(default_factory=dict)
    bm25: Any = None
    vocabulary: Mapping[str, int] = field(default_factory=dict)
    matrix: np.ndarray | None = None
    generation: int = 0


class SearchIndex:
    """Documents and what finds them (see the module docs).

    Args:
        encoder: makes dense vectors; None: BM25 only.
        bm25_weight: BM25's share of the fused score (the dense one's is the rest).
    """

    def __init__(self, *, encoder: Encoder | None = None, bm25_weight: float = BM25_WEIGHT) -> None:
        self.encoder = encoder
        self.bm25_weight = bm25_weight
        self._snapshot = _Snapshot()
        self._terms: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    # -- building ----------------------------------------------------------------
    @property
    def documents(self) -> tuple[Document, ...]:
        return self._snapshot.documents

    @property
    def generation(self) -> int:
        """Goes up with every update: what a cached filter mask is valid for."""
        return self._snapshot.generation

    def update(self, documents: Iterable[Document]) -> int:
        """Make ``documents`` the whole indexed set; returns how many were new or
        changed (their digest was not indexed before).

        Raises:
            ValueError: two documents share a key.
        """
        docs = tuple(documents)
        positions: dict[str, int] = {}
        for i, doc in enumerate(docs):
            if doc.key in positions:
                raise ValueError(f"two documents are keyed {doc.key!r}")
            positions[doc.key] = i
        with self._lock:
            fresh = 0
            corpus: list[list[str]] = []
            for doc in docs:
                cached = self._terms.get(doc.digest)
                if cached is None:
                    fresh += 1
                    cached = self._terms[doc.digest] = [
                        term for text, weight in doc.fields for term in terms(text) * weight
                    ]
                corpus.append(cached)
            live = {doc.digest for doc in docs}
            for digest in [d for d in self._terms if d not in live]:
                del self._terms[digest]
            for digest in [d for d in self._vectors if d not in live]:
                del self._vectors[digest]
            bm25, vocabulary = _bm25(corpus)
            self._snapshot = _Snapshot(
                documents=docs,
                positions=positions,
                bm25=bm25,
                vocabulary=vocabulary,
                matrix=self._matrix(docs),
                generation=self._snapshot.generation + 1,
            )
            return fresh

    def missing_vectors(self) -> list[Document]:
        """Documents without a dense vector yet (none without an encoder)."""
        if self.encoder is None:
            return []
        return [doc for doc in self._snapshot.documents if doc.digest not in self._vectors]

    def add_vectors(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Vectors by digest (from a cache, or :meth:`encode_missing`); dense search
        starts once every document has one."""
        with self._lock:
            self._vectors.update(vectors)
            snapshot = self._snapshot
            if snapshot.matrix is None:
                matrix = self._matrix(snapshot.documents)
                if matrix is not None:
                    self._snapshot = _Snapshot(
                        documents=snapshot.documents,
                        positions=snapshot.positions,
                        bm25=snapshot.bm25,
                        vocabulary=snapshot.vocabulary,
                        matrix=matrix,
                        generation=snapshot.generation,
                    )

    def encode_missing(self, *, batch: int = 256) -> dict[str, np.ndarray]:
        """Encode the documents still without a vector (slow: call it off the event
        loop); returns the new vectors by digest, to be cached."""
        if self.encoder is None:
            return {}
        made: dict[str, np.ndarray] = {}
        missing = self.missing_vectors()
        for start in range(0, len(missing), batch):
            chunk = missing[start : start + batch]
            new = dict(
                zip(
                    (doc.digest for doc in chunk),
                    _document_vectors(self.encoder, chunk),
                    strict=True,
                )
            )
            self.add_vectors(new)
            made.update(new)
        return made

    @property
    def dense_ready(self) -> bool:
        """Whether searches use dense vectors (an encoder, and every document encoded)."""
        return self.encoder is not None and self._snapshot.matrix is not None

    def _matrix(self, docs: Sequence[Document]) -> np.ndarray | None:
        if self.encoder is None or not docs:
            return None
        if any(doc.digest not in self._vectors for doc in docs):
            return None
        import numpy as np

        return np.stack([self._vectors[doc.digest] for doc in docs]).astype(np.float32)

    # -- searching -----------------------------------------------------------------
    def mask(self, allowed: Callable[[Document], bool]) -> np.ndarray:
        """A filter for :meth:`search` from a predicate (cache it per
        :attr:`generation` and caller: it costs a call per document)."""
        import numpy as np

        return np.fromiter(
            (allowed(doc) for doc in self._snapshot.documents),
            dtype=bool,
            count=len(self._snapshot.documents),
        )

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        allowed: np.ndarray | Collection[str] | None = None,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        """The best ``limit`` documents for ``query``, best first.

        Args:
            allowed: only these take part: a mask from :meth:`mask` (for this
                :attr:`generation`), or a collection of document keys.
            mode: ``hybrid`` fuses BM25 and dense rankings (BM25 alone until
                :attr:`dense_ready`); ``bm25`` and ``dense`` use one.
        """
        import numpy as np

        snap = self._snapshot
        count = len(snap.documents)
        if count == 0 or limit < 1:
            return []
        if allowed is None:
            mask = None
        elif isinstance(allowed, np.ndarray):
            if allowed.shape != (count,):
                raise ValueError("the mask was made for another generation of the index")
            mask = allowed
        else:
            mask = np.zeros(count, dtype=bool)
            for key in allowed:
                position = snap.positions.get(key)
                if position is not None:
                    mask[position] = True
        bm25: np.ndarray | None = None
        dense: np.ndarray | None = None
        fused: np.ndarray | None
        if mode in ("hybrid", "bm25"):
            bm25 = self._bm25_scores(snap, query)
        if mode in ("hybrid", "dense") and snap.matrix is not None and self.encoder is not None:
            dense = snap.matrix @ self.encoder.encode([query], kind="query")[0]
        bm25_ranking = _top(bm25, mask, CANDIDATES, positive=True) if bm25 is not None else []
        dense_ranking = _top(dense, mask, CANDIDATES, positive=False) if dense is not None else []
        if bm25 is not None and dense is not None:
            fused = self.bm25_weight * _scaled(bm25, mask, floor=0.0) + (
                1 - self.bm25_weight
            ) * _scaled(dense, mask)
            best = _top(fused, mask, limit, positive=False)
        else:
            fused = bm25 if bm25 is not None else dense
            best = (bm25_ranking or dense_ranking)[:limit]
        bm25_at = {p: r + 1 for r, p in enumerate(bm25_ranking)}
        dense_at = {p: r + 1 for r, p in enumerate(dense_ranking)}
        return [
            Hit(
                document=snap.documents[p],
                score=float(fused[p]) if fused is not None else 0.0,
                bm25_rank=bm25_at.get(p),
                dense_rank=dense_at.get(p),
            )
            for p in best
        ]

    def _bm25_scores(self, snap: _Snapshot, query: str) -> np.ndarray:
        import numpy as np

        wanted = [term for term in terms(query) if term in snap.vocabulary]
        if not wanted or snap.bm25 is None:
            return np.zeros(len(snap.documents), dtype=np.float32)
        return np.asarray(snap.bm25.get_scores(wanted))


def _document_vectors(encoder: Encoder, docs: Sequence[Document]) -> np.ndarray:
    """One unit vector per document: the normalised mean of its two texts' vectors."""
    import numpy as np

    matrix = encoder.encode([text for doc in docs for text in doc.dense_texts], kind="document")
    mean = (matrix[0::2] + matrix[1::2]) / 2
    norms = np.linalg.norm(mean, axis=1, keepdims=True)
    return (mean / np.where(norms > 0, norms, 1)).astype(np.float32)


def _bm25(corpus: list[list[str]]) -> tuple[Any, Mapping[str, int]]:
    if not corpus:
        return None, {}
    import bm25s

    model = bm25s.BM25(k1=1.2, b=0.75)
    model.index(corpus, show_progress=False)
    return model, model.vocab_dict


def _scaled(
    scores: np.ndarray, mask: np.ndarray | None, *, floor: float | None = None
) -> np.ndarray:
    """``scores`` mapped onto [0, 1] over the documents ``mask`` allows: from
    ``floor`` (or the lowest score) to the highest."""
    import numpy as np

    shown = scores if mask is None else scores[mask]
    if shown.size == 0:
        return np.zeros_like(scores, dtype=np.float32)
    low = float(shown.min()) if floor is None else floor
    span = float(shown.max()) - low
    if span <= 0:
        return np.zeros_like(scores, dtype=np.float32)
    return ((scores - low) / span).astype(np.float32)


def _top(scores: np.ndarray, mask: np.ndarray | None, k: int, *, positive: bool) -> list[int]:
    """Positions of the ``k`` best scores among those ``mask`` allows (and, with
    ``positive``, above zero: a BM25 score of 0 means no term matched)."""
    import numpy as np

    scores = scores.astype(np.float32, copy=True)
    if mask is not None:
        scores[~mask] = -np.inf
    if positive:
        scores[scores <= 0] = -np.inf
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.argsort(-scores[part], kind="stable")]
    return [int(p) for p in order if np.isfinite(scores[p])]
