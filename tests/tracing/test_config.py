"""Tracing is off unless configured, and then exports over real OTLP/HTTP.

Each case runs in a fresh interpreter: what is imported, and the global tracer
provider, are per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_script(**env: str) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CALLGATE_TRACING"))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.tracing._script"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_without_configuration_nothing_of_opentelemetry_is_loaded() -> None:
    seen = _run_script()

    assert seen["tracer"] is False
    assert seen["opentelemetry"] == []


def test_callgate_tracing_off_wins_over_an_endpoint() -> None:
    seen = _run_script(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", CALLGATE_TRACING="off")

    assert seen["tracer"] is False and seen["opentelemetry"] == []


class _Receiver:
    """A local OTLP/HTTP endpoint: decodes each export into the spans it carries."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.requests: list[Any] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                export = ExportTraceServiceRequest()
                export.ParseFromString(body)
                receiver.paths.append(self.path)
                receiver.requests.append(export)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[str, Any, Any]]:
        """(service name, resource attributes, span) of every span received."""
        found = []
        for export in self.requests:
            for resource_spans in export.resource_spans:
                attributes = {a.key: a.value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append((attributes["service.name"].string_value, scope_spans, span))
        return found


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    pytest.importorskip("opentelemetry.sdk")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    pytest.importorskip("opentelemetry.proto")
    found = _Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()
        thread.join(5)


def test_an_otlp_endpoint_turns_tracing_on_and_spans_arrive(receiver: _Receiver) -> None:
    seen = _run_script(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="bank-gw")
    received = receiver.spans()
    by_name = {span.name: span for _, _, span in received}

    assert seen["tracer"] is True
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert {service for service, _, _ in received} == {"bank-gw"}
    assert sorted(by_name) == [
        "chat scripted",
        "execute_tool bank.balance",
        "invoke_agent",
    ]
    assert len(received) == 5  # the lone call, and the run: itself, two turns, one call
    # The lone call's trace is the one its Envelope (and its audit record) names.
    lone = [
        span
        for _, _, span in received
        if span.name == "execute_tool bank.balance" and not span.parent_span_id
    ]
    assert [span.trace_id.hex() for span in lone] == [seen["trace_id"]]
    attributes = {a.key: a.value for a in lone[0].attributes}
    assert attributes["gen_ai.operation.name"].string_value == "execute_tool"
    assert attributes["callgate.decision"].string_value == "allow"
    [run] = [span for _, _, span in received if span.name == "invoke_agent"]
    run_attributes = {a.key: a.value for a in run.attributes}
    assert run_attributes["gen_ai.conversation.id"].string_value == seen["run_id"]


def test_mcp_requests_and_programs_are_parents_of_their_tool_calls() -> None:
    pytest.importorskip("opentelemetry.sdk")
    done = subprocess.run(
        [sys.executable, "-m", "tests.tracing._mcp_script"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    spans = seen["spans"]
    by_id = {span["span_id"]: span for span in spans}

    def parent_name(span: dict[str, Any]) -> str | None:
        parent = by_id.get(span["parent"])
        return parent["name"] if parent is not None else None

    tools = [s for s in spans if s["name"] == "execute_tool bank.balance"]
    [program] = [s for s in spans if s["name"] == "execute_tool callgate.run_code"]

    assert seen["errors"] == [False, False]
    # The MCP SDK's request span (tools/call ...) is the parent of the governed call.
    direct, *inner = tools
    assert parent_name(direct) == "tools/call bank__balance"
    assert [parent_name(s) for s in inner] == ["execute_tool callgate.run_code"] * 2
    assert parent_name(program) == "tools/call callgate__run_code"
    # Each tool call inside the program is a child of the program's call, in its trace.
    assert {s["trace_id"] for s in inner} == {program["trace_id"]}
    assert (
        sorted({s["trace_id"] for s in spans if s["name"].startswith("execute_tool")})
        == seen["audit_trace_ids"]
    )
