"""`callgate run`'s exit code says how the run ended; a wait for the model shows progress.

The model is a ScriptedModel (in process); tests/cli/test_run.py runs real processes
against an OpenAI-compatible server.
"""

from __future__ import annotations

import json
import sys

import pytest

from callgate.agent import ScriptedModel, call, reply
from callgate.agent.messages import ForcedTool, ModelRequest, ModelResponse, ToolCall, Usage
from callgate.agent.model import Model, ModelError
from callgate.agent.names import OPENAI_NAMES

from .conftest import Cli

RUN = ("run", "How is D-1?", "--provider", "openai", "--model", "m")
STATUS = call("ops.deploy_status", {"deploy_id": "D-1"})


def use(monkeypatch: pytest.MonkeyPatch, model: Model) -> None:
    def make(provider: str, name: str, *, base_url: str | None = None) -> Model:
        return model

    monkeypatch.setattr("callgate.cli.run.make_model", make)


class Unreachable:
    name = "openai-compatible:m"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise ModelError(
            "could not reach the OpenAI-compatible server at http://x/v1", retryable=True
        )


def test_a_completed_run_exits_0(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, ScriptedModel([STATUS, reply("D-1 is running.")]))

    result = cli(*RUN)

    assert result.exit_code == 0, result.output
    assert "D-1 is running." in result.stdout


def test_a_failed_run_exits_1_and_says_why(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, Unreachable())

    readable = cli(*RUN)
    as_json = cli(*RUN, "--json")

    assert readable.exit_code == 1
    assert "could not reach the OpenAI-compatible server at http://x/v1" in readable.stdout
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["status"] == "failed"


def test_a_run_stopped_by_a_limit_exits_4_not_as_a_failure(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, ScriptedModel([STATUS, STATUS, reply("never reached")]))

    result = cli(*RUN, "--max-turns", "1")
    as_json = cli(*RUN, "--max-turns", "1", "--json")

    assert result.exit_code == 4
    assert "turn limit (1) reached" in result.stdout
    assert as_json.exit_code == 4
    assert json.loads(as_json.stdout)["status"] == "stopped"


def test_the_exit_codes_are_in_the_help(cli: Cli) -> None:
    result = cli("run", "--help")

    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "1 it failed, 4 a limit stopped it, 3 it waits for an approval" in text


def test_a_run_waiting_for_an_approval_exits_3(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    email = {"to": ["partner@example.org"], "subject": "Q4", "body": "Attached."}
    use(monkeypatch, ScriptedModel([call("ops.send_email", email)]))

    result = cli(*RUN, "--json")

    assert result.exit_code == 3
    assert json.loads(result.stdout)["status"] == "waiting_approval"


def test_waiting_for_the_model_shows_a_spinner_on_a_terminal(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, ScriptedModel([reply("Hi."), reply("Hi.")]))

    on_terminal = cli(*RUN, FORCE_COLOR="1")
    piped = cli(*RUN)

    assert "waiting for scripted" in on_terminal.stderr
    # Piped: no spinner (a loaded machine may still log a stalled-loop warning).
    assert "waiting for" not in piped.stderr


def test_a_provider_sdk_not_installed_says_how_to_install_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the openai extra were missing: importing the SDK fails.
    monkeypatch.setitem(sys.modules, "openai", None)
    for module in ("callgate.agent.openai_chat", "callgate.agent._openai_common"):
        monkeypatch.delitem(sys.modules, module, raising=False)

    result = cli(
        *("run", "Hi", "--provider", "openai-compatible", "--model", "m"),
        *("--base-url", "http://127.0.0.1:1/v1"),
    )

    assert result.exit_code == 2
    assert result.stderr.startswith(
        "callgate: error: --provider openai-compatible needs callgate's extra 'openai'"
    )
    assert "pip install -e '.[openai]'" in result.stderr


def test_what_the_model_reads_names_tools_as_its_provider_does(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the OpenAI adapter: the model knows ops__deploy_status, never ops.deploy_status.
    model = ScriptedModel([call("ops__deploy_statu", {"deploy_id": "D-1"}), reply("Sorry.")])
    model.name_rule = OPENAI_NAMES  # type: ignore[attr-defined]
    use(monkeypatch, model)

    result = cli(*RUN)

    [fed_back] = model.requests[1].messages[-1].results  # type: ignore[union-attr]
    assert fed_back.content.startswith("Unknown tool 'ops__deploy_statu'. Did you mean ")
    assert "'ops__deploy_status'" in fed_back.content and "ops." not in fed_back.content
    assert "Did you mean 'ops__deploy_status'" in result.stdout


def test_the_stream_keeps_labels_apart_and_shows_what_the_model_sent(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_json = '{"deploy_id": "D-1"'  # cut off: no closing brace
    bad = ToolCall(id="c1", name="ops.deploy_status", raw_arguments=not_json)
    turn = ModelResponse(parts=(bad,), stop_reason="tool_use", usage=Usage())
    use(monkeypatch, ScriptedModel([turn, STATUS]))

    result = cli(*RUN, "--max-turns", "2")

    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert f"call    #1 ops.deploy_status {not_json}" in lines
    assert any(line.startswith("  error    #1 ops.deploy_status: ") for line in lines)
    assert any(line.startswith("  ok       #2 ops.deploy_status: ") for line in lines)
    assert "stopped turn limit (2) reached" in lines
    # An error's next step sits under its message, not at the start of the line.
    [next_step] = [line for line in lines if "Next step:" in line]
    assert next_step.startswith(" " * 11 + "Next step:")


def test_tool_forces_one_call_and_ends_the_run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel([STATUS])
    use(monkeypatch, model)

    result = cli(*RUN, "--tool", "ops.deploy_status", "--json")

    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert done["reason"] == "the forced tool ops.deploy_status was called"
    assert [c["name"] for c in done["calls"]] == ["ops.deploy_status"]
    [request] = model.requests
    assert request.tool_choice == ForcedTool("ops.deploy_status")


def test_a_forced_tool_that_is_not_there_is_a_cli_error_with_the_near_names(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([STATUS])
    use(monkeypatch, model)

    result = cli(*RUN, "--tool", "ops.deploy_stats")

    assert result.exit_code == 2
    assert "the forced tool 'ops.deploy_stats' is not a tool local may call here." in result.output
    assert "Did you mean 'ops.deploy_status', " in result.output
    assert model.requests == []  # nothing was asked


def test_a_resumed_forced_run_keeps_its_tool_and_ends_after_the_call(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    email = {"to": ["partner@example.org"], "subject": "Q4", "body": "Attached."}
    model = ScriptedModel([call("ops.send_email", email)])
    use(monkeypatch, model)

    paused = cli.json(*RUN, "--tool", "ops.send_email", exit_code=3)
    [approval_id] = paused["pending_approvals"]
    approved = cli("approvals", "approve", approval_id, "--principal", "local", "--tenant", "acme")
    assert approved.exit_code == 0, approved.output
    # No --tool: the run's own is kept, and the model is not asked again.
    done = cli.json("run", "--resume", paused["run_id"], "--provider", "openai", "--model", "m")

    assert done["status"] == "completed"
    assert done["reason"] == "the forced tool ops.send_email was called"
    assert len(model.requests) == 1
