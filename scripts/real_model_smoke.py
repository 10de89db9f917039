"""Smoke checks of the agent loop against a real model behind a real server.

Run by ``scripts/real-model.sh`` (which builds and starts the server); alone:

    python scripts/real_model_smoke.py --base-url http://127.0.0.1:PORT/v1 --model NAME

Each check prints what happened as it runs; the command fails (exit 1) if one
fails. A 135M model's arguments are often wrong: a call refused by validation
still reached the chain, which is what is checked. A failed run (the server
refused a request, an answer could not be read) is a failure.

1. forced tool calls reach the chain (Python ``Agent`` with ``ForcedTool``, and
   ``callgate run --tool``): each call is audited;
2. automatic runs of five demo prompts finish their turns without a protocol
   error (completed, or stopped by the turn limit), told turn by turn;
3. an approval pause and resume, in Python and with ``callgate run``: a forced
   call of a tool that needs approval parks the run; it is approved; the resume
   completes it and the tool ran exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from callgate import Gate, Limits, Principal, Toolbox
from callgate.agent import Agent, RunLimits
from callgate.agent.messages import ForcedTool
from callgate.agent.openai_chat import OpenAIChatModel
from callgate.demo import demo_policy, toolboxes
from callgate.runtime.policy import Effect, Policy, Rule

PROMPTS = [
    "How is deployment D-1?",
    "Search the notes for the word outage.",
    "Find the campaign called autumn.",
    "What is the status of deployment D-2?",
    "Read the runbook for deploys.",
]
FORCED = ["ops.deploy_status", "ops.notes_search", "ops.campaigns_find"]
TURNS = 4
WALL_TIME = 240.0
"""Seconds a run may take: llama-cpp-python's chatml-function-calling writes a
call's arguments with no output limit (it ignores ``max_tokens`` there), and a
small model sometimes never closes a string: that request runs until the context
is full, minutes on 2 cores. The run stops at its wall time (a limit, not a
failure); the server finishes that generation before it answers again."""
RESULT_TOKENS = 400
"""A result's share of a 4,096-token context that holds the demo's tools (about
1,700 tokens as this server renders them) and four turns."""
WHO = Principal(
    "local",
    tenant="acme",
    scopes={"deploy:read", "notes:read", "campaigns:read", "campaigns:write", "email:send"},
)
NOTES_TOOL = '''
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

from callgate import Toolbox

notes = Toolbox("notes", description="Notes to delete.")


@notes.tool(destructive=True)
def note_delete(note_id: Annotated[str, Field(max_length=16)]) -> str:
    """Delete a note. Use it when the user asks to delete a note.

    Args:
        note_id: The note, like N-1.
    """
    with Path(os.environ["SMOKE_DELETED"]).open("a") as log:
        log.write(note_id + "\\n")
    return f"deleted {note_id}"
'''
CONFIG = f"""
toolboxes = ["callgate.demo:toolboxes", "./smoke_tools.py:notes"]

[principal]
user = "local"
tenant = "acme"

[limits]
max_result_tokens = {RESULT_TOKENS}

# The demo's own rules (a weak model proposed a rollback to "How is deployment D-1?").
[[policy.rules]]
name = "rollback-needs-oncall"
effect = "deny"
tools = ["ops.deploy_rollback"]
when = '!("oncall" in principal.roles)'
reason = "only on-call engineers may roll back"

[[policy.rules]]
name = "external-email-needs-approval"
effect = "require_approval"
tools = ["ops.send_email"]
when = 'args.to.exists(r, !r.endsWith("@acme.example"))'
reason = "emails to outside recipients need a confirmation"
approved_by = "requester"

[[policy.rules]]
name = "deletes-need-a-confirmation"
effect = "require_approval"
tools = ["notes.note_delete"]
reason = "deleting needs a confirmation"
approved_by = "requester"
"""


class Smoke:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.limits = RunLimits(
            max_turns=TURNS, max_tokens_per_request=args.max_output_tokens, wall_time=WALL_TIME
        )

    def model(self) -> OpenAIChatModel:
        return OpenAIChatModel(self.args.model, base_url=self.args.base_url)

    def idle(self) -> None:
        """Wait until the server answers again: it serves one request at a time and
        finishes a generation whose client gave up (its model list waits too)."""
        started = time.monotonic()
        urllib.request.urlopen(self.args.base_url + "/models", timeout=1800).read()
        if time.monotonic() - started > 5:
            print(f"  (the server was busy for {time.monotonic() - started:.0f} s more)")

    def gate(self, boxes: list[Toolbox], name: str, policy: Policy | None = None) -> Gate:
        store = f"sqlite:///{self.tmp / (name + '.db')}"
        limits = Limits(max_result_tokens=RESULT_TOKENS)
        return Gate(boxes, store=store, policy=policy or demo_policy(), limits=limits)

    # -- Python --------------------------------------------------------------
    async def forced(self) -> bool:
        ok = True
        async with self.gate(toolboxes(), "forced") as gate:
            for tool in FORCED:
                agent = Agent(
                    gate,
                    self.model(),
                    principal=WHO,
                    tool_choice=ForcedTool(tool),
                    limits=self.limits,
                    temperature=self.args.temperature,
                )
                await asyncio.to_thread(self.idle)
                result = await agent.run(f"Use {tool}.")
                audited = [r for r in await gate.audit() if r.tool == tool]
                passed = result.status == "completed" and bool(audited)
                ok &= passed
                print(f"  forced {tool}: {'ok' if passed else 'FAILED'} ({result.reason})")
                await self.tell(gate, result.run_id)
        return ok

    async def automatic(self) -> bool:
        ok = True
        async with self.gate(toolboxes(), "automatic") as gate:
            for prompt in PROMPTS:
                agent = Agent(
                    gate,
                    self.model(),
                    principal=WHO,
                    limits=self.limits,
                    temperature=self.args.temperature,
                )
                await asyncio.to_thread(self.idle)
                started = time.monotonic()
                result = await agent.run(prompt)
                passed = result.status in ("completed", "stopped")
                ok &= passed
                usage = result.usage
                print(
                    f"  {prompt!r}: {'ok' if passed else 'FAILED'}, {result.status} "
                    f"({result.reason}); {usage.requests} requests, {usage.input_tokens} tokens "
                    f"in / {usage.output_tokens} out, {time.monotonic() - started:.0f} s"
                )
                await self.tell(gate, result.run_id)
        return ok

    async def approval(self) -> bool:
        box = Toolbox("notes", description="Notes to delete.")
        deleted: list[str] = []

        # A bounded id: the server's grammar then ends the string (unbounded, a 135M
        # model once wrote the id until the output limit, and the call was refused).
        @box.tool(destructive=True)
        def note_delete(note_id: Annotated[str, Field(max_length=16)]) -> str:
            """Delete a note. Use it when the user asks to delete a note."""
            deleted.append(note_id)
            return f"deleted {note_id}"

        rule = Rule(
            name="deletes-need-a-human",
            effect=Effect.REQUIRE_APPROVAL,
            tools=("notes.note_delete",),
            reason="deleting needs a second person",
        )
        async with self.gate([box], "approval", Policy([rule])) as gate:
            agent = Agent(
                gate,
                self.model(),
                principal=WHO,
                tool_choice=ForcedTool("notes.note_delete"),
                limits=self.limits,
                temperature=self.args.temperature,
            )
            await asyncio.to_thread(self.idle)
            first = await agent.run("Delete note N-1.")
            print(f"  paused: {first.status}; pending {list(first.pending_approvals)}")
            if first.status != "waiting_approval" or not first.pending_approvals:
                print(f"    FAILED: the run did not wait for an approval ({first.reason})")
                return False
            approvals = await gate.approvals()
            for approval_id in first.pending_approvals:
                await approvals.approve(
                    approval_id, by=Principal("dana", tenant="acme", roles={"approver"})
                )
            resumed = await agent.resume(first.run_id)
            passed = resumed.status == "completed" and len(deleted) == 1
            print(
                f"  resumed: {resumed.status}; the tool ran {len(deleted)} time(s) "
                f"({deleted}): {'ok' if passed else 'FAILED'}"
            )
            await self.tell(gate, first.run_id)
            return passed

    async def tell(self, gate: Gate, run_id: str) -> None:
        """What the model did in ``run_id``, turn by turn, from the run's trace."""
        record = await gate.store.get_run(run_id)
        assert record is not None
        for entry in record.trace:
            if entry["type"] == "model_response":
                parts = entry["message"]["parts"]
                text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
                line = f"    turn {entry['turn']}: stop {entry['stop_reason']}"
                if text.strip():
                    line += f", text {_short(text)!r}"
                print(line)
            elif entry["type"] == "tool_call":
                call, envelope = entry["call"], entry["envelope"]
                sent = call.get("raw_arguments") or json.dumps(call["arguments"])
                error = envelope.get("error") or {}
                outcome = envelope["status"] + (f" ({error['kind']})" if error else "")
                print(f"      call {call['name']} {_short(sent)} -> {outcome}")
            elif entry["type"] == "model_error":
                print(f"    turn {entry['turn']}: model error {entry['error']}")

    # -- callgate run ------------------------------------------------------------
    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.idle()
        command = [sys.executable, "-m", "callgate", *args]
        command += ["--config", str(self.tmp / "callgate.toml")]
        command += ["--store", f"sqlite:///{self.tmp / 'cli.db'}"]
        env = {
            **os.environ,
            "COLUMNS": "160",
            "SMOKE_DELETED": str(self.tmp / "deleted.txt"),
            "CALLGATE_DEMO_STATE": str(self.tmp / "demo.json"),
        }
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            print(f"    | {line}")
        if done.stderr.strip():
            print(f"    stderr: {_short(done.stderr, 400)}")
        return done

    def command_line(self) -> bool:
        (self.tmp / "smoke_tools.py").write_text(textwrap.dedent(NOTES_TOOL))
        (self.tmp / "callgate.toml").write_text(CONFIG)
        model = ["--provider", "openai-compatible", "--base-url", self.args.base_url]
        model += ["--model", self.args.model, "--max-output-tokens"]
        model += [str(self.args.max_output_tokens), "--max-turns", str(TURNS)]
        model += ["--wall-time", str(WALL_TIME)]
        model += ["--temperature", str(self.args.temperature)]
        ok = True

        print("  callgate run (automatic):")
        done = self.cli("run", PROMPTS[0], *model)
        passed = done.returncode in (0, 4)  # completed, or stopped by the turn limit
        ok &= passed
        print(f"  exit {done.returncode}: {'ok' if passed else 'FAILED'}")

        print("  callgate run --tool ops.deploy_status:")
        done = self.cli("run", "How is deployment D-2?", *model, "--tool", "ops.deploy_status")
        passed = done.returncode == 0 and "ops.deploy_status" in done.stdout
        ok &= passed
        print(f"  exit {done.returncode}: {'ok' if passed else 'FAILED'}")

        print("  callgate run --tool notes.note_delete (waits for an approval):")
        paused = self.cli(
            "run", "Delete note N-7.", *model, "--tool", "notes.note_delete", "--json"
        )
        if paused.returncode != 3:
            print(f"  exit {paused.returncode}: FAILED (3 expected: waiting for an approval)")
            return False
        waiting = json.loads(paused.stdout)
        for approval_id in waiting["pending_approvals"]:
            approved = self.cli(
                "approvals", "approve", approval_id, "--principal", "local", "--tenant", "acme"
            )
            ok &= approved.returncode == 0
        print("  callgate run --resume RUN_ID (nothing else):")
        resumed = self.cli("run", "--resume", waiting["run_id"])
        deleted = (self.tmp / "deleted.txt").read_text().split()
        passed = resumed.returncode == 0 and len(deleted) == 1
        ok &= passed
        print(
            f"  exit {resumed.returncode}; the tool ran {len(deleted)} time(s) ({deleted}): "
            f"{'ok' if passed else 'FAILED'}"
        )
        return ok


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def main(args: argparse.Namespace) -> int:
    results: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as tmp:
        smoke = Smoke(args, Path(tmp))
        checks: dict[str, Any] = {
            "forced tool calls (Agent)": smoke.forced,
            "automatic runs (Agent)": smoke.automatic,
            "approval pause and resume (Agent)": smoke.approval,
        }
        for name, check in checks.items():
            print(f"{name}:", flush=True)
            try:
                results[name] = await check()
            except Exception as exc:  # a traceback here is a failure of the check
                print(f"  FAILED with {type(exc).__name__}: {exc}")
                results[name] = False
        print("callgate run:", flush=True)
        results["callgate run"] = await asyncio.to_thread(smoke.command_line)
    for name, passed in results.items():
        print(f"{'passed' if passed else 'FAILED'}: {name}")
    print("real model smoke:", "passed" if all(results.values()) else "FAILED")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--max-output-tokens",
        type=int,
        default=512,
        help="output tokens a request (a small context holds the demo's tools and the talk)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature (at the server's default, 0.8, the 135M model's "
        "arguments are mostly random text)",
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
