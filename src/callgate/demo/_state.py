"""The demo's in-process state: seeded records behind one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, TypeVar

from callgate.demo import _seed
from callgate.demo._records import (
    CampaignRecord,
    DeploymentRecord,
    NoteRecord,
    OutboxMessage,
)
from callgate.errors import ConstructionError, PermissionDenied


class _Owned(Protocol):
    """A dataclass record that belongs to a tenant."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def id(self) -> str: ...
    @property
    def tenant(self) -> str: ...


R = TypeVar("R", bound=_Owned)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DemoState:
    """One tenant-partitioned copy of the seeded data, private to a ``toolboxes()`` call.

    Records are immutable; ``update_*`` swaps a whole record under the lock, so
    concurrent tool calls (the gate runs sync tools in worker threads) see
    either the old or the new record, never a mix, and check-then-write
    sequences (``with state.lock:``) are atomic.

    Args:
        clock: returns the current time (UTC); tests may pass a fixed one.
    """

    def __init__(self, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.campaigns: dict[str, CampaignRecord] = {c.id: c for c in _seed.CAMPAIGNS}
        self.deployments: dict[str, DeploymentRecord] = {d.id: d for d in _seed.DEPLOYMENTS}
        self.notes: dict[str, NoteRecord] = {n.id: n for n in _seed.NOTES}
        self.outbox: list[OutboxMessage] = []

    def campaigns_of(self, tenant: str) -> list[CampaignRecord]:
        with self.lock:
            return [c for c in self.campaigns.values() if c.tenant == tenant]

    def notes_of(self, tenant: str) -> list[NoteRecord]:
        with self.lock:
            return [n for n in self.notes.values() if n.tenant == tenant]

    def update(self, table: dict[str, R], record: R, **changes: Any) -> R:
        """Replace ``record`` in ``table`` by a copy with ``changes``; returns the copy."""
        with self.lock:
            new = replace(record, **changes)
            table[new.id] = new
            return new

    def queue_email(
        self, *, sender: str, to: Iterable[str], subject: str, body: str
    ) -> OutboxMessage:
        with self.lock:
            message = OutboxMessage(
                message_id=f"msg-{len(self.outbox) + 1:04d}",
                sender=sender,
                to=tuple(to),
                subject=subject,
                body=body,
                queued_at=self.clock(),
            )
            self.outbox.append(message)
            return message


def owned(
    table: dict[str, R],
    object_id: str,
    tenant: str,
    *,
    kind: str,
    id_format: str,
    finder: str,
) -> R:
    """The record ``object_id`` of ``tenant``.

    Raises:
        ConstructionError: no record has that id (the message gives the id format
            and the tool that finds ids).
        PermissionDenied: the record belongs to another tenant.
    """
    record = table.get(object_id.strip().upper())
    if record is None:
        raise ConstructionError(
            f"There is no {kind} with id {object_id!r}. {kind.capitalize()} ids look like "
            f"{id_format}.",
            next_step=f"{finder} Do not guess ids.",
        )
    if record.tenant != tenant:
        raise PermissionDenied(
            f"{kind.capitalize()} {record.id} belongs to another tenant; you can only see "
            f"and change your own organization's {kind}s.",
            next_step="Do not retry. Check the id with the user; it is not one of theirs.",
        )
    return record
