"""Run by the tests in a fresh interpreter (it sets the global tracer provider):
an MCP session's tool call and a code-mode program, printed as their spans."""

from __future__ import annotations

import json

import anyio
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from callgate import Gate
from callgate.codemode.settings import CodeModeSettings
from callgate.mcp import build_server
from callgate.store import MemoryStore
from tests.tracing._tools import ALICE, API_KEY, POLICY, bank

PROGRAM = """
a = await bank.balance(account="ACC-1")
b = await bank.balance(account="ACC-2")
a["balance"] + b["balance"]
"""


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the application's: callgate finds it
    code_mode = CodeModeSettings(enabled=True)
    gate = Gate(
        [bank()],
        store=MemoryStore(),
        policy=POLICY,
        secrets={"api_key": API_KEY},
        code_mode=code_mode,
    )
    async with gate:
        async with Client(build_server(gate, principal=ALICE)) as client:
            with anyio.fail_after(30):
                direct = await client.call_tool("bank__balance", {"account": "ACC-1"})
                program = await client.call_tool("callgate__run_code", {"code": PROGRAM})
        audit = await gate.store.list_audit()
    spans = [
        {
            "name": s.name,
            "trace_id": format(s.context.trace_id, "032x"),
            "span_id": s.context.span_id,
            "parent": s.parent.span_id if s.parent else None,
        }
        for s in exporter.get_finished_spans()
    ]
    answer = {
        "errors": [direct.is_error, program.is_error],
        "spans": spans,
        "audit_trace_ids": sorted({r.trace_id for r in audit if r.phase == "final"}),
    }
    print(json.dumps(answer), flush=True)


anyio.run(main)
