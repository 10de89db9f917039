"""docs/config.md documents every ``[auth]`` key, in its tables and its complete
example; docs/auth.md's examples are what the code reads, makes and prints."""

from __future__ import annotations

import json
import re
import tomllib
from typing import get_args

import pytest

from callgate.auth import (
    AuthSettings,
    ClaimNames,
    TokenProblem,
    metadata_url,
    parse_auth,
    protected_resource_metadata,
    www_authenticate,
)
from callgate.auth.settings import _AuthFile, _ClaimsFile

from ..docs.readme import ROOT

CONFIG_DOC = ROOT / "docs" / "config.md"


def _example() -> str:
    [example] = re.findall(r"```toml\n(.*?)```", CONFIG_DOC.read_text(), flags=re.S)
    return example


def _section(title: str) -> str:
    text = CONFIG_DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_every_auth_key_is_in_the_auth_section_s_tables_and_the_example() -> None:
    rows = re.findall(r"^\| `([^`]+)` \|", _section("`[auth]`"), flags=re.M)
    documented = {row.strip("[]").rpartition(".")[2] for row in rows}
    keys = {*_AuthFile.model_fields, *_ClaimsFile.model_fields}

    assert documented == keys
    example = _example()
    missing = {k for k in keys if not re.search(rf"(^|[\[.\s]){k}\b", example, flags=re.M)}
    assert not missing


def test_the_example_s_auth_table_reads_as_documented() -> None:
    raw = tomllib.loads(_example())["auth"]
    settings = parse_auth(raw, "docs/config.md")

    assert settings == AuthSettings(
        issuer="https://login.acme.example",
        audience="https://gateway.acme.example/mcp",
        jwks_url="https://login.acme.example/.well-known/jwks.json",
        authorization_servers=("https://login.acme.example",),
        resource_name="Acme tools",
        claims=ClaimNames(),
    )


# docs/auth.md -------------------------------------------------------------------------
AUTH_DOC = ROOT / "docs" / "auth.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", flags=re.S | re.M)


def _blocks(lang: str) -> list[str]:
    return [m[2] for m in _FENCE.finditer(AUTH_DOC.read_text()) if m[1] == lang]


def _settings() -> AuthSettings:
    [toml] = _blocks("toml")
    return parse_auth(tomllib.loads(toml)["auth"], "docs/auth.md")


def test_the_auth_doc_s_config_reads_as_it_says() -> None:
    settings = _settings()
    assert settings.audience == "https://gateway.acme.example/mcp"
    assert settings.claims == ClaimNames()


def test_the_auth_doc_s_metadata_and_challenge_are_what_the_code_makes() -> None:
    settings = _settings()
    [document] = _blocks("json")
    challenge = next(b for b in _blocks("") if b.startswith("WWW-Authenticate:"))

    assert json.loads(document) == protected_resource_metadata(
        settings, scopes=["deploy:rollback", "deploy:read"]
    )
    header = www_authenticate(
        metadata_url(settings), error="invalid_token", description="the token has expired"
    )
    assert challenge == f"WWW-Authenticate: {header}\n"


def test_the_auth_doc_lists_every_refusal_code() -> None:
    text = AUTH_DOC.read_text()
    section = text[text.index("### Refusals") : text.index("## What a client reads")]
    listed = re.findall(r"^\| `(\w+)` \| ", section, flags=re.M)
    assert listed == ["code", *get_args(TokenProblem)]  # the header, then each code


def test_the_auth_doc_s_local_issuer_runs_and_prints_what_it_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    [python] = _blocks("python")
    printed = next(b for b in _blocks("") if b.startswith("dana@acme.example"))

    exec(compile(python, str(AUTH_DOC), "exec"), {"__name__": "__main__"})

    assert capsys.readouterr().out == printed
