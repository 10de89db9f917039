"""Session taints (the lethal trifecta), on every store kind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio
import pytest

from callgate.store import Store

if TYPE_CHECKING:
    from tests.store.conftest import Database

pytestmark = pytest.mark.anyio


async def test_an_unknown_session_has_no_taints(store: Store) -> None:
    assert await store.session_taints("s1") == {}


async def test_the_first_tool_that_brought_a_taint_is_kept(store: Store) -> None:
    now = datetime.now(UTC)
    await store.add_session_taint("s1", "private_data", "crm_get_customer", now)
    await store.add_session_taint("s1", "private_data", "mail_read", now)
    await store.add_session_taint("s1", "untrusted_content", "web_fetch", now)

    assert await store.session_taints("s1") == {
        "private_data": "crm_get_customer",
        "untrusted_content": "web_fetch",
    }


async def test_sessions_are_kept_apart(store: Store) -> None:
    now = datetime.now(UTC)
    await store.add_session_taint("s1", "private_data", "crm_get_customer", now)
    await store.add_session_taint("s2", "untrusted_content", "web_fetch", now)

    assert await store.session_taints("s1") == {"private_data": "crm_get_customer"}
    assert await store.session_taints("s2") == {"untrusted_content": "web_fetch"}


async def test_concurrent_adds_keep_one_tool(store: Store) -> None:
    tools = [f"tool_{i}" for i in range(20)]

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for tool in tools:
                tg.start_soon(
                    store.add_session_taint, "s1", "private_data", tool, datetime.now(UTC)
                )

    taints = await store.session_taints("s1")
    assert list(taints) == ["private_data"] and taints["private_data"] in tools


async def test_taints_survive_a_restart(database: Database) -> None:
    async with database.store() as store:
        await store.add_session_taint("s1", "private_data", "crm_get_customer", datetime.now(UTC))

    async with database.store() as store:
        await store.add_session_taint("s1", "private_data", "mail_read", datetime.now(UTC))
        assert await store.session_taints("s1") == {"private_data": "crm_get_customer"}
