"""The official MCP conformance suite against ``callgate serve``, at both spec versions.

``python -m callgate serve`` serves the fixture toolboxes (``conformance`` unprefixed,
loaded by path from ``tests/conformance/fixture/``) on a free port; ``scripts/conformance.sh`` runs ``@modelcontextprotocol/conformance``
``--suite all`` against it with ``conformance/expected-failures.yml`` as the baseline,
and the run must exit 0: every failure is listed there, and no listed entry passes.

A listed entry that passes ("stale") fails the run, by the suite's design: remove it
from the file in the change that makes it pass. While such a change is in progress,
``CALLGATE_CONFORMANCE_ALLOW_STALE=1`` reports stale entries as an xfail instead
(unexpected failures still fail).

Node 22 and the suite are installed on first use into ``.cache/`` (see the script);
concurrent installs wait on a lock there.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from tests.conformance.fixture import FIXTURE_TOOLBOX, FIXTURE_TOOLBOXES
from tests.npm import install

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "conformance.sh"
BASELINE = ROOT / "conformance" / "expected-failures.yml"
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")
ALLOW_STALE = "CALLGATE_CONFORMANCE_ALLOW_STALE"
RUN_TIMEOUT = 600  # seconds: both suites take seconds; a hung scenario times out at 30 s

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SECTIONS = {
    "Expected failures (in baseline):": "expected",
    "Stale baseline entries (now passing - remove from baseline):": "stale",
    "Unexpected failures (not in baseline):": "unexpected",
}


def _suite_verdict(output: str) -> dict[str, list[str]]:
    """The suite's baseline report: expected, stale and unexpected entries."""
    found: dict[str, list[str]] = {name: [] for name in _SECTIONS.values()}
    section: str | None = None
    for raw in _ANSI.sub("", output).splitlines():
        line = raw.strip()
        if line in _SECTIONS:
            section = _SECTIONS[line]
        elif section and line[:2] in ("~ ", "✓ ", "✗ "):
            found[section].append(line[2:].strip())
        else:
            section = None
    return found


def _summary(output: str) -> str:
    """The suite's summary and baseline report (the tail if there is none)."""
    text = _ANSI.sub("", output)
    start = text.find("=== SUMMARY ===")
    return text[start:] if start >= 0 else text[-3000:]


def _failing_checks(results: Path) -> list[str]:
    """``scenario:check [STATUS] message`` for every FAILURE or WARNING in the results."""
    out: list[str] = []
    for path in sorted(results.glob("**/checks.json")):
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", path.parent.name)
        scenario = scenario.removeprefix("server-")
        try:
            checks = json.loads(path.read_text())
        except ValueError:
            out.append(f"{scenario}: unreadable {path}")
            continue
        for check in checks:
            if check.get("status") in ("FAILURE", "WARNING"):
                message = (check.get("errorMessage") or check.get("description") or "")[:300]
                out.append(f"{scenario}:{check.get('id')} [{check['status']}] {message}")
    return out


@pytest.fixture(scope="session")
def suite_installed() -> None:
    """Node 22 and the suite, installed once (the script locks against other installs)."""
    install(SCRIPT, "the conformance suite")


@asynccontextmanager
async def _fixture_server(tmp_path: Path) -> AsyncIterator[tuple[str, Process]]:
    """``callgate serve`` with the fixture toolboxes on a free port; yields its URL.

    Its stderr goes to a file, not a pipe nobody reads once the URL is known.
    """
    config = tmp_path / "conformance.toml"
    # JSON's string escapes are TOML's: the reference is a path, which may need them.
    # Every fixture tool listed, as the suite expects (more than 15 would switch
    # tools/list to the search meta-tools: docs/discovery.md).
    config.write_text(
        f'store = "memory://"\ntoolboxes = [{json.dumps(FIXTURE_TOOLBOXES)}]\n'
        '[discovery]\nmode = "direct"\n'
    )
    log = tmp_path / "serve.stderr"
    command = [sys.executable, "-m", "callgate", "serve", "--config", str(config)]
    command += ["--port", "0", "--unprefixed", FIXTURE_TOOLBOX]
    with log.open("wb") as errors:
        # Not in the checkout: with -m the cwd is on sys.path, and the fixture must load
        # by its path alone, as it does for a server started anywhere.
        process = await anyio.open_process(
            command, cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=errors
        )
    try:
        url = ""
        with anyio.fail_after(30):
            while not url:
                text = log.read_text(errors="replace")
                match = re.search(r"serving MCP at (\S+)\n", text)
                if match:
                    url = match.group(1)
                elif process.returncode is not None:
                    pytest.fail(f"callgate serve exited {process.returncode}:\n{text}")
                else:
                    await anyio.sleep(0.05)
        yield url, process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            await process.wait()
        await process.aclose()


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
async def test_conformance_suite(suite_installed: None, tmp_path: Path, spec_version: str) -> None:
    results = tmp_path / "results"
    async with _fixture_server(tmp_path) as (url, server):
        with anyio.fail_after(RUN_TIMEOUT):
            run = await anyio.run_process(
                [
                    "bash",
                    str(SCRIPT),
                    "--spec-version",
                    spec_version,
                    "--suite",
                    "all",
                    "--expected-failures",
                    str(BASELINE),
                    "--output-dir",
                    str(results),
                    url,
                ],
                check=False,
                stdin=subprocess.DEVNULL,
            )
        alive = server.returncode is None
    output = run.stdout.decode(errors="replace") + run.stderr.decode(errors="replace")
    log = (tmp_path / "serve.stderr").read_text(errors="replace")
    assert alive, f"callgate serve died during the suite:\n{log[-4000:]}"
    if run.returncode == 0:
        return
    verdict = _suite_verdict(output)
    report = (
        f"conformance suite at {spec_version} exited {run.returncode}\n"
        f"unexpected failures (fix, or list in {BASELINE.relative_to(ROOT)} with a reason): "
        f"{verdict['unexpected']}\n"
        f"stale entries (now passing; remove from the file): {verdict['stale']}\n"
        "failing checks:\n  " + "\n  ".join(_failing_checks(results)) + "\n"
        f"suite summary:\n{_summary(output)}"
    )
    only_stale = run.returncode == 1 and verdict["stale"] and not verdict["unexpected"]
    if only_stale and os.environ.get(ALLOW_STALE, "") not in ("", "0"):
        pytest.xfail(f"{ALLOW_STALE} set; stale baseline entries: {verdict['stale']}")
    pytest.fail(report, pytrace=False)


TASKS_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
"""The Tasks extension's scenarios: not on a spec version's timeline, so ``--suite all``
leaves them out; each is run with ``--force`` at 2026-07-28 against the same baseline."""


@pytest.mark.anyio
@pytest.mark.slow
async def test_tasks_extension_scenarios(suite_installed: None, tmp_path: Path) -> None:
    failures: list[str] = []
    async with _fixture_server(tmp_path) as (url, server):
        for scenario in TASKS_SCENARIOS:
            results = tmp_path / "results" / scenario
            with anyio.fail_after(RUN_TIMEOUT):
                command = ["bash", str(SCRIPT), "--spec-version", "2026-07-28"]
                command += ["--scenario", scenario, "--force", "--expected-failures"]
                command += [str(BASELINE), "--output-dir", str(results), url]
                run = await anyio.run_process(
                    command,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            if run.returncode != 0:
                output = run.stdout.decode(errors="replace") + run.stderr.decode(errors="replace")
                verdict = _suite_verdict(output)
                failures.append(
                    f"{scenario}: exited {run.returncode}, unexpected {verdict['unexpected']}, "
                    f"stale {verdict['stale']}\n  " + "\n  ".join(_failing_checks(results))
                )
        alive = server.returncode is None
    log = (tmp_path / "serve.stderr").read_text(errors="replace")
    assert alive, f"callgate serve died during the tasks scenarios:\n{log[-4000:]}"
    assert not failures, "\n".join(failures)


def test_every_expected_failure_has_a_reason() -> None:
    """Each entry in the baseline carries its reason as a comment on its line (an empty
    baseline says so: the suite refuses ``server:`` with no list)."""
    text = BASELINE.read_text()
    entries = [line.strip() for line in text.splitlines() if line.lstrip().startswith("- ")]
    assert entries or re.search(r"(?m)^server: \[\]", text)
    for entry in entries:
        name, _, reason = entry.removeprefix("- ").partition(" # ")
        assert re.fullmatch(r"[a-z0-9-]+(:[a-z0-9-]+)?", name), entry
        assert reason.strip(), f"no reason given for {name}"
