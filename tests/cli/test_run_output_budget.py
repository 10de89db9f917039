"""``callgate run --max-output-tokens``: the output budget of each model request."""

from __future__ import annotations

import pytest

from callgate.agent import ScriptedModel, reply
from callgate.agent.model import Model

from .conftest import Cli

RUN = ("run", "How is D-1?", "--provider", "openai", "--model", "m")


def use(monkeypatch: pytest.MonkeyPatch, model: Model) -> None:
    def make(provider: str, name: str, *, base_url: str | None = None) -> Model:
        return model

    monkeypatch.setattr("callgate.cli.run.make_model", make)


def test_the_output_budget_reaches_every_request(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([reply("D-1 is running.")])
    use(monkeypatch, model)

    result = cli(*RUN, "--max-output-tokens", "512")

    assert result.exit_code == 0, result.output
    assert [request.max_tokens for request in model.requests] == [512]


def test_the_output_budget_defaults_to_4096(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([reply("D-1 is running.")])
    use(monkeypatch, model)

    assert cli(*RUN).exit_code == 0
    assert model.requests[0].max_tokens == 4096
