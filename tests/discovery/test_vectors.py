"""Dense vectors in a gate: made in the background, fused into search once made, and
kept in the store so that a restart encodes nothing again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from callgate import Gate, Principal
from callgate.discovery import DiscoverySettings
from callgate.store import SQLStore
from tests.discovery.catalogue import catalogue

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")


class Counting:
    """A stand-in encoder that counts what it encodes: money-ish texts point one way."""

    name = "counting-test"
    dim = 2

    def __init__(self) -> None:
        self.documents = 0

    def encode(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> np.ndarray:
        if kind == "document":
            self.documents += len(texts)
        rows = [[1.0, 0.0] if ("refund" in t or "cash" in t) else [0.0, 1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 2)


async def test_vectors_are_made_kept_in_the_store_and_not_made_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    money = Principal("bob", tenant="acme", scopes={"billing:write"})
    first = Counting()
    async with Gate(catalogue(), store=SQLStore(url), discovery=DiscoverySettings()) as gate:
        gate.discovery.use_encoder(first)
        assert await gate.discovery.wait_for_vectors()
        envelope = await gate.call("callgate.search_tools", {"query": "cash"}, principal=money)

    # Two texts a document: everything indexed, and the name's words with the description.
    assert first.documents == 2 * len(gate.discovery.index.documents) > 0
    assert envelope.payload["note"] is None  # dense vectors took part
    # "cash" matches no word of the refund tool: found by its vector.
    assert envelope.payload["tools"][0]["name"] == "billing.refund_invoice"

    again = Counting()
    async with Gate(catalogue(), store=SQLStore(url), discovery=DiscoverySettings()) as gate:
        gate.discovery.use_encoder(again)
        assert await gate.discovery.wait_for_vectors()
    assert again.documents == 0


async def test_without_the_extra_search_is_bm25_and_says_so() -> None:
    async with Gate(
        catalogue(), store="memory://", discovery=DiscoverySettings(embeddings="off")
    ) as gate:
        envelope = await gate.call("callgate.search_tools", {"query": "email"}, principal=ALICE)
    assert "off" in envelope.payload["note"]
