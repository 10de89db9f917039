"""No handler's internals reach an MCP client.

The SDK answers an exception a handler did not mean for the wire with its text:
at 2025-11-25 as a JSON-RPC error of code 0 whose message is ``str(exc)`` (a
driver's SQL and parameters, a file path, a token), at 2026-07-28 as a generic
internal error. callgate's handlers answer expected failures themselves
(Envelopes, ``MCPError``); anything else is logged here with a reference, and the
client gets ``-32603`` naming only that reference, at both versions.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from pydantic import ValidationError

from callgate.mcp import _wire
from callgate.runtime.call import new_id

__all__ = ["internal_errors"]

logger = logging.getLogger("callgate.mcp")


async def internal_errors(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: an unexpected exception becomes ``-32603`` with a reference."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise  # meant for the wire (ValidationError: the SDK's invalid params)
    except Exception:
        reference = new_id("err")
        logger.exception("MCP %s failed (reference %s)", ctx.method, reference)
        raise _wire.internal(
            f"The server could not handle this request (reference {reference}). Try again "
            "later; if it keeps failing, give an operator the reference."
        ) from None
