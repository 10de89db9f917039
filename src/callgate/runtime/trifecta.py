"""The lethal trifecta: private data + untrusted content + a way out.

A session whose context has taken in private data (results of tools marked
``private_data``) *and* untrusted content (results of open-world reads, or of
any tool from an untrusted source) must not reach an exfiltration-capable tool
(open-world and not read-only: email, HTTP posts, messages) without a human's
approval, whatever policy would otherwise allow. What entered a session is
kept in the store, so every replica sees it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from callgate.contract import ToolSpec
from callgate.runtime.call import Call
from callgate.runtime.policy import Effect, Verdict

PRIVATE = "private_data"
UNTRUSTED = "untrusted_content"


def taints_of(spec: ToolSpec) -> list[str]:
    """What a successful result of ``spec`` brings into the model's context."""
    out = []
    if spec.private_data:
        out.append(PRIVATE)
    eff = spec.effective_annotations
    # What an open-world read fetches is outside content; so is anything an
    # untrusted source returns. A trusted tool's write ("sent") brings none in.
    if not spec.trusted_source or (eff.open_world and eff.read_only):
        out.append(UNTRUSTED)
    return out


def can_exfiltrate(spec: ToolSpec) -> bool:
    eff = spec.effective_annotations
    return bool(eff.open_world and not eff.read_only)


async def note_result(call: Call) -> None:
    """After a successful call: remember what its result brought into the session."""
    assert call.spec is not None
    if not call.session_id:
        return
    for taint in taints_of(call.spec):
        await call.services.store.add_session_taint(
            call.session_id,
            taint,  # type: ignore[arg-type]
            call.spec.name,
            datetime.now(UTC),
        )


async def guard(call: Call, verdict: Verdict) -> Verdict:
    """Upgrade an allow to require_approval when the trifecta would be complete."""
    spec = call.spec
    assert spec is not None
    if verdict.effect is Effect.DENY or not call.session_id or not can_exfiltrate(spec):
        return verdict
    seen = await call.services.store.session_taints(call.session_id)
    if PRIVATE not in seen or UNTRUSTED not in seen:
        return verdict
    call.detail["trifecta"] = dict(seen)
    return Verdict(
        effect=Effect.REQUIRE_APPROVAL,
        reason=(
            f"this session has read private data (via {seen[PRIVATE]}) and taken in "
            f"untrusted content (via {seen[UNTRUSTED]}); {spec.name} can send data out, so "
            "a human must check what is being sent"
        ),
        rule="lethal-trifecta",
    )


def static_check(specs: Iterable[ToolSpec]) -> dict[str, list[str]] | None:
    """Where all three capabilities meet in one toolset: the tools of each, else None."""
    pool = list(specs)
    found = {
        PRIVATE: [s.name for s in pool if s.private_data],
        UNTRUSTED: [s.name for s in pool if UNTRUSTED in taints_of(s)],
        "exfiltration": [s.name for s in pool if can_exfiltrate(s)],
    }
    return found if all(found.values()) else None
