"""The README's first ten minutes, as a new user pastes them.

Shell blocks run in one bash each, with ``callgate`` on PATH (as ``source
.venv/bin/activate`` leaves it) and the store in a temporary directory; Python
blocks run as scripts. Every fenced block of the README is accounted for here:
adding one without a test fails ``test_every_block_is_run_or_checked``.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client

from callgate.agent.providers import PROVIDERS
from callgate.demo._seed import DEPLOYMENTS

from ..cli.test_run import callgate_run, fake_openai, text, tool_call
from .readme import README, ROOT, Step, block, blocks, callgate_bin, commands, run_shell

EXPECTED_BLOCKS = {
    ("Two commands", "bash"): 1,
    ("Install", "bash"): 2,
    ("Your first ten minutes", "bash"): 1,
    ("Your first ten minutes", "python"): 2,
    ("A change that needs a human", "bash"): 1,
    ("Decide it in the browser", "bash"): 1,
    ("Serve your own tools", "python"): 1,
    ("Serve your own tools", "toml"): 1,
    ("Serve your own tools", "bash"): 1,
    ("Serve your own tools", "console"): 1,
    ("Put other MCP servers behind it", "bash"): 1,
    ("Share it with a team: tokens, a second approver, replicas", "toml"): 1,
    ("Use it from an MCP host", "console"): 1,
    ("Use it from an MCP host", "json"): 1,
    ("Run an agent", "console"): 1,
}
"""Each section's blocks, all run or checked by the tests below."""


def test_every_block_is_run_or_checked() -> None:
    found = Counter((b.section, b.lang) for b in blocks() if b.lang)
    assert dict(found) == EXPECTED_BLOCKS


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """What differs from a user's shell: the store (theirs is in their data directory)."""
    return {"CALLGATE_STORE": f"sqlite:///{tmp_path / 'callgate.db'}"}


def run(section: str, tmp_path: Path, env: dict[str, str], index: int = 0) -> list[Step]:
    return run_shell(commands(block(section, "bash", index).text), tmp_path, env)


# Two commands ---------------------------------------------------------------------
def test_the_two_commands_are_the_main_job_and_the_suite() -> None:
    main_job, suite = commands(block("Two commands", "bash").text)
    assert main_job.split("#")[0].split() == ["bash", "scripts/run.sh"]
    assert suite.split("#")[0].split() == ["bash", "scripts/test.sh"]
    assert (ROOT / "scripts" / "run.sh").exists() and (ROOT / "scripts" / "test.sh").exists()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci


# Install --------------------------------------------------------------------------
def _extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


@pytest.mark.slow
def test_install_names_what_exists_and_puts_callgate_on_path(
    tmp_path: Path, user_env: dict[str, str]
) -> None:
    setup, other = (commands(block("Install", "bash", i).text) for i in (0, 1))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    # No package index has callgate: every install is from the checkout.
    assert "pip install 'callgate" not in README.read_text()
    assert setup[0].startswith("bash scripts/run.sh")
    assert setup[1].startswith("source .venv/bin/activate")  # before any bare `callgate`
    named = {
        e for line in other for group in re.findall(r"\[([\w,]+)\]", line) for e in group.split(",")
    }
    assert named and named <= _extras()
    wheel = f"callgate-{project['version']}-py3-none-any.whl"
    assert f"dist/{wheel}" in other[1] and f"dist/{wheel}[openai]" in other[2]
    # The rest of the first block runs with what run.sh installed.
    [demo] = run_shell(setup[2:], tmp_path, user_env)
    assert demo.exit_code == 0, demo.stderr
    assert "governed" in demo.stdout


def test_run_sh_installs_what_callgate_run_needs_for_a_local_model() -> None:
    script = (ROOT / "scripts" / "run.sh").read_text()
    [extras] = re.findall(r"^CALLGATE_EXTRAS=([\w,]+) ", script, flags=re.M)

    assert PROVIDERS["openai-compatible"].extra in extras.split(",")
    assert set(extras.split(",")) <= _extras()


# Your first ten minutes ------------------------------------------------------------
@pytest.mark.slow
def test_the_shell_tour_runs(tmp_path: Path, user_env: dict[str, str]) -> None:
    steps = run("Your first ten minutes", tmp_path, user_env)

    assert [s.exit_code for s in steps] == [0, 0, 0, 0, 1, 0, 0], [s.stderr for s in steps]
    tools, tools_json, find, status, refused, rolled_back, audit = (s.stdout for s in steps)
    names = [t["name"] for t in json.loads(tools_json)]
    assert all(sum(line.split()[:1] == [n] for line in tools.splitlines()) == 1 for n in names)
    assert "Autumn Sale_Search_Retarget" in find
    assert '"state": "failed"' in status
    assert "only on-call engineers (role 'oncall')" in " ".join(refused.split())
    assert '"to_version": "1.7.5"' in rolled_back
    assert "ops.deploy_rollback" in audit and "local (acme)" in audit


def test_the_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(block("Your first ten minutes", "python").text)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "dict_keys(['deploy_id'])" in out
    assert "ok {'deploy_id': 'D-1', 'state': 'running', 'tenant': 'acme'}" in out
    assert "construction Unknown argument 'deploy'. Did you mean 'deploy_id'?" in out
    assert "permission You are not allowed to call ops.deploy_rollback" in out
    assert "alice ops.deploy_rollback refused:authorize permission" in out
    assert (tmp_path / "callgate-readme.db").exists()


@pytest.mark.slow
def test_the_synchronous_example_prints_and_exits(tmp_path: Path) -> None:
    script = tmp_path / "sync_example.py"
    script.write_text(block("Your first ten minutes", "python", 1).text)

    # It must end by itself: the bound only stops a hang.
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stdout, done.stderr) == (0, "5\n", "")


# A change that needs a human ---------------------------------------------------------
@pytest.mark.slow
def test_the_approval_story_runs(tmp_path: Path, user_env: dict[str, str]) -> None:
    steps = run("A change that needs a human", tmp_path, user_env)

    codes = [s.exit_code for s in steps]
    assert codes == [0, 0, 0, 0, 3, 0, 0, 0, 0, 0], [(s.command, s.stderr) for s in steps]
    find, _, _, _, parked, shown, approved, applied, status, audit = (s.stdout for s in steps)
    assert "Autumn Sale_Search_Retarget" in find
    assert "An approval request has been filed: apr_" in " ".join(parked.split())
    assert '"daily_budget_after": 2160' in shown
    assert re.search(r"approvals approve\|deny apr_[\w-]+ --principal WHO --tenant acme", shown)
    assert "approved apr_" in approved
    assert "approved by bob@acme.example: Q4 push agreed" in applied
    assert '"state": "applied"' in status
    assert "bob@acme.example (acme)" in audit


# Decide it in the browser ------------------------------------------------------------
@pytest.mark.slow
def test_the_console_section_serves_the_main_job_and_mints_a_link_for_bob(
    tmp_path: Path, user_env: dict[str, str]
) -> None:
    main_job, link = commands(block("Decide it in the browser", "bash").text)
    assert main_job.split("#")[0].split() == ["bash", "scripts/run.sh"]
    [step] = run_shell([link], ROOT, user_env)
    assert step.exit_code == 0, step.stderr
    assert step.stdout.startswith("http://127.0.0.1:8765/console/login?token="), step.stdout
    # The approval itself, done by people in a browser:
    # tests/browser/test_console_browser.py.


# Share it with a team -------------------------------------------------------------
def test_the_auth_table_is_a_valid_config() -> None:
    from callgate.auth import parse_auth

    text = block("Share it with a team: tokens, a second approver, replicas", "toml").text
    settings = parse_auth(tomllib.loads(text)["auth"], "README")
    assert settings.audience == "https://gateway.acme.example/mcp"
    assert settings.jwks_url is not None
    for linked in ("docs/auth.md", "docs/deploy.md", "examples/deploy"):
        assert (ROOT / linked).exists()


# Put other MCP servers behind it --------------------------------------------------------
@pytest.mark.slow
def test_the_gateway_example_installs_and_connects(tmp_path: Path) -> None:
    lines = commands(block("Put other MCP servers behind it", "bash").text)
    [serve] = [line for line in lines if " serve " in line]
    assert serve.split("#")[0].split() == [
        ".venv/bin/callgate",
        "serve",
        "-c",
        "examples/gateway.toml",
    ]
    install, probe = run_shell([line for line in lines if line != serve], ROOT, {})
    assert install.exit_code == 0, install.stderr
    assert probe.exit_code == 0, probe.stdout + probe.stderr
    assert re.search(r"everything\s+ready", probe.stdout), probe.stdout
    assert re.search(r"time\s+ready", probe.stdout), probe.stdout


# Serve your own tools ----------------------------------------------------------------
def _shop(tmp_path: Path) -> tuple[list[str], str]:
    """The section's files written where the user saves them; its commands."""
    tools = block("Serve your own tools", "python")
    config = block("Serve your own tools", "toml")
    assert "`my_tools.py`" in tools.before and "`callgate.toml`" in config.before
    (tmp_path / "my_tools.py").write_text(tools.text)
    (tmp_path / "callgate.toml").write_text(config.text)
    lines = commands(block("Serve your own tools", "bash").text)
    [serve] = [line for line in lines if line.startswith("callgate serve")]
    return [line for line in lines if line != serve], serve


@pytest.mark.slow
def test_your_own_tools_from_the_shell(tmp_path: Path) -> None:
    lines, _ = _shop(tmp_path)

    tools, status, cancel = run_shell(lines, tmp_path, {})

    assert tools.exit_code == 0 and "shop.order_cancel" in tools.stdout
    assert status.exit_code == 0
    assert '"status": "shipped"' in status.stdout and '"tenant": "acme"' in status.stdout
    assert cancel.exit_code == 3 and "pending_approval" in cancel.stdout
    assert (tmp_path / "shop.db").is_file()  # the config's store, beside it


@pytest.mark.slow
@pytest.mark.anyio
async def test_your_own_tools_over_mcp(tmp_path: Path) -> None:
    _, serve = _shop(tmp_path)
    expected = commands(block("Serve your own tools", "console").text)
    command = [str(callgate_bin() / "callgate"), *shlex.split(serve.split("#")[0])[1:]]

    process = await anyio.open_process([*command, "--port", "0"], cwd=tmp_path)
    try:
        assert process.stderr is not None
        said = ""
        with anyio.fail_after(30):
            async for chunk in process.stderr:
                said += chunk.decode()
                if "sign in to the console as " in said and said.endswith("\n"):
                    break
        lines = said.splitlines()
        [url] = [line.split("serving MCP at ", 1)[1] for line in lines if "serving MCP" in line]
        with anyio.fail_after(30):
            async with Client(url, mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                result = await client.call_tool("shop__order_status", {"order_id": "O-1"})
    finally:
        process.terminate()
        with anyio.fail_after(15):
            await process.wait()
        await process.aclose()

    assert lines[0] == f"callgate: store: sqlite:///{tmp_path / 'shop.db'}"
    assert lines[1:3] == expected[1:3]  # the principal and the toolboxes, as the README says
    base = url.removesuffix("/mcp")
    assert lines[4] == expected[4].replace("http://127.0.0.1:8765", base)
    signed = expected[5].replace("http://127.0.0.1:8765", base).removesuffix("…")
    assert lines[5].startswith(signed) and len(lines[5]) > len(signed) + 20
    assert {"shop__order_status", "shop__order_cancel"} <= names
    assert result.structured_content == {"order_id": "O-1", "status": "shipped", "tenant": "acme"}


# Use it from an MCP host ---------------------------------------------------------------
@pytest.mark.slow
def test_a_host_config_says_where_the_store_is_and_serve_reports_it(tmp_path: Path) -> None:
    host = json.loads(block("Use it from an MCP host", "json").text)["mcpServers"]["callgate"]
    [claude] = commands(block("Use it from an MCP host", "console").text)
    store = f"sqlite:///{tmp_path / 'host.db'}"

    assert host["command"].endswith("/.venv/bin/callgate")
    assert host["args"][:2] == ["serve", "--stdio"]
    assert "CALLGATE_STORE" in host["env"]
    assert "-e CALLGATE_STORE=" in claude and claude.endswith("/.venv/bin/callgate serve --stdio")
    # What the host then runs (stdin closed: the client is gone at once).
    done = subprocess.run(
        [str(callgate_bin() / "callgate"), "serve", "--stdio"],
        env={**os.environ, "CALLGATE_STORE": store},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"callgate: store: {store}"
    assert done.stdout == ""  # stdout is the protocol's


# Run an agent --------------------------------------------------------------------------
def test_every_deployment_the_readme_names_exists_in_the_demo() -> None:
    named = set(re.findall(r"\bD-\d+\b", README.read_text()))
    assert named and named <= {d.id for d in DEPLOYMENTS}


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_agent_examples_run(tmp_path: Path) -> None:
    """The block as written, against a fake server at the URL real-model.sh serves:
    a run, a forced email that waits, its approval, the resume with nothing but the
    run id, and the Anthropic example without a key."""
    lines = [
        shlex.split(line.removeprefix("$ "), comments=True)
        for line in commands(block("Run an agent", "console").text)
    ]
    serve, status, email, approve, resume, _, anthropic = lines
    assert serve == ["bash", "scripts/real-model.sh", "--serve"]
    message = {"to": ["partner@example.org"], "subject": "Q4", "body": "The Q4 note."}
    turns = [
        tool_call("deploy_status", {"deploy_id": "D-1"}),
        text("D-1 is running."),
        tool_call("send_email", message),
        text("Sent."),
    ]
    url = "http://127.0.0.1:8080/v1"
    async with fake_openai(turns) as (fake_url, fake):
        answered = await callgate_run(tmp_path, *[fake_url if a == url else a for a in status[2:]])
        waiting = await callgate_run(tmp_path, *[fake_url if a == url else a for a in email[2:]])
        run_id = waiting.stdout.decode().split()[1]
        [approval_id] = set(re.findall(r"apr_[\w-]+", waiting.stdout.decode()))
        env = {**os.environ, "CALLGATE_DEMO_STATE": str(tmp_path / "demo.json")}
        decide = [sys.executable, "-m", "callgate", *approve[1:], "--store"]
        decide = [approval_id if a == "apr_..." else a for a in decide]
        approved = await anyio.run_process(
            [*decide, f"sqlite:///{tmp_path / 'runs.db'}"], env=env, check=False
        )
        resumed = await callgate_run(
            tmp_path, *[run_id if a == "run_..." else a for a in resume[2:]]
        )
    without_key = await callgate_run(tmp_path, *anthropic[2:])

    assert answered.returncode == 0, answered.stderr.decode()
    assert "D-1 is running." in answered.stdout.decode()
    assert waiting.returncode == 3, waiting.stdout.decode()
    assert approved.returncode == 0, approved.stderr.decode()
    assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
    assert "the forced tool ops.send_email was called" in resumed.stdout.decode()
    assert [r.get("temperature") for r in fake.requests] == [0, 0, 0]
    assert without_key.returncode == 2
    assert "set the environment variable ANTHROPIC_API_KEY" in without_key.stderr.decode()
