"""What replicas share comes from the environment; a bad value stops ``serve`` at start."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from callgate.cli._replicas import LEASE_ENV, SECRET_ENV
from callgate.cli.app import app


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        (SECRET_ENV, "too-short", f"{SECRET_ENV} must be at least 32 characters (it has 9)"),
        (LEASE_ENV, "soon", f"{LEASE_ENV} must be a positive number of seconds, not 'soon'"),
        (LEASE_ENV, "0", f"{LEASE_ENV} must be a positive number of seconds, not '0'"),
    ],
)
def test_a_bad_shared_setting_stops_serve_saying_which(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["serve", "--stdio", "--store", "memory://"])
    assert result.exit_code == 2
    assert said in result.output
    assert value not in result.output or name == LEASE_ENV  # a secret is never echoed
