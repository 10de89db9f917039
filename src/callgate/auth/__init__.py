"""Who is calling, over HTTP: the gateway as an OAuth 2.1 resource server.

``[auth]`` in the config names the issuer whose access tokens the gateway
accepts, its own resource URL (the audience tokens must be minted for) and how
claims map to a :class:`~callgate.Principal`. :class:`TokenVerifier` turns a
bearer token into that principal or refuses it with :class:`InvalidToken`;
:func:`protected_resource_metadata` and :func:`www_authenticate` are what a
client reads to find out how to get a token. See docs/auth.md.
"""

from callgate.auth.errors import InvalidToken, TokenProblem
from callgate.auth.metadata import (
    WELL_KNOWN,
    metadata_path,
    metadata_url,
    protected_resource_metadata,
    www_authenticate,
)
from callgate.auth.settings import AuthConfigError, AuthSettings, ClaimNames, parse_auth
from callgate.auth.verifier import ISSUER_ATTRIBUTE, TokenVerifier

__all__ = [
    "ISSUER_ATTRIBUTE",
    "WELL_KNOWN",
    "AuthConfigError",
    "AuthSettings",
    "ClaimNames",
    "InvalidToken",
    "TokenProblem",
    "TokenVerifier",
    "metadata_path",
    "metadata_url",
    "parse_auth",
    "protected_resource_metadata",
    "www_authenticate",
]
