"""Policy: rules with CEL conditions that decide allow, deny or require_approval.

Conditions are Common Expression Language (CEL) over four variables:

- ``tool``: name, toolbox, risk, scopes, read_only, destructive, idempotent,
  open_world, trusted, tags
- ``args``: the exact arguments the tool would receive (trusted fields included)
- ``principal``: user, tenant, scopes, roles, attributes
- ``session``: id (empty string when the call has none)
- ``impact``: for the apply of a previewed change, what the preview computed
  (an empty map otherwise)

CEL is side-effect free and always terminates, so policy written by operators
cannot hang or change the gate. All matching rules count and the strongest
effect wins: deny, then auto_approve (an explicit exception that grants the
approval another rule requires; honoured for tools of trusted sources only),
then require_approval, then allow. If none match, the policy's default applies.

A rule whose condition reads an argument the tool does not declare
(``args.amount`` for a tool without ``amount``) does not apply to that tool, so
one rule can speak about every tool that has an amount. Otherwise policy fails
closed: a condition that cannot be evaluated (a missing attribute such as
``principal.attributes.domain``, a type error) counts as matched for a deny or
require_approval rule and as not matched for an allow or auto_approve rule; ``has(...)`` tests
for optional keys explicitly.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from callgate.contract import Principal, RiskTier, ToolSpec
from callgate.contract.identity import InvalidIdentity, canonical, canonical_set
from callgate.errors import RuntimeFailure, UserError
from callgate.store.base import ApprovedBy

_ARG_REF = re.compile(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)|\bargs\[\s*[\"']([^\"']+)[\"']\s*\]")


def referenced_args(condition: str) -> frozenset[str]:
    """Top-level argument names a CEL condition reads (``args.x`` or ``args["x"]``)."""
    return frozenset(a or b for a, b in _ARG_REF.findall(condition))


class Effect(StrEnum):
    ALLOW = "allow"
    REQUIRE_APPROVAL = "require_approval"
    AUTO_APPROVE = "auto_approve"
    """Grants the approval another rule requires, for tools of trusted sources only
    (for an untrusted source it is ignored and the approval stays required)."""
    DENY = "deny"


_STRICTNESS = {Effect.ALLOW: 0, Effect.REQUIRE_APPROVAL: 1, Effect.AUTO_APPROVE: 2, Effect.DENY: 3}


class PolicyError(UserError, ValueError):
    """A rule is malformed (bad CEL, unknown effect or risk tier)."""


def _compile(expression: str, what: str) -> Any:
    """A compiled CEL program.

    Raises:
        PolicyError: naming ``what`` when the expression is not valid CEL.
    """
    # Imported here: the CEL package costs about 0.15 s to import (it brings its
    # own command line), paid only by a policy with conditions.
    import cel

    try:
        return cel.compile(expression)
    except (ValueError, RuntimeError) as exc:
        raise PolicyError(f"{what}: invalid CEL condition: {exc}") from None


@dataclass(kw_only=True, frozen=True)
class Approvers:
    """Who may approve what a rule requires; any one qualifies.

    Args:
        roles: holders of any of these roles (of the request's tenant).
        users: these named users.
        owner: a CEL expression over the rule's variables naming the resource
            owner's user id (or a list of them), evaluated when the approval is
            filed, e.g. ``"impact.owner"`` for a previewed change whose impact
            says whose campaign it is. If it cannot be evaluated or gives no user,
            nobody qualifies through it (fail closed) and the approval says why.

    Every approver is also of the request's tenant, and never the requester
    (unless the rule lets the requester confirm): see :mod:`callgate.access`.
    """

    roles: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    owner: str | None = None
    _owner_program: Any = field(default=None, repr=False, compare=False)

    def __init__(
        self,
        *,
        roles: Iterable[str] = (),
        users: Iterable[str] = (),
        owner: str | None = None,
    ) -> None:
        try:
            role_set = canonical_set("approver roles", roles)
            user_set = canonical_set("approver users", users)
        except InvalidIdentity as exc:
            raise PolicyError(str(exc)) from None
        if not role_set and not user_set and owner is None:
            raise PolicyError("approvers name nobody: give roles, users or an owner")
        program = _compile(owner, f"approvers owner {owner!r}") if owner is not None else None
        object.__setattr__(self, "roles", role_set)
        object.__setattr__(self, "users", user_set)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "_owner_program", program)

    @classmethod
    def parse(cls, value: Approvers | Mapping[str, Any] | None) -> Approvers | None:
        """From config: ``{roles = [...], users = [...], owner = "impact.owner"}``.

        Raises:
            PolicyError: unknown keys or wrong types.
        """
        if value is None or isinstance(value, Approvers):
            return value
        if not isinstance(value, Mapping):
            raise PolicyError("approvers must be a table with roles, users and/or owner")
        unknown = set(value) - {"roles", "users", "owner"}
        if unknown:
            raise PolicyError(f"approvers: unknown keys {sorted(unknown)}")
        for key in ("roles", "users"):
            if not isinstance(value.get(key, []), list | tuple | set | frozenset):
                raise PolicyError(f"approvers.{key} must be a list of strings")
        owner = value.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise PolicyError("approvers.owner must be a CEL expression (a string)")
        return cls(roles=value.get("roles", ()), users=value.get("users", ()), owner=owner)

    def resolve(self, rule: str | None, variables: Mapping[str, Any] | None) -> dict[str, Any]:
        """The set as stored on an approval: the owner evaluated for this call."""
        out: dict[str, Any] = {
            "rule": rule,
            "roles": sorted(self.roles),
            "users": sorted(self.users),
        }
        if self._owner_program is None:
            return out
        try:
            value = self._owner_program.execute(dict(variables or {}))
            found = [value] if isinstance(value, str) else list(value)
            owners = sorted({canonical("owner", v) for v in found})
        except Exception as exc:  # CEL errors, non-string values, invalid identities
            out["owners"] = []
            out["unresolved"] = f"the owner ({self.owner}) could not be determined: {exc}"[:300]
            return out
        out["owners"] = owners
        if not owners:
            out["unresolved"] = f"the owner ({self.owner}) names nobody"
        return out


@dataclass(kw_only=True, frozen=True)
class Rule:
    """One policy rule. Every given filter must match for the rule to apply.

    Args:
        effect: what happens when the rule matches.
        when: a CEL condition (see module docs); None matches every call.
        tools: glob patterns of tool names (``ops.*``); None matches every tool.
        risk: risk tiers the rule applies to; None matches every tier.
        reason: the text shown to the model (deny) or the approver.
        name: an identifier for the audit; defaults to the rule's position.
        approved_by: for ``require_approval``, who may approve: ``"another"``
            person than the requester (four eyes, the default), or the
            ``"requester"`` themself too: a confirmation of the exact inputs, which
            an MCP client can answer through elicitation. When several
            approval rules match, ``"another"`` wins.
        approvers: for ``require_approval``, which other people may approve
            (:class:`Approvers`: roles, named users, the resource owner); by
            default the policy's ``approvers``, else anyone of the request's
            tenant. When several approval rules match, an approver must satisfy
            each rule's set.
    """

    effect: Effect
    when: str | None = None
    tools: tuple[str, ...] | None = None
    risk: frozenset[RiskTier] | None = None
    reason: str | None = None
    name: str | None = None
    approved_by: ApprovedBy = "another"
    approvers: Approvers | None = None
    _program: Any = field(default=None, repr=False, compare=False)
    _args: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __init__(
        self,
        effect: Effect | str,
        *,
        when: str | None = None,
        tools: Iterable[str] | None = None,
        risk: Iterable[RiskTier | str] | None = None,
        reason: str | None = None,
        name: str | None = None,
        approved_by: ApprovedBy = "another",
        approvers: Approvers | Mapping[str, Any] | None = None,
    ) -> None:
        if approved_by not in ("another", "requester"):
            raise PolicyError(
                f"rule {name or when!r}: approved_by must be 'another' or 'requester', "
                f"not {approved_by!r}"
            )
        try:
            eff = Effect(effect)
            tiers = frozenset(RiskTier(r) for r in risk) if risk is not None else None
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        program = _compile(when, f"rule {name or when!r}") if when is not None else None
        object.__setattr__(self, "effect", eff)
        object.__setattr__(self, "when", when)
        object.__setattr__(self, "tools", tuple(tools) if tools is not None else None)
        object.__setattr__(self, "risk", tiers)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "approved_by", approved_by)
        object.__setattr__(self, "approvers", Approvers.parse(approvers))
        if self.approvers is not None and eff is not Effect.REQUIRE_APPROVAL:
            raise PolicyError(f"rule {name or when!r}: approvers apply to require_approval only")
        object.__setattr__(self, "_program", program)
        object.__setattr__(self, "_args", referenced_args(when) if when else frozenset())

    def applies_to(self, spec: ToolSpec) -> bool:
        """The cheap filters (tool name, risk, arguments read) that need no CEL."""
        if self._args and not self._args <= _declared(spec):
            return False
        if self.tools is not None and not any(
            fnmatch.fnmatchcase(spec.name, pat) for pat in self.tools
        ):
            return False
        return self.risk is None or spec.risk in self.risk

    def evaluate(self, activation: Mapping[str, Any]) -> bool:
        """Whether the condition holds.

        Raises:
            PolicyEvaluationError: the condition could not be evaluated.
        """
        if self._program is None:
            return True
        try:
            result = self._program.execute(dict(activation))
        except Exception as exc:  # the CEL runtime raises several exception types
            raise PolicyEvaluationError(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(result, bool):
            raise PolicyEvaluationError(
                f"condition returned {type(result).__name__}, not a boolean"
            )
        return result


def _declared(spec: ToolSpec) -> set[str]:
    names = {*spec.input_schema.get("properties", {}), *spec.trusted_fields}
    performer = spec.change.performer if spec.change is not None else None
    if performer is not None:
        # An apply tool acts on the previewed arguments: rules may read them.
        names |= {*performer.input_schema.get("properties", {}), *performer.trusted_fields}
    return names


class PolicyEvaluationError(RuntimeFailure, RuntimeError):
    """A CEL condition failed at evaluation time."""


@dataclass(kw_only=True, frozen=True)
class Verdict:
    effect: Effect
    reason: str | None
    rule: str | None
    problem: str | None = None
    """Operator-only: why a condition could not be evaluated (never shown to the model)."""
    approved_by: ApprovedBy = "another"
    """For ``require_approval``: who may approve (see :class:`Rule`)."""
    approvers: tuple[dict[str, Any], ...] = ()
    """For ``require_approval``: the approver sets of every matching approval rule
    (or the policy's default), resolved for this call (see :class:`Approvers`)."""

    def _rank(self) -> tuple[int, int]:
        # Among approvals, four eyes is stricter than the requester's confirmation.
        return _STRICTNESS[self.effect], int(self.approved_by == "another")


@dataclass(kw_only=True, frozen=True)
class Policy:
    """An ordered list of rules and a default effect."""

    rules: tuple[Rule, ...] = ()
    default: Effect = Effect.ALLOW
    approvers: Approvers | None = None
    """Who may approve when a rule requiring approval names nobody (the trifecta
    guard's approvals too); None: anyone of the request's tenant but the requester."""

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        *,
        default: Effect | str = Effect.ALLOW,
        approvers: Approvers | Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "rules", tuple(rules))
        object.__setattr__(self, "default", Effect(default))
        object.__setattr__(self, "approvers", Approvers.parse(approvers))

    def approver_sets(
        self, verdict: Verdict, variables: Callable[[], Mapping[str, Any]]
    ) -> tuple[dict[str, Any], ...]:
        """The resolved approver sets for an approval ``verdict`` (its rules' or the default)."""
        if verdict.approvers or self.approvers is None:
            return verdict.approvers
        return (self.approvers.resolve(None, variables() if self.approvers.owner else None),)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build from config (``{"default": ..., "rules": [{"effect": ..., "when": ...}]}``).

        Raises:
            PolicyError: a rule is malformed.
        """
        rules = []
        for i, raw in enumerate(data.get("rules", [])):
            if not isinstance(raw, Mapping) or "effect" not in raw:
                raise PolicyError(f"rule #{i + 1} needs an 'effect'")
            unknown = set(raw) - {
                "effect",
                "when",
                "tools",
                "risk",
                "reason",
                "name",
                "approved_by",
                "approvers",
            }
            if unknown:
                raise PolicyError(f"rule #{i + 1}: unknown keys {sorted(unknown)}")
            rules.append(Rule(**raw))
        return cls(
            rules, default=data.get("default", Effect.ALLOW), approvers=data.get("approvers")
        )

    def decide(self, spec: ToolSpec, variables: Callable[[], Mapping[str, Any]]) -> Verdict:
        """The verdict for a call of ``spec``.

        ``variables`` builds the CEL variables; it is called only if some rule
        applies to the tool and has a condition (most calls pay nothing).
        """
        best: Verdict | None = None
        built: Mapping[str, Any] | None = None
        approver_sets: list[dict[str, Any]] = []
        for index, rule in enumerate(self.rules):
            if not rule.applies_to(spec):
                continue
            label = rule.name or f"rule#{index + 1}"
            reason = rule.reason
            problem = None
            if rule.when is not None and built is None:
                built = variables()
            try:
                matched = rule.evaluate(built or {})
            except PolicyEvaluationError as exc:
                # Fail closed: an unreadable condition may restrict, never grant.
                matched = rule.effect in (Effect.DENY, Effect.REQUIRE_APPROVAL)
                # The model sees the rule's reason; operators see what went wrong.
                reason = reason or "a policy condition could not be checked"
                problem = f"condition of {label} could not be evaluated: {exc}"
            if not matched:
                continue
            if rule.effect is Effect.REQUIRE_APPROVAL and rule.approvers is not None:
                if rule.approvers.owner is not None and built is None:
                    built = variables()
                approver_sets.append(rule.approvers.resolve(label, built))
            verdict = Verdict(
                effect=rule.effect,
                reason=reason,
                rule=label,
                problem=problem,
                approved_by=rule.approved_by,
            )
            if best is None or verdict._rank() > best._rank():
                best = verdict
                if best.effect is Effect.DENY:
                    break
        if best is not None and best.effect is Effect.REQUIRE_APPROVAL and approver_sets:
            best = dataclasses.replace(best, approvers=tuple(approver_sets))
        return best or Verdict(effect=self.default, reason=None, rule=None)


def activation(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    principal: Principal,
    session_id: str | None,
    *,
    impact: Any = None,
) -> dict[str, Any]:
    """The variables CEL conditions see for one call."""
    eff = spec.effective_annotations
    return {
        "tool": {
            "name": spec.name,
            "toolbox": spec.toolbox,
            "risk": spec.risk.value,
            "scopes": sorted(spec.scopes),
            "read_only": bool(eff.read_only),
            "destructive": bool(eff.destructive),
            "idempotent": bool(eff.idempotent),
            "open_world": bool(eff.open_world),
            "trusted": spec.trusted_source,
            "tags": sorted(spec.tags),
        },
        "args": dict(arguments),
        "principal": principal.as_cel(),
        "session": {"id": session_id or ""},
        "impact": impact if isinstance(impact, Mapping) else {},
    }
