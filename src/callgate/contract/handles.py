"""Handles: state a tool keeps across calls, behind an opaque id with a stated TTL.

A tool that needs state across calls (a draft, a checklist run, a change set)
creates a handle through its context and returns the id to the model, which
passes it back in later calls::

    RUN = HandleKind(name="runbook run", prefix="run", ttl=timedelta(hours=2),
                     created_by="ops.runbook_start")

    async def runbook_start(note_id: str, ctx: ToolContext) -> dict[str, Any]:
        run = await ctx.handles.create(RUN, {"note_id": note_id, "done": []})
        return {"run": run.id, "expires_at": run.expires_at.isoformat()}

A handle is not a permission. It is bound to its creator (user and tenant) and
its kind; every use checks both, and another caller's handle looks exactly like
an unknown one. Unknown and expired handles raise :class:`UnknownHandle`, a
construction error that tells the model to create a new one. Handles live in the
gate's store, so every replica sees them; a handle expires ``ttl`` after its
last change, and tools should state that lifetime in their descriptions
(:attr:`HandleKind.lifetime` spells it).
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import anyio.from_thread

from callgate import access
from callgate.clock import Clock
from callgate.contract.identity import Principal
from callgate.errors import ConstructionError, InvalidArgument, TransientError
from callgate.store.base import HandleRecord

__all__ = ["Handle", "HandleConflict", "HandleKind", "HandleStore", "Handles", "UnknownHandle"]

_PREFIX = re.compile(r"[a-z]{2,8}")
# Letters and digits only: no "-" or "_" for a model to drop or a reader to
# mistake for the prefix's separator. 24 of 62 symbols: about 143 random bits.
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 24
_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


@dataclass(kw_only=True, frozen=True)
class HandleKind:
    """One kind of handle a toolbox hands out.

    Args:
        name: What the model calls it, in messages ("runbook run", "draft").
        prefix: 2-8 lowercase letters the ids start with (``run`` -> ``run_...``),
            so a model (and a human reading a transcript) can tell kinds apart.
        ttl: How long a handle lives after its last change (create or update).
        created_by: The tool that creates a new one, named in the error for an
            unknown or expired handle.
        plural: The plural of ``name``; ``name + "s"`` by default.

    Raises:
        InvalidArgument: A malformed ``prefix``, or a ``ttl`` that is not a positive
            whole number of seconds.
    """

    name: str
    prefix: str
    ttl: timedelta
    created_by: str
    plural: str | None = None

    def __post_init__(self) -> None:
        if not _PREFIX.fullmatch(self.prefix):
            raise InvalidArgument(
                f"handle prefix must be 2-8 lowercase letters, not {self.prefix!r}"
            )
        seconds = self.ttl.total_seconds()
        if seconds < 1 or seconds != int(seconds):
            raise InvalidArgument(
                f"handle ttl must be a positive whole number of seconds, not {seconds}"
            )

    @property
    def lifetime(self) -> str:
        """The TTL in words, e.g. ``2 hours`` or ``90 minutes``."""
        seconds = int(self.ttl.total_seconds())
        for unit, size in _UNITS:
            if seconds % size == 0:
                count = seconds // size
                return f"{count} {unit}{'' if count == 1 else 's'}"
        raise AssertionError("unreachable: every whole number of seconds has a unit")

    @property
    def lives(self) -> str:
        """The sentence tools put in their descriptions (and errors repeat)."""
        return f"{(self.plural or self.name + 's').capitalize()} live {self.lifetime} after their last change."


@dataclass(kw_only=True, frozen=True)
class Handle:
    """A live handle as its owner's tool sees it. ``data`` is a copy."""

    id: str
    kind: str
    data: dict[str, Any]
    version: int
    """Grows by one with every update; :meth:`Handles.update` is based on it."""
    created_at: datetime
    updated_at: datetime
    expires_at: datetime


class UnknownHandle(ConstructionError):
    """The handle does not exist, has expired, or is not the caller's (the three
    look alike on purpose: a handle id reveals nothing about other callers)."""

    def __init__(self, kind: HandleKind, handle_id: str) -> None:
        super().__init__(
            f"{kind.name} {handle_id!r} is unknown or expired. {kind.lives}",
            next_step=f"Create a new one with {kind.created_by}; do not guess or reuse ids.",
        )
        self.handle_id = handle_id


class HandleConflict(TransientError):
    """Another call changed the handle between this call's read and its update;
    this call's change was not made."""

    def __init__(self, kind: HandleKind, handle_id: str) -> None:
        super().__init__(
            f"{kind.name} {handle_id!r} was changed by another call at the same moment; "
            "this change was not made.",
            next_step="Call again; the tool will work on the current state.",
        )


class HandleStore(Protocol):
    """The part of :class:`~callgate.store.base.Store` handles need."""

    clock: Clock
    """Handles expire on the store's time."""

    async def create_handle(self, record: HandleRecord) -> None: ...

    async def get_handle(self, handle_id: str) -> HandleRecord | None: ...

    async def update_handle(
        self,
        handle_id: str,
        *,
        version: int,
        data: dict[str, Any],
        at: datetime,
        expires_at: datetime,
    ) -> HandleRecord | None: ...

    async def delete_handle(self, handle_id: str, *, version: int | None = None) -> bool: ...


class Handles:
    """The handles of one caller, as a tool reaches them (``ctx.handles``).

    Async tools await :meth:`create`, :meth:`get`, :meth:`update` and
    :meth:`close`; sync tools (in a worker thread) use the ``_sync`` variants.
    """

    def __init__(self, store: HandleStore, principal: Principal) -> None:
        self._store = store
        self._principal = principal
        self._user = principal.user
        self._tenant = principal.tenant

    async def create(self, kind: HandleKind, data: Mapping[str, Any]) -> Handle:
        """A new handle of ``kind`` holding ``data`` (JSON-able), bound to the caller."""
        now = self._store.clock.now()
        record = HandleRecord(
            id=f"{kind.prefix}_{''.join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))}",
            kind=kind.name,
            user=self._user,
            tenant=self._tenant,
            data=dict(data),
            created_at=now,
            updated_at=now,
            expires_at=now + kind.ttl,
        )
        await self._store.create_handle(record)
        return _handle(record)

    async def get(self, kind: HandleKind, handle_id: str) -> Handle:
        """The caller's live handle ``handle_id`` of ``kind``.

        Raises:
            UnknownHandle: unknown, expired, of another kind or another caller's.
        """
        record = await self._store.get_handle(handle_id)
        if (
            record is None
            or record.kind != kind.name
            or not access.check(self._principal, access.Action.READ_OWN, record)
        ):
            raise UnknownHandle(kind, handle_id)
        return _handle(record)

    async def update(self, kind: HandleKind, handle: Handle, data: Mapping[str, Any]) -> Handle:
        """Replace the data of ``handle`` (as read by :meth:`get`); renews its TTL.

        Raises:
            UnknownHandle: it expired (or was closed) since it was read.
            HandleConflict: another call updated it since it was read.
        """
        current = await self.get(kind, handle.id)  # the caller check, again
        if current.version != handle.version:
            raise HandleConflict(kind, handle.id)
        now = self._store.clock.now()
        record = await self._store.update_handle(
            handle.id, version=handle.version, data=dict(data), at=now, expires_at=now + kind.ttl
        )
        if record is None:
            # Lost the race in the moment between the check and the update.
            raise HandleConflict(kind, handle.id)
        return _handle(record)

    async def close(self, kind: HandleKind, handle_id: str) -> Handle:
        """Delete the caller's handle; its last state.

        Raises:
            UnknownHandle: unknown, expired, of another kind or another caller's.
            HandleConflict: another call updated it meanwhile (it is kept).
        """
        handle = await self.get(kind, handle_id)
        if not await self._store.delete_handle(handle_id, version=handle.version):
            raise HandleConflict(kind, handle_id)
        return handle

    def create_sync(self, kind: HandleKind, data: Mapping[str, Any]) -> Handle:
        """:meth:`create` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(self.create, kind, data)

    def get_sync(self, kind: HandleKind, handle_id: str) -> Handle:
        """:meth:`get` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(self.get, kind, handle_id)

    def update_sync(self, kind: HandleKind, handle: Handle, data: Mapping[str, Any]) -> Handle:
        """:meth:`update` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(self.update, kind, handle, data)

    def close_sync(self, kind: HandleKind, handle_id: str) -> Handle:
        """:meth:`close` for a sync tool (called from its worker thread)."""
        return anyio.from_thread.run(self.close, kind, handle_id)


def _handle(record: HandleRecord) -> Handle:
    return Handle(
        id=record.id,
        kind=record.kind,
        data=record.data,
        version=record.version,
        created_at=record.created_at,
        updated_at=record.updated_at,
        expires_at=record.expires_at,
    )
