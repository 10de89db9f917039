"""The one persistence interface every part of callgate writes through.

Everything a second gateway replica must see lives behind :class:`Store`: the
audit trail, idempotency records and spilled (oversized) results now; previews,
approvals, tasks and traces later. Two implementations ship: ``SQLStore``
(SQLAlchemy 2 async: SQLite by default, PostgreSQL for several replicas) and
``MemoryStore`` (a test double with the same semantics, no durability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from callgate.clock import Clock
from callgate.store.console_records import ConsoleRecords
from callgate.store.search_records import SearchRecords

AuditPhase = Literal["intent", "final", "decision", "late"]
"""``intent`` is written before a side-effecting tool runs, ``final`` once the call
has an outcome. An intent without a final is a call whose outcome is unknown.
``decision`` records a human's approval or denial (``call_id`` is then the
approval id, ``user`` the decider). ``late`` follows a ``final`` when the tool's
work outlived its deadline: how it ended after all (``outcome``, ``detail.late``);
the call's outcome stays the final's."""

IdempotencyState = Literal["pending", "done"]

ApprovalState = Literal["pending", "approved", "denied", "used"]
"""``pending`` until a human decides; ``approved`` until the approved call runs
(then ``used``, once); ``denied`` for good. Expiry is by ``expires_at``: a
pending or approved record past it counts as expired."""

ApprovedBy = Literal["another", "requester"]
"""Who may approve: ``another`` person than the requester (four eyes, the default),
or the ``requester`` themself too (a confirmation, e.g. answered in their MCP client)."""

Taint = Literal["private_data", "untrusted_content"]


@dataclass(kw_only=True, frozen=True)
class AuditRecord:
    """One append-only row of the audit trail.

    ``seq`` is assigned by the store on append (0 before that); records are
    returned in ``seq`` order, which is the order they became durable.
    """

    call_id: str
    phase: AuditPhase
    at: datetime
    trace_id: str
    tool: str
    user: str | None = None
    tenant: str | None = None
    session_id: str | None = None
    tool_version: str | None = None
    contract_hash: str | None = None
    args_hash: str | None = None
    risk: str | None = None
    decision: str | None = None
    decision_reason: str | None = None
    status: str | None = None
    outcome: str | None = None
    """``ok`` or an error kind (``construction``, ``permission``, ...)."""
    duration_ms: float | None = None
    attempts: int = 0
    idempotency_key: str | None = None
    dropped_fields: tuple[str, ...] = ()
    """Trusted fields the model tried to set; their values were discarded."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Operator-only detail (exception type and traceback, raw_ref, ...). Never
    shown to the model."""
    seq: int = 0


@dataclass(kw_only=True, frozen=True)
class IdempotencyRecord:
    scope: str
    """``["tenant","tool","key"]`` (JSON, ``null`` for no tenant): keys never
    collide across tenants or tools."""
    args_hash: str
    call_id: str
    state: IdempotencyState
    created_at: datetime
    expires_at: datetime
    envelope: dict[str, Any] | None = None
    """The Envelope (as JSON-able dict) once ``state == 'done'``."""


@dataclass(kw_only=True, frozen=True)
class StoredResult:
    """A full tool result kept so a truncated Envelope can be read on by cursor."""

    ref: str
    call_id: str
    tool: str
    tenant: str | None
    user: str | None
    content: Any
    """The full, JSON-able payload."""
    created_at: datetime
    expires_at: datetime
    text: str | None = field(default=None, compare=False, repr=False)
    """``content`` as JSON text, when the caller has it (the shape stage measured
    and cut that text): a store keeps it instead of serializing ``content`` again.
    Stores may leave it None in what they return."""


@dataclass(kw_only=True, frozen=True)
class ApprovalRecord:
    """A parked call waiting for (or bearing) a human decision.

    ``arguments`` are exactly what the tool will receive (trusted fields
    included); ``model_arguments`` what the model sent (validated), which the
    resumed call replays. The approval binds to ``tool`` + ``args_hash`` +
    ``user`` + ``tenant``: it cannot be used for anything else.
    """

    id: str
    tool: str
    arguments: dict[str, Any]
    model_arguments: dict[str, Any]
    args_hash: str
    user: str
    tenant: str | None
    session_id: str | None
    call_id: str
    """The call that was parked."""
    reason: str
    rule: str | None
    created_at: datetime
    expires_at: datetime
    state: ApprovalState = "pending"
    impact: dict[str, Any] | None = None
    """For a preview's apply: what the change will do (before/after, amounts)."""
    preview_id: str | None = None
    approved_by: ApprovedBy = "another"
    """Who may decide it (the rule's ``approved_by``): see :data:`ApprovedBy`."""
    approvers: list[dict[str, Any]] = field(default_factory=list)
    """The approver sets of the rules that required it, resolved when it was filed
    (``{"rule", "roles", "users", "owners", "unresolved"}``); an approver must be in
    each. Empty: anyone of its tenant but the requester. See :mod:`callgate.access`."""
    decided_by: str | None = None
    decided_at: datetime | None = None
    note: str | None = None
    """The approver's note, or the reason of a denial."""
    used_by_call: str | None = None
    result: dict[str, Any] | None = None
    """The Envelope of the call that ran once approved."""


@dataclass(kw_only=True, frozen=True)
class PreviewRecord:
    """What ``X_preview`` computed, bound to the exact arguments and caller."""

    id: str
    change: str
    """The apply tool's full name."""
    arguments: dict[str, Any]
    """Everything the apply function will receive (trusted fields included)."""
    args_hash: str
    user: str
    tenant: str | None
    impact: Any
    created_at: datetime
    expires_at: datetime
    approval_id: str | None = None


TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""Where a long-running call (an MCP task) is; the last three are terminal."""

ACTIVE_TASK_STATUSES: tuple[TaskStatus, ...] = ("working", "input_required")


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A call running in the background for a caller (the MCP Tasks extension).

    ``owner`` names the process running it, which renews ``lease_until`` while
    it runs; a ``working`` task whose lease ran out (its runner died) is failed
    by :meth:`Store.abandon_tasks` (its outcome is unknown). An
    ``input_required`` task runs nowhere: it waits for the answers to
    ``input_requests`` (collected in ``responses``) and is resumed, by any
    process, with ``arguments`` and ``request_state``. ``envelope`` is the
    Envelope its call ended with (JSON): what ``tasks/get`` shows, whether the
    task ``completed`` or ``failed``; ``error`` is the ``{code, message}`` of a
    task that failed without one (its server stopped, the protocol refused the
    call). ``result`` is only read for tasks that ended before envelopes were
    kept (the wire result itself).
    """

    id: str
    tool: str
    user: str
    tenant: str | None
    owner: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    status: TaskStatus = "working"
    message: str | None = None
    call_id: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None
    """The call's model-facing arguments, to resume it after input."""
    input_requests: dict[str, Any] | None = None
    """While ``input_required``: the questions still unanswered (wire JSON), by key."""
    responses: dict[str, Any] | None = None
    """While ``input_required``: the answers received so far this round, by key."""
    request_state: str | None = None
    """The state the resumed call continues from (kept here, never sent)."""
    lease_until: datetime | None = None
    envelope: dict[str, Any] | None = None


@dataclass(kw_only=True, frozen=True)
class HandleRecord:
    """State a tool keeps across calls for one caller, behind an opaque id.

    A handle is not a permission: ``user`` and ``tenant`` say whose it is, and
    the runtime hands it to nobody else. ``version`` starts at 1 and grows by one
    with every update, so concurrent updates cannot silently overwrite each other.
    Past ``expires_at`` it counts as absent.
    """

    id: str
    kind: str
    user: str
    tenant: str | None
    data: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    version: int = 1


RunStatus = Literal["running", "waiting_approval", "completed", "stopped", "failed"]
"""An agent run: ``running`` while its loop goes on; ``waiting_approval`` while a
call waits for a human (it can be resumed, by any process); ``completed`` (the
model answered), ``stopped`` (a limit ended it) or ``failed`` (the model could not
be reached) for good."""


@dataclass(kw_only=True, frozen=True)
class RunRecord:
    """An agent run as the store keeps it: its state (messages, pending calls,
    usage) as JSON, and its trace (model requests and responses, every Envelope)."""

    id: str
    user: str
    tenant: str | None
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    state: dict[str, Any]
    trace: list[dict[str, Any]] = field(default_factory=list)


class TaskRecords(Protocol):
    """The part of the store background calls (MCP tasks) use: see :class:`Store`."""

    async def create_task(self, record: TaskRecord) -> None: ...

    async def get_task(self, task_id: str) -> TaskRecord | None: ...

    async def finish_task(
        self,
        task_id: str,
        *,
        status: TaskStatus,
        at: datetime,
        message: str | None = None,
        call_id: str | None = None,
        envelope: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool: ...

    async def park_task(
        self,
        task_id: str,
        *,
        at: datetime,
        input_requests: dict[str, Any],
        request_state: str | None,
        call_id: str | None = None,
    ) -> bool: ...

    async def answer_task(
        self,
        task_id: str,
        responses: dict[str, Any],
        *,
        at: datetime,
        lease_until: datetime | None = None,
    ) -> TaskRecord | None: ...

    async def renew_task_lease(self, task_id: str, *, owner: str, until: datetime) -> bool: ...

    async def abandon_tasks(self, *, at: datetime, message: str) -> int: ...


class RunRecords(Protocol):
    """The part of the store agent runs use: see :class:`Store`."""

    async def save_run(self, record: RunRecord) -> None: ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...


@runtime_checkable
class Store(SearchRecords, ConsoleRecords, Protocol):
    """Persistence used by the gate. All methods are safe under concurrency.

    Tool search's records (embedding vectors, usage per tool) are declared in
    :class:`~callgate.store.search_records.SearchRecords`, which this extends.
    """

    url: str
    clock: Clock
    """What time it is when the store decides what has expired."""

    async def open(self) -> None:
        """Connect and bring the schema up to date (idempotent)."""

    async def close(self) -> None:
        """Release connections. The store may be opened again."""

    async def ping(self) -> None:
        """One trivial round trip to the database (a health check); raises what
        the database raises when it does not answer."""

    # audit -----------------------------------------------------------------
    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Append records in one transaction; durable when this returns.

        A store may also offer ``append_audit_now(records) -> bool``: the same
        append without yielding to the event loop, True if done (durable), False
        if it cannot right now (nothing written). The gate's group committer uses
        it for a lone call, which then skips the hand-off to the writer task.
        """

    async def list_audit(
        self, *, tail: int | None = None, call_id: str | None = None
    ) -> list[AuditRecord]:
        """Records oldest first; ``tail`` keeps the newest N."""

    async def count_session_calls(self, session_id: str, tool: str, args_hash: str) -> int:
        """How many ``final`` records with status ``ok`` the session has for this
        tool and argument hash."""

    async def count_outcomes(self, tool_prefix: str, *, since: datetime) -> tuple[int, int]:
        """Calls (``final`` records) of tools whose names start with ``tool_prefix``
        at or after ``since``, and how many of them ended in an error."""

    async def session_retries(self, session_id: str) -> int:
        """Retries spent in the session so far: sum of ``attempts - 1`` over its
        ``final`` records."""

    # idempotency -----------------------------------------------------------
    async def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Insert ``record`` (state ``pending``) unless a live record for its
        scope exists. Returns None when the claim succeeded, else the existing
        record. Expired records are replaced."""

    async def complete_idempotency(
        self, scope: str, envelope: dict[str, Any], *, call_id: str | None = None
    ) -> None:
        """Mark the scope's record ``done`` with the Envelope every later caller gets.

        With ``call_id``, only a record claimed by that call is completed (a claim
        that expired and was taken over by another call is left alone).
        """

    async def release_idempotency(self, scope: str, *, call_id: str) -> None:
        """Delete the scope's ``pending`` record claimed by ``call_id``, so the key
        can run again (used when the call had no effect, e.g. a transient error)."""

    async def get_idempotency(self, scope: str) -> IdempotencyRecord | None:
        """The live record for ``scope`` or None (expired records count as absent)."""

    # spilled results --------------------------------------------------------
    async def put_result(self, result: StoredResult) -> None:
        """Keep a full result. ``ref`` is unique."""

    async def get_result(self, ref: str) -> StoredResult | None:
        """The stored result, or None if unknown or expired."""

    # approvals ---------------------------------------------------------------
    async def create_approval(self, record: ApprovalRecord) -> None:
        """Insert a new (pending) approval. ``id`` is unique."""

    async def create_pending_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """File the pending ``record`` unless a live pending approval is bound to the
        same request (tool, args_hash, user, tenant); return the one that stands.

        Atomic across processes and replicas: concurrent identical calls share one
        pending approval instead of filling the inbox with copies.
        """

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """The record, whatever its state or expiry; None if unknown."""

    async def list_approvals(
        self,
        *,
        state: ApprovalState | None = None,
        tenant: str | None = None,
        limit: int = 100,
        live_at: datetime | None = None,
        expired_at: datetime | None = None,
        settled_at: datetime | None = None,
        oldest_first: bool = False,
    ) -> list[ApprovalRecord]:
        """Newest first (``oldest_first``: oldest first), optionally filtered by state
        and tenant; with ``live_at``, only those expiring after it; with
        ``expired_at``, only the pending or approved ones expired by then (expiring
        at or before it); with ``settled_at``, only those no longer waiting for a
        decision then (every one but the pending ones still live)."""

    async def find_approval(
        self, *, tool: str, args_hash: str, user: str, tenant: str | None
    ) -> ApprovalRecord | None:
        """The newest approval bound to exactly this call (any state)."""

    async def decide_approval(
        self,
        approval_id: str,
        *,
        state: Literal["approved", "denied"],
        decided_by: str,
        note: str | None,
        at: datetime,
    ) -> ApprovalRecord | None:
        """Move a ``pending``, unexpired approval to ``state`` atomically.

        Returns the updated record, or None when it was not pending (already
        decided, used, expired or unknown): a decision is taken once.
        """

    async def consume_approval(self, approval_id: str, *, call_id: str, at: datetime) -> bool:
        """Move an ``approved``, unexpired approval to ``used`` atomically; True
        for exactly one caller."""

    async def release_approval(self, approval_id: str, *, call_id: str) -> bool:
        """Give back an approval that ``call_id`` consumed but used without any effect
        (``used`` -> ``approved``, only if that call used it); True if it was."""

    async def set_approval_result(self, approval_id: str, envelope: dict[str, Any]) -> None:
        """Keep the Envelope of the call that ran once approved."""

    # previews ---------------------------------------------------------------
    async def create_preview(self, record: PreviewRecord) -> None:
        """Insert a preview. ``id`` is unique."""

    async def get_preview(self, preview_id: str) -> PreviewRecord | None:
        """The preview, even if expired (callers check ``expires_at``); None if unknown."""

    async def set_preview_approval(self, preview_id: str, approval_id: str) -> None:
        """Link the approval filed for applying this preview."""

    # session taints (the lethal trifecta) -----------------------------------
    async def add_session_taint(
        self, session_id: str, taint: Taint, tool: str, at: datetime
    ) -> None:
        """Note that the session's context now holds ``taint`` (first tool kept)."""

    async def session_taints(self, session_id: str) -> dict[str, str]:
        """``{taint: first tool that brought it}`` for the session."""

    # tasks --------------------------------------------------------------------
    async def create_task(self, record: TaskRecord) -> None:
        """Insert a task. ``id`` is unique."""

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task whatever its state (callers check ``expires_at``); None if unknown."""

    async def finish_task(
        self,
        task_id: str,
        *,
        status: TaskStatus,
        at: datetime,
        message: str | None = None,
        call_id: str | None = None,
        envelope: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Move an active task (``working`` or ``input_required``) to ``status``
        atomically; True for exactly one caller (a task ends once)."""

    async def park_task(
        self,
        task_id: str,
        *,
        at: datetime,
        input_requests: dict[str, Any],
        request_state: str | None,
        call_id: str | None = None,
    ) -> bool:
        """Move a ``working`` task to ``input_required`` with its questions; True if it was."""

    async def answer_task(
        self,
        task_id: str,
        responses: dict[str, Any],
        *,
        at: datetime,
        lease_until: datetime | None = None,
    ) -> TaskRecord | None:
        """Record answers to an ``input_required`` task's questions, atomically.

        Answered keys leave ``input_requests`` and join ``responses``; once none
        is left the task is ``working`` again, holding ``lease_until`` (the caller
        resumes it: exactly one caller sees that transition). Returns the updated
        task, or None when it is not waiting for input.

        Raises:
            ValueError: a key is not one of the task's pending questions.
        """

    async def renew_task_lease(self, task_id: str, *, owner: str, until: datetime) -> bool:
        """Extend a ``working`` task's lease for ``owner``; False once it is not
        working any more (finished, or cancelled by another process)."""

    async def abandon_tasks(self, *, at: datetime, message: str) -> int:
        """Fail every ``working`` task whose lease ran out before ``at`` (its
        runner died); returns how many."""

    # agent runs ---------------------------------------------------------------
    async def save_run(self, record: RunRecord) -> None:
        """Insert the run, or replace the stored one with the same ``id``."""

    # upstream listings ---------------------------------------------------------
    async def save_listing(self, name: str, key: str, listing: Any) -> None:
        """Keep what the upstream ``name`` served (JSON), for the upstream as
        configured now (``key``); replaces the one kept before."""

    async def get_listing(self, name: str, key: str) -> Any | None:
        """The listing kept for ``name`` as configured by ``key``; None if there
        is none or the upstream was configured otherwise when it was kept."""

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run whatever its status; None if unknown."""

    # handles ------------------------------------------------------------------
    async def create_handle(self, record: HandleRecord) -> None:
        """Insert a handle (``id`` is unique) and purge the expired ones."""

    async def get_handle(self, handle_id: str) -> HandleRecord | None:
        """The live handle; None if unknown or expired."""

    async def update_handle(
        self,
        handle_id: str,
        *,
        version: int,
        data: dict[str, Any],
        at: datetime,
        expires_at: datetime,
    ) -> HandleRecord | None:
        """Replace a live handle's ``data`` if it is still at ``version``, atomically.

        Returns the updated record (``version + 1``), or None when the handle is
        unknown, expired or was updated meanwhile: an update is based on what its
        caller read.
        """

    async def delete_handle(self, handle_id: str, *, version: int | None = None) -> bool:
        """Delete a live handle (only at ``version``, if given); True if it was."""
