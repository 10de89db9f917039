"""``[limits.rate]`` across two real ``callgate serve`` replicas: one principal's
budget is one, whichever replica a call lands on, through Redis and through the
shared PostgreSQL store."""

from __future__ import annotations

import uuid

import anyio
import pytest
from mcp import Client

from tests.replicas.conftest import Deployment, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

MODE = "2026-07-28"
LIMIT = 5


@pytest.mark.parametrize("backend", ["redis", "store"])
async def test_one_principals_budget_holds_across_replicas(
    deployment: Deployment, backend: str
) -> None:
    table = f'\n[limits.rate]\nper_principal = "{LIMIT}/minute"\nbackend = "{backend}"\n'
    if backend == "redis":
        table += 'redis_url = "redis://127.0.0.1:6379/0"\n'
        table += f'key_prefix = "callgate-test:{uuid.uuid4().hex}:"\n'
    deployment.config.write_text(deployment.config.read_text() + table)
    outcomes: list[bool] = []
    async with replicas(deployment) as (a, b):
        with anyio.fail_after(60):
            async with Client(a.url, mode=MODE) as on_a, Client(b.url, mode=MODE) as on_b:
                for n in range(2 * LIMIT):
                    client = on_a if n % 2 == 0 else on_b
                    result = await client.call_tool("rep__balance", {"account": f"A-{n}"})
                    outcomes.append(not result.is_error)
                    if result.is_error:
                        refused = result.content[0]
                        assert f"{LIMIT}/minute" in getattr(refused, "text", ""), refused

    # Exactly the budget got through, split across both replicas; the rest waited.
    assert outcomes == [True] * LIMIT + [False] * LIMIT
