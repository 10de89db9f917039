"""What a client needs to get a token for the gateway: the Protected Resource
Metadata document (RFC 9728) and the ``WWW-Authenticate`` challenge (RFC 6750)
that points to it, as the MCP authorization spec asks.

A client that calls without a token (or with a bad one) gets ``401`` and
``WWW-Authenticate: Bearer resource_metadata="<url>"``; it reads the metadata
there, finds the authorization server, gets a token for ``resource`` and calls
again. A call lacking a scope gets ``403`` with ``error="insufficient_scope"``
and the scope to ask for (step-up).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from callgate.auth.settings import AuthSettings
from callgate.errors import InvalidArgument

__all__ = [
    "BEARER_ERRORS",
    "WELL_KNOWN",
    "metadata_path",
    "metadata_url",
    "protected_resource_metadata",
    "www_authenticate",
]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
BEARER_ERRORS = ("invalid_request", "invalid_token", "insufficient_scope")
"""The ``error`` values of RFC 6750 section 3.1."""


def protected_resource_metadata(settings: AuthSettings, *, scopes: Iterable[str]) -> dict[str, Any]:
    """The RFC 9728 document served at :func:`metadata_url`.

    Args:
        settings: the gateway's ``[auth]``.
        scopes: the scopes its tools, resources and prompts require
            (``scopes_supported``, sorted; left out when there are none).

    Raises:
        InvalidArgument: ``scopes`` is one string (a collection of them is meant).
    """
    if isinstance(scopes, str):
        raise InvalidArgument("scopes must be a collection of scope strings, not one string")
    document: dict[str, Any] = {
        "resource": settings.audience,
        "authorization_servers": list(settings.metadata_servers),
        "bearer_methods_supported": ["header"],
    }
    supported = sorted(set(scopes))
    if supported:
        document["scopes_supported"] = supported
    if settings.resource_name is not None:
        document["resource_name"] = settings.resource_name
    return document


def metadata_path(settings: AuthSettings) -> str:
    """The path the metadata is served at: :data:`WELL_KNOWN` followed by the
    resource URL's path (RFC 9728 section 3.1): ``/.well-known/oauth-protected-resource/mcp``
    for ``https://gateway.example/mcp``. Serve :data:`WELL_KNOWN` alone too: some
    clients ask there first."""
    path = urlsplit(settings.audience).path
    return WELL_KNOWN + ("" if path == "/" else path)


def metadata_url(settings: AuthSettings) -> str:
    """The absolute URL of the metadata, for ``resource_metadata`` in the challenge."""
    parts = urlsplit(settings.audience)
    return urlunsplit((parts.scheme, parts.netloc, metadata_path(settings), parts.query, ""))


def www_authenticate(
    metadata_url: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """The value of a ``WWW-Authenticate`` header for a refused request.

    Args:
        metadata_url: where the protected resource metadata is.
        error: ``invalid_token`` (a bad token), ``insufficient_scope`` (a missing
            scope) or ``invalid_request``; None when no token was given (RFC 6750
            section 3.1: no error then).
        description: one line for a human (e.g. :attr:`InvalidToken.description`).
            RFC 6750 allows neither ``"`` nor ``\\`` in it: they become ``'`` and
            ``/``; other characters outside printable ASCII become ``?``.
        scope: the scopes the request needs, space-separated.

    Raises:
        InvalidArgument: ``error`` is none of RFC 6750's.
    """
    if error is not None and error not in BEARER_ERRORS:
        raise InvalidArgument(f"error must be one of {', '.join(BEARER_ERRORS)}, not {error!r}")
    params = []
    if error is not None:
        params.append(f"error={_quoted(error)}")
    if scope is not None:
        params.append(f"scope={_quoted(scope)}")
    params.append(f"resource_metadata={_quoted(metadata_url)}")
    if description is not None:
        safe = description.replace('"', "'").replace("\\", "/")
        params.append(f"error_description={_quoted(safe)}")
    return "Bearer " + ", ".join(params)


def _quoted(value: str) -> str:
    """An RFC 9110 quoted-string; a character that may not be in a header (CR, LF,
    other controls, non-ASCII) becomes ``?``, so no value can end the header."""
    printable = "".join(c if " " <= c <= "~" else "?" for c in value)
    return '"' + printable.replace("\\", "\\\\").replace('"', '\\"') + '"'
