"""``callgate demo``: a scripted tour of the governed chain on the demo tools.

Each step is one real call through the gate (nothing is faked or bypassed),
with one line saying what to notice. The tour ends with the audit records of
its own calls. It needs no input and no network.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from callgate.cli import render
from callgate.cli._common import CliError, opened, safe_url
from callgate.cli.audit_view import dropped_fields, summarize
from callgate.config import GateConfig
from callgate.contract import Principal
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.gate import Gate
from callgate.runtime.limits import Limits
from callgate.store import AuditRecord, Store
from callgate.store.urls import store_from_url

ALICE = Principal(
    "alice@acme.example",
    tenant="acme",
    scopes=["campaigns:read", "campaigns:write", "notes:read", "email:send"],
    attributes={"domain": "acme.example"},
)
BOB = Principal("bob@acme.example", tenant="acme", scopes=["campaigns:read"])

TRUNCATION_LIMITS = Limits(max_result_tokens=300)
"""A deliberately small result budget for the truncation step."""


@dataclass(kw_only=True, frozen=True)
class Step:
    """One call of the tour and what it is meant to show."""

    title: str
    explain: str
    tool: str
    arguments: Mapping[str, Any]
    principal: Principal = ALICE
    expect: str
    """The status, or the error kind, the call should end with."""
    limits: Limits | None = None
    """Limits other than the config's, for this step's gate."""


STEPS = (
    Step(
        title="A successful read",
        explain="alice finds the 'Autumn Sale' campaigns: near-duplicate names come back "
        "ranked, each with its id.",
        tool="ops.campaigns_find",
        arguments={"query": "Autumn Sale"},
        expect="ok",
    ),
    Step(
        title="A validation error, with a did-you-mean",
        explain="A misspelled argument is caught before the tool runs; the error says "
        "what is allowed and what to do next.",
        tool="ops.budget_change_preview",
        arguments={"campaign_id": "C-101", "new_daily_budjet": 1500},
        expect="construction",
    ),
    Step(
        title="A refused call (missing scope)",
        explain="bob may read campaigns but not change them: authorization is checked on "
        "every call.",
        tool="ops.budget_change_preview",
        arguments={"campaign_id": "C-101", "new_daily_budget": 1500},
        principal=BOB,
        expect="permission",
    ),
    Step(
        title="A trusted field supplied by the model is dropped",
        explain="The arguments claim tenant 'globex'; the server sets tenant_id from alice's "
        "identity, so acme's campaign comes back.",
        tool="ops.campaigns_find",
        arguments={"query": "Autumn Sale_Search", "limit": 1, "tenant_id": "globex"},
        expect="ok",
    ),
    Step(
        title="Policy asks for a human: pending_approval",
        explain="An email to an address outside alice's domain matches a policy rule: "
        "nothing is sent until a human approves this exact request.",
        tool="ops.send_email",
        arguments={
            "to": ["buyer@globex.example"],
            "subject": "Autumn Sale budget",
            "body": "The Autumn Sale search budget goes up next week.",
        },
        expect="pending_approval",
    ),
    Step(
        title="A truncated result",
        explain=f"The long runbook note does not fit a {TRUNCATION_LIMITS.max_result_tokens}"
        "-token budget: the model gets the start and a cursor for the rest.",
        tool="ops.notes_read",
        arguments={"note_id": "N-1"},
        expect="ok",
        limits=TRUNCATION_LIMITS,
    ),
)


def _outcome(envelope: Envelope) -> str:
    if envelope.status is Status.ERROR and envelope.error is not None:
        return envelope.error.kind.value
    return envelope.status.value


async def run_tour(out: Console, config: GateConfig, store_url: str) -> None:
    """Run every step, print what happened, then the audit records of the tour.

    Args:
        out: where to print.
        config: the demo configuration (toolboxes and policy).
        store_url: the store the tour's calls are recorded in.

    Raises:
        CliError: the store URL is bad or the store cannot be opened.
        ConfigError: the demo tools cannot be loaded.
    """
    try:
        store = store_from_url(store_url)
    except ValueError as exc:
        raise CliError(f"--store: {exc}") from None
    session = f"demo-{uuid.uuid4().hex[:8]}"
    out.print(
        Text.assemble(
            ("callgate demo", "bold"),
            f": {len(STEPS)} calls through the governed chain, recorded in "
            f"{safe_url(store_url)} (session {session}).",
        )
    )
    records: list[AuditRecord] = []
    number = 0
    # Limits are gate-wide, so a step with its own runs on a gate of its own, on
    # the same store; each gate is closed (its audit flushed) before the next.
    for limits, steps in itertools.groupby(STEPS, key=lambda s: s.limits):
        gate = _gate(config, store, limits or config.limits)
        async with opened(gate):
            for step in steps:
                number += 1
                records.extend(await _run_step(out, gate, step, number, session))
    out.rule("What the audit trail says")
    render.print_audit(out, summarize(records))
    out.print(
        "Next: `callgate tools`, `callgate call ops.campaigns_find --args "
        '\'{"query": "Autumn"}\' --principal alice@acme.example --tenant acme --scopes '
        "campaigns:read`, `callgate audit`.",
        style="dim",
        soft_wrap=True,
    )


def _gate(config: GateConfig, store: Store, limits: Limits) -> Gate:
    return Gate(
        config.load_toolboxes(),
        store=store,
        policy=config.policy,
        limits=limits,
        context=config.context,
    )


async def _run_step(
    out: Console, gate: Gate, step: Step, number: int, session: str
) -> list[AuditRecord]:
    """Run and print one step; return its audit records (durable once the call returns)."""
    out.print()
    out.rule(f"{number}. {step.title}", align="left")
    out.print(step.explain, style="italic")
    who = step.principal
    out.print(
        Text.assemble(
            ("call ", "dim"),
            (step.tool, "bold"),
            (f" as {who.user} (scopes: {', '.join(sorted(who.scopes))})", "dim"),
        )
    )
    out.print(
        Text("args ", style="dim") + Text(json.dumps(step.arguments, ensure_ascii=False)),
        soft_wrap=True,
    )
    envelope = await gate.call(step.tool, step.arguments, principal=who, session_id=session)
    records = await gate.audit(call_id=envelope.call_id)
    render.render_envelope(out, envelope, dropped_fields=dropped_fields(records))
    if _outcome(envelope) != step.expect:
        out.print(
            f"(unexpected: this step should end with {step.expect!r}, "
            f"not {_outcome(envelope)!r}; the demo data may have changed)",
            style=render.WARNING,
        )
    return records
