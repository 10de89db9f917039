"""`callgate contract snapshot` and `callgate contract diff`: a tool change gated
the way CI would gate it, on the demo's tools, on configs and on a real upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.gateway.upstreams import Servers, servers_fixture, time_server, write_config

from .conftest import SHOP_TOOLS, Cli

__all__ = ["servers_fixture"]  # the fixture ``servers``, for the real upstream's test


def snapshot(cli: Cli, *args: str) -> dict[str, Any]:
    result = cli("contract", "snapshot", *args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def save(cli: Cli, name: str, data: Any) -> str:
    path = cli.tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def tool(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in data["tools"] if t["name"] == name)
    return found


def assert_one_line_error(stderr: str, *fragments: str) -> None:
    assert stderr.startswith("callgate: error: ")
    assert len(stderr.splitlines()) == 1
    for fragment in fragments:
        assert fragment in stderr


def edited_demo(cli: Cli) -> tuple[str, str]:
    """The demo's snapshot, and a copy with four breaking edits and one compatible."""
    old = snapshot(cli)
    new = json.loads(json.dumps(old))
    new["tools"] = [t for t in new["tools"] if t["name"] != "ops.notes_read"]
    find = tool(new, "ops.campaigns_find")["input_schema"]
    find["properties"]["region"] = {"type": "string", "description": "Region code."}
    find["required"].append("region")
    find["properties"]["response_format"]["enum"] = ["concise"]
    tool(new, "ops.deploy_status")["risk"] = "write_high_risk"
    search = tool(new, "ops.notes_search")["input_schema"]
    search["properties"]["tag"] = {"type": "string"}
    return save(cli, "old.json", old), save(cli, "new.json", new)


# snapshot ----------------------------------------------------------------------------
def test_snapshot_writes_the_demo_tools_as_tools_json_shows_them(cli: Cli) -> None:
    data = snapshot(cli)

    assert data["callgate_contract_snapshot"] == 1
    assert data["tools"] == cli.json("tools")
    names = [t["name"] for t in data["tools"]]
    assert names == sorted(names)
    assert "ops.campaigns_find" in names


def test_snapshot_out_writes_the_file_and_says_so(cli: Cli) -> None:
    out = cli.tmp_path / "contract.json"

    result = cli("contract", "snapshot", "--out", str(out))

    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8")) == snapshot(cli)
    assert f"Wrote the contracts of {len(snapshot(cli)['tools'])} tools to {out}" in result.stdout


def test_snapshot_of_a_config_file(cli: Cli) -> None:
    data = snapshot(cli, "--config", str(cli.shop_config()))

    assert {t["name"] for t in data["tools"]} >= {"shop.order_get", "shop.refund", "ext.lookup"}
    assert tool(data, "shop.order_get")["trusted_fields"] == ["tenant_id"]


# diff --------------------------------------------------------------------------------
def test_identical_contracts_exit_0_and_say_so(cli: Cli) -> None:
    path = save(cli, "s.json", snapshot(cli))

    result = cli("contract", "diff", path, path)

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"No changes: the {len(snapshot(cli)['tools'])} tools have the same contracts."
    )


def test_breaking_edits_exit_1_and_each_is_named(cli: Cli) -> None:
    old, new = edited_demo(cli)

    result = cli("contract", "diff", old, new)

    assert result.exit_code == 1, result.output
    total = len(snapshot(cli)["tools"])
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "ops.notes_read  removed" in lines
    assert "ops.campaigns_find  changed: 2 breaking" in lines
    text = "\n".join(lines)
    for rule, fragment in [
        ("tool-removed", "removed; calls to it now fail"),
        ("param-required-added", "region: added, required; calls without it now fail validation"),
        ("enum-narrowed", 'response_format: enum no longer has "detailed"'),
        ("risk-raised", "risk read -> write_high_risk"),
        ("param-added", "tag: added, optional"),
    ]:
        assert any(rule in line and fragment in line for line in lines), (rule, text)
    # Tools with a breaking change come first; the compatible one last.
    assert text.index("ops.notes_read") < text.index("ops.notes_search")
    assert lines[-2:] == [
        f"4 of {total} tools changed: 4 breaking, 1 compatible, 0 notes.",
        "Breaking changes: what works with OLD may fail with NEW (exit 1; --allow-breaking "
        "accepts them).",
    ]


def test_allow_breaking_exits_0_and_still_lists_them(cli: Cli) -> None:
    old, new = edited_demo(cli)

    result = cli("contract", "diff", old, new, "--allow-breaking")

    assert result.exit_code == 0, result.output
    assert "tool-removed" in result.stdout
    assert result.stdout.rstrip().endswith("Breaking changes, allowed by --allow-breaking.")


def test_compatible_changes_exit_0(cli: Cli) -> None:
    old = snapshot(cli)
    new = json.loads(json.dumps(old))
    tool(new, "ops.campaigns_find")["input_schema"]["properties"]["limit"]["maximum"] = 100
    tool(new, "ops.campaigns_find")["description"] = "Find campaigns by name."

    result = cli("contract", "diff", save(cli, "a.json", old), save(cli, "b.json", new))

    assert result.exit_code == 0, result.output
    assert "bound-loosened" in result.stdout
    assert "description-changed" in result.stdout
    assert result.stdout.rstrip().endswith("No breaking changes.")


def test_json_output_is_the_machine_form(cli: Cli) -> None:
    old, new = edited_demo(cli)

    result = cli("contract", "diff", old, new, "--json")

    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["old"] == old
    assert data["new"] == new
    assert data["breaking"] is True
    assert data["counts"] == {"breaking": 4, "compatible": 1, "note": 0}
    assert [t["name"] for t in data["tools"]] == [
        "ops.campaigns_find",
        "ops.deploy_status",
        "ops.notes_read",
        "ops.notes_search",
    ]
    assert data["tools"][0]["changes"][0] == {
        "rule": "enum-narrowed",
        "severity": "breaking",
        "path": "response_format",
        "message": 'enum no longer has "detailed": calls sending a value it lost now fail '
        "validation",
    }
    assert len(data["unchanged"]) == len(snapshot(cli)["tools"]) - 4


def versions(cli: Cli) -> tuple[str, str]:
    """Two config files over two versions of the shop's tools."""
    paths = []
    for version, source in (
        ("v1", SHOP_TOOLS),
        (
            "v2",
            SHOP_TOOLS.replace(
                "order_id: str, amount: int,", "order_id: str, amount: int, reason: str,"
            ),
        ),
    ):
        folder = cli.tmp_path / version
        folder.mkdir()
        (folder / "shop_tools.py").write_text(source, encoding="utf-8")
        (folder / "callgate.toml").write_text(
            'toolboxes = ["./shop_tools.py:shop"]\n', encoding="utf-8"
        )
        paths.append(str(folder / "callgate.toml"))
    assert paths[0] != paths[1]
    return paths[0], paths[1]


def test_a_config_file_on_each_side(cli: Cli) -> None:
    old, new = versions(cli)

    result = cli("contract", "diff", old, new, "--json")

    assert result.exit_code == 1, result.output
    [refund] = json.loads(result.stdout)["tools"]
    assert refund["name"] == "shop.refund"
    assert [(c["rule"], c["path"]) for c in refund["changes"]] == [
        ("param-required-added", "reason")
    ]


def test_a_snapshot_against_the_config_it_was_taken_from_has_no_changes(cli: Cli) -> None:
    old, _ = versions(cli)
    taken = save(cli, "taken.json", snapshot(cli, "--config", old))

    result = cli("contract", "diff", taken, old)

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("No changes")


def test_a_tools_list_result_on_each_side(cli: Cli) -> None:
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}
    listed = {"tools": [{"name": "get_time", "inputSchema": schema, "annotations": {}}]}
    later = json.loads(json.dumps(listed))
    later["tools"][0]["annotations"] = {"readOnlyHint": True}

    result = cli("contract", "diff", save(cli, "a.json", listed), save(cli, "b.json", later))

    assert result.exit_code == 0, result.output
    assert "read-only-added" in result.stdout


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("{not json", ["NEW", "not JSON", "expected a snapshot, a tools/list result"]),
        ('{"tools": [{"description": "x"}]}', ["NEW", "tools[0]: no name"]),
        ("[1, 2]", ["NEW", "tools[0]: expected an object, not int"]),
        ('{"callgate_contract_snapshot": 9, "tools": []}', ["snapshot format 9"]),
    ],
    ids=["not-json", "no-name", "not-tools", "future-format"],
)
def test_a_malformed_file_exits_2_with_one_line(
    cli: Cli, content: str, fragments: list[str]
) -> None:
    good = save(cli, "good.json", snapshot(cli))
    bad = cli.tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")

    result = cli("contract", "diff", good, str(bad))

    assert result.exit_code == 2
    assert result.stdout == ""
    assert_one_line_error(result.stderr, str(bad), *fragments)


def test_a_missing_file_or_a_bad_config_exits_2_with_one_line(cli: Cli) -> None:
    missing = cli("contract", "diff", str(cli.tmp_path / "nowhere.json"), "x.json")
    bad_config = cli.tmp_path / "bad.toml"
    bad_config.write_text("toolboxes = [\n", encoding="utf-8")
    config = cli("contract", "diff", str(bad_config), str(bad_config))

    assert missing.exit_code == 2
    assert_one_line_error(missing.stderr, "OLD", "nowhere.json", "cannot read it")
    assert config.exit_code == 2
    assert_one_line_error(config.stderr, "bad.toml", "invalid TOML")


# docs/contract-diff.md's first example, run as written --------------------------------
DOC = Path(__file__).parents[2] / "docs" / "contract-diff.md"

ADS_V1 = '''
from typing import Literal

from callgate import Toolbox, Trusted

ads = Toolbox("ads")


@ads.tool(scopes=["campaigns:read"], read_only=True, open_world=False)
def campaigns_find(
    query: str,
    tenant_id: Trusted[str],
    status: Literal["active", "paused", "ended"] | None = None,
    limit: int = 10,
) -> list[dict]:
    """Find campaigns by name.

    Args:
        query: Part of a campaign name.
        status: Only campaigns in this state.
        limit: At most this many (1-50).
    """
    return []


@ads.tool(scopes=["campaigns:write"], destructive=False, idempotent=True, open_world=False)
def campaign_pause(campaign_id: str, tenant_id: Trusted[str]) -> dict:
    """Pause a campaign.

    Args:
        campaign_id: The campaign, e.g. "C-1".
    """
    return {"id": campaign_id, "status": "paused"}
'''

ADS_V2 = (
    ADS_V1.replace(
        '    status: Literal["active", "paused", "ended"] | None = None,\n    limit: int = 10,',
        '    region: str,\n    status: Literal["active", "paused"] | None = None,\n    limit: int = 20,',
    )
    .replace(
        "        query: Part of a campaign name.\n",
        '        query: Part of a campaign name.\n        region: The market, e.g. "DE".\n',
    )
    .replace(
        "destructive=False, idempotent=True, open_world=False)\n"
        "def campaign_pause(campaign_id: str, tenant_id: Trusted[str]) -> dict:",
        "open_world=False)\n"
        "def campaign_pause(campaign_id: str, tenant_id: Trusted[str], until: str | None = None)"
        " -> dict:",
    )
    .replace(
        '        campaign_id: The campaign, e.g. "C-1".\n',
        '        campaign_id: The campaign, e.g. "C-1".\n'
        "        until: When to resume it (ISO 8601); never if left out.\n",
    )
)


def documented(command: str) -> list[str]:
    """The lines the doc shows after ``$ command``, up to the next prompt or fence."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"$ {command}") + 1
    shown = []
    for line in lines[start:]:
        if line.startswith(("$ ", "```")):
            break
        shown.append(line)
    return shown


def test_the_docs_example_output_is_what_the_command_prints(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ADS_V2.count("region") == 2 and "until" in ADS_V2  # every edit applied
    monkeypatch.chdir(cli.tmp_path)
    (cli.tmp_path / "ads_tools.py").write_text(ADS_V1, encoding="utf-8")
    (cli.tmp_path / "callgate.toml").write_text(
        'toolboxes = ["./ads_tools.py:ads"]\n', encoding="utf-8"
    )
    taken = cli("contract", "snapshot", "--config", "callgate.toml", "--out", "contract.json")
    # The edited tools in a folder of their own: this process has imported the first file.
    (cli.tmp_path / "edited").mkdir()
    (cli.tmp_path / "edited" / "ads_tools.py").write_text(ADS_V2, encoding="utf-8")
    (cli.tmp_path / "edited" / "callgate.toml").write_text(
        'toolboxes = ["./ads_tools.py:ads"]\n', encoding="utf-8"
    )

    result = cli("contract", "diff", "contract.json", "edited/callgate.toml", COLUMNS="100")

    assert taken.stdout.splitlines() == documented(
        "callgate contract snapshot --config callgate.toml --out contract.json"
    )
    assert result.exit_code == 1
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines == documented("callgate contract diff contract.json callgate.toml")


# A real upstream: mcp-server-time behind the gateway, and its own tools/list -------------
async def tools_list(servers: Servers, log: Path) -> dict[str, Any]:
    """mcp-server-time's tools/list result as the SDK's client reads it (MCP names)."""
    params = StdioServerParameters(command=servers.time, args=["--local-timezone", "UTC"])
    with log.open("w") as errlog, anyio.fail_after(20):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            listed = await client.list_tools()
    data: dict[str, Any] = listed.model_dump(by_alias=True, exclude_none=True, mode="json")
    return data


@pytest.mark.slow
def test_a_real_upstreams_contract_through_the_gateway_and_its_own_tools_list(
    cli: Cli, servers: Servers
) -> None:
    config = write_config(cli.tmp_path, time_server(servers))
    gateway = snapshot(cli, "--config", str(config))
    listed = anyio.run(tools_list, servers, cli.tmp_path / "time.log")
    convert = tool(gateway, "time.convert_time")
    # A newer server that needs one more argument and claims to write.
    newer = json.loads(json.dumps(listed))
    changed = tool(newer, "convert_time")
    changed["inputSchema"]["properties"]["format"] = {"type": "string", "enum": ["iso", "unix"]}
    changed["inputSchema"]["required"].append("format")
    changed["annotations"]["readOnlyHint"] = False

    same = cli("contract", "diff", str(config), save(cli, "gw.json", gateway))
    upstream = cli(
        "contract", "diff", save(cli, "a.json", listed), save(cli, "b.json", newer), "--json"
    )

    assert convert["trusted_source"] is False
    assert convert["risk"] == "write_high_risk"  # an untrusted upstream's claims do not count
    assert same.exit_code == 0, same.output
    assert upstream.exit_code == 1, upstream.output
    [found] = json.loads(upstream.stdout)["tools"]
    assert found["name"] == "convert_time"
    assert {(c["rule"], c["path"]) for c in found["changes"]} == {
        ("read-only-dropped", ""),
        ("param-required-added", "format"),
    }
