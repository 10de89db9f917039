"""Start-up: a command imports what it needs, not the whole package.

``callgate --help`` used to load the gate, the store's SQLAlchemy, the MCP
SDK, uvicorn and the CEL engine, and took twice as long as importing the MCP
SDK alone. Each check runs a fresh interpreter and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = (
    "mcp",
    "mcp_types",
    "uvicorn",
    "starlette",
    "sqlalchemy",
    "alembic",
    "cel",
    "callgate.runtime.gate",
    "callgate.store",
    "callgate.agent.loop",
)


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = textwrap.dedent(code) + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in HEAVY if name in modules)


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [["--help"], ["serve", "--help"], ["run", "--help"], ["approvals", "--help"], ["--version"]],
    ids=" ".join,
)
def test_help_loads_neither_the_gate_nor_the_mcp_sdk(argv: list[str]) -> None:
    modules = _modules_after(
        f"""
        import contextlib, io
        from callgate.cli.app import app
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            app({argv!r}, prog_name="callgate")
        """
    )
    assert _heavy(modules) == []


@pytest.mark.slow
def test_importing_callgate_loads_only_what_is_used() -> None:
    assert _heavy(_modules_after("import callgate; callgate.__version__")) == []
    # Each name still arrives when asked for, from its own module.
    modules = _modules_after("from callgate import Gate, Toolbox, tool")
    assert {"callgate.runtime.gate", "callgate.contract.toolbox"} <= modules
    assert "mcp" not in modules


@pytest.mark.slow
def test_a_policy_without_conditions_loads_no_cel_engine() -> None:
    modules = _modules_after(
        """
        from callgate import Gate, Policy, Rule, Toolbox
        Gate([Toolbox("ops")], store="memory://", policy=Policy([Rule("allow", tools=["ops.*"])]))
        """
    )
    assert "cel" not in modules
    modules = _modules_after(
        """
        from callgate import Policy, Rule
        Policy([Rule("deny", when="args.amount > 10")])
        """
    )
    assert "cel" in modules


def test_serve_shows_the_servers_own_defaults() -> None:
    from callgate.cli import serve
    from callgate.mcp import DEFAULT_BODY_TIMEOUT, DEFAULT_SEPARATOR

    assert serve.DEFAULT_BODY_TIMEOUT == DEFAULT_BODY_TIMEOUT
    assert serve.DEFAULT_SEPARATOR == DEFAULT_SEPARATOR
