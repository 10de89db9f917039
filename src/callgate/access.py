"""Who may do what to which record: every access decision of callgate, in one place.

The chain authorizes tool calls (scopes, tenants, policy). Everything else a
principal can reach by id goes through :func:`check` here: the CLI, the
approvals API and console, the MCP server (confirmations, tasks), the agent
loop (runs), handles, previews, kept results and approval status. Nobody else
compares users or tenants by hand.

The rules:

- **Own records** (:attr:`Action.READ_OWN`: a run, a task, a handle, a preview, a
  kept result, the status of one's own approval request) belong to the user *and*
  tenant that made them; anyone else is told the record does not exist.
- **Viewing an approval** (:attr:`Action.VIEW_APPROVAL`: the inbox, ``show``): its
  requester, anyone of its tenant, or the role :data:`ADMIN_ROLE` (every tenant).
  Others: not found.
- **Reading the record of what happened** (the audit, runs, tasks, per-tool
  figures: :func:`record_scope`): the role :data:`ADMIN_ROLE` reads every
  tenant's; a role of :data:`TENANT_READER_ROLES` reads its own tenant's;
  anyone else only their own records.
- **Deciding an approval** (:attr:`Action.DECIDE_APPROVAL`) needs all of:
  the approval's tenant (an admin of another tenant may look, not decide);
  not the requester, unless every rule that required it lets the requester
  confirm it (``approved_by="requester"``); and, for each approver set the
  rules named (a role, named users, the resource owner), membership of it.

Identities compare in their canonical form (:mod:`callgate.contract.identity`),
both sides normalized, so legacy rows written before that compare correctly too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from callgate.contract.identity import InvalidIdentity, Principal, canonical, same_identity
from callgate.store.console_records import Scope

__all__ = [
    "ADMIN_ROLE",
    "TENANT_READER_ROLES",
    "Access",
    "Action",
    "Owned",
    "check",
    "describe_approvers",
    "owns",
    "record_scope",
]

ADMIN_ROLE = "admin"
"""The role that may view (not decide) every tenant's approvals."""


TENANT_READER_ROLES = frozenset({"auditor", "approver"})
"""Roles that read their whole tenant's audit, runs and tasks (not only their own)."""


class Action(StrEnum):
    READ_OWN = "read_own"
    VIEW_APPROVAL = "view_approval"
    DECIDE_APPROVAL = "decide_approval"


class Owned(Protocol):
    """A record made by someone: runs, tasks, handles, previews, results, approvals."""

    @property
    def user(self) -> str | None: ...

    @property
    def tenant(self) -> str | None: ...


class _Approval(Owned, Protocol):
    @property
    def approved_by(self) -> str: ...

    @property
    def approvers(self) -> Sequence[Mapping[str, Any]]: ...


@dataclass(kw_only=True, frozen=True)
class Access:
    """The answer of :func:`check`: allowed, or refused with a code and a reason.

    ``code`` is ``ok``, ``not_found`` (the record must look missing to this
    principal), ``other_tenant``, ``self_approval`` or ``not_an_approver``;
    ``reason`` is a sentence for the person refused and the audit.
    """

    allowed: bool
    code: str
    reason: str

    def __bool__(self) -> bool:
        return self.allowed


_OK = Access(allowed=True, code="ok", reason="allowed")


def owns(principal: Principal, record: Owned) -> bool:
    """Whether ``record`` was made by ``principal`` (same user, same tenant)."""
    return same_identity(record.user, principal.user) and same_identity(
        record.tenant, principal.tenant
    )


def check(principal: Principal, action: Action, record: Owned) -> Access:
    """May ``principal`` do ``action`` to ``record``? The only place that decides it."""
    if action is Action.READ_OWN:
        if owns(principal, record):
            return _OK
        return Access(allowed=False, code="not_found", reason="no such record")
    if action is Action.VIEW_APPROVAL:
        if (
            owns(principal, record)
            or (principal.tenant is not None and same_identity(record.tenant, principal.tenant))
            or ADMIN_ROLE in principal.roles
        ):
            return _OK
        return Access(allowed=False, code="not_found", reason="no such approval request")
    return _may_decide(principal, record)  # type: ignore[arg-type]


def record_scope(principal: Principal) -> Scope:
    """Whose audit records, runs and tasks ``principal`` may read: the scope every
    store listing of them is given (the console's and the CLI's alike)."""
    if ADMIN_ROLE in principal.roles:
        return Scope(every_tenant=True)
    if principal.tenant is not None and principal.roles & TENANT_READER_ROLES:
        return Scope(tenant=principal.tenant)
    return Scope(tenant=principal.tenant, user=principal.user)


def may_read(principal: Principal, record: Any) -> bool:
    """Whether ``principal`` may read ``record`` (an audit record, a run, a task, a
    kept result: anything with ``tenant`` and ``user``): :func:`record_scope` holds it."""
    return record_scope(principal).holds(record)


def _may_decide(principal: Principal, record: _Approval) -> Access:
    if not same_identity(record.tenant, principal.tenant):
        return Access(
            allowed=False,
            code="other_tenant",
            reason=f"it was requested in tenant {record.tenant or '(none)'}, and "
            f"{principal.user} acts for {principal.tenant or 'no tenant'}; only its own "
            "tenant's approvers decide it",
        )
    is_requester = same_identity(record.user, principal.user)
    if is_requester and record.approved_by != "requester":
        return Access(
            allowed=False,
            code="self_approval",
            reason=f"{principal.user} requested it and cannot decide it; another person must",
        )
    if is_requester:
        return _OK  # the rules let the requester confirm the exact inputs themself
    for approver_set in record.approvers:
        if not _in_set(principal, approver_set):
            return Access(
                allowed=False,
                code="not_an_approver",
                reason=f"{principal.user} is not among its approvers "
                f"({describe_approvers([approver_set])})",
            )
    return _OK


def _in_set(principal: Principal, approver_set: Mapping[str, Any]) -> bool:
    users = _canonical_all([*approver_set.get("users", ()), *approver_set.get("owners", ())])
    roles = _canonical_all(approver_set.get("roles", ()))
    return principal.user in users or bool(roles & principal.roles)


def _canonical_all(values: Iterable[Any]) -> frozenset[str]:
    out = set()
    for value in values:
        try:
            out.add(canonical("identity", value))
        except InvalidIdentity:
            continue  # an unusable stored value grants nothing
    return frozenset(out)


def describe_approvers(approvers: Sequence[Mapping[str, Any]]) -> str:
    """Who may decide, in words: ``"role approver, or bob@acme.example (owner)"``."""
    if not approvers:
        return "anyone of the tenant but the requester"
    parts = []
    for approver_set in approvers:
        options = [f"role {role}" for role in approver_set.get("roles", ())]
        options += list(approver_set.get("users", ()))
        options += [f"{owner} (the owner)" for owner in approver_set.get("owners", ())]
        if approver_set.get("unresolved"):
            options.append(f"nobody yet: {approver_set['unresolved']}")
        label = " or ".join(options) or "nobody"
        rule = approver_set.get("rule")
        parts.append(f"{label} (rule {rule})" if rule else label)
    return "; and ".join(parts)
