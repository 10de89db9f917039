"""Tracer providers: the one callgate builds from OTLP settings, and trace ids.

A governed call made outside any span starts a trace of its own; its id should
be the call's ``trace_id`` (what the Envelope and the audit carry), not a second
random one. :class:`CallTraceIds` makes that so for an SDK provider: it hands
out the id a call asked for (through a context variable, set only around the
start of that call's span) and otherwise defers to the generator it wraps.
"""

from __future__ import annotations

import contextvars
import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

wanted_trace_id: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "callgate_wanted_trace_id", default=None
)
"""The trace id the next root span should get (a call's own), or None."""


class CallTraceIds(IdGenerator):
    """Gives a root span the trace id a call asked for, else what ``inner`` gives."""

    def __init__(self, inner: IdGenerator) -> None:
        self.inner = inner

    def generate_span_id(self) -> int:
        return self.inner.generate_span_id()

    def generate_trace_id(self) -> int:
        wanted = wanted_trace_id.get()
        return wanted if wanted is not None else self.inner.generate_trace_id()


def adopt(provider: Any) -> bool:
    """Make ``provider`` give calls their own trace ids; False if it cannot (not
    an SDK provider: a call's root span then gets a remote parent carrying its id)."""
    if not isinstance(provider, TracerProvider):
        return False
    if not isinstance(provider.id_generator, CallTraceIds):
        # The SDK types the attribute as the default generator it infers; any IdGenerator works.
        provider.id_generator = CallTraceIds(provider.id_generator)  # type: ignore[assignment]
    return True


def otlp_provider() -> TracerProvider:
    """A provider exporting over OTLP/HTTP to where the ``OTEL_EXPORTER_OTLP_*``
    variables say, made the global one unless the application set its own.

    Raises:
        ImportError: ``opentelemetry-exporter-otlp-proto-http`` is not installed.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    name = os.environ.get("OTEL_SERVICE_NAME") or "callgate"
    provider = TracerProvider(
        resource=Resource.create({"service.name": name}),
        id_generator=CallTraceIds(RandomIdGenerator()),
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        # The MCP SDK's request spans (tools/call ...) then land in the same traces.
        trace.set_tracer_provider(provider)
    return provider
