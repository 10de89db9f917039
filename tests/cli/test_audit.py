"""`callgate audit`: what was decided and what happened, including unknown outcomes."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from callgate.store import AuditRecord, SQLStore

from .conftest import ALICE_ARGS, Cli


def _find(cli: Cli, query: str, *extra: str) -> str:
    envelope = cli.json(
        "call",
        "ops.campaigns_find",
        "--args",
        f'{{"query": "{query}"{"".join(extra)}}}',
        *ALICE_ARGS,
    )
    return str(envelope["call_id"])


def _append_intent(url: str, call_id: str) -> None:
    """A side-effecting call whose process died after writing its intent."""

    async def go() -> None:
        async with SQLStore(url) as store:
            await store.append_audit(
                [
                    AuditRecord(
                        call_id=call_id,
                        phase="intent",
                        at=datetime.now(UTC),
                        trace_id="t-crash",
                        tool="ops.budget_change_apply",
                        user="alice",
                        tenant="acme",
                        risk="write_idempotent",
                        decision="allow",
                    )
                ]
            )

    asyncio.run(go())


def test_audit_json_tail_gives_the_newest_records_oldest_first(cli: Cli) -> None:
    first = _find(cli, "Autumn")
    second = _find(cli, "Retarget")
    third = _find(cli, "Display", ', "tenant_id": "globex"')

    everything = cli.json("audit")
    tail = cli.json("audit", "--tail", "2")

    assert [r["call_id"] for r in everything] == [first, second, third]
    assert [r["call_id"] for r in tail] == [second, third]
    assert [r["seq"] for r in tail] == sorted(r["seq"] for r in tail)
    newest = tail[-1]
    assert newest["phase"] == "final"
    assert newest["tool"] == "ops.campaigns_find"
    assert newest["user"] == "alice"
    assert newest["tenant"] == "acme"
    assert newest["decision"] == "allow"
    assert newest["outcome"] == "ok"
    assert newest["dropped_fields"] == ["tenant_id"]
    assert newest["outcome_unknown"] is False
    assert datetime.fromisoformat(newest["at"]).tzinfo is not None


def test_intent_without_final_is_flagged_in_json(cli: Cli) -> None:
    done = _find(cli, "Autumn")
    _append_intent(cli.store, "call_crashed")

    records = cli.json("audit")

    flags = {(r["call_id"], r["phase"]): r["outcome_unknown"] for r in records}
    assert flags == {(done, "final"): False, ("call_crashed", "intent"): True}


def test_readable_audit_merges_records_per_call_and_shows_unknown_outcomes(cli: Cli) -> None:
    _find(cli, "Autumn", ', "tenant_id": "globex"')
    preview = cli.json(
        "call",
        "ops.budget_change_preview",
        "--args",
        '{"campaign_id": "C-101", "new_daily_budget": 1300}',
        *ALICE_ARGS,
    )
    cli.json(
        "call",
        "ops.budget_change_apply",
        "--args",
        json.dumps({"preview_id": preview["payload"]["preview_id"]}),
        *ALICE_ARGS,
    )
    _append_intent(cli.store, "call_crashed")

    result = cli("audit")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    rows = [line for line in lines if "ops." in line]
    # The apply wrote an intent and a final record: still one row.
    assert len(rows) == 4
    find, _preview, change, crashed = rows
    assert "alice (acme)" in find
    assert "allow" in find
    assert "ok" in find
    assert "tenant_id" in find
    assert "ops.budget_change_apply" in change
    assert " ok " in change
    assert "call_crashed" not in result.stdout  # one row per call, no ids in the table
    assert "unknown (no outcome recorded)" in crashed
    assert "1 call(s) with an intent and no outcome" in result.stdout


def test_audit_of_one_call_shows_every_recorded_field(cli: Cli) -> None:
    call_id = _find(cli, "Autumn", ', "tenant_id": "globex"')
    _find(cli, "Retarget")

    only = cli.json("audit", "--call", call_id)
    readable = cli("audit", "--call", call_id)

    assert [r["call_id"] for r in only] == [call_id]
    assert readable.exit_code == 0
    assert f"{call_id} #" in readable.stdout
    assert "dropped fields  tenant_id" in readable.stdout
    assert "1 call (newest last)" in readable.stdout
    assert "args hash" in readable.stdout
    assert "Retarget" not in readable.stdout


def test_readable_tail_counts_calls(cli: Cli) -> None:
    for query in ("Autumn", "Retarget", "Display"):
        _find(cli, query)

    result = cli("audit", "--tail", "2")

    assert result.exit_code == 0
    assert "2 calls (newest last)" in result.stdout


def test_empty_store_says_so(cli: Cli) -> None:
    result = cli("audit")

    assert result.exit_code == 0
    assert result.stdout.startswith("No audit records in sqlite:///")


def test_store_option_wins_over_the_environment(cli: Cli) -> None:
    other = f"sqlite:///{cli.tmp_path / 'other.db'}"
    cli.json(
        "call", "ops.campaigns_find", "--args", '{"query": "x"}', *ALICE_ARGS, "--store", other
    )

    in_env_store = cli.json("audit")
    in_other = cli.json("audit", "--store", other)
    global_option = cli("--store", other, "audit", "--json")

    assert in_env_store == []
    assert [r["tool"] for r in in_other] == ["ops.campaigns_find"]
    assert global_option.exit_code == 0
    assert json.loads(global_option.stdout) == in_other


def test_narrow_terminal_shows_two_lines_per_call_and_cuts_nothing(cli: Cli) -> None:
    _find(cli, "Autumn", ', "tenant_id": "globex"')
    _append_intent(cli.store, "call_crashed")

    result = cli("audit", COLUMNS="60")

    assert result.exit_code == 0
    out = result.stdout
    assert "ops.campaigns_find  allow -> ok" in out
    assert "alice (acme)" in out
    assert "dropped: tenant_id" in out
    assert "unknown (no outcome recorded)" in out
    assert "…" not in out
