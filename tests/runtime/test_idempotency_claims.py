"""Idempotency claims: a crashed owner's claim, and scopes that never collide."""

from __future__ import annotations

import pytest

from callgate import Principal, Status
from callgate.runtime.idempotency import scope_for

from .conftest import GateFactory
from .tools import Counters, build

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((None, "k"), ("-", "k")),  # no tenant, and the tenant "-"
        (("-", "k"), (None, "k")),
        (("a/t.transfer", "k"), ("a", "t.transfer/k")),  # separators inside the parts
    ],
)
async def test_keys_of_different_tenants_never_share_a_scope(
    make_gate: GateFactory, first: tuple[str | None, str], second: tuple[str | None, str]
) -> None:
    counters = Counters()
    (tenant_a, key_a), (tenant_b, key_b) = first, second
    async with make_gate([build(counters)]) as gate:
        a = await gate.call(
            "t.transfer",
            {"amount": 1, "to": "x"},
            principal=Principal(user="u1", tenant=tenant_a, scopes={"w"}),
            idempotency_key=key_a,
        )
        b = await gate.call(
            "t.transfer",
            {"amount": 1, "to": "x"},
            principal=Principal(user="u2", tenant=tenant_b, scopes={"w"}),
            idempotency_key=key_b,
        )
    assert a.status is Status.OK and b.status is Status.OK
    assert not b.replayed and b.call_id != a.call_id  # the second caller's own run
    assert counters.runs["transfer"] == 2


def test_scopes_are_unambiguous() -> None:
    assert scope_for(None, "t.x", "k") != scope_for("-", "t.x", "k")
    assert scope_for("a/t.x", "t.y", "k") != scope_for("a", "t.x", "t.y/k")
    assert scope_for("acme", "t.x", "k") == '["acme","t.x","k"]'
