"""What a model sends is checked as strictly at every depth."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from callgate import ErrorKind, Gate, Principal, Toolbox
from callgate.store import MemoryStore

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"w"})


class Line(BaseModel):
    sku: str
    qty: int


@dataclasses.dataclass
class Address:
    city: str


class Note(TypedDict):
    text: str


class Loose(BaseModel):
    """Declares that it takes any further field."""

    model_config = ConfigDict(extra="allow")
    kind: str


def _box(seen: list[dict[str, Any]]) -> Toolbox:
    box = Toolbox("shop")

    @box.tool(scopes={"w"}, idempotent=False)
    def order(lines: list[Line], ship_to: Address, note: Note | None = None) -> int:
        """Place an order."""
        seen.append({"lines": [line.model_dump() for line in lines], "ship_to": ship_to})
        return len(lines)

    @box.tool(scopes={"w"}, read_only=True)
    def tag(tag: Loose) -> str:
        """Tag something."""
        return tag.kind

    return box


ORDER = {"lines": [{"sku": "a", "qty": 1}], "ship_to": {"city": "Lima"}}


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({**ORDER, "lines": [{"sku": "a", "qty": 1, "extra": 1}]}, "lines[0]"),
        ({**ORDER, "ship_to": {"city": "Lima", "zip": "15001"}}, "ship_to"),
        ({**ORDER, "note": {"text": "hi", "urgent": True}}, "note"),
    ],
)
async def test_an_unknown_nested_field_is_refused_not_dropped(
    arguments: dict[str, Any], path: str
) -> None:
    seen: list[dict[str, Any]] = []
    async with Gate([_box(seen)], store=MemoryStore()) as gate:
        env = await gate.call("shop.order", arguments, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert "Unknown argument" in env.error.message_for_model
    assert repr(path) in env.error.message_for_model
    assert seen == []  # the tool never ran with a silently trimmed order


async def test_nested_objects_are_closed_in_the_schema_the_model_sees() -> None:
    box = _box([])
    spec = box.get("shop.order")
    assert spec is not None
    defs = spec.input_schema["$defs"]
    assert {name: d.get("additionalProperties") for name, d in defs.items()} == {
        "Line": False,
        "Address": False,
        "Note": False,
    }
    # A model that says it takes any field keeps saying so.
    tag = box.get("shop.tag")
    assert tag is not None and tag.input_schema["$defs"]["Loose"]["additionalProperties"] is True


async def test_valid_nested_arguments_still_pass() -> None:
    seen: list[dict[str, Any]] = []
    async with Gate([_box(seen)], store=MemoryStore()) as gate:
        env = await gate.call("shop.order", ORDER, principal=ALICE)
        loose = await gate.call("shop.tag", {"tag": {"kind": "x", "any": 1}}, principal=ALICE)
    assert env.ok and env.payload == 1 and seen[0]["lines"] == [{"sku": "a", "qty": 1}]
    assert loose.ok
