"""Secret values reach the tool and nothing else.

A trusted field is secret when its marker says so (``Secret[...]``) or when it
is filled from a secret of the gate's context (``Gate(secrets=...)``, the
config's ``[secrets]``). Wherever a call's inputs are kept or shown (approval
records, previews, the elicitation that asks a human, the CLI and console) the
value reads :data:`~callgate.contract.REDACTED`; the argument hash that binds an
approval or a preview is computed over that redacted form too, so no digest of
a secret is stored either. When the tool finally runs, the value is injected
afresh from the gate's context. Operator text built from exceptions (the audit's
``detail``) has the injected secret values replaced as well.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from callgate.contract import REDACTED, ToolSpec

__all__ = ["redact", "scrub", "secret_fields"]


def secret_fields(spec: ToolSpec, secret_sources: Collection[str]) -> frozenset[str]:
    """The trusted fields of ``spec`` that hold secrets."""
    return frozenset(
        name
        for name, marker in spec.trusted_fields.items()
        if marker.secret or (marker.source or name) in secret_sources
    )


def redact(arguments: Mapping[str, Any], secret: Collection[str]) -> dict[str, Any]:
    """``arguments`` with every secret field's value replaced by ``REDACTED``."""
    if not secret:
        return dict(arguments)
    return {k: (REDACTED if k in secret else v) for k, v in arguments.items()}


def scrub(value: Any, secrets: Collection[str]) -> Any:
    """``value`` (operator detail: strings, lists, dicts) with secret strings replaced."""
    needles = [s for s in secrets if isinstance(s, str) and len(s) >= 4]
    if not needles:
        return value
    return _scrub(value, needles)


def _scrub(value: Any, needles: list[str]) -> Any:
    if isinstance(value, str):
        for needle in needles:
            value = value.replace(needle, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {k: _scrub(v, needles) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, needles) for v in value]
    return value
