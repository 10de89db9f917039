"""The official MCP conformance suite's client scenarios against callgate's gateway.

``scripts/conformance-client.sh`` runs ``@modelcontextprotocol/conformance client
--suite all`` at each spec version: per scenario the suite starts a mock MCP server and
runs ``python -m tests.conformance.client URL`` (a gateway config with the mock as its
one ``[[upstreams]]``, the gate opened, the scenario's tools called through the chain).
The run must exit 0: every failing check, and every scenario whose client program could
not finish, is listed in ``conformance/expected-failures-client.yml`` with its reason,
and no listed entry passes (a "stale" entry: remove it in the change that fixes it).

Node 22 and the suite are installed on first use into ``.cache/`` (see the script),
shared with ``test_suite.py``; concurrent installs wait on a lock there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.conformance.test_suite import _suite_verdict, _summary
from tests.npm import install

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "conformance-client.sh"
BASELINE = ROOT / "conformance" / "expected-failures-client.yml"
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")
RUN_TIMEOUT = 300  # seconds: a suite takes 15-30 s; a hung scenario times out at 60 s

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@pytest.fixture(scope="session")
def client_suite_installed() -> None:
    """Node 22 and the suite, installed once (the script locks against other installs)."""
    install(SCRIPT, "the conformance suite")


def _failing_checks(results: Path) -> list[str]:
    """``scenario:check [STATUS] message`` for every FAILURE or WARNING in the results."""
    out: list[str] = []
    for path in sorted(results.glob("**/checks.json")):
        scenario = _STAMP.sub("", path.parent.relative_to(results).as_posix())
        for check in json.loads(path.read_text()):
            if check.get("status") in ("FAILURE", "WARNING"):
                message = (check.get("errorMessage") or check.get("description") or "")[:300]
                out.append(f"{scenario}:{check.get('id')} [{check['status']}] {message}")
    return out


async def _run_client_suite(results: Path, *options: str) -> tuple[int, str]:
    """The script's exit status and output (stdout and stderr, without colours)."""
    command = ["bash", str(SCRIPT), *options, "--expected-failures", str(BASELINE)]
    command += ["--output-dir", str(results), "--python", sys.executable]
    with anyio.fail_after(RUN_TIMEOUT):
        run = await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL)
    output = run.stdout.decode(errors="replace") + run.stderr.decode(errors="replace")
    return run.returncode, _ANSI.sub("", output)


def _report(what: str, status: int, output: str, results: Path) -> str:
    verdict = _suite_verdict(output)
    program = output[output.find("Client program failures") :] if "Client program" in output else ""
    return (
        f"{what} exited {status}\n"
        f"unexpected failures (fix, or list in {BASELINE.relative_to(ROOT)} with a reason): "
        f"{verdict['unexpected']}\n"
        f"stale entries (now passing; remove from the file): {verdict['stale']}\n"
        f"{program}\n"
        "failing checks:\n  " + "\n  ".join(_failing_checks(results)) + "\n"
        f"suite summary:\n{_summary(output)}"
    )


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
async def test_client_scenarios(
    client_suite_installed: None, tmp_path: Path, spec_version: str
) -> None:
    results = tmp_path / "results"
    status, output = await _run_client_suite(
        results, "--spec-version", spec_version, "--suite", "all"
    )
    # The gateway connected and called tools in the scenarios it is expected to pass.
    verdicts = {
        _STAMP.sub("", out.parent.relative_to(results).as_posix()): out.read_text()
        for out in results.glob("**/stdout.txt")
    }
    assert "conformance client: ok" in verdicts["tools_call"], verdicts["tools_call"]
    if status != 0:
        pytest.fail(_report(f"client suite at {spec_version}", status, output, results), False)


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
async def test_client_credentials_extension(
    client_suite_installed: None, tmp_path: Path, spec_version: str
) -> None:
    """The gateway's own credential for an upstream, the client credentials grant with a
    client secret: an extension scenario, so not in ``--suite all``; run with --force."""
    results = tmp_path / "results"
    scenario = ["--scenario", "auth/client-credentials-basic", "--force"]
    status, output = await _run_client_suite(results, "--spec-version", spec_version, *scenario)
    assert status == 0, _report(
        f"auth/client-credentials-basic at {spec_version}", status, output, results
    )
    (checks,) = results.glob("auth/client-credentials-basic-*/checks.json")
    passed = {c["id"] for c in json.loads(checks.read_text()) if c["status"] == "SUCCESS"}
    assert {"client-credentials-basic-auth", "valid-bearer-token"} <= passed, passed


def test_every_expected_failure_has_a_reason() -> None:
    """Each entry of the client baseline (``client:`` and ``client-program:``) carries
    its reason as a comment on its line."""
    text = BASELINE.read_text()
    entries = [line.strip() for line in text.splitlines() if line.lstrip().startswith("- ")]
    assert entries
    assert re.search(r"(?m)^client:$", text) and re.search(r"(?m)^client-program:$", text)
    for entry in entries:
        name, _, reason = entry.removeprefix("- ").partition(" # ")
        assert re.fullmatch(r"[a-z0-9_/-]+(:[a-z0-9-]+)?", name), entry
        assert reason.strip(), f"no reason given for {name}"
