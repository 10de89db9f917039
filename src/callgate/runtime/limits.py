"""The bounds a gate enforces on every call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from callgate.errors import InvalidArgument


@dataclass(kw_only=True, frozen=True)
class Limits:
    """Bounds the gate enforces on every call.

    Raises:
        InvalidArgument: a bound that cannot work (a timeout not positive, fewer
            threads per tool than one, a result budget below its floor).
    """

    default_timeout: float = 30.0
    """Seconds a tool may run when its contract names no timeout."""
    max_timeout: float = 300.0
    """Hard maximum: no contract or caller can ask for more."""
    max_attempts: int = 3
    """Tries per call for transient failures of retry-safe tools (1 = no retry)."""
    session_retry_budget: int = 10
    """Retries a session may spend in all (needs a session id)."""
    backoff_base: float = 0.05
    backoff_max: float = 2.0
    duplicate_call_limit: int = 3
    """Successful calls of one tool with the same arguments per session before the
    next identical one is refused (0 disables)."""
    max_result_tokens: int = 4000
    """Estimated tokens of payload the model receives at most; the rest is kept
    in the store and readable by cursor."""
    max_result_bytes: int = 8 * 1024 * 1024
    """Largest result (as JSON text) a call may return: a result over it is neither
    kept in the store nor shown (see docs/chain.md, Shaping)."""
    idempotency_ttl: timedelta = timedelta(hours=24)
    approval_ttl: timedelta = timedelta(hours=24)
    """How long a parked call waits for a human, and an approval stays usable."""
    result_ttl: timedelta = timedelta(hours=24)
    max_argument_bytes: int = 1_000_000
    """Largest arguments accepted, measured as JSON text: beyond it a call is
    refused before validation (a ``construction`` error), never stored or echoed."""
    backlog_limit: int = 10_000
    """Writes (final audit records, idempotency answers) kept in memory while the
    store does not answer; beyond it they are dropped and logged as errors."""
    tool_threads: int = 8
    """Worker threads one sync tool (or resource, prompt, change helper) may hold,
    running or abandoned after a timeout: further calls wait for one, and once as
    many are stuck, new calls are refused as not responding. Also the number of
    stray async tasks (ignoring cancellation) a tool may have before it is refused."""
    max_threads: int = 40
    """Worker threads all sync tools of the gate may hold together."""

    def __post_init__(self) -> None:
        if self.default_timeout <= 0 or self.max_timeout <= 0:
            raise InvalidArgument("timeouts must be positive")
        if self.max_attempts < 1:
            raise InvalidArgument("max_attempts must be at least 1")
        if self.max_result_tokens < 50:
            raise InvalidArgument("max_result_tokens must be at least 50")
        if self.max_result_bytes < self.max_result_tokens * 4:
            raise InvalidArgument("max_result_bytes must hold at least max_result_tokens * 4 bytes")
        if self.max_argument_bytes < 1_000:
            raise InvalidArgument("max_argument_bytes must be at least 1,000")
        if self.backlog_limit < 1:
            raise InvalidArgument("backlog_limit must be at least 1")
        if self.tool_threads < 1 or self.max_threads < self.tool_threads:
            raise InvalidArgument("tool_threads must be at least 1 and at most max_threads")
