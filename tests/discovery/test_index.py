"""The search index on its own: terms, updates that reuse work, filters before ranking,
fusion with a dense ranking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
import pytest

from callgate.discovery.index import Document, Hit, SearchIndex, function_document
from callgate.discovery.text import name_words, terms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ops.deployStatus", ["op", "deploy", "status"]),
        ("get-HTTPResponse", ["get", "http", "respons"]),
        ("send_email to the customers", ["send", "email", "custom"]),
        ("v2Items", ["v", "2", "item"]),
        ("Привет мир", ["привет", "мир"]),
        ("发送邮件", ["发", "送", "邮", "件", "发送", "送邮", "邮件"]),
    ],
)
def test_terms_split_identifiers_stem_english_and_pair_cjk(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("ops.getDeployStatus", "ops get deploy status"),
        ("Movies_3_FindMovies", "movies 3 find movies"),
        ("get-HTTPResponse", "get http response"),
        ("发送邮件", "发送邮件"),
    ],
)
def test_name_words_read_an_identifier_as_words(identifier: str, expected: str) -> None:
    assert name_words(identifier) == expected


def test_the_dense_encoder_also_reads_the_name_and_description_without_the_parameters() -> None:
    document = function_document(
        "crm.sendEmail",
        "Send an email to a customer.",
        {"type": "object", "properties": {"weather": {"description": "Weather of the day"}}},
        namespace="crm",
    )
    full, short = document.dense_texts
    assert "Weather of the day" in full
    assert short == "send email. Send an email to a customer."


def doc(name: str, description: str) -> Document:
    return function_document(name, description, namespace=name.split(".")[0])


def names(hits: Sequence[Hit]) -> list[str]:
    return [hit.document.name for hit in hits]


def test_an_update_reindexes_only_what_changed() -> None:
    index = SearchIndex()
    docs = [doc(f"t.tool_{i}", f"Does thing number {i}") for i in range(50)]

    assert index.update(docs) == 50
    changed = [*docs[:-1], doc("t.tool_49", "Does something else entirely")]
    assert index.update(changed) == 1
    assert names(index.search("something else", limit=1)) == ["t.tool_49"]


def test_two_documents_with_one_key_are_refused() -> None:
    with pytest.raises(ValueError, match="keyed"):
        SearchIndex().update([doc("a.x", "one"), doc("a.x", "two")])


def test_the_filter_applies_before_ranking() -> None:
    index = SearchIndex()
    index.update([doc("a.send_email", "Send an email"), doc("b.send_email", "Send an email too")])

    assert names(index.search("send email", allowed={"tool:b.send_email"})) == ["b.send_email"]
    mask = index.mask(lambda d: d.name.startswith("a."))
    assert names(index.search("send email", allowed=mask)) == ["a.send_email"]
    assert index.search("send email", allowed=set()) == []


def test_an_empty_index_or_query_finds_nothing() -> None:
    index = SearchIndex()
    assert index.search("anything") == []
    index.update([doc("a.x", "Something")])
    assert index.search("") == []
    assert index.search("zzz unknown words") == []


class _Fixed:
    """A stand-in encoder: a direction per keyword, so dense ranks are known."""

    name = "fixed-test"
    dim = 3
    AXES: ClassVar[dict[str, int]] = {"money": 0, "mail": 1, "weather": 2}

    def encode(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> np.ndarray:
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for row, text in enumerate(texts):
            for word, axis in self.AXES.items():
                if word in text.lower():
                    out[row, axis] = 1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
        return out


def test_dense_ranks_join_once_every_document_has_a_vector() -> None:
    index = SearchIndex(encoder=_Fixed())
    index.update(
        [
            doc("pay.refund", "Give money back for an order (money)"),
            doc("post.send", "Deliver a letter (mail)"),
        ]
    )
    assert not index.dense_ready

    made = index.encode_missing()

    assert set(made) == {d.digest for d in index.documents}
    assert index.dense_ready
    hits = index.search("some money")
    assert names(hits)[0] == "pay.refund"
    assert hits[0].dense_rank == 1


def test_vectors_given_from_a_cache_are_not_encoded_again() -> None:
    first = SearchIndex(encoder=_Fixed())
    docs = [doc("pay.refund", "money back"), doc("post.send", "mail a letter")]
    first.update(docs)
    cached = first.encode_missing()

    second = SearchIndex(encoder=_Fixed())
    second.update(docs)
    second.add_vectors(cached)

    assert second.missing_vectors() == []
    assert second.dense_ready
