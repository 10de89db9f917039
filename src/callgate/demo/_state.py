"""The demo's state: seeded records behind one lock, optionally kept in a file.

In memory (the default) every ``DemoState`` is a private, freshly seeded copy.
With a ``path`` the mutable tables (campaigns, deployments, the outbox) live in
that JSON file, so that separate processes (one ``callgate call`` per command)
see each other's changes: every transaction takes an exclusive ``fcntl.flock``
on ``<path>.lock``, reads the file, and writes it back atomically (temporary
file + ``os.replace``) if it changed something. Deleting the file starts over
from the seeded data.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol, TypeVar

from pydantic import TypeAdapter

from callgate.clock import SYSTEM_CLOCK
from callgate.demo import _seed
from callgate.demo._records import (
    CampaignRecord,
    DeploymentRecord,
    NoteRecord,
    OutboxMessage,
)
from callgate.errors import ConstructionError, PermissionDenied, RuntimeFailure

STATE_FORMAT = 1
"""Version of the state file's layout."""


class _Owned(Protocol):
    """A dataclass record that belongs to a tenant."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def id(self) -> str: ...
    @property
    def tenant(self) -> str: ...


R = TypeVar("R", bound=_Owned)

_CAMPAIGNS = TypeAdapter(list[CampaignRecord])
_DEPLOYMENTS = TypeAdapter(list[DeploymentRecord])
_OUTBOX = TypeAdapter(list[OutboxMessage])


class DemoStateError(RuntimeFailure, RuntimeError):
    """The state file cannot be read (corrupt, or written by another format)."""


class DemoState:
    """One tenant-partitioned copy of the seeded data.

    Records are immutable; ``update`` swaps a whole record, so a reader sees
    either the old or the new record, never a mix. Tools read and write inside
    ``with state.transaction():`` (reentrant), which makes check-then-write
    sequences atomic between threads and, for a file-backed state, between
    processes.

    Args:
        clock: Returns the current time (UTC); tests may pass a fixed one.
        path: A JSON file holding the mutable tables. It is seeded on first use
            (when it does not exist or is empty). ``None`` (the default) keeps
            everything in memory, private to this object.

    Raises:
        DemoStateError: ``path`` holds something other than a demo state.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = SYSTEM_CLOCK.now,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._dirty = False
        self.clock = clock
        self.path = Path(path) if path is not None else None
        self.campaigns: dict[str, CampaignRecord] = {}
        self.deployments: dict[str, DeploymentRecord] = {}
        self.notes: dict[str, NoteRecord] = {n.id: n for n in _seed.NOTES}
        self.outbox: list[OutboxMessage] = []
        self._seed()
        if self.path is not None:
            with self.transaction():
                pass  # loads the file, or seeds it

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the state for a read or a read-modify-write (reentrant).

        For a file-backed state the outermost transaction locks the file against
        other processes, reads it (another process may have changed it) and
        writes back what changed. A transaction that raises writes nothing.
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._depth = 1
            self._dirty = False
            try:
                if self.path is None:
                    yield
                else:
                    with self._file_lock(self.path):
                        self._load(self.path)
                        yield
                        if self._dirty:
                            self._save(self.path)
            finally:
                self._depth = 0
                self._dirty = False

    def _seed(self) -> None:
        self._replace_tables(list(_seed.CAMPAIGNS), list(_seed.DEPLOYMENTS), [])

    def _replace_tables(
        self,
        campaigns: list[CampaignRecord],
        deployments: list[DeploymentRecord],
        outbox: list[OutboxMessage],
    ) -> None:
        # In place: a caller may hold a table it passes to ``update``.
        self.campaigns.clear()
        self.campaigns.update((c.id, c) for c in campaigns)
        self.deployments.clear()
        self.deployments.update((d.id, d) for d in deployments)
        self.outbox[:] = outbox

    def campaigns_of(self, tenant: str) -> list[CampaignRecord]:
        with self.transaction():
            return [c for c in self.campaigns.values() if c.tenant == tenant]

    def notes_of(self, tenant: str) -> list[NoteRecord]:
        with self.transaction():
            return [n for n in self.notes.values() if n.tenant == tenant]

    def update(self, table: dict[str, R], record: R, **changes: Any) -> R:
        """Replace ``record`` in ``table`` by a copy with ``changes``; returns the copy."""
        with self.transaction():
            new = replace(record, **changes)
            table[new.id] = new
            self._dirty = True
            return new

    def queue_email(
        self, *, sender: str, to: Iterable[str], subject: str, body: str
    ) -> OutboxMessage:
        with self.transaction():
            message = OutboxMessage(
                message_id=f"msg-{len(self.outbox) + 1:04d}",
                sender=sender,
                to=tuple(to),
                subject=subject,
                body=body,
                queued_at=self.clock(),
            )
            self.outbox.append(message)
            self._dirty = True
            return message

    # -- the file ---------------------------------------------------------------

    @staticmethod
    @contextmanager
    def _file_lock(path: Path) -> Iterator[None]:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A separate lock file: os.replace gives the state file a new inode.
        with open(path.with_name(path.name + ".lock"), "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _load(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        if not text.strip():
            # First use (or deleted to start over): seed the file.
            self._seed()
            self._dirty = True
            return
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
                raise ValueError(f"not a demo state of format {STATE_FORMAT}")
            campaigns = _CAMPAIGNS.validate_python(data["campaigns"])
            deployments = _DEPLOYMENTS.validate_python(data["deployments"])
            outbox = _OUTBOX.validate_python(data["outbox"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DemoStateError(
                f"{path} is not a readable demo state ({exc}); delete it to start over from "
                "the seeded data"
            ) from None
        self._replace_tables(campaigns, deployments, outbox)

    def _save(self, path: Path) -> None:
        data = {
            "format": STATE_FORMAT,
            "campaigns": _CAMPAIGNS.dump_python(list(self.campaigns.values()), mode="json"),
            "deployments": _DEPLOYMENTS.dump_python(list(self.deployments.values()), mode="json"),
            "outbox": _OUTBOX.dump_python(self.outbox, mode="json"),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            handle: IO[str]
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


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
