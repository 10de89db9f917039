"""The stages of a previewed change's three tools (see :mod:`callgate.runtime.changes`).

A change (``toolbox.change(...)``) is served as ``*_preview``, ``*_apply`` and
``*_status``; the pipeline gives each its stages here, in one place, so that no
other stage asks which kind of tool it serves:

- :func:`bind` (apply and status, after inject): the preview id must name a
  preview of this caller (and, to apply, one still valid). The apply is then
  bound to exactly what was previewed: the apply function, the previewed
  arguments and trusted values, the preview id as idempotency key, and the check,
  made by whoever owns the run just before it, that the impact is unchanged.
- :func:`check_status` (status, instead of execute): what happened to the id.
- :func:`keep` (preview, after execute): the preview kept under a new id, the
  apply's policy decided now by the decide stage's own rules, its approval filed.
"""

from __future__ import annotations

import asyncio

from callgate.contract.change import ChangeBinding
from callgate.errors import ErrorKind
from callgate.runtime import changes
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.runner import Unresponsive


def _change(call: Call) -> ChangeBinding:
    assert call.spec is not None and call.spec.change is not None
    return call.spec.change


async def bind(call: Call) -> Envelope | None:
    """Stage 4b (apply, status): the preview this call acts on."""
    change = _change(call)
    refused = await changes.find(call, change)
    if refused is not None:
        return refused
    if change.role == "apply":
        changes.bind_apply(call, change)
    else:
        call.repeatable = True  # checking again is what a status is for
    return None


async def check_status(call: Call) -> Envelope | None:
    """Stage 7 of a status tool: read what happened to the preview id."""
    change = _change(call)
    timeout = call.effective_timeout()
    try:
        async with asyncio.timeout(timeout):
            call.payload = await changes.status(call, change)
    except Unresponsive as exc:
        return call.fail(
            ErrorKind.TRANSIENT,
            f"Could not check the live system: the check is not responding ({exc.stuck} "
            "earlier checks are still running).",
            retryable=True,
        )
    except TimeoutError:
        return call.fail(
            ErrorKind.TRANSIENT,
            f"Could not check within {timeout:g} seconds whether the change is in effect.",
            retryable=True,
        )
    return None


async def repeatable(call: Call) -> Envelope | None:
    """Stage 4b of a preview: previewing again is how a model recovers (expired,
    denied, changed), not a loop: it is exempt from the duplicate-call limit."""
    call.repeatable = True
    return None


async def keep(call: Call) -> Envelope | None:
    """Stage 7b of a preview: keep it, and say whether applying it needs a human."""
    call.payload = await changes.keep_preview(call, _change(call), call.payload)
    return None
