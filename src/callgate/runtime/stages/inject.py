"""Stage 4: set trusted fields from the principal and context, never from the model."""

from __future__ import annotations

from callgate.errors import ErrorKind
from callgate.runtime import redaction
from callgate.runtime.call import Call, hash_json
from callgate.runtime.envelope import Envelope


async def inject(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    for name, marker in spec.trusted_fields.items():
        if marker.pinned:
            call.injected[name] = marker.value
            continue
        source = marker.source or name
        value = call.trusted_value(source)
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
    call.secret_fields = redaction.secret_fields(spec, call.services.secret_sources)
    call.args_hash = hash_json(call.shown_arguments())
    return None
