"""Smoke checks of the agent loop against a real model behind a real server.

Run by ``scripts/real-model.sh`` (which builds and starts the server); alone:

    python scripts/real_model_smoke.py --base-url http://127.0.0.1:PORT/v1 --model NAME

Checks, each printed as it runs, failing the command (exit 1) if one fails:

1. forced tool calls reach the chain: with ``ForcedTool``, each of three tools
   is called and the call is audited (its outcome may be a validation error: a
   135M model's arguments are often wrong; a protocol error is a failure);
2. automatic runs of the demo prompts finish their turns without a protocol
   error (the server accepts every request the loop sends), and what the model
   did is printed turn by turn;
3. an approval pause and resume: a forced call of a tool that needs approval
   parks the run; the approval is granted; ``Agent.resume`` completes it and the
   tool ran once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from callgate import Gate, Principal, Toolbox
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
OUTPUT = 512
"""Output tokens per model request: a small server context holds the demo's tool
definitions (about 2,000 tokens) and the conversation, not a 4,096-token budget."""
WHO = Principal(
    "local",
    tenant="acme",
    scopes={"deploy:read", "notes:read", "campaigns:read", "campaigns:write", "email:send"},
)


def _model(args: argparse.Namespace) -> OpenAIChatModel:
    return OpenAIChatModel(model=args.model, base_url=args.base_url)


def _turns(result: Any) -> str:
    if not result.calls:
        return "no tool call"
    shown = []
    for c in result.calls:
        kind = f" ({c.error_kind})" if c.error_kind else ""
        shown.append(f"{c.name} -> {c.status}{kind}")
    return "; ".join(shown)


async def forced(args: argparse.Namespace, store: str) -> bool:
    ok = True
    async with Gate(toolboxes(), store=store, policy=demo_policy()) as gate:
        for tool in FORCED:
            agent = Agent(
                gate,
                _model(args),
                principal=WHO,
                tool_choice=ForcedTool(name=tool),
                limits=RunLimits(max_turns=2, max_tokens_per_request=OUTPUT),
            )
            result = await agent.run(f"Use {tool}.")
            audited = [r for r in await gate.audit() if r.tool == tool]
            passed = result.status != "failed" and bool(audited)
            ok &= passed
            print(
                f"  forced {tool}: {'ok' if passed else 'FAILED'} ({result.status}; {_turns(result)}; {result.reason or ''})"
            )
    return ok


async def automatic(args: argparse.Namespace, store: str) -> bool:
    ok = True
    async with Gate(toolboxes(), store=store, policy=demo_policy()) as gate:
        for prompt in PROMPTS:
            agent = Agent(
                gate,
                _model(args),
                principal=WHO,
                limits=RunLimits(max_turns=4, max_tokens_per_request=OUTPUT),
            )
            result = await agent.run(prompt)
            passed = result.status != "failed"
            ok &= passed
            print(
                f"  {prompt!r}: {result.status} after {result.usage.requests} turn(s); {_turns(result)}; answer: {result.output[:80]!r}"
            )
            if not passed:
                print(f"    FAILED: {result.reason}")
    return ok


async def approval(args: argparse.Namespace, store: str) -> bool:
    box = Toolbox("notes", description="A note to delete.")
    deleted: list[str] = []

    @box.tool(destructive=True)
    def note_delete(note_id: str) -> str:
        """Delete a note. Use it when the user asks to delete a note."""
        deleted.append(note_id)
        return f"deleted {note_id}"

    rule = Rule(
        name="deletes-need-a-human",
        effect=Effect.REQUIRE_APPROVAL,
        tools=("notes.note_delete",),
        reason="deleting needs a second person",
    )
    policy = Policy([rule])
    async with Gate([box], store=store, policy=policy) as gate:
        agent = Agent(
            gate,
            _model(args),
            principal=WHO,
            tool_choice=ForcedTool(name="notes.note_delete"),
            limits=RunLimits(max_turns=2, max_tokens_per_request=OUTPUT),
        )
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
        passed = resumed.status != "failed" and len(deleted) == 1
        print(
            f"  resumed: {resumed.status}; the tool ran {len(deleted)} time(s): {'ok' if passed else 'FAILED'}"
        )
        return passed


async def main(args: argparse.Namespace) -> int:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in (
            ("forced tool calls", forced),
            ("automatic runs", automatic),
            ("approval pause and resume", approval),
        ):
            print(f"{name}:", flush=True)
            try:
                results.append(
                    await check(args, f"sqlite:///{Path(tmp) / (name.replace(' ', '_') + '.db')}")
                )
            except Exception as exc:  # a traceback here is a failure of the check
                print(f"  FAILED with {type(exc).__name__}: {exc}")
                results.append(False)
    print("real model smoke:", "passed" if all(results) else "FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    sys.exit(asyncio.run(main(parser.parse_args())))
