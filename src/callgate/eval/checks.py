"""Judging one run against its task's expectations.

A run succeeds when every check passes: it ended as expected, every required
call was made (with at least the expected arguments), no forbidden tool was
called, the answer matches, and the state read back after the run is right.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from callgate.eval.script import dig
from callgate.eval.tasks import CallCheck, StateCheck, Task

if TYPE_CHECKING:
    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

__all__ = ["MadeCall", "check_run", "duplicates", "is_subset"]


@dataclass(kw_only=True, frozen=True)
class MadeCall:
    """A call the model proposed and the gate answered (``pending_approval`` included)."""

    name: str
    arguments: Mapping[str, Any]
    status: str


def is_subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has everything ``expected`` has (objects by key, recursively)."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and is_subset(v, actual[k]) for k, v in expected.items()
        )
    return bool(expected == actual)


def duplicates(calls: Sequence[MadeCall]) -> int:
    """Calls with the same tool and arguments as an earlier call of the run."""
    seen: set[str] = set()
    count = 0
    for c in calls:
        key = c.name + json.dumps(c.arguments, sort_keys=True, default=str)
        count += key in seen
        seen.add(key)
    return count


def _call_made(check: CallCheck, calls: Sequence[MadeCall]) -> bool:
    return any(c.name == check.tool and is_subset(check.args, c.arguments) for c in calls)


async def _state(check: StateCheck, gate: Gate, principal: Principal) -> str | None:
    envelope = await gate.call(check.tool, dict(check.args), principal=principal)
    label = f"state {check.tool}{'.' + check.path if check.path else ''}"
    if envelope.payload is None or envelope.error is not None:
        return f"{label}: the call failed ({envelope.status.value})"
    try:
        value = dig(envelope.payload, check.path)
    except (LookupError, IndexError):
        return f"{label}: not in the result"
    if check.equals is not None and value != check.equals:
        return f"{label}: {value!r}, expected {check.equals!r}"
    if check.contains is not None:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if check.contains not in text:
            return f"{label}: does not contain {check.contains!r}"
    return None


async def check_run(
    task: Task,
    *,
    status: str,
    answer: str,
    calls: Sequence[MadeCall],
    gate: Gate,
    principal: Principal,
    reason: str = "",
) -> list[str]:
    """The failed checks of a run of ``task`` (empty: it succeeded); ``reason`` is
    why the loop ended the run, said when the run did not end as expected."""
    expect = task.expect
    failures = []
    if status != expect.status:
        why = f" ({reason})" if reason and status != "completed" else ""
        failures.append(f"ended {status}{why}, expected {expect.status}")
    for check in expect.calls:
        if not _call_made(check, calls):
            args = json.dumps(dict(check.args), sort_keys=True) if check.args else ""
            failures.append(f"no call to {check.tool} {args}".rstrip())
    called = {c.name for c in calls}
    failures += [
        f"called {name}, which it must not" for name in expect.not_called if name in called
    ]
    for text in expect.answer_contains:
        if text not in answer:
            failures.append(f"the answer does not contain {text!r}")
    if expect.answer_regex is not None and re.search(expect.answer_regex, answer) is None:
        failures.append(f"the answer does not match /{expect.answer_regex}/")
    for state in expect.state:
        problem = await _state(state, gate, principal)
        if problem is not None:
            failures.append(problem)
    return failures
