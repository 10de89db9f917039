"""Gates with code mode over a durable store (SQLite, PostgreSQL): two of them share
one, as two processes of a deployment would."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from callgate import Gate, Toolbox
from callgate.codemode import CodeModeSettings
from callgate.store import SQLStore, Store
from tests.pg import POSTGRES_URL, drop_schema

GateFactory = Callable[..., Gate]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def durable_gates(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[GateFactory]:
    """Gates with code mode, each with its own connection to one store."""
    gates: list[Gate] = []
    schema = f"test_cm_{uuid.uuid4().hex[:12]}"

    def factory(toolboxes: list[Toolbox], **options: Any) -> Gate:
        store: Store
        if request.param == "sqlite":
            store = SQLStore(f"sqlite:///{tmp_path / 'gate.db'}")
        else:
            store = SQLStore(POSTGRES_URL, schema=schema)
        options.setdefault("code_mode", CodeModeSettings(enabled=True))
        gate = Gate(toolboxes, store=store, **options)
        gates.append(gate)
        return gate

    yield factory
    for gate in gates:
        await gate.aclose()
    if request.param == "postgres":
        await drop_schema(schema)
