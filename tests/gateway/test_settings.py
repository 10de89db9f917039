"""The [[upstreams]] tables: what a config may say, and the errors that name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from callgate.config import ConfigError, load_config
from callgate.gateway import upstream_toolboxes
from callgate.gateway._forwarding import scrub
from callgate.gateway._transports import safe_reason
from callgate.gateway.proxy import local_names
from callgate.gateway.settings import ToolRule


def load(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gw.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path).build_gate("memory://")
    return str(info.value)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('name = "a"\ncommand = "x"\ncolour = "red"', "upstreams[0].colour: unknown key"),
        ('name = "a"', "give exactly one of command (a stdio server) or url"),
        ('name = "a"\ncommand = "x"\nurl = "http://h/mcp"', "give exactly one of command"),
        ('name = "a.b"\ncommand = "x"', "upstreams[0] ('a.b').name: 'a.b' must be 1-64"),
        (
            'name = "a"\nurl = "ftp://h/mcp"',
            ".url: 'ftp://h/mcp' is not an http:// or https:// URL",
        ),
        ('name = "a"\nurl = "http:///mcp"', "is not an http:// or https:// URL with a host"),
        ('name = "a"\nurl = "https://u:p@h/mcp"', "credentials do not belong in the URL"),
        ('name = "a"\ncommand = "  "', ".command: must not be empty"),
        (
            'name = "a"\ncommand = "x"\nheaders = { X = "1" }',
            ".headers: only for an upstream with a url",
        ),
        (
            'name = "a"\nurl = "http://h/mcp"\nargs = ["1"]',
            ".args: only for an upstream with a command",
        ),
        (
            'name = "a"\ncommand = "x"\ntrust = "maybe"',
            "upstreams[0].trust: Input should be 'trusted' or 'untrusted'",
        ),
        ('name = "a"\ncommand = "x"\nprotocol = "2024-01-01"', "upstreams[0].protocol"),
        (
            'name = "a"\nurl = "http://h/mcp"\nauth = { type = "basic" }',
            "type must be 'bearer' or 'client_credentials'",
        ),
        (
            'name = "a"\ncommand = "x"\n[upstreams.tools.t]\npinned = { x = 1 }\ninject = { x = "tenant" }',
            "tools.t: 'x' is both pinned and injected",
        ),
        (
            'name = "a"\ncommand = "x"\n[upstreams.tools.t]\nrename = "a.b"',
            "tools.t.rename: 'a.b' must be",
        ),
        (
            'name = "a"\ncommand = "x"\n[upstreams.tools.t]\nrisk = "low"',
            "upstreams[0].tools.t.risk",
        ),
        (
            'name = "a"\ncommand = "x"\n[upstreams.tools.t]\ntimeout = 0',
            "upstreams[0].tools.t.timeout",
        ),
    ],
)
def test_bad_tables_are_refused_naming_the_key(tmp_path: Path, table: str, expected: str) -> None:
    message = load(tmp_path, f"[[upstreams]]\n{table}\n")
    assert expected in message, message
    assert message.startswith(str(tmp_path / "gw.toml"))


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    text = '[[upstreams]]\nname = "a"\ncommand = "x"\n[[upstreams]]\nname = "a"\ncommand = "y"\n'
    assert "upstreams[1] ('a').name: upstreams[0] has that name already" in load(tmp_path, text)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('command = "x"\nenv = { API_KEY = { env = "NO_SUCH_VAR_1" } }', "env.API_KEY"),
        ('url = "http://h/mcp"\nheaders = { X-Key = { env = "NO_SUCH_VAR_1" } }', "headers.X-Key"),
        ('url = "http://h/mcp"\nauth = { type = "bearer", env = "NO_SUCH_VAR_1" }', "auth.env"),
        (
            'url = "http://h/mcp"\nauth = { type = "client_credentials", token_url = '
            '"http://h/token", client_id = "gw", client_secret_env = "NO_SUCH_VAR_1" }',
            "auth.client_secret_env",
        ),
    ],
)
def test_a_missing_environment_variable_is_named(tmp_path: Path, table: str, key: str) -> None:
    message = load(tmp_path, f'[[upstreams]]\nname = "a"\n{table}\n')
    assert f"upstreams ('a').{key}: the environment variable NO_SUCH_VAR_1 is not set" in message


def test_secrets_come_from_the_environment_and_never_show(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        '[[upstreams]]\nname = "a"\nurl = "https://h.example/mcp?x=1"\n'
        'auth = { type = "bearer", env = "GW_TOKEN" }\nheaders = { X-Team = "ops" }\n'
    )
    cfg = load_config(path)
    (box,) = upstream_toolboxes(cfg.upstreams, cfg.label, environ={"GW_TOKEN": "s3cret"})
    # Read from the environment, kept for the connection and for scrubbing only.
    assert box.connection.secrets == {"s3cret"}
    assert "s3cret" not in repr(box.settings)
    assert box.settings.target == "https://h.example/mcp"  # what people are shown
    failure = ConnectionError("POST https://h.example/mcp with Bearer s3cret refused")
    assert "s3cret" not in safe_reason(failure, box.connection.secrets)
    assert scrub({"echo": ["token s3cret"]}, box.connection.secrets) == {"echo": ["token [secret]"]}


def test_a_config_without_upstreams_imports_no_mcp_sdk(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text('toolboxes = ["callgate.demo:toolboxes"]\n')
    script = (
        "import sys; from callgate.config import load_config; "
        f"gate = load_config({str(path)!r}).build_gate('memory://'); "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_local_names_are_host_safe_short_unique_and_stable() -> None:
    tools = ["read.file", "read_file", "a" * 80, "ok-name", "weird name!"]
    names, changed = local_names("fs", tools, {})
    again, _ = local_names("fs", list(reversed(tools)), {})
    assert names == again
    assert names["ok-name"] == "ok-name" and "ok-name" not in changed
    assert len(set(names.values())) == len(tools)
    for local in names.values():
        assert len(f"fs__{local}") <= 64
        assert all(ch.isalnum() or ch in "_-" for ch in local)
    assert names["read_file"] == "read_file"
    assert names["read.file"].startswith("read_file_") and "read.file" in changed


def test_a_rename_wins_its_name() -> None:
    names, _ = local_names("fs", ["write", "put"], {"put": ToolRule(rename="write")})
    assert names["put"] == "write"
    assert names["write"] != "write"


def test_relative_commands_and_cwd_are_the_config_files(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "gw.toml"
    path.write_text(
        '[[upstreams]]\nname = "a"\ncommand = "../bin/server"\ncwd = "data"\n'
        '[[upstreams]]\nname = "b"\ncommand = "node"\n'
    )
    first, second = load_config(path).upstreams
    assert first.command == str(tmp_path / "bin" / "server")
    assert first.cwd == str(tmp_path / "conf" / "data")
    assert second.command == "node"  # a program on PATH


def test_a_schema_naming_another_document_is_refused_without_fetching_it() -> None:
    import socket

    import jsonschema_rs

    from callgate.runtime.validation import ArgumentValidator

    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json"
        with pytest.raises(jsonschema_rs.ValidationError, match="does not fetch"):
            ArgumentValidator({"type": "object", "properties": {"x": {"$ref": url}}})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    local = ArgumentValidator(
        {"$defs": {"id": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/id"}}}
    )
    assert local.errors({"x": "a"}) == []
