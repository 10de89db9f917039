"""Stage 3: validate the model-filled arguments against the tool's contract."""

from __future__ import annotations

import json
from typing import Any

import pydantic

from callgate.errors import ConstructionError, ErrorKind
from callgate.runtime.call import Call
from callgate.runtime.envelope import Envelope
from callgate.runtime.shaping import dumps
from callgate.runtime.validation import json_type, pydantic_messages


def _example(call: Call) -> str:
    assert call.spec is not None
    if call.spec.input_examples:
        return " Example: " + json.dumps(call.spec.input_examples[0]) + "."
    return ""


def _too_large(call: Call, args: Any) -> Envelope | None:
    """Arguments over ``Limits.max_argument_bytes`` (as JSON text) are refused before
    anything parses, validates, stores or echoes them."""
    limit = call.services.limits.max_argument_bytes
    if isinstance(args, bytes):
        size = len(args)
    else:
        text = args if isinstance(args, str) else dumps(args)
        size = len(text) if text.isascii() else len(text.encode(errors="replace"))
    if size <= limit:
        return None
    call.detail["argument_bytes"] = size
    return call.fail(
        ErrorKind.CONSTRUCTION,
        f"The arguments are too large ({size:,} bytes; at most {limit:,} are accepted).",
        next_step="Send only what the tool needs: pass large content by reference (an id, "
        "a URL) or in smaller parts.",
    )


async def validate(call: Call) -> Envelope | None:
    spec = call.spec
    assert spec is not None
    args: Any = call.raw_arguments
    if args is None:
        args = {}
    too_large = _too_large(call, args)
    if too_large is not None:
        return too_large
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return call.fail(
                ErrorKind.CONSTRUCTION,
                f"The arguments are not valid JSON ({exc.msg} at line {exc.lineno} "
                f"column {exc.colno}). Send one JSON object of named arguments." + _example(call),
            )
    if not isinstance(args, dict):
        return call.fail(
            ErrorKind.CONSTRUCTION,
            f"The arguments must be a JSON object of named arguments, not {json_type(args)}."
            + _example(call),
        )
    # Trusted fields are the server's to set: a model-supplied value is dropped,
    # never used, and the attempt is noted in the audit record.
    dropped = [name for name in args if name in spec.trusted_fields]
    if dropped:
        call.dropped_fields.extend(dropped)
        args = {k: v for k, v in args.items() if k not in spec.trusted_fields}

    messages = call.services.validator_for(spec).errors(args)
    if messages:
        return call.fail(
            ErrorKind.CONSTRUCTION,
            " ".join(messages),
            next_step=f"Fix the arguments and call {call.shown(spec.name)} again." + _example(call),
        )
    try:
        call.prepared, call.arguments = spec.handler.prepare(args)
    except pydantic.ValidationError as exc:
        return call.fail(
            ErrorKind.CONSTRUCTION,
            " ".join(pydantic_messages(exc)),
            next_step=f"Fix the arguments and call {call.shown(spec.name)} again." + _example(call),
        )
    except ConstructionError as exc:
        return call.fail(
            ErrorKind.CONSTRUCTION,
            call.in_callers_names(exc.message) or "",
            next_step=call.in_callers_names(exc.next_step),
        )
    return None
