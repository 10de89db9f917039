"""Stage 3: set trusted fields from the principal and context, never from the model."""

from __future__ import annotations

from typing import Any

from callgate.errors import ErrorKind
from callgate.runtime import changes
from callgate.runtime.call import Call, hash_json
from callgate.runtime.envelope import Envelope

_PRINCIPAL_SOURCES = {"tenant_id": "tenant", "tenant": "tenant", "user_id": "user", "user": "user"}


def trusted_value(call: Call, source: str) -> Any:
    """The server-side value for ``source``, or None when the caller has none."""
    principal = call.principal
    attr = _PRINCIPAL_SOURCES.get(source)
    if attr == "tenant":
        return principal.tenant
    if attr == "user":
        return principal.user
    if source == "scopes":
        return sorted(principal.scopes)
    if source == "roles":
        return sorted(principal.roles)
    if source == "session_id":
        return call.session_id
    if source in principal.attributes:
        return principal.attributes[source]
    return call.services.context.get(source)


async def inject(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    if spec.change is not None and spec.change.role != "preview":
        # Apply and status take a preview id: their inputs are what was previewed.
        refused = await changes.bind(call)
        if refused is not None or spec.change.role == "status":
            call.args_hash = call.args_hash or hash_json(call.arguments)
            return refused
        return await changes.inject_apply(call)
    for name, marker in spec.trusted_fields.items():
        source = marker.source or name
        value = trusted_value(call, source)
        if value is None:
            return call.fail(
                ErrorKind.PERMISSION,
                f"{call.shown(spec.name)} acts on behalf of a known "
                f"{source.removesuffix('_id')}, and this call was made without one "
                f"({source!r} is set by the server from the signed-in identity, not by you).",
                next_step="Do not retry. Tell the user to sign in with an account that has "
                f"a {source.removesuffix('_id')}.",
            )
        call.injected[name] = value
    call.args_hash = hash_json(call.full_arguments())
    return None
