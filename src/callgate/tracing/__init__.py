"""OpenTelemetry traces of governed calls and agent runs, off unless configured.

Tracing costs nothing until it is turned on: this module imports no part of
OpenTelemetry, and a gate without a tracer checks one attribute per call. It is
on when one of these holds as a gate opens (or an agent run starts):

- the application called :func:`enable` (with its own tracer provider, or the
  global one);
- ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
  set: callgate builds a tracer provider that exports over OTLP/HTTP (the
  ``otel`` extra) and makes it the global one if there is none yet;
- the application has set a global OpenTelemetry SDK tracer provider.

``CALLGATE_TRACING=off`` (or ``OTEL_SDK_DISABLED=true``) keeps it off whatever
else is set. What is emitted is described in ``docs/tracing.md``: a span per
governed tool call (``execute_tool {tool}``) with the chain's stages as events,
and a span per agent run (``invoke_agent``) with a ``chat {model}`` span per
model turn.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from callgate.tracing._calls import CallTracer

__all__ = ["current", "disable", "enable"]

logger = logging.getLogger(__name__)

_OTLP_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

_explicit: CallTracer | None = None
_disabled = False
_from_env: CallTracer | None = None
_env_tried = False
_from_global: tuple[object, CallTracer] | None = None


def enable(provider: Any = None) -> CallTracer:
    """Trace governed calls and agent runs with ``provider`` (an OpenTelemetry
    ``TracerProvider``; the global one if None). Gates opened from now on use it.

    With an SDK provider, callgate wraps its id generator so that a call made
    outside any span keeps its own ``trace_id`` as the trace's id (see
    ``docs/tracing.md``); everything else it generates as before.

    Raises:
        ImportError: ``opentelemetry-api`` is not installed.
    """
    from callgate.tracing._calls import CallTracer

    global _explicit, _disabled
    _explicit = CallTracer.build(provider)
    _disabled = False
    return _explicit


def disable() -> None:
    """Stop tracing: gates opened from now on, and agent runs started, emit nothing."""
    global _explicit, _disabled
    _explicit = None
    _disabled = True


def reset() -> None:
    """Forget :func:`enable` and :func:`disable`: configuration is read again (tests)."""
    global _explicit, _disabled, _from_env, _env_tried, _from_global
    _explicit = _from_env = _from_global = None
    _disabled = _env_tried = False


def current() -> CallTracer | None:
    """The tracer gates and agent runs use now, or None when tracing is off."""
    if _explicit is not None:
        return _explicit
    if _disabled or _off_by_env():
        return None
    if any(os.environ.get(name) for name in _OTLP_VARS):
        return _env_tracer()
    return _global_tracer()


def _off_by_env() -> bool:
    return (
        os.environ.get("CALLGATE_TRACING", "").strip().lower() in ("off", "0", "false", "no")
        or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    )


def _env_tracer() -> CallTracer | None:
    global _from_env, _env_tried
    if not _env_tried:
        _env_tried = True
        try:
            from callgate.tracing._setup import otlp_provider

            provider = otlp_provider()
        except ImportError as exc:
            logger.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but callgate cannot export traces "
                "(%s): install callgate[otel]",
                exc,
            )
            return None
        from callgate.tracing._calls import CallTracer

        _from_env = CallTracer.build(provider)
    return _from_env


def _global_tracer() -> CallTracer | None:
    """A tracer over the application's global SDK provider, if it set one."""
    global _from_global
    if "opentelemetry.sdk.trace" not in sys.modules:
        return None  # no SDK provider can exist: nothing to import, nothing to trace
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return None
    if _from_global is None or _from_global[0] is not provider:
        from callgate.tracing._calls import CallTracer

        _from_global = (provider, CallTracer.build(provider))
    return _from_global[1]
