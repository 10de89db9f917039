"""What a model sends is echoed, stored and accepted within bounds."""

from __future__ import annotations

import json
from typing import Annotated

import anyio
import pytest
from mcp import Client, MCPError
from pydantic import Field

from callgate import ErrorKind, Gate, Limits, Principal, Toolbox
from callgate.mcp import build_server
from callgate.store import MemoryStore

from .test_nested_arguments import _box

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", scopes={"w"})


async def test_an_unknown_tool_name_is_echoed_and_stored_within_bounds() -> None:
    name = "x" * 3_000_000
    async with Gate([_box([])], store=MemoryStore()) as gate:
        env = await gate.call(name, {}, principal=ALICE)
        records = await gate.audit(call_id=env.call_id)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert len(env.model_dump_json()) < 2_000
    assert "3,000,000 characters" in env.error.message_for_model
    assert len(records[0].tool) < 300 and records[0].tool.startswith("x" * 100)


async def test_an_mcp_client_is_not_sent_a_huge_name_back() -> None:
    async with Gate([_box([])], store=MemoryStore()) as gate:
        server = build_server(gate, principal=ALICE)
        with anyio.fail_after(20):
            async with Client(server, mode="legacy") as client:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("x" * 3_000_000, {})
    error = refused.value.error
    assert len(error.message) < 2_000 and len(str(error.data)) < 2_000
    assert "3,000,000 characters" in error.message


async def test_many_unknown_arguments_make_a_short_message() -> None:
    arguments = {f"field_{i}": i for i in range(100_000)}
    limits = Limits(max_argument_bytes=10_000_000)  # under the size limit: validated
    async with Gate([_box([])], store=MemoryStore(), limits=limits) as gate:
        env = await gate.call("shop.tag", arguments, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    message = env.error.message_for_model
    assert len(message) < 2_000
    assert "field_0" in message and "99,990 more" in message


async def test_a_long_value_is_not_echoed_in_full() -> None:
    box = Toolbox("t")

    @box.tool(read_only=True)
    def code(value: Annotated[str, Field(max_length=8)]) -> str:
        """Echo."""
        return value

    async with Gate([box], store=MemoryStore()) as gate:
        env = await gate.call("t.code", {"value": "9" * 500_000}, principal=ALICE)
    assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
    assert env.error.message_for_model.startswith("Argument 'value': ")
    assert len(env.error.message_for_model) < 2_000


async def test_a_long_value_is_told_the_bound_it_broke() -> None:
    box = Toolbox("t")

    @box.tool(read_only=True)
    def code(value: Annotated[str, Field(max_length=8)]) -> str:
        """Echo."""
        return value

    async with Gate([box], store=MemoryStore()) as gate:
        env = await gate.call("t.code", {"value": "9" * 400}, principal=ALICE)
        huge = await gate.call("t.code", {"value": "9" * 500_000}, principal=ALICE)
    for answer in (env, huge):
        assert answer.error is not None
        assert answer.error.message_for_model.startswith("Argument 'value': ")
        assert "longer than 8 characters" in answer.error.message_for_model
        assert len(answer.error.message_for_model) < 2_000


async def test_arguments_over_the_limit_are_refused_before_validation() -> None:
    async with Gate([_box([])], store=MemoryStore(), limits=Limits()) as gate:
        as_text = await gate.call(
            "shop.tag", json.dumps({"tag": {"kind": "y" * 2_000_000}}), principal=ALICE
        )
        as_dict = await gate.call("shop.tag", {"tag": {"kind": "y" * 2_000_000}}, principal=ALICE)
    for env in (as_text, as_dict):
        assert env.error is not None and env.error.kind is ErrorKind.CONSTRUCTION
        assert "too large" in env.error.message_for_model
        assert len(env.model_dump_json()) < 2_000


async def test_arguments_of_exactly_the_limit_are_accepted() -> None:
    arguments = {"tag": {"kind": "y" * 2_000}}
    size = len(json.dumps(arguments, separators=(",", ":")))
    async with Gate([_box([])], store=MemoryStore(), limits=Limits(max_argument_bytes=size)) as at:
        fits = await at.call("shop.tag", arguments, principal=ALICE)
    limits = Limits(max_argument_bytes=size - 1)
    async with Gate([_box([])], store=MemoryStore(), limits=limits) as under:
        over = await under.call("shop.tag", arguments, principal=ALICE)
    assert fits.ok and fits.payload == "y" * 2_000
    assert over.error is not None and over.error.kind is ErrorKind.CONSTRUCTION
    assert f"too large ({size:,} bytes; at most {size - 1:,} are accepted)" in (
        over.error.message_for_model
    )


async def test_an_overlong_idempotency_key_is_a_developer_error() -> None:
    async with Gate([_box([])], store=MemoryStore()) as gate:
        with pytest.raises(ValueError, match="at most 255 characters"):
            await gate.call(
                "shop.tag", {"tag": {"kind": "x"}}, principal=ALICE, idempotency_key="k" * 256
            )
