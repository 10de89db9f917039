"""Who is calling: the :class:`Principal`, and identities in one canonical form,
made once where a principal is built.

Every decision that compares who someone is (four eyes, tenant isolation, the
owner of a run, a task or a handle) compares these canonical forms, so
``" Alice@ACME.example"`` can never pass for someone other than
``alice@acme.example``, nor a different tenant than ``acme``:

- surrounding whitespace is stripped;
- Unicode is NFKC-normalized (full-width and compatibility forms fold to one
  spelling) and then case-folded: user ids, tenants and roles are
  case-insensitive (``Alice`` is ``alice``);
- an empty value, or one containing control or invisible format characters
  (``\\n``, ``\\x00``, zero-width space, bidi overrides), is refused: they have
  no business in an identity and only serve to forge one that looks the same;
- values longer than :data:`MAX_IDENTITY_CHARS` are refused.

Scopes keep their case (OAuth scopes are case-sensitive) but are stripped and
checked the same way.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.errors import UserError

__all__ = [
    "MAX_IDENTITY_CHARS",
    "InvalidIdentity",
    "Principal",
    "canonical",
    "canonical_optional",
    "canonical_set",
]

MAX_IDENTITY_CHARS = 256

# Cc: control characters; Cf: invisible format characters (zero-width, bidi);
# Zl/Zp: line and paragraph separators; Co/Cs/Cn: private use, surrogates, unassigned.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})


class InvalidIdentity(UserError, ValueError):
    """A user, tenant, role or scope that cannot be an identity (empty, control
    characters, too long). The message names the field and the problem."""


def _check(field: str, value: str) -> None:
    if not value:
        raise InvalidIdentity(f"{field} must not be empty")
    if len(value) > MAX_IDENTITY_CHARS:
        raise InvalidIdentity(f"{field} is longer than {MAX_IDENTITY_CHARS} characters")
    for char in value:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise InvalidIdentity(
                f"{field} {value[:40]!r} contains the character U+{ord(char):04X} "
                f"({unicodedata.name(char, 'unnamed')}), which an identity may not contain"
            )


def canonical(field: str, value: str, *, fold_case: bool = True) -> str:
    """The canonical form of one identity value.

    Raises:
        InvalidIdentity: not a string, empty after stripping, too long, or with
            control or invisible characters.
    """
    if not isinstance(value, str):
        raise InvalidIdentity(f"{field} must be a string, not {type(value).__name__}")
    text = unicodedata.normalize("NFKC", value).strip()
    _check(field, text)
    return text.casefold() if fold_case else text


def canonical_optional(field: str, value: str | None) -> str | None:
    """:func:`canonical` for a value that may be absent (a principal without a tenant)."""
    return None if value is None else canonical(field, value)


def canonical_set(field: str, values: Iterable[str], *, fold_case: bool = True) -> frozenset[str]:
    """The canonical forms of a set of roles or scopes.

    Raises:
        InvalidIdentity: a plain string was given where a collection is expected
            (``"a,b"`` would otherwise become ``{"a", ",", "b"}``), or one value is invalid.
    """
    if isinstance(values, str):
        raise InvalidIdentity(f"{field} must be a collection of strings, not one string")
    return frozenset(canonical(field, v, fold_case=fold_case) for v in values)


def same_identity(a: str | None, b: str | None) -> bool:
    """Whether two stored identity values name the same one.

    Both sides are normalized, so records written before identities were
    canonical (or by hand) compare like new ones; an invalid value matches nothing.
    """
    if a is None or b is None:
        return a is None and b is None
    try:
        return canonical("identity", a) == canonical("identity", b)
    except InvalidIdentity:
        return False


@dataclass(kw_only=True, frozen=True)
class Principal:
    """The authenticated caller on whose behalf a tool runs.

    Set by the server from authentication, never by the model. ``attributes``
    holds further trusted values (project, locale, ...) that tools can receive
    through trusted fields.

    ``user``, ``tenant`` and ``roles`` are kept in their canonical form
    (stripped, NFKC, case-folded) and ``scopes`` stripped: see the top of this
    module.

    Raises:
        InvalidIdentity: a value is empty, too long or holds control or invisible
            characters.
    """

    user: str
    tenant: str | None = None
    scopes: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        user: str,
        tenant: str | None = None,
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        # Identities are normalized here, once: every comparison downstream
        # (four eyes, tenant isolation, ownership) relies on the canonical form.
        object.__setattr__(self, "user", canonical("user", user))
        object.__setattr__(self, "tenant", canonical_optional("tenant", tenant))
        object.__setattr__(self, "scopes", canonical_set("scopes", scopes, fold_case=False))
        object.__setattr__(self, "roles", canonical_set("roles", roles))
        object.__setattr__(self, "attributes", dict(attributes or {}))

    def as_cel(self) -> dict[str, Any]:
        """The principal as policy conditions see it."""
        return {
            "user": self.user,
            "tenant": self.tenant or "",
            "scopes": sorted(self.scopes),
            "roles": sorted(self.roles),
            "attributes": dict(self.attributes),
        }
