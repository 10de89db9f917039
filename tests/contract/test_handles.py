"""Handle kinds state their lifetime; concurrent updates of one handle cannot both land."""

from __future__ import annotations

from datetime import timedelta

import pytest

from callgate import ErrorKind, Principal
from callgate.contract import HandleConflict, HandleKind, Handles, UnknownHandle
from callgate.store import MemoryStore

RUN = HandleKind(
    name="runbook run", prefix="run", ttl=timedelta(hours=2), created_by="ops.runbook_start"
)
ALICE = Principal("alice", tenant="acme")


@pytest.mark.parametrize(
    ("ttl", "words"),
    [
        (timedelta(hours=2), "2 hours"),
        (timedelta(minutes=30), "30 minutes"),
        (timedelta(minutes=90), "90 minutes"),
        (timedelta(days=1), "1 day"),
        (timedelta(seconds=45), "45 seconds"),
    ],
)
def test_the_lifetime_is_said_in_words(ttl: timedelta, words: str) -> None:
    kind = HandleKind(name="draft", prefix="drf", ttl=ttl, created_by="x.create")
    assert kind.lifetime == words
    assert kind.lives == f"Drafts live {words} after their last change."


def test_a_plural_can_be_given() -> None:
    kind = HandleKind(
        name="change set",
        prefix="chg",
        ttl=timedelta(hours=1),
        created_by="x.create",
        plural="change sets",
    )
    assert kind.lives == "Change sets live 1 hour after their last change."


@pytest.mark.parametrize(
    ("prefix", "ttl"),
    [("r", timedelta(hours=1)), ("Run", timedelta(hours=1)), ("run", timedelta(0))],
)
def test_malformed_kinds_are_refused_when_declared(prefix: str, ttl: timedelta) -> None:
    with pytest.raises(ValueError, match=r"handle (prefix|ttl)"):
        HandleKind(name="run", prefix=prefix, ttl=ttl, created_by="x.create")


@pytest.mark.anyio
async def test_an_update_from_a_stale_read_is_refused(anyio_backend: str) -> None:
    handles = Handles(MemoryStore(), ALICE)
    run = await handles.create(RUN, {"done": []})
    first, second = await handles.get(RUN, run.id), await handles.get(RUN, run.id)

    await handles.update(RUN, first, {"done": [1]})
    with pytest.raises(HandleConflict) as conflict:
        await handles.update(RUN, second, {"done": [2]})

    assert conflict.value.kind is ErrorKind.TRANSIENT
    assert "this change was not made" in conflict.value.message
    assert (await handles.get(RUN, run.id)).data == {"done": [1]}


@pytest.mark.anyio
async def test_a_handle_of_another_kind_is_unknown(anyio_backend: str) -> None:
    handles = Handles(MemoryStore(), ALICE)
    draft = HandleKind(name="draft", prefix="drf", ttl=timedelta(hours=1), created_by="x.c")
    run = await handles.create(RUN, {})

    with pytest.raises(UnknownHandle) as unknown:
        await handles.get(draft, run.id)

    assert unknown.value.kind is ErrorKind.CONSTRUCTION
    assert unknown.value.next_step == "Create a new one with x.c; do not guess or reuse ids."
