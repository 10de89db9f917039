"""What the stages of the chain share: the gate's collaborators and caches."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from callgate.clock import SYSTEM_CLOCK, Clock
from callgate.contract import ToolSpec
from callgate.ratelimit import RateLimiter
from callgate.runtime.envelope import Envelope
from callgate.runtime.limits import Limits
from callgate.runtime.policy import Policy
from callgate.runtime.registry import Registry
from callgate.runtime.runner import Runner
from callgate.runtime.validation import ArgumentValidator
from callgate.store import GroupCommitter, Store
from callgate.store.backlog import WriteBacklog
from callgate.tracing import current as current_tracer

if TYPE_CHECKING:
    from callgate.tracing._calls import CallTracer


@dataclass(kw_only=True, frozen=True)
class InFlight:
    """A call with an idempotency key that is running in this process."""

    args_hash: str
    future: asyncio.Future[Envelope | None]
    """Resolved with the Envelope every waiter gets, or None when the registrant
    left without one (cancelled, failed): waiters then look again."""


@dataclass(kw_only=True)
class Services:
    registry: Registry
    store: Store
    committer: GroupCommitter
    backlog: WriteBacklog
    """Writes the store could not take as calls ended, retried until it does."""
    policy: Policy
    limits: Limits
    context: Mapping[str, Any] = field(default_factory=dict)
    """Gate-wide trusted values (deployment, region, ...) for trusted fields."""
    secret_sources: frozenset[str] = frozenset()
    """Keys of ``context`` that hold secrets (see :mod:`callgate.runtime.redaction`)."""
    clock: Clock = SYSTEM_CLOCK
    """What time it is for whatever expires (see :mod:`callgate.clock`)."""
    runner: Runner = field(default_factory=Runner)
    """Runs tool code: deadlines, worker threads, stray work (see ``runtime/runner.py``)."""
    inflight: dict[str, InFlight] = field(default_factory=dict)
    rate_limiter: RateLimiter | None = None
    """Per-principal and per-tool rate limits; None (no rate stage) when none are set."""
    tracer: CallTracer | None = field(default_factory=current_tracer)
    """Emits each call's span (see :mod:`callgate.tracing`); None, the default, when
    tracing is not configured as the gate opens."""
    _validators: dict[str, ArgumentValidator] = field(default_factory=dict)

    def validator_for(self, spec: ToolSpec) -> ArgumentValidator:
        """The compiled validator of a tool, compiled once per contract version."""
        key = f"{spec.name}@{spec.contract_hash}"
        validator = self._validators.get(key)
        if validator is None:
            validator = self._validators[key] = ArgumentValidator(spec.input_schema)
        return validator
