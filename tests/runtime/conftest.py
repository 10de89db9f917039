"""Gates over every store kind, for the runtime tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from callgate import Gate, Principal, Toolbox
from callgate.store import MemoryStore, SQLStore, Store
from tests.pg import POSTGRES_URL, drop_schema

ALICE = Principal(user="alice", tenant="acme", scopes={"r", "w"})

GateFactory = Callable[..., Gate]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_gate(
    store_kind: str, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[GateFactory]:
    """Build gates on the parametrized store; all are closed after the test."""
    gates: list[Gate] = []
    schemas: list[str] = []

    def factory(toolboxes: Iterable[Toolbox], **options: Any) -> Gate:
        store: Store
        if store_kind == "memory":
            store = MemoryStore()
        elif store_kind == "sqlite":
            store = SQLStore(f"sqlite:///{tmp_path / f'gate{len(gates)}.db'}")
        else:
            schema = f"test_rt_{uuid.uuid4().hex[:12]}"
            schemas.append(schema)
            store = SQLStore(POSTGRES_URL, schema=schema)
        gate = Gate(toolboxes, store=store, **options)
        gates.append(gate)
        return gate

    yield factory
    for gate in gates:
        await gate.aclose()
    for schema in schemas:
        await drop_schema(schema)


durable_stores = pytest.mark.parametrize(
    "store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
"""For tests about what outlives a process: they need a database, not memory."""
