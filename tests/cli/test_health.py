"""``GET /healthz`` of ``callgate serve``: ok while the store answers, degraded
while an upstream is down, 503 once the store stops answering; no credentials
needed, nothing but states in the body."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from callgate import Gate
from callgate.cli._health import health_route
from callgate.config import load_config
from callgate.gateway import upstream_toolboxes
from callgate.store import MemoryStore
from tests.mcp.serving import serve_http

pytestmark = pytest.mark.anyio


class Silent(MemoryStore):
    """A store that stopped answering."""

    async def ping(self) -> None:
        raise ConnectionRefusedError("[Errno 111] connect to db.internal:5432 refused")


async def probe(gate: Gate) -> httpx.Response:
    app = Starlette(routes=[health_route(gate)])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gw"
    ) as http:
        return await http.get("/healthz")


async def test_served_without_credentials_and_ok(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'h.db'}"
    async with serve_http("--store", store) as (url, _), httpx.AsyncClient() as http:
        answer = await http.get(url.removesuffix("/mcp") + "/healthz")

    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "store": "ok", "upstreams": {}}


async def test_a_store_that_does_not_answer_is_503_and_names_nothing() -> None:
    async with Gate([], store=Silent()) as gate:
        answer = await probe(gate)

    assert answer.status_code == 503
    assert answer.json() == {"status": "down", "store": "unreachable", "upstreams": {}}
    assert "db.internal" not in answer.text


async def test_an_upstream_down_is_degraded_not_down(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        '[[upstreams]]\nname = "gone"\ncommand = "/nonexistent/mcp-server"\nstartup_wait = 0.5\n'
    )
    cfg = load_config(path)
    async with Gate(upstream_toolboxes(cfg.upstreams, cfg.label), store=MemoryStore()) as gate:
        answer = await probe(gate)

    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "degraded" and body["store"] == "ok"
    assert body["upstreams"]["gone"] in {"starting", "down"}
