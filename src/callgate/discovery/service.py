"""A gate's tool search: its index kept in step with its toolboxes, searched per caller.

:class:`Discovery` is what the meta-tools (:mod:`callgate.discovery.meta`), the
agent loop and the MCP server use. It layers the routing:

1. **Hard filters** by who asks: only tools the caller may call (scopes,
   tenant) take part, and tools a ``hide`` rule matches never do. The filter is
   applied inside the index, before ranking (:meth:`SearchIndex.search`).
2. **Rules**: ``mention`` tools are found only when the query names them;
   ``pin`` tools are offered directly and left out of results.
3. **Retrieval**: BM25 fused with dense vectors where the ``search`` extra
   is installed (BM25 alone otherwise, and the answer says so).
4. **Signals**: a tool that failed often in the last hour moves down, one
   used often moves up a little; both only reorder close scores.

The index follows the registry: a changed toolbox or upstream tool list is
picked up by the next search, re-reading only documents whose digest changed.
Vectors are encoded in a background thread (searches meanwhile use BM25) and
kept in the store by digest, so a restart does not encode them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from callgate.discovery.index import (
    VECTOR_RECIPE,
    Document,
    Hit,
    SearchIndex,
    function_document,
    tool_document,
)
from callgate.discovery.settings import DiscoverySettings
from callgate.discovery.text import terms

if TYPE_CHECKING:
    import numpy as np

    from callgate.clock import Clock
    from callgate.contract import Principal, ToolSpec
    from callgate.discovery.embeddings import Encoder
    from callgate.discovery.skills import Skill
    from callgate.runtime.registry import Registry
    from callgate.store import Store

__all__ = ["Discovery", "SearchOutcome"]

_log = logging.getLogger("callgate.discovery")

META_TOOLBOX = "callgate"
"""Tools of this toolbox (the gate's own) are never indexed."""
USAGE_WINDOW = timedelta(hours=1)
USAGE_REFRESH = timedelta(seconds=60)
MIN_CALLS_FOR_FAILURE = 5
"""A failure rate over fewer calls says nothing yet."""


@dataclass(frozen=True)
class SearchOutcome:
    """What one search found, and how."""

    hits: list[Hit]
    dense: bool
    """Whether dense vectors took part (else BM25 alone)."""
    note: str | None = None
    """Why dense vectors did not take part, when that is worth saying."""


def skill_document(skill: Skill) -> Document:
    """The document of a skill: its name and description (and the tools it names)."""
    return function_document(
        skill.name,
        skill.description,
        None,
        namespace="skills",
        tags=("skill",),
        kind="skill",
        digest=skill.digest,
    )


class Discovery:
    """Search over a registry's tools (and skills) for one gate.

    Args:
        registry: the gate's tools.
        settings: ``[discovery]``.
        store: where vectors are cached and usage is counted (the gate's).
        clock: the gate's clock (usage windows).
        skills: the skills to index, by name.
    """

    def __init__(
        self,
        registry: Registry,
        settings: DiscoverySettings,
        *,
        store: Store,
        clock: Clock,
        skills: Mapping[str, Skill] | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.skills: dict[str, Skill] = dict(skills or {})
        self._store = store
        self._clock = clock
        self.index = SearchIndex()
        self._indexed_at = -1
        self._tool_docs: dict[str, Document] = {}
        self._masks: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._encoder_state = "unloaded" if settings.embeddings != "off" else "off"
        self._encoder_note: str | None = (
            None if settings.embeddings != "off" else "dense search is off ([discovery] embeddings)"
        )
        self._encoding: asyncio.Task[None] | None = None
        self._usage: dict[str, tuple[int, int]] = {}
        self._usage_at: Any = None
        self._lock = asyncio.Lock()

    @property
    def catalogue_generation(self) -> int:
        """Goes up whenever a toolbox is added or changes: what views of the
        catalogue (a listing's size, say) are cached by."""
        return self.registry.generation

    # -- keeping the index current ---------------------------------------------------
    def _documents(self) -> list[Document]:
        docs: list[Document] = []
        kept: dict[str, Document] = {}
        for spec in self.registry.specs():
            if spec.toolbox == META_TOOLBOX:
                continue
            doc = self._tool_docs.get(spec.contract_hash)
            if doc is None or doc.name != spec.name:
                doc = tool_document(spec)
            kept[spec.contract_hash] = doc
            docs.append(doc)
        self._tool_docs = kept
        docs.extend(skill_document(skill) for skill in self.skills.values())
        return docs

    async def current(self) -> SearchIndex:
        """The index, brought up to date with the registry first if it changed."""
        if self._indexed_at != self.registry.generation:
            async with self._lock:
                generation = self.registry.generation
                if self._indexed_at != generation:
                    docs = self._documents()
                    # A 10,000-tool rebuild takes a few hundred ms: off the loop.
                    await asyncio.to_thread(self.index.update, docs)
                    self._indexed_at = generation
                    self._masks.clear()
        await self._ensure_vectors()
        return self.index

    async def _ensure_vectors(self) -> None:
        if self._encoder_state == "off" or self._encoder_state == "failed":
            return
        if self._encoding is not None and not self._encoding.done():
            return
        if self._encoder_state == "loaded" and not self.index.missing_vectors():
            return
        self._encoding = asyncio.get_running_loop().create_task(
            self._fill_vectors(), name="callgate-discovery-vectors"
        )

    async def _fill_vectors(self) -> None:
        try:
            if self._encoder_state == "unloaded":
                try:
                    from callgate.discovery.embeddings import EmbeddingsUnavailable, load_encoder
                except ImportError:  # pragma: no cover - the module ships with callgate
                    self._encoder_state = "failed"
                    self._encoder_note = "dense search is not available in this build"
                    return
                try:
                    encoder = await asyncio.to_thread(load_encoder, self.settings.embeddings)
                except EmbeddingsUnavailable as exc:
                    self._encoder_state = "failed"
                    self._encoder_note = str(exc)
                    return
                self.index.encoder = encoder
                self._encoder_state = "loaded"
            await self._encode_missing()
        except Exception:
            # Search goes on with BM25; the reason is logged once, not per search.
            self._encoder_state = "failed"
            self._encoder_note = "dense search failed to start (see the server log)"
            _log.exception("dense vectors for tool search could not be made")

    async def _encode_missing(self) -> None:
        import numpy as np

        encoder = self.index.encoder
        assert encoder is not None
        missing = self.index.missing_vectors()
        if not missing:
            return
        digests = [doc.digest for doc in missing]
        key = f"{encoder.name}/{VECTOR_RECIPE}"
        cached = await self._store.get_vectors(key, digests)
        if cached:
            self.index.add_vectors(
                {d: np.frombuffer(blob, dtype=np.float32) for d, blob in cached.items()}
            )
        while self.index.missing_vectors():
            made = await asyncio.to_thread(self.index.encode_missing, batch=256)
            if not made:
                break
            await self._store.put_vectors(
                key,
                {d: np.asarray(v, dtype=np.float32).tobytes() for d, v in made.items()},
            )

    def use_encoder(self, encoder: Encoder) -> None:
        """Make dense vectors with ``encoder`` (instead of the one ``embeddings``
        names): for an encoder of your own, or in tests."""
        self.index.encoder = encoder
        self._encoder_state = "loaded"
        self._encoder_note = None

    async def wait_for_vectors(self) -> bool:
        """Bring the index up to date and wait until every document has a dense
        vector; False when dense search is off or unavailable."""
        await self.current()
        while self._encoding is not None and not self._encoding.done():
            await asyncio.shield(self._encoding)
            await self.current()
        return self.index.dense_ready

    async def aclose(self) -> None:
        task, self._encoding = self._encoding, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def dense_note(self) -> str | None:
        """Why searches are BM25 alone right now (None when dense vectors take part)."""
        if self.index.dense_ready:
            return None
        if self._encoder_note is not None:
            return self._encoder_note
        missing = len(self.index.missing_vectors())
        if self._encoder_state == "loaded" and missing:
            return f"dense vectors are still being made ({missing:,} tools to go)"
        return "dense vectors are being prepared"

    # -- who may find what -------------------------------------------------------------
    def may_use(self, principal: Principal, spec: ToolSpec) -> bool:
        """Whether ``principal`` may call ``spec`` at all (scopes, tenant): the
        filter every search applies, and what the gate checks again on a call."""
        return spec.scopes <= principal.scopes and (
            spec.tenants is None or principal.tenant in spec.tenants
        )

    def pinned(self, principal: Principal) -> list[ToolSpec]:
        """The tools ``pin`` rules offer directly to ``principal``, in name order."""
        return [
            spec
            for spec in self.registry.specs(principal)
            if spec.toolbox != META_TOOLBOX
            and self.settings.rule_for("pin", spec.name, spec.tags, spec.risk.value)
        ]

    def _mask(self, principal: Principal) -> np.ndarray:
        key = (self.index.generation, self.registry.generation, principal.scopes, principal.tenant)
        mask = self._masks.get(key)
        if mask is not None:
            self._masks.move_to_end(key)
            return mask

        def allowed(doc: Document) -> bool:
            if doc.kind == "skill":
                return True
            spec = self.registry.get(doc.name)
            if spec is None or not self.may_use(principal, spec):
                return False
            risk = spec.risk.value
            return not (
                self.settings.rule_for("hide", spec.name, spec.tags, risk)
                or self.settings.rule_for("pin", spec.name, spec.tags, risk)
            )

        mask = self.index.mask(allowed)
        self._masks[key] = mask
        while len(self._masks) > 256:
            self._masks.popitem(last=False)
        return mask

    # -- searching ---------------------------------------------------------------------
    async def search(
        self,
        principal: Principal,
        query: str,
        *,
        limit: int | None = None,
        toolbox: str | None = None,
        kinds: tuple[str, ...] = ("tool", "skill"),
    ) -> SearchOutcome:
        """The tools (and skills) best matching ``query`` that ``principal`` may use."""
        index = await self.current()
        await self._refresh_usage()
        wanted = min(limit or self.settings.limit, self.settings.max_limit)
        mask = self._mask(principal)
        if toolbox is not None or kinds != ("tool", "skill"):
            mask = mask & index.mask(
                lambda doc: doc.kind in kinds and (toolbox is None or doc.namespace == toolbox)
            )
        # More than asked for: rules and signals below may drop or reorder some.
        hits = index.search(query, limit=wanted * 3 + 5, allowed=mask)
        query_terms = set(terms(query))
        kept: list[tuple[float, Hit]] = []
        for hit in hits:
            doc = hit.document
            if (
                doc.kind == "tool"
                and self.settings.rule_for("mention", doc.name, doc.tags, doc.risk)
                and not _names(doc, query_terms)
            ):
                continue
            kept.append((hit.score * self._signal(doc.name), hit))
        kept.sort(key=lambda pair: -pair[0])
        return SearchOutcome(
            hits=[hit for _, hit in kept[:wanted]],
            dense=index.dense_ready,
            note=self.dense_note,
        )

    def _signal(self, tool: str) -> float:
        calls, failures = self._usage.get(tool, (0, 0))
        factor = 1.0
        if calls >= MIN_CALLS_FOR_FAILURE:
            factor *= 1.0 - 0.3 * (failures / calls)
        if calls:
            factor *= 1.0 + 0.02 * math.log1p(calls)
        return factor

    async def _refresh_usage(self) -> None:
        now = self._clock.now()
        if self._usage_at is not None and now - self._usage_at < USAGE_REFRESH:
            return
        self._usage_at = now
        try:
            self._usage = await self._store.tool_usage(since=now - USAGE_WINDOW)
        except Exception:  # a signal, not a requirement: search goes on without it
            _log.warning("tool usage for search ranking could not be read", exc_info=True)


def _names(doc: Document, query_terms: set[str]) -> bool:
    """Whether the query names the tool: every word of its name is in the query."""
    local = doc.name.removeprefix(f"{doc.namespace}.") if doc.namespace else doc.name
    wanted = set(terms(local))
    return bool(wanted) and wanted <= query_terms
