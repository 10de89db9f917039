"""tau2-bench's airline and retail domains, converted to eval suites and run
through the gate over tau2's own tool implementations."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

pytest.importorskip("tau2")

from callgate.cli.app import app
from callgate.config import load_config, local_principal
from callgate.eval.tasks import load_suite
from callgate.eval.tau2 import convert, convert_tasks, tau2_toolbox, write_suite

AIRLINE_TOOLS = {
    "book_reservation",
    "calculate",
    "cancel_reservation",
    "get_flight_status",
    "get_reservation_details",
    "get_user_details",
    "list_all_airports",
    "search_direct_flight",
    "search_onestop_flight",
    "send_certificate",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
}


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def test_the_toolbox_serves_tau2s_tools_with_tau2s_descriptions_and_kinds() -> None:
    box = tau2_toolbox("airline")

    assert {spec.name for spec in box.specs} == {f"airline.{n}" for n in AIRLINE_TOOLS}
    user = box.get("get_user_details")
    assert user is not None
    assert user.description == "Get the details of a user, including their reservations."
    assert user.input_schema["required"] == ["user_id"]
    assert user.annotations.read_only is True
    cancel = box.get("cancel_reservation")
    assert cancel is not None
    assert cancel.annotations.read_only is False
    assert cancel.annotations.idempotent is False
    assert len(tau2_toolbox("retail")) == 15


@pytest.mark.anyio
async def test_a_read_runs_through_the_gate_and_each_gate_gets_a_fresh_database(
    tmp_path: Path,
) -> None:
    write_suite("airline", tmp_path, limit=1)
    config = load_config(tmp_path / "callgate.toml")

    first = config.build_gate("memory://")
    async with first:
        principal = local_principal(first, config.principal)
        read = await first.call(
            "airline.get_reservation_details", {"reservation_id": "EHGLP3"}, principal=principal
        )
        assert read.status == "ok", read.error
        assert read.payload["user_id"] == "emma_kim_9957"
        assert read.payload["status"] is None  # not cancelled
        cancelled = await first.call(
            "airline.cancel_reservation", {"reservation_id": "EHGLP3"}, principal=principal
        )
        assert cancelled.status == "ok", cancelled.error
        assert cancelled.payload["status"] == "cancelled"
        later = await first.call(
            "airline.get_reservation_details", {"reservation_id": "EHGLP3"}, principal=principal
        )
        assert later.payload["status"] == "cancelled"  # one database for the gate's life

    second = config.build_gate("memory://")
    async with second:
        again = await second.call(
            "airline.get_reservation_details",
            {"reservation_id": "EHGLP3"},
            principal=local_principal(second, config.principal),
        )
    assert again.payload["status"] is None  # the first gate's cancellation is not seen


@pytest.mark.anyio
async def test_an_eval_run_lets_go_of_its_database_as_it_ends(tmp_path: Path) -> None:
    """A run's gate is freed only by the garbage collector (its objects refer to
    each other); the database of 25,000 models its tools were given is freed as
    the run ends, not left to the collector, whose sweeps held the event loop
    for up to a second."""
    from callgate.eval.runner import run_suite

    write_suite("airline", tmp_path, limit=3)
    suite = load_suite(tmp_path / "airline.toml")
    gc.collect()
    gc.disable()
    try:
        result = await run_suite(suite)
        alive = sum(type(o).__name__ == "FlightDB" for o in gc.get_objects())
    finally:
        gc.enable()

    assert [r.success for r in result.runs] == [True, True, True]
    assert alive == 0


@pytest.mark.anyio
async def test_a_tau2_refusal_reaches_the_model_with_tau2s_message(tmp_path: Path) -> None:
    # tau2 refuses by raising ValueError and shows the agent its message; the gate
    # would otherwise hide it as an internal error.
    write_suite("retail", tmp_path, limit=1)
    config = load_config(tmp_path / "callgate.toml")
    gate = config.build_gate("memory://")
    async with gate:
        principal = local_principal(gate, config.principal)
        missing = await gate.call(
            "retail.get_product_details", {"product_id": "0"}, principal=principal
        )
        refused = await gate.call(
            "retail.cancel_pending_order",
            {"order_id": "#W2378156", "reason": "no longer needed"},  # delivered, not pending
            principal=principal,
        )
    assert missing.error is not None
    assert (missing.error.kind.value, missing.error.message_for_model) == (
        "construction",
        "Product not found",
    )
    assert refused.error is not None
    assert refused.error.kind.value == "business_state"
    assert refused.error.message_for_model == "Non-pending order cannot be cancelled"


def test_converting_airline_keeps_every_task_and_tau2s_split(tmp_path: Path) -> None:
    conversion = write_suite("airline", tmp_path)

    assert (conversion.converted, dict(conversion.skipped)) == (50, {})
    suite = load_suite(tmp_path / "airline.toml")
    assert suite.config == tmp_path / "callgate.toml"
    assert len(suite.select(split="heldout").tasks) == 20  # tau2's test split
    assert len(suite.select(split="dev").tasks) == 30
    assert suite.system is not None and suite.system.startswith("# Airline Agent Policy")
    task = next(t for t in suite.tasks if t.id == "airline-1")
    assert task.prompt.startswith("You are Raj Sanchez.\nYour user id is raj_sanchez_7340.")
    assert [c for step in task.script for c in step.calls] == [
        ("airline.get_user_details", {"user_id": "raj_sanchez_7340"}),
        ("airline.get_reservation_details", {"reservation_id": "Q69X3R"}),
    ]
    assert task.script[-1].reply == "Done."
    assert [(c.tool, dict(c.args)) for c in task.expect.calls] == [
        ("airline.get_user_details", {"user_id": "raj_sanchez_7340"}),
        ("airline.get_reservation_details", {"reservation_id": "Q69X3R"}),
    ]
    # tau2 would see a write the reference does not make in the final database.
    assert "airline.cancel_reservation" in task.expect.not_called
    assert task.tags == ("airline", "reads-only")


def test_converting_retail_keeps_what_the_agent_must_say() -> None:
    text = convert("retail")

    assert text.count("[[tasks]]") == 114
    assert 'answer_contains = ["1093.34"]' in text  # a communicate_info, in the reply too
    assert convert("retail", split="heldout").count("[[tasks]]") == 40
    assert convert("retail", split="dev", limit=3).count("[[tasks]]") == 3


def test_tasks_that_cannot_be_converted_are_skipped_with_the_reason() -> None:
    def task(task_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": task_id,
            "user_scenario": {"instructions": "Help me."},
            "evaluation_criteria": {"actions": [{"name": name, "arguments": args}]},
        }

    conversion = convert_tasks(
        "airline",
        [
            task("ok", "get_user_details", {"user_id": "u"}),
            task("null", "get_user_details", {"user_id": None}),
            task("gone", "teleport", {}),
        ],
        {"test": ["ok"]},
        tools=frozenset({"airline.get_user_details"}),
        writes=frozenset(),
    )

    assert conversion.converted == 1
    assert conversion.skipped == {
        "null": "its arguments hold null, which TOML cannot write",
        "gone": "its actions call airline.teleport, which the toolbox lacks",
    }
    assert 'split = "heldout"' in conversion.text


def test_the_reference_solutions_pass_through_the_gate(tmp_path: Path) -> None:
    converted = _cli("eval", "tau2", "airline", "--out", str(tmp_path), "--limit", "5")
    assert converted.exit_code == 0, converted.output
    assert "5 tasks converted, 0 skipped" in converted.output

    ran = _cli(
        "eval", "run", str(tmp_path / "airline.toml"), "--json", "--min-success", "1",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    result = json.loads(ran.stdout)
    assert [r["task"] for r in result["runs"] if r["success"]] == [f"airline-{i}" for i in range(5)]
    # No approval parks a write and no validation refuses tau2's arguments.
    assert not any(r["approval_hit"] or r["errors_by_kind"] for r in result["runs"])


def test_a_run_is_judged_by_the_final_database_as_tau2_judges_it(tmp_path: Path) -> None:
    write_suite("airline", tmp_path, limit=3)
    suite_file = tmp_path / "airline.toml"
    text = suite_file.read_text(encoding="utf-8")
    assert 'check_tools = ["airline.database_hash"]' in text
    assert '"callgate.eval.tau2:airline_eval"' in (tmp_path / "callgate.toml").read_text()
    # airline-2's reference sends one certificate; sending it twice makes every
    # expected call, and only the database shows the second certificate.
    send = '  { call = "airline.send_certificate", args = { user_id = "noah_muller_9847", amount = 50 } },\n'
    assert text.count(send) == 1
    suite_file.write_text(text.replace(send, send * 2), encoding="utf-8")

    result = json.loads(_cli("eval", "run", str(suite_file), "--json").stdout)

    runs = {r["task"]: r for r in result["runs"]}
    assert runs["airline-0"]["success"] and runs["airline-1"]["success"]
    [failure] = runs["airline-2"]["failures"]
    assert failure.startswith("state airline.database_hash: '")
    assert runs["airline-2"]["duplicate_calls"] == 1


@pytest.mark.anyio
async def test_the_model_is_not_offered_the_check_tool(tmp_path: Path) -> None:
    from callgate.agent.model import ScriptedModel, call, reply
    from callgate.eval.runner import run_suite

    write_suite("airline", tmp_path, limit=1)
    suite = load_suite(tmp_path / "airline.toml")
    models: list[ScriptedModel] = []

    def model(task: object) -> ScriptedModel:
        models.append(ScriptedModel([call("airline.database_hash"), reply("Done.")]))
        return models[-1]

    result = await run_suite(suite, model=model)

    offered = {tool.name for tool in models[0].requests[0].tools}
    assert "airline.get_user_details" in offered
    assert "airline.database_hash" not in offered
    # A model that names it anyway is refused like any tool it was not offered.
    [run] = result.runs
    assert run.tools_called == ("airline.database_hash",)
    assert run.errors_by_kind


def test_a_check_tool_the_config_lacks_stops_the_suite(tmp_path: Path) -> None:
    write_suite("airline", tmp_path, limit=1)
    config = tmp_path / "callgate.toml"
    config.write_text(config.read_text().replace("airline_eval", "airline"), encoding="utf-8")

    result = _cli("eval", "run", str(tmp_path / "airline.toml"))

    assert result.exit_code == 2
    assert "check_tools names airline.database_hash, which the suite's config does not serve" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_an_unknown_domain_stops_the_command(tmp_path: Path) -> None:
    result = _cli("eval", "tau2", "telecom", "--out", str(tmp_path))

    assert result.exit_code == 2
    assert "expected one of airline, retail" in result.output


def test_an_output_that_is_a_file_stops_the_command_before_converting(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine", encoding="utf-8")
    seen: list[tuple[int, int]] = []

    with pytest.raises(OSError):
        write_suite("airline", taken, on_task=lambda done, total: seen.append((done, total)))

    assert seen == []  # nothing was converted first
    assert taken.read_text(encoding="utf-8") == "mine"


def test_the_conversion_reports_its_progress(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []

    write_suite(
        "airline", tmp_path, split="heldout", limit=3, on_task=lambda d, t: seen.append((d, t))
    )

    assert seen == [(1, 3), (2, 3), (3, 3)]


# One test a domain, so that the two (about 30 s each) run on different workers.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("domain", "errors"),
    [
        ("airline", {}),
        # Retail's reference solutions make failing calls of their own: looking up
        # an item id as a product (construction), and writes tau2 itself refuses
        # (business_state: a return to another payment method, an exchange of an
        # undelivered order, a gift card short of the difference). They fail in
        # tau2 too; its final-database check does not see a refused write.
        ("retail", {"construction": 19, "business_state": 4}),
    ],
)
def test_every_reference_solution_passes_and_tau2s_own_failures_show(
    tmp_path: Path, domain: str, errors: dict[str, int]
) -> None:
    write_suite(domain, tmp_path / domain)
    result = json.loads(
        _cli("eval", "run", str(tmp_path / domain / f"{domain}.toml"), "--json").stdout
    )

    assert result["overall"]["success_rate"] == 1.0
    assert not any(r["approval_hit"] for r in result["runs"])
    found: dict[str, int] = {}
    for run in result["runs"]:
        for kind, count in run["errors_by_kind"].items():
            found[kind] = found.get(kind, 0) + count
    assert found == errors
