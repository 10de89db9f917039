"""The lethal trifecta: private data + untrusted content + a way out.

A session whose context has taken in private data (results of tools marked
``private_data``) *and* untrusted content (results of open-world reads, or of
any tool from an untrusted source) must not reach an exfiltration-capable tool
(open-world and not read-only: email, HTTP posts, messages) without a human's
approval, whatever policy would otherwise allow. What entered a session is
kept in the store, so every replica sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from callgate.contract import ToolSpec
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope, Status
from callgate.runtime.policy import Effect, Verdict
from callgate.store import Store

PRIVATE = "private_data"
UNTRUSTED = "untrusted_content"
RULE = "lethal-trifecta"
"""The rule name of a verdict the guard upgraded (audit and decision show it)."""


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


async def guard_for(
    store: Store,
    spec: ToolSpec,
    session_id: str | None,
    verdict: Verdict,
    *,
    shown: Callable[[str], str] = str,
) -> Verdict:
    """The trifecta check for a call of ``spec`` in ``session_id`` (see module docs).

    ``shown`` names tools in the reason as the caller sees them (the reason is
    in the text the model reads).
    """
    if verdict.effect is Effect.DENY or not session_id or not can_exfiltrate(spec):
        return verdict
    seen = await store.session_taints(session_id)
    if PRIVATE not in seen or UNTRUSTED not in seen:
        return verdict
    return Verdict(
        effect=Effect.REQUIRE_APPROVAL,
        reason=(
            f"this session has read private data (via {shown(seen[PRIVATE])}) and taken in "
            f"untrusted content (via {shown(seen[UNTRUSTED])}); {shown(spec.name)} can send "
            "data out, so "
            "a human must check what is being sent"
        ),
        rule=RULE,
    )


async def note_envelope(call: Call, envelope: Envelope) -> None:
    """After a call: remember what its answer brought into the session.

    A result (also a replayed one) brings what its tool brings; an error of an
    untrusted source brings its text, which is untrusted too (a pending call's
    explanation is callgate's own text: it brings nothing).
    """
    spec = call.spec
    if spec is None or not call.session_id:
        return
    if envelope.status is Status.OK:
        taints = taints_of(spec)
    elif envelope.status is Status.ERROR and not spec.trusted_source:
        taints = [UNTRUSTED]
    else:
        return
    for taint in taints:
        await call.services.store.add_session_taint(
            call.session_id,
            taint,  # type: ignore[arg-type]
            spec.name,
            call.now(),
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
