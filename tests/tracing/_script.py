"""Run by the tests in a fresh interpreter: one governed call and one agent run.

Prints what the test checks: the Envelope's trace id, the run's id, and the
OpenTelemetry modules loaded at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys

from callgate import Gate, tracing
from callgate.agent import ScriptedModel, call, reply
from callgate.agent.loop import Agent
from callgate.store import MemoryStore
from tests.tracing._tools import ALICE, API_KEY, POLICY, bank


async def main() -> None:
    async with Gate(
        [bank()], store=MemoryStore(), policy=POLICY, secrets={"api_key": API_KEY}
    ) as gate:
        envelope = await gate.call("bank.balance", {"account": "ACC-1"}, principal=ALICE)
        model = ScriptedModel([call("bank.balance", {"account": "ACC-2"}), reply("120.")])
        result = await Agent(gate, model, principal=ALICE).run("Balance of ACC-2?")
        loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
        print(
            json.dumps(
                {
                    "trace_id": envelope.trace_id,
                    "run_id": result.run_id,
                    "tracer": tracing.current() is not None,
                    "opentelemetry": loaded,
                }
            )
        )


asyncio.run(main())
