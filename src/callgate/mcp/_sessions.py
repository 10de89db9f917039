"""Which session a request's calls belong to, decided by the server alone.

The chain's session-scoped guards (the lethal trifecta above all, also the
duplicate-call limit and the retry budget) group calls by a session id. A
client must neither escape its session (a fresh id per call would never
complete the trifecta) nor join another's (whose taints, or lack of them, it
would inherit). So the id is never a value the client sent:

- a 2025-11-25 connection (stdio, Streamable HTTP, in memory) is one session,
  known by the connection object the SDK serves it on. Over HTTP that object
  exists only for a session id the SDK issued and still holds, and the
  ``Mcp-Session-Id`` header of a request is never read here: a 2026-07-28
  request that names a legacy session does not join it;
- a 2026-07-28 request belongs to no connection (the protocol is stateless,
  and the specification defines no conversation id a server could trust), so
  its session is the principal's: every stateless call one principal makes
  to this server shares one session, and the trifecta stays on across them.
  That is the conservative choice: a principal whose conversations mix
  private data and untrusted content is asked to approve more, never less.

The principal is each request's own (the authenticated caller over HTTP, else
the server's fixed one). A 2025-11-25 connection keeps the principal that
opened it: over HTTP the SDK refuses the session to anyone else (see
:class:`callgate.mcp._http.Authentication`).

Ids are ``mcp-`` and an HMAC over the principal and the connection (or the
principal alone) under the server's session key, so they cannot be guessed or
forged from outside, and replicas given the same key agree on a principal's
stateless session. The key is random per server unless given; a server that
restarts with a new key starts its principals' stateless sessions afresh, as a
stdio server's process does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import weakref
from collections.abc import Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from callgate.contract import Principal

__all__ = ["Sessions"]


class Sessions:
    """The session id of each request's calls (see the module docs).

    Args:
        principal_of: whom a request is served for.
        key: the secret the ids are derived with (random if None); share it
            between replicas of one server.
        fixed: one session for every request (stdio: the process is the
            conversation).
    """

    def __init__(
        self,
        principal_of: Callable[[ServerRequestContext[Any, Any]], Principal],
        *,
        key: bytes | None = None,
        fixed: str | None = None,
    ) -> None:
        self._principal_of = principal_of
        self._key = key if key is not None else secrets.token_bytes(32)
        self._fixed = fixed
        self._connections: weakref.WeakKeyDictionary[Connection, str] = weakref.WeakKeyDictionary()

    def of(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The session of the request ``ctx``: never None, never the client's choice."""
        if self._fixed is not None:
            return self._fixed
        connection = getattr(ctx.session, "_connection", None)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not isinstance(
            connection, Connection
        ):
            return self._derive(self._principal_of(ctx), "stateless")
        session = self._connections.get(connection)
        if session is None:
            derived = self._derive(self._principal_of(ctx), "connection", secrets.token_hex(16))
            session = self._connections.setdefault(connection, derived)
        return session

    def _derive(self, principal: Principal, *parts: str) -> str:
        who = (principal.tenant or "", principal.user)
        message = "\0".join((*parts, *who)).encode()
        return "mcp-" + hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]
