"""What a client reads to get a token: the RFC 9728 metadata and the
``WWW-Authenticate`` challenge that points to it."""

from __future__ import annotations

from typing import Any
from urllib.request import parse_http_list, parse_keqv_list

import pytest

from callgate.auth import (
    WELL_KNOWN,
    AuthSettings,
    metadata_path,
    metadata_url,
    protected_resource_metadata,
    www_authenticate,
)
from callgate.errors import InvalidArgument

from .issuer import AUDIENCE, ISSUER

JWKS = "https://login.acme.example/.well-known/jwks.json"
METADATA = "https://gateway.acme.example/.well-known/oauth-protected-resource/mcp"


def settings(**changes: Any) -> AuthSettings:
    return AuthSettings(**{"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": JWKS, **changes})


def params(header: str) -> dict[str, str]:
    """The header's parameters as a client's parser reads them."""
    scheme, _, rest = header.partition(" ")
    assert scheme == "Bearer"
    return parse_keqv_list(parse_http_list(rest))


def test_the_metadata_names_the_resource_its_issuer_and_the_scopes() -> None:
    document = protected_resource_metadata(
        settings(), scopes=["deploy:rollback", "deploy:read", "deploy:read"]
    )
    assert document == {
        "resource": AUDIENCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["deploy:read", "deploy:rollback"],
    }


def test_the_metadata_takes_the_configured_servers_and_name_and_leaves_out_no_scopes() -> None:
    servers = ("https://login.acme.example/a", "https://login.acme.example/b")
    document = protected_resource_metadata(
        settings(authorization_servers=servers, resource_name="Acme tools"), scopes=[]
    )
    assert document["authorization_servers"] == list(servers)
    assert document["resource_name"] == "Acme tools"
    assert "scopes_supported" not in document


def test_scopes_must_be_a_collection() -> None:
    with pytest.raises(InvalidArgument, match="not one string"):
        protected_resource_metadata(settings(), scopes="deploy:read")


@pytest.mark.parametrize(
    ("audience", "path", "url"),
    [
        (AUDIENCE, "/.well-known/oauth-protected-resource/mcp", METADATA),
        (
            "https://gateway.acme.example",
            WELL_KNOWN,
            "https://gateway.acme.example/.well-known/oauth-protected-resource",
        ),
        (
            "https://gateway.acme.example/",
            WELL_KNOWN,
            "https://gateway.acme.example/.well-known/oauth-protected-resource",
        ),
        (
            "http://127.0.0.1:8000/tools/mcp?v=2",
            "/.well-known/oauth-protected-resource/tools/mcp",
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/tools/mcp?v=2",
        ),
    ],
)
def test_the_metadata_is_at_the_well_known_path_before_the_resource_path(
    audience: str, path: str, url: str
) -> None:
    assert metadata_path(settings(audience=audience)) == path
    assert metadata_url(settings(audience=audience)) == url


def test_a_request_without_a_token_is_pointed_at_the_metadata() -> None:
    header = www_authenticate(METADATA)
    assert header == f'Bearer resource_metadata="{METADATA}"'


def test_a_bad_token_gets_invalid_token_and_the_reason() -> None:
    header = www_authenticate(METADATA, error="invalid_token", description="the token has expired")
    assert header == (
        f'Bearer error="invalid_token", resource_metadata="{METADATA}", '
        'error_description="the token has expired"'
    )


def test_a_missing_scope_names_the_scope_to_step_up_to() -> None:
    header = www_authenticate(
        METADATA,
        error="insufficient_scope",
        scope="deploy:read deploy:rollback",
        description="deploy_rollback needs the scope deploy:rollback",
    )
    assert params(header) == {
        "error": "insufficient_scope",
        "scope": "deploy:read deploy:rollback",
        "resource_metadata": METADATA,
        "error_description": "deploy_rollback needs the scope deploy:rollback",
    }


def test_a_description_with_quotes_backslashes_or_line_breaks_stays_one_parameter() -> None:
    header = www_authenticate(
        METADATA,
        error="invalid_token",
        description='the "aud" claim\\ is wrong\r\nSet-Cookie: x=1 — é',
    )
    assert "\r" not in header and "\n" not in header
    assert header.isascii()
    assert params(header)["error_description"] == "the 'aud' claim/ is wrong??Set-Cookie: x=1 ? ?"
    assert params(header)["resource_metadata"] == METADATA


def test_a_url_or_scope_with_a_quote_is_escaped_not_cut() -> None:
    header = www_authenticate('https://gw.example/"x"', error="insufficient_scope", scope='a"b')
    assert params(header) == {
        "error": "insufficient_scope",
        "scope": 'a"b',
        "resource_metadata": 'https://gw.example/"x"',
    }


def test_only_rfc_6750_errors_are_accepted() -> None:
    with pytest.raises(InvalidArgument, match="invalid_request, invalid_token, insufficient_scope"):
        www_authenticate(METADATA, error="expired")
