"""A toolbox with one tool per behaviour the runtime tests need."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Literal

import anyio
from pydantic import BaseModel, Field

from callgate import (
    BusinessStateError,
    PermissionDenied,
    Toolbox,
    TransientError,
    Trusted,
)


class Deploy(BaseModel):
    id: str
    tenant: str
    state: str


@dataclass
class Counters:
    runs: dict[str, int] = field(default_factory=dict)
    threads: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: anyio.Event | None = None

    def hit(self, name: str) -> int:
        with self.lock:
            self.runs[name] = self.runs.get(name, 0) + 1
            return self.runs[name]


DEPLOYS = {"D-1": "acme", "D-2": "globex"}


def build(counters: Counters) -> Toolbox:
    box = Toolbox("t")

    @box.tool(scopes={"r"}, read_only=True, open_world=False)
    def status(deploy_id: str, tenant_id: Trusted[str]) -> Deploy:
        """Show a deployment.

        Args:
            deploy_id: Like D-1.
        """
        counters.hit("status")
        counters.threads.append(threading.current_thread().name)
        owner = DEPLOYS.get(deploy_id)
        if owner is None:
            from callgate import ConstructionError

            raise ConstructionError(f"No deployment {deploy_id!r}; ids look like D-1.")
        if owner != tenant_id:
            raise PermissionDenied(f"Deployment {deploy_id} belongs to another tenant.")
        return Deploy(id=deploy_id, tenant=tenant_id, state="running")

    @box.tool(scopes={"r"}, read_only=True)
    def forecast(city: Literal["Beijing", "Paris", "Lima"], days: int = 1) -> str:
        """Weather forecast."""
        return f"sunny in {city} for {days} days"

    @box.tool(scopes={"w"}, idempotent=False)
    async def transfer(amount: int, to: str) -> dict[str, object]:
        """Move money (not idempotent)."""
        counters.hit("transfer")
        await anyio.sleep(0.01)
        return {"moved": amount, "to": to}

    @box.tool(scopes={"w"}, idempotent=False)
    def ship(shipment_id: str) -> None:
        """Ship a parcel."""
        raise BusinessStateError(
            f"Shipment {shipment_id} has left the warehouse; weights can no longer change."
        )

    @box.tool(read_only=True)
    def broken() -> None:
        """Always fails unexpectedly."""
        raise RuntimeError("db password=hunter2 at internal-db-7.corp:5432")

    @box.tool(read_only=True, timeout=0.2)
    async def hang_read() -> None:
        """Never answers."""
        counters.hit("hang_read")
        await anyio.sleep(30)

    @box.tool(timeout=0.2)
    async def hang_write() -> None:
        """Never answers, and writes."""
        counters.hit("hang_write")
        await anyio.sleep(30)

    @box.tool(read_only=True, timeout=0.3)
    def hang_sync() -> None:
        """Sync tool that blocks."""
        time.sleep(1.0)

    @box.tool(read_only=True)
    def flaky(fail_times: int) -> str:
        """Fails transiently a few times, then answers."""
        n = counters.hit("flaky")
        if n <= fail_times:
            raise TransientError("upstream is restarting", retry_after=0.001)
        return f"ok after {n}"

    @box.tool(idempotent=False)
    def flaky_write() -> None:
        """A write that reports a transient failure."""
        counters.hit("flaky_write")
        raise TransientError("rate limited (429)")

    @box.tool(read_only=True)
    def rows(n: int, width: int = 40) -> list[dict[str, object]]:
        """Many rows."""
        return [{"i": i, "text": "x" * width} for i in range(n)]

    @box.tool(read_only=True)
    def blob(n: int) -> str:
        """One long string."""
        return "y" * n

    @box.tool(read_only=True)
    def note(n: int) -> dict[str, object]:
        """A note with a long body."""
        return {"id": "N-1", "title": "Runbook", "body": "".join(str(i % 10) for i in range(n))}

    @box.tool(read_only=True, concise=["id", "name"])
    def people() -> list[dict[str, object]]:
        """People, concise or detailed."""
        return [{"id": 1, "name": "Ann", "bio": "long bio " * 5, "email": "a@x.example"}]

    @box.tool(scopes={"w"}, idempotent=False)
    async def slow_write(ms: int) -> str:
        """A slow write, for cancellation."""
        counters.hit("slow_write")
        if counters.started is not None:
            counters.started.set()
        await anyio.sleep(ms / 1000)
        return "done"

    @box.tool(read_only=True)
    def notify(
        to: Annotated[
            list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$")]],
            Field(description="Recipients, as name@domain addresses"),
        ],
    ) -> int:
        """Count recipients."""
        return len(to)

    return box
