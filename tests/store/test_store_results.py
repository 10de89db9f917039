"""Spilled (oversized) results, on every store kind."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from callgate.clock import ManualClock
from callgate.store import SQLStore, Store, StoredResult

pytestmark = pytest.mark.anyio


def result(ref: str, *, ttl: timedelta = timedelta(minutes=10)) -> StoredResult:
    now = datetime.now(UTC)
    return StoredResult(
        ref=ref,
        call_id="call-1",
        tool="orders_search",
        tenant="acme",
        user="u1",
        content={"rows": [{"id": i} for i in range(3)], "total": 1340},
        created_at=now,
        expires_at=now + ttl,
    )


async def test_put_then_get_result(store: Store) -> None:
    stored = result("r1")
    await store.put_result(stored)

    assert await store.get_result("r1") == stored
    assert await store.get_result("unknown") is None


async def test_expired_result_is_gone(store: Store) -> None:
    await store.put_result(result("r1", ttl=timedelta(seconds=-1)))

    assert await store.get_result("r1") is None


async def test_a_ref_is_stored_once(store: Store) -> None:
    first = result("r1")
    await store.put_result(first)

    with pytest.raises(ValueError, match="already stored"):
        await store.put_result(replace(result("r1"), call_id="call-2", content={"rows": []}))
    # The first result stays as it was: a second put never overwrites it.
    assert await store.get_result("r1") == first


async def test_null_content_round_trips(store: Store) -> None:
    stored = StoredResult(**{**result("r1").__dict__, "content": None})
    await store.put_result(stored)

    assert await store.get_result("r1") == stored


class Unserializable:
    """Content no JSON encoder takes: a store that serialized it would fail."""


async def test_a_result_given_as_json_text_is_kept_as_that_text(store: Store) -> None:
    # The gate hands over the JSON text it already made; serializing the content
    # again is the work this saves (a megabyte result used to be encoded four times).
    text = '{"rows":[{"id":0},{"id":1}],"total":2}'
    await store.put_result(replace(result("r1"), content=Unserializable(), text=text))

    stored = await store.get_result("r1")
    assert stored is not None and stored.content == {"rows": [{"id": 0}, {"id": 1}], "total": 2}


async def test_expired_results_make_room_for_new_ones(
    tmp_path: Path,
) -> None:
    """A gateway storing large results keeps about ``result_ttl``'s worth: the
    expired ones are deleted as new ones come and their space is reused (they
    were kept for ever: a database once grew to 3 GB of unreadable results)."""
    path = tmp_path / "results.db"
    start = datetime.now(UTC)

    def big(ref: str) -> StoredResult:
        return replace(result(ref, ttl=timedelta(hours=1)), content=["x" * 1000] * 200)

    async with SQLStore(f"sqlite:///{path}") as store:
        for i in range(40):
            await store.put_result(big(f"old-{i}"))
    full = path.stat().st_size  # closed: everything is in the file
    clock = ManualClock(start + timedelta(hours=2))
    async with SQLStore(f"sqlite:///{path}", clock=clock) as store:
        for i in range(40):
            await store.put_result(replace(big(f"new-{i}"), expires_at=start + timedelta(hours=3)))
        assert await store.get_result("new-39") is not None
        assert await store.get_result("old-39") is None
    assert path.stat().st_size < full * 1.5  # kept for ever, they made it 2x
