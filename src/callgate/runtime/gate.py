"""Gate: the public entry point that runs tool calls through the governed chain."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from callgate import access
from callgate.clock import Clock
from callgate.codemode.settings import CodeModeSettings
from callgate.codemode.suspend import program_waiting_on
from callgate.codemode.tool import RUN_CODE
from callgate.contract import Principal, Toolbox, ToolNames, ToolSink, ToolSpec
from callgate.contract.toolbox import ConnectedToolbox
from callgate.discovery.meta import CALL_TOOL, add_meta_tools, inner_call
from callgate.discovery.service import Discovery
from callgate.discovery.settings import DiscoverySettings
from callgate.errors import InvalidArgument
from callgate.ratelimit import RateLimiter, RateLimits
from callgate.runtime import changes, pipeline
from callgate.runtime._sync import LoopThread, closed, closes_at_exit
from callgate.runtime.approvals import ApprovalError, Approvals
from callgate.runtime.builtin import BUILTIN_TOOLBOX, builtin_toolbox
from callgate.runtime.call import Call
from callgate.runtime.check import Check, check
from callgate.runtime.envelope import Envelope
from callgate.runtime.inflight import InFlight
from callgate.runtime.limits import Limits
from callgate.runtime.policy import Policy
from callgate.runtime.reads import Reads
from callgate.runtime.registry import Registry
from callgate.runtime.runner import Runner
from callgate.runtime.services import Services
from callgate.runtime.stages.shape import READ_MORE_TOOL
from callgate.store import AuditRecord, GroupCommitter, Store
from callgate.store.backlog import WriteBacklog
from callgate.store.base import RunRecords, StoredResult, TaskRecords
from callgate.store.console_records import ReadRecords
from callgate.store.urls import default_store_url, store_from_url

if TYPE_CHECKING:
    from callgate.codemode.sandbox import Sandbox

MAX_KEY_CHARS = 255
"""Longest idempotency key: it is stored, indexed and echoed in every Envelope."""


class Gate:
    """Runs tool calls through the governed chain.

    Example:
        gate = Gate([ops], store="sqlite:///callgate.db")
        env = await gate.call("ops.deploy_status", {"deploy_id": "D-1"}, principal=alice)

    Use it as an async context manager (or call ``aclose``) so queued audit
    records are flushed and connections closed. From synchronous code use
    ``call_sync``, which runs the gate on a private event loop thread; do not mix
    the two styles on one Gate.

    Args:
        toolboxes: the tools to serve. A ``callgate`` toolbox with
            ``callgate.read_more`` (to page through truncated results) is added.
        store: a Store, a URL (``sqlite:///file.db``, ``postgresql://...``), or
            None for ``$CALLGATE_STORE`` / the user's data directory. The gate
            opens the store on first use and closes it in ``aclose``.
        policy: decides allow / deny / require_approval; allows everything if None.
        limits: timeouts, retries, result size; see ``Limits``.
        context: gate-wide trusted values for trusted fields not set by the principal.
        secrets: gate-wide trusted values that are credentials (API keys, tokens):
            like ``context``, but redacted wherever a call's inputs are kept or
            shown (approvals, previews, elicitations, the audit's detail). Tools
            receive them through trusted fields (``Secret[str]`` or ``Trusted[str]``).
        clock: what time it is for everything that expires (approvals, previews,
            idempotency keys, results, handles, tasks); the gate's store reads the
            same clock (it is given to it). By default the store's own, the system
            clock unless the store was made with another: see :mod:`callgate.clock`.
        rate_limits: per-principal and per-tool rate limits (``[limits.rate]``),
            kept where ``rate_limits.backend`` says (replicas share them through
            the store's PostgreSQL or Redis); none if None.
        discovery: how tools are disclosed and searched, and the skills
            (``[discovery]``, :mod:`callgate.discovery`); the defaults if None.
        code_mode: ``callgate.run_code`` and its limits (``[code_mode]``,
            :mod:`callgate.codemode`); off if None.

    Raises:
        InvalidArgument: a name given both in ``context`` and in ``secrets``.
        DuplicateToolbox: two toolboxes share a name.
        SkillError: a skill folder of ``discovery`` cannot be read.
    """

    def __init__(
        self,
        toolboxes: Iterable[Toolbox] = (),
        *,
        store: Store | str | None = None,
        policy: Policy | None = None,
        limits: Limits | None = None,
        context: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        rate_limits: RateLimits | None = None,
        discovery: DiscoverySettings | None = None,
        code_mode: CodeModeSettings | None = None,
    ) -> None:
        self.store: Store = (
            store
            if store is not None and not isinstance(store, str)
            else store_from_url(store or default_store_url())
        )
        if clock is not None:
            self.store.clock = clock  # one time for the gate and what it keeps
        self.clock: Clock = self.store.clock
        """What time it is for the gate (and its store)."""
        self.limits = limits or Limits()
        self.policy = policy or Policy()
        self.rate_limits = rate_limits if rate_limits is not None and rate_limits.enabled else None
        self.registry = Registry(toolboxes)
        self.sandbox: Sandbox | None = None
        """Where programs run (``callgate.run_code``); None without code mode."""
        settings = discovery or DiscoverySettings()
        skills = {}
        if settings.skills:
            from callgate.discovery.skills import load_skills, skills_toolbox

            skills = load_skills(settings.skills)
            if skills:
                self.registry.add(skills_toolbox(skills))
        self.discovery = Discovery(
            self.registry, settings, store=self.store, clock=self.clock, skills=skills
        )
        """Tool search and disclosure (see :mod:`callgate.discovery`)."""
        if self.registry.get(READ_MORE_TOOL) is None:
            box = builtin_toolbox(self.store, self.limits, self.registry, clock=self.clock)
            add_meta_tools(box, self.discovery)
            if code_mode is not None and code_mode.enabled:
                from callgate.codemode.sandbox import Sandbox
                from callgate.codemode.tool import add_code_tools

                self.sandbox = Sandbox(code_mode)
                add_code_tools(box, self, self.sandbox)
            self.registry.add(box)
        clash = set(context or {}) & set(secrets or {})
        if clash:
            raise InvalidArgument(f"{sorted(clash)} given both as context and as secrets")
        self._context = {**(context or {}), **(secrets or {})}
        self._secret_sources = frozenset(secrets or {})
        self.runner = Runner(
            tool_threads=self.limits.tool_threads, max_threads=self.limits.max_threads
        )
        """Runs tool, resource and prompt code under its deadline and caps."""
        self._services: Services | None = None
        self._in_flight = InFlight()
        self._open_lock: asyncio.Lock | None = None
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()

    # lifecycle ---------------------------------------------------------------
    async def open(self) -> None:
        """Open the store (creating or migrating its schema). Called on first use."""
        if self._services is not None:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._services is not None:
                return
            limiter = (
                RateLimiter.build(self.rate_limits, store=self.store, clock=self.clock)
                if self.rate_limits is not None
                else None
            )
            await self.store.open()
            # A lone call commits its record itself; concurrent ones share commits.
            committer = GroupCommitter(self.store, alone=lambda: self._in_flight.count <= 1)
            await committer.start()
            self.runner.start()
            backlog = WriteBacklog(self.store, limit=self.limits.backlog_limit)
            await backlog.start()
            services = Services(
                registry=self.registry,
                store=self.store,
                committer=committer,
                backlog=backlog,
                policy=self.policy,
                limits=self.limits,
                context=self._context,
                secret_sources=self._secret_sources,
                clock=self.clock,
                runner=self.runner,
                rate_limiter=limiter,
            )
            # Toolboxes that hold connections (a gateway's upstreams) start with the
            # gate, side by side: each waits a bounded time for its first listing.
            await asyncio.gather(*(box.open(self.store) for box in self.upstreams()))
            self._services = services

    def upstreams(self) -> list[ConnectedToolbox]:
        """The toolboxes that hold a connection (a gateway's upstream MCP servers),
        in name order: the gate opens and closes them with itself."""
        return [box for box in self.registry.toolboxes if isinstance(box, ConnectedToolbox)]

    async def aclose(self) -> None:
        """Wait for calls in flight, flush queued audit records, close the store.

        Writes kept because the store did not answer (see :meth:`reconcile`) get
        a last try; those the store still does not take are logged as errors.
        """
        # Closing under running calls would lose their audit records.
        await self._in_flight.idle.wait()
        if self._services is not None:
            # Late records of stray tool work go out while the gate is still open.
            await self.runner.aclose()
        services, self._services = self._services, None
        if services is not None:
            await self.discovery.aclose()
            if self.sandbox is not None:
                await self.sandbox.aclose()
            await asyncio.gather(*(box.aclose() for box in self.upstreams()))
            await services.committer.aclose()
            await services.backlog.aclose()
            if services.rate_limiter is not None:
                await services.rate_limiter.aclose()
            await self.store.close()

    async def reconcile(self) -> int:
        """Write now what the store could not take as calls ended; how many still wait.

        When the store does not answer as a call ends (a locked SQLite file,
        terminated PostgreSQL connections), its caller is told so (``transient``,
        or ``unknown_outcome`` once a side effect may have started) and its final
        audit record, idempotency answer and approval result are kept in memory.
        A background task writes them once the store answers; this writes them now.
        """
        if self._services is None:
            return 0
        return await self._services.backlog.flush()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # calls -------------------------------------------------------------------
    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        principal: Principal,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        trace_id: str | None = None,
        sink: ToolSink | None = None,
        names: ToolNames | None = None,
        parent_call_id: str | None = None,
    ) -> Envelope:
        """Run one call through the chain and return its Envelope.

        Whatever the model sent (unknown tool, malformed JSON text, wrong types)
        and whatever the store does once open, the answer is an Envelope. A
        result is returned only with its audit record durable: when the store
        does not answer, the caller gets ``transient`` (nothing was changed) or
        ``unknown_outcome`` (a side effect may have started), never the driver's
        text, and the record is written later (see :meth:`reconcile`).

        Args:
            tool: the full tool name (``toolbox.tool``), or with ``names`` the
                caller's name for it.
            arguments: the model-filled arguments, as a mapping or JSON text.
            principal: the authenticated caller; trusted fields come from it.
            session_id: groups calls of one conversation (duplicate limit, retry budget).
            idempotency_key: the same key (per tenant and tool) runs the tool once;
                at most ``MAX_KEY_CHARS`` characters.
            timeout: seconds for this call; capped by ``Limits.max_timeout``.
            trace_id: to join an existing trace; a new one otherwise.
            sink: receives the tool's progress and log messages while it runs
                (``ToolContext.report_progress`` / ``log``); dropped without one.
            names: how the caller names tools (an MCP host, a provider's model):
                ``tool`` is looked up through it, and every text the model reads
                (close matches, next steps, hints) names tools its way. The
                Envelope, the audit and policy keep the full names.
            parent_call_id: the call this one is made from (a program's
                ``callgate.run_code`` call), kept in the audit's detail.

        Raises:
            InvalidArgument: a bad ``timeout`` or ``idempotency_key`` (a ValueError).
            Exception: the store cannot be opened at all (the gate cannot start).
        """
        if timeout is not None and not timeout > 0:
            raise InvalidArgument(f"timeout must be a positive number of seconds, not {timeout!r}")
        if idempotency_key is not None and len(idempotency_key) > MAX_KEY_CHARS:
            raise InvalidArgument(
                f"idempotency_key must be at most {MAX_KEY_CHARS} characters, "
                f"not {len(idempotency_key):,}"
            )
        await self.open()
        assert self._services is not None
        full = names.full(tool) if names is not None else tool
        if full == CALL_TOOL and (inner := inner_call(arguments)) is not None:
            tool, arguments = self._unwrapped(tool, inner, names)
        call = Call(
            services=self._services,
            tool_name=tool,
            raw_arguments=arguments if not isinstance(arguments, Mapping) else dict(arguments),
            principal=principal,
            session_id=session_id,
            idempotency_key=idempotency_key,
            timeout=timeout,
            sink=sink,
        )
        if names is not None:
            call.names = names
        if trace_id:
            call.trace_id = trace_id
        if parent_call_id is not None:
            call.detail["parent_call_id"] = parent_call_id
        with self._in_flight:
            return await pipeline.run(call)

    def target(
        self, tool: str, arguments: Mapping[str, Any] | str | None, names: ToolNames | None = None
    ) -> str | None:
        """The full name of the tool :meth:`call` would run for ``tool``: the one a
        ``callgate.call_tool`` call names, else ``tool``'s own; None if unknown."""
        full = names.full(tool) if names is not None else tool
        if full == CALL_TOOL and (inner := inner_call(arguments)) is not None:
            named, _ = self._unwrapped(tool, inner, names)
            return names.full(named) if names is not None else named
        return full

    async def check(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        principal: Principal,
        session_id: str | None = None,
    ) -> Check:
        """How the chain would take this call now, without running it: the tool,
        authorization, validation, injection, risk and the decision policy would
        reach (:mod:`callgate.runtime.check`). Nothing runs, is parked or is
        audited, and the rate limit is not spent."""
        await self.open()
        assert self._services is not None
        if tool == CALL_TOOL and (inner := inner_call(arguments)) is not None:
            tool, arguments = self._unwrapped(tool, inner, None)
        raw = arguments if not isinstance(arguments, Mapping) else dict(arguments)
        return await check(
            Call(
                services=self._services,
                tool_name=tool,
                raw_arguments=raw,
                principal=principal,
                session_id=session_id,
            )
        )

    def _unwrapped(
        self, tool: str, inner: tuple[str, Any], names: ToolNames | None
    ) -> tuple[str, Any]:
        """A ``callgate.call_tool`` call as the named tool's own call, which then
        passes the whole chain. The name may be the caller's (``ops__deploy_status``)
        or the full one; an unknown one is refused by the chain with close
        matches. ``call_tool`` of ``call_tool`` runs as itself (its body refuses it).
        """
        target, arguments = inner
        full = names.full(target) if names is not None else target
        if full is None and self.registry.get(target) is not None:
            full = target
        if full == CALL_TOOL:
            return tool, {"name": target, "arguments": arguments}
        if full is not None and names is not None:
            target = names.shown(full)
        return target, arguments

    async def read_more(
        self, cursor: str, *, principal: Principal, session_id: str | None = None
    ) -> Envelope:
        """Read the next page of a truncated result (a governed call itself)."""
        return await self.call(
            READ_MORE_TOOL, {"cursor": cursor}, principal=principal, session_id=session_id
        )

    async def kept_result(self, ref: str) -> StoredResult | None:
        """The whole result the chain kept under an Envelope's ``raw_ref``, None once
        expired: for code that made the call itself (a program); a model pages
        through :meth:`read_more` instead."""
        await self.open()
        return await self.store.get_result(ref)

    def call_sync(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        principal: Principal,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        trace_id: str | None = None,
        sink: ToolSink | None = None,
        names: ToolNames | None = None,
    ) -> Envelope:
        """``call`` for synchronous code (runs on the gate's own event loop thread).

        ``sink`` is called on that thread, as the tool reports progress or logs.

        The thread does not keep the process alive: a gate that is never closed
        is closed at interpreter exit. ``close_sync`` (or ``with Gate(...)``)
        closes it earlier.
        """
        loop = self._sync_loop()

        async def _go() -> Envelope:
            return await self.call(
                tool,
                arguments,
                principal=principal,
                session_id=session_id,
                idempotency_key=idempotency_key,
                timeout=timeout,
                trace_id=trace_id,
                sink=sink,
                names=names,
            )

        return loop.call(_go)

    def close_sync(self) -> None:
        """``aclose`` for synchronous code; also stops the gate's loop thread."""
        with self._loop_lock:
            loop, self._loop_thread = self._loop_thread, None
        closed(self)
        if loop is not None:
            try:
                loop.call(self.aclose)
            finally:
                loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()

    def _sync_loop(self) -> LoopThread:
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
                closes_at_exit(self)
            return self._loop_thread

    async def reads(self) -> Reads:
        """How resources and prompts are served: their functions run on the gate's
        runner, and every read is audited (see :mod:`callgate.runtime.reads`)."""
        await self.open()
        assert self._services is not None
        return Reads(self._services, busy=self._in_flight)

    # approvals -------------------------------------------------------------
    async def approvals(self) -> Approvals:
        """The human side of approvals: list, get, approve, deny (decisions audited)."""
        await self.open()
        assert self._services is not None
        return Approvals(self.store, audit=self._services.committer, clock=self.clock)

    async def impact_now(self, preview_id: str) -> Any:
        """A preview's impact computed again now (:func:`changes.impact_now`); raises
        LookupError for an unknown preview or a change without a previewer."""
        await self.open()
        preview = await self.store.get_preview(preview_id)
        if preview is None:
            raise LookupError(f"no preview {preview_id}")
        return await changes.impact_now(self._services, preview)

    async def resume(
        self, approval_id: str, *, principal: Principal, session_id: str | None = None
    ) -> Envelope:
        """Run an approved call: exactly the parked arguments, through the whole chain
        (for a program's call, the program goes on where it waited).

        The call is authorized again with ``principal`` as it is now, and the
        approval is consumed by this one run; pending or denied approvals answer
        as the call itself would (``pending_approval``, permission error).

        Raises:
            ApprovalError: no such approval, or it belongs to another user or tenant.
        """
        await self.open()
        record = await self.store.get_approval(approval_id)
        if record is None:
            raise ApprovalError(f"no approval request {approval_id!r}", code="unknown")
        if not access.check(principal, access.Action.READ_OWN, record):
            raise ApprovalError(
                f"{approval_id} was filed by another user or tenant", code="unknown"
            )
        if self.sandbox is not None:  # a program's call: the program goes on
            program = await program_waiting_on(self.store, principal, approval_id)
            if program is not None:
                code, session = program
                return await self.call(
                    RUN_CODE, {"code": code}, principal=principal, session_id=session
                )
        return await self.call(
            record.tool,
            record.model_arguments,
            principal=principal,
            session_id=session_id if session_id is not None else record.session_id,
        )

    # introspection -----------------------------------------------------------
    def tools(self, principal: Principal | None = None, *, builtin: bool = True) -> list[ToolSpec]:
        """Tools in name order; with a principal, only those its scopes allow."""
        specs = self.registry.specs(principal)
        if not builtin:
            specs = [s for s in specs if s.toolbox != BUILTIN_TOOLBOX]
        return specs

    def tool(self, name: str) -> ToolSpec | None:
        """The tool of full name ``name`` (``toolbox.tool``), whoever may call it; None
        if the gate serves none. Listing it is not permission: every call is checked."""
        return self.registry.get(name)

    @property
    def toolboxes(self) -> tuple[Toolbox, ...]:
        """The toolboxes served, in name order (callgate's own included)."""
        return tuple(self.registry.toolboxes)

    def required_scopes(self) -> frozenset[str]:
        """Every scope a tool, resource or prompt of the gate requires: what a local
        principal that may use everything holds."""
        return frozenset().union(*(box.required_scopes() for box in self.registry.toolboxes))

    @property
    def store_url(self) -> str:
        """The store's URL as given (it may hold a password: mask it before showing it)."""
        return self.store.url

    async def tasks(self) -> TaskRecords:
        """Where background calls (MCP tasks) are kept, across processes and replicas."""
        await self.open()
        return self.store

    async def runs(self) -> RunRecords:
        """Where agent runs are kept (their state and trace), across processes."""
        await self.open()
        return self.store

    async def records(self) -> ReadRecords:
        """What the console reads: the audit filtered, runs, tasks, kept results, its sessions."""
        await self.open()
        return self.store

    async def outcomes(self, tool_prefix: str, *, since: datetime) -> tuple[int, int]:
        """Calls of the tools whose full names start with ``tool_prefix`` (``time.``:
        an upstream's) recorded since ``since``, and how many of them failed: from
        the audit, so every process writing to this store counts."""
        await self.open()
        return await self.store.count_outcomes(tool_prefix, since=since)

    async def ping(self) -> None:
        """Reach the store once (a health check); raises what it raises."""
        await self.open()
        await self.store.ping()

    async def audit(
        self, *, tail: int | None = None, call_id: str | None = None
    ) -> list[AuditRecord]:
        """Audit records oldest first: the newest ``tail``, or those of one call."""
        await self.open()
        return await self.store.list_audit(tail=tail, call_id=call_id)
