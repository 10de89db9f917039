"""docs/config.md documents every ``[auth]`` key, in its tables and its complete
example, and the example's ``[auth]`` is what it says."""

from __future__ import annotations

import re
import tomllib

from callgate.auth import AuthSettings, ClaimNames, parse_auth
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
