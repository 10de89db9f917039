"""Oversized results: an explicit notice, and the rest readable by cursor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callgate import ErrorKind, Gate, Limits, Principal, Status, Toolbox
from callgate.runtime.cursor import Cursor
from callgate.store import MemoryStore, StoredResult

from .conftest import ALICE, GateFactory
from .tools import Counters, build

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_five_megabytes_are_truncated_and_fully_readable(make_gate: GateFactory) -> None:
    n = 50_000  # ~5 MB of rows
    async with make_gate([build(Counters())], limits=Limits(max_result_tokens=20_000)) as gate:
        env = await gate.call("t.rows", {"n": n, "width": 80}, principal=ALICE)
        assert env.status is Status.OK and env.truncated is not None
        assert len(json.dumps(env.payload, separators=(",", ":"))) <= 20_000 * 4
        t = env.truncated
        assert t.unit == "items" and t.total == n and 0 < t.shown < n
        assert f"showing {t.shown:,} of {n:,} items" in t.notice
        assert t.cursor and t.cursor in t.notice and "callgate.read_more" in t.notice
        assert env.raw_ref

        seen = list(env.payload)
        cursor: str | None = t.cursor
        pages = 0
        while cursor:
            page = await gate.read_more(cursor, principal=ALICE)
            assert page.status is Status.OK, page.error
            assert page.truncated is None  # a page always fits
            seen.extend(page.payload["items"])
            cursor = page.payload["next_cursor"]
            pages += 1
        assert pages > 1
    assert [row["i"] for row in seen] == list(range(n))


async def test_one_long_string_is_cut_by_characters(make_gate: GateFactory) -> None:
    async with make_gate([build(Counters())], limits=Limits(max_result_tokens=100)) as gate:
        env = await gate.call("t.blob", {"n": 1000}, principal=ALICE)
        assert env.truncated is not None and env.truncated.unit == "chars"
        assert env.truncated.total == 1002  # the JSON text, quotes included
        text = env.payload
        cursor = env.truncated.cursor
        while cursor:
            rest = await gate.read_more(cursor, principal=ALICE)
            assert rest.ok and rest.truncated is None
            text += rest.payload["items"]
            cursor = rest.payload["next_cursor"]
    assert text == json.dumps("y" * 1000)


async def test_small_results_are_untouched() -> None:
    from callgate import Gate
    from callgate.store import MemoryStore

    async with Gate([build(Counters())], store=MemoryStore()) as gate:
        env = await gate.call("t.rows", {"n": 3}, principal=ALICE)
    assert env.truncated is None and env.raw_ref is None and len(env.payload) == 3


async def test_a_cursor_is_not_a_permission(make_gate: GateFactory) -> None:
    async with make_gate([build(Counters())], limits=Limits(max_result_tokens=100)) as gate:
        env = await gate.call("t.rows", {"n": 100}, principal=ALICE)
        assert env.truncated is not None and env.truncated.cursor
        cursor = env.truncated.cursor
        others = [
            Principal(user="mallory", tenant="globex"),  # another tenant
            Principal(user="bob", tenant="acme", scopes={"r", "w"}),  # another user
        ]
        refused = [await gate.read_more(cursor, principal=p) for p in others]
        forged = await gate.read_more("not-a-cursor", principal=ALICE)
        decoded = Cursor.decode(cursor)
        edited = [
            Cursor(ref=decoded.ref, offset=0, unit="items", key="nope").encode(),
            Cursor(ref=decoded.ref, offset=0, unit="items", key=None).encode(),
            Cursor(ref=decoded.ref + "x", offset=0, unit="items").encode(),
        ]
        answers = [await gate.read_more(c, principal=ALICE) for c in edited]
        mine = await gate.read_more(cursor, principal=ALICE)
    assert mine.ok
    for env in [*refused, *answers[:1], answers[2]]:
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert "expired or does not exist" in env.error.message_for_model
    assert answers[1].ok  # a list payload paged by items from 0: a valid position
    assert forged.error is not None and forged.error.kind is ErrorKind.CONSTRUCTION


class KeepingStore(MemoryStore):
    """A MemoryStore that keeps what the gate hands to ``put_result``."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[StoredResult] = []

    async def put_result(self, result: StoredResult) -> None:
        self.kept.append(result)
        await super().put_result(result)


async def test_the_store_gets_the_text_the_result_was_cut_from() -> None:
    # One serialization: the text measured and cut for the model is the text a
    # store keeps (no store has to serialize the result again).
    store = KeepingStore()
    async with Gate([build(Counters())], store=store, limits=Limits(max_result_tokens=100)) as gate:
        env = await gate.call("t.blob", {"n": 1000}, principal=ALICE)
    assert env.truncated is not None and env.truncated.unit == "chars"
    [kept] = store.kept
    assert kept.text is not None and json.loads(kept.text) == "y" * 1000 == kept.content
    assert env.payload == kept.text[: env.truncated.shown]


async def test_the_largest_of_several_lists_is_paged() -> None:
    box = Toolbox("many")

    @box.tool(read_only=True)
    def report() -> dict[str, Any]:
        """A report with a few tags and many rows."""
        return {
            "tags": ["a", "b"],
            "rows": [{"i": i, "text": "x" * 40} for i in range(200)],
            "notes": ["n" * 30] * 3,
        }

    async with Gate([box], store=MemoryStore(), limits=Limits(max_result_tokens=200)) as gate:
        env = await gate.call("many.report", {}, principal=ALICE)
    assert env.truncated is not None and env.truncated.unit == "items"
    assert env.truncated.total == 200 and "of 'rows'" in env.truncated.notice
    assert env.payload["tags"] == ["a", "b"] and env.payload["notes"] == ["n" * 30] * 3


async def test_text_the_fast_encoder_refuses_is_still_cut() -> None:
    box = Toolbox("odd")

    @box.tool(read_only=True)
    def text() -> str:
        """Text with a lone surrogate, as a badly decoded file gives."""
        return "\ud800" + "z" * 1000

    store = KeepingStore()
    async with Gate([box], store=store, limits=Limits(max_result_tokens=100)) as gate:
        env = await gate.call("odd.text", {}, principal=ALICE)
    assert env.ok and env.truncated is not None and env.truncated.total == 1003
    assert env.payload.startswith('"\ud800zzz')
    assert store.kept[0].content == "\ud800" + "z" * 1000


def test_an_envelope_serializes_its_payload_once_and_never_shows_another_payloads_text() -> None:
    from callgate.runtime.envelope import Envelope, Status

    payload = {"name": "Zoë", "n": [1, 2]}
    envelope = Envelope(tool="t", call_id="c", trace_id="t", status=Status.OK, payload=payload)
    assert envelope.payload_json() == '{"name":"Zoë","n":[1,2]}'
    measured = envelope.with_payload_json('{"name":"Zoë","n":[1,2]}')
    assert measured.payload_json() is measured.payload_json()
    # A copy with another payload serializes its own.
    assert measured.model_copy(update={"payload": [3]}).payload_json() == "[3]"
