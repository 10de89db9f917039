"""Tasks run through the real agent loop over the demo gate, and are judged."""

from __future__ import annotations

from typing import Any

import pytest

from callgate.eval.runner import run_suite
from callgate.eval.tasks import parse_suite

pytestmark = pytest.mark.anyio

PREVIEW = "ops.budget_change_preview"
APPLY = "ops.budget_change_apply"


def _suite(*tasks: dict[str, Any]) -> Any:
    return parse_suite({"suite": {"name": "t"}, "tasks": list(tasks)})


async def test_a_scripted_write_is_judged_by_its_calls_answer_and_the_state_after() -> None:
    suite = _suite(
        {
            "id": "raise",
            "prompt": "Set Autumn Sale_Search to 1,500.",
            "script": [
                {"call": PREVIEW, "args": {"campaign_id": "C-101", "new_daily_budget": 1500}},
                {"call": APPLY, "args": {"preview_id": "${ops.budget_change_preview.preview_id}"}},
                {"reply": "Done: 1,500."},
            ],
            "expect": {
                "calls": [{"tool": APPLY}],
                "allowed": [PREVIEW],
                "answer_contains": ["1,500"],
                "state": [
                    {
                        "tool": "ops.campaigns_find",
                        "args": {"query": "Autumn Sale_Search"},
                        "path": "0.daily_budget",
                        "equals": 1500,
                    }
                ],
            },
        }
    )

    result = await run_suite(suite, repeat=2, concurrency=2)

    assert [(r.success, r.calls, r.errors) for r in result.runs] == [(True, 2, 0)] * 2
    assert result.overall.wrong_tool_rate == 0.0


async def test_failed_checks_are_named() -> None:
    suite = _suite(
        {
            "id": "status",
            "prompt": "Is D-1 up?",
            "script": [
                {"call": "ops.notes_search", "args": {"query": "D-1"}},
                {"call": "ops.deploy_status", "args": {"deploy_id": "D-1"}},
                {"call": "ops.deploy_status", "args": {"deploy_id": "D-1"}},
                {"reply": "It is down."},
            ],
            "expect": {
                "calls": [{"tool": "ops.deploy_status", "args": {"deploy_id": "D-2"}}],
                "not_called": ["ops.notes_search"],
                "answer_contains": ["running"],
            },
        }
    )

    (run,) = (await run_suite(suite)).runs

    assert not run.success
    assert run.failures == (
        'no call to ops.deploy_status {"deploy_id": "D-2"}',
        "called ops.notes_search, which it must not",
        "the answer does not contain 'running'",
    )
    assert (run.calls, run.wrong_tool_calls, run.duplicate_calls) == (3, 1, 1)


async def test_an_approval_ends_the_run_waiting_for_a_person() -> None:
    suite = _suite(
        {
            "id": "big",
            "prompt": "Raise Autumn Sale_Search to 3,000.",
            "script": [
                {"call": PREVIEW, "args": {"campaign_id": "C-101", "new_daily_budget": 3000}},
                {"call": APPLY, "args": {"preview_id": "${ops.budget_change_preview.preview_id}"}},
            ],
            "expect": {"status": "waiting_approval", "calls": [{"tool": APPLY}]},
        }
    )

    (run,) = (await run_suite(suite)).runs

    assert run.success
    assert run.status == "waiting_approval"
    assert run.approval_hit and run.human_takeover


async def test_a_script_that_runs_out_fails_the_run_and_a_bad_argument_counts_by_kind() -> None:
    suite = _suite(
        {
            "id": "short",
            "prompt": "Status of D-1?",
            "script": [{"call": "ops.deploy_status", "args": {"deploy_id": 1}}],
        }
    )

    (run,) = (await run_suite(suite)).runs

    assert not run.success
    assert run.failures == ("the scripted model ran out of steps",)
    assert run.calls == 1


HOLDING_TOOLS = '''
from callgate import Toolbox
from callgate.eval.scope import on_run_end

ended = []
registered = []


def box():
    toolbox = Toolbox("hold")
    held = {"big": list(range(1000))}  # what a run's tools hold (a database)

    @toolbox.tool(read_only=True, open_world=False)
    def size() -> int:
        """How much is held."""
        return len(held["big"])

    registered.append(on_run_end(lambda: ended.append(held.pop("big"))))
    return toolbox
'''


async def test_a_toolbox_built_for_a_run_is_told_when_the_run_ends(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import importlib
    import sys

    from callgate.config import load_config

    (tmp_path / "holding_tools.py").write_text(HOLDING_TOOLS, encoding="utf-8")
    (tmp_path / "callgate.toml").write_text('toolboxes = ["holding_tools:box"]\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("holding_tools")
    request.addfinalizer(lambda: sys.modules.pop("holding_tools", None))
    script = [{"call": "hold.size"}, {"reply": "1000"}]
    suite = parse_suite(
        {
            "suite": {"name": "t", "config": "callgate.toml"},
            "tasks": [
                {"id": f"t{i}", "prompt": "How much?", "script": script,
                 "expect": {"answer_contains": ["1000"]}}
                for i in range(2)
            ],
        },
        source=tmp_path / "suite.toml",
    )  # fmt: skip

    result = await run_suite(suite)

    assert [r.success for r in result.runs] == [True, True]
    assert module.registered == [True, True]  # each run's own gate
    assert len(module.ended) == 2
    load_config(tmp_path / "callgate.toml").build_gate("memory://")  # a server's gate
    assert module.registered[-1] is False
