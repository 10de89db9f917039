"""Thousands of malformed messages at the MCP endpoint: it never crashes and always
answers per the spec (a JSON-RPC error or an HTTP client error), then keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from callgate.mcp import MCP_PATH, build_server, streamable_http_app
from tests.mcp.tools import ALICE, build_gate

MODERN = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "host": "127.0.0.1:8765",
}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
METHODS = ["tools/list", "tools/call", "server/discover", "ping", "nope/nope", "", "initialize"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, str]:
    """(method header, body): often almost-valid JSON-RPC, sometimes garbage."""
    method = draw(st.sampled_from(METHODS) | st.text(max_size=12))
    kind = draw(st.sampled_from(["rpc", "json", "text"]))
    if kind == "text":
        return method, draw(st.text(max_size=200))
    if kind == "json":
        return method, json.dumps(draw(json_values))
    params: Any = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "_meta": st.just(ENVELOPE) | json_values,
                "name": st.sampled_from(["shop.order_get", "shop.nope", ""]) | st.text(max_size=10),
                "arguments": json_values,
            },
        )
        | json_values
    )
    message = {
        "jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2])),
        "method": method,
        "params": params,
    }
    if draw(st.booleans()):
        message["id"] = draw(st.integers() | st.text(max_size=5) | st.none())
    return method, json.dumps(message)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    gate = build_gate()
    app = streamable_http_app(build_server(gate, principal=ALICE))
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        yield http


@pytest.mark.slow
@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(message=messages())
def test_malformed_messages_get_spec_answers(client: TestClient, message: tuple[str, str]) -> None:
    method, body = message
    headers = (
        {**MODERN, "mcp-method": method} if method.isascii() and method.isprintable() else MODERN
    )
    response = client.post(MCP_PATH, content=body.encode(), headers=headers)
    assert response.status_code < 500, (body, response.status_code, response.text[:300])
    assert response.status_code != 421  # reached the protocol layer, not refused by host
    if response.headers.get("content-type", "").startswith("application/json") and response.content:
        answer = response.json()
        assert answer.get("jsonrpc") == "2.0", answer
        assert ("result" in answer) != ("error" in answer), answer
        if "error" in answer:
            assert isinstance(answer["error"]["code"], int)
            assert isinstance(answer["error"]["message"], str)


def test_the_server_still_serves_after_the_fuzz(client: TestClient) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    response = client.post(MCP_PATH, json=body, headers={**MODERN, "mcp-method": "tools/list"})
    assert response.status_code == 200
    assert "shop__order_get" in {t["name"] for t in response.json()["result"]["tools"]}


def test_an_oversized_body_is_refused_with_a_clear_error(client: TestClient) -> None:
    huge = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "shop__order_get", "arguments": {"order_id": "x" * (5 * 1024 * 1024)}},
    }
    response = client.post(
        MCP_PATH,
        content=json.dumps(huge).encode(),
        headers={**MODERN, "mcp-method": "tools/call", "mcp-name": "shop__order_get"},
    )
    assert response.status_code == 413
    assert "too large" in response.text
