"""``python -m tests.conformance.client URL``: one client scenario of the conformance
suite, run by callgate's gateway (see the package docs)."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from callgate import Gate, Principal
from callgate.config import load_config
from callgate.contract.context import Elicitation, Root
from callgate.gateway.connection import State
from callgate.gateway.proxy import UpstreamToolbox

UPSTREAM = "up"
CALLER = Principal("local", tenant=None)
SECRET_ENV = "CALLGATE_CONFORMANCE_CLIENT_SECRET"
MARKER = "conformance client: "
"""Starts the program's last line on stdout: ``ok`` or ``failed: <reason>``."""
CONNECT_WAIT = 20.0
"""Seconds the upstream gets to connect and list its tools (the suite runs its
scenarios side by side, each with its own Python process)."""


def _log(message: str) -> None:
    print(f"conformance client: {message}", file=sys.stderr, flush=True)


def _context() -> dict[str, Any]:
    text = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(text) if text else {}


def _config(url: str, auth: str = "") -> str:
    """The gateway's config: the scenario's mock server as its one upstream.

    Trusted, so that its tools' annotations count and the default policy lets the
    calls run: what is tested is the client side, not the policy.
    """
    return (
        f"[[upstreams]]\nname = {json.dumps(UPSTREAM)}\nurl = {json.dumps(url)}\n"
        f'trust = "trusted"\nprotocol = "auto"\nstartup_wait = 0\n{auth}'
    )


async def _client_credentials(url: str) -> str:
    """The ``auth`` of an upstream that takes the client credentials grant.

    The operator configures the token URL; here it is read from the mock's protected
    resource metadata and its authorization server's metadata (RFC 9728, RFC 8414),
    and the client's id and secret from the scenario's context.
    """
    context = _context()
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    async with httpx2.AsyncClient(timeout=10.0) as http:
        resource = await _first_json(
            http,
            f"{origin}/.well-known/oauth-protected-resource{parts.path}",
            f"{origin}/.well-known/oauth-protected-resource",
        )
        issuer = urlsplit(resource["authorization_servers"][0])
        server = await _first_json(
            http,
            f"{issuer.scheme}://{issuer.netloc}/.well-known/oauth-authorization-server"
            f"{issuer.path.rstrip('/')}",
            f"{issuer.scheme}://{issuer.netloc}/.well-known/openid-configuration",
        )
    os.environ[SECRET_ENV] = context["client_secret"]
    table = {
        "type": "client_credentials",
        "token_url": server["token_endpoint"],
        "client_id": context["client_id"],
        "client_secret_env": SECRET_ENV,
    }
    fields = ", ".join(f"{key} = {json.dumps(value)}" for key, value in table.items())
    return f"auth = {{ {fields} }}\n"


async def _first_json(http: httpx2.AsyncClient, *urls: str) -> dict[str, Any]:
    for url in urls:
        response = await http.get(url)
        if response.status_code == 200:
            return dict(response.json())
    raise ScenarioFailed(f"no metadata at {urls}")


class UserAtTheGateway:
    """The gateway's caller: takes progress and log messages, and answers the upstream's
    questions as a user who accepts every default (SEP-1034)."""

    def __init__(self, answers: Mapping[str, Any] | None = None) -> None:
        self.answers = dict(answers or {})
        self.questions: list[str] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        _log(f"progress {progress}/{total}: {message}")

    async def log(self, level: str, message: str, data: Any) -> None:
        _log(f"upstream log [{level}] {message}")

    async def elicit(self, message: str, schema: Mapping[str, Any], key: str | None) -> Elicitation:
        self.questions.append(message)
        content: dict[str, Any] = {}
        for name, field in (schema.get("properties") or {}).items():
            if isinstance(field, Mapping) and "default" in field:
                content[name] = field["default"]
        content.update(self.answers)
        _log(f"elicitation {message!r}: accepting {content}")
        return Elicitation(action="accept", content=content)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
        key: str | None,
    ) -> str:
        return ""

    async def list_roots(self, key: str | None) -> list[Root]:
        return []


async def _connected(gate: Gate) -> UpstreamToolbox:
    """The upstream, once its tools are listed; exits at its first failure to connect."""
    (box,) = [b for b in gate.upstreams() if isinstance(b, UpstreamToolbox)]
    connection = box.connection
    deadline = time.monotonic() + CONNECT_WAIT
    while connection.state is not State.READY:
        if connection.stats.last_error is not None:
            _fail(f"the upstream did not connect: {connection.stats.last_error}")
        if time.monotonic() > deadline:
            _fail(f"the upstream did not connect within {CONNECT_WAIT:.0f} s")
        await anyio.sleep(0.02)
    _log(
        f"connected at {connection.stats.protocol} to {connection.stats.server}; "
        f"tools: {[spec.name for spec in gate.tools() if spec.toolbox == UPSTREAM]}"
    )
    return box


class ScenarioFailed(Exception):
    """A step of the scenario did not work: the program exits 1 with the reason."""


def _fail(reason: str) -> None:
    raise ScenarioFailed(reason)


async def _call(
    gate: Gate,
    tool: str,
    arguments: Mapping[str, Any],
    sink: UserAtTheGateway,
    *,
    must_succeed: bool = True,
) -> Any:
    envelope = await gate.call(f"{UPSTREAM}.{tool}", dict(arguments), principal=CALLER, sink=sink)
    if envelope.status != "ok":
        reason = envelope.error.message_for_model if envelope.error else envelope.status
        for record in await gate.audit(call_id=envelope.call_id):
            # An internal error's traceback is kept for the operator, in the audit.
            if "exception" in record.detail:
                _log(f"{tool}: {record.detail['exception'].get('traceback')}")
        if must_succeed:
            _fail(f"{tool} answered {envelope.status}: {reason}")
        _log(f"{tool} answered {envelope.status}: {reason}")
        return None
    _log(f"{tool} -> {json.dumps(envelope.payload)[:500]}")
    return envelope.payload


def _stub_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments that fill a schema's required properties."""
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}}
    properties = schema.get("properties") or {}
    return {
        name: by_type.get((properties.get(name) or {}).get("type"), "x")
        for name in schema.get("required") or []
    }


Scenario = Callable[[Gate, UserAtTheGateway], Awaitable[None]]


async def _list_only(gate: Gate, sink: UserAtTheGateway) -> None:
    """Connecting lists the tools: nothing more to do."""


def _calls(*calls: tuple[str, dict[str, Any]]) -> Scenario:
    async def run(gate: Gate, sink: UserAtTheGateway) -> None:
        for tool, arguments in calls:
            await _call(gate, tool, arguments, sink)

    return run


async def _echo_schema(gate: Gate, sink: UserAtTheGateway) -> None:
    """Send the focal tool's schema, as the gateway serves it, back to the upstream."""
    focal = gate.tool(f"{UPSTREAM}.json_schema_2020_12_tool")
    if focal is None:
        _fail("the upstream's json_schema_2020_12_tool is not served")
    assert focal is not None
    await _call(gate, "json_schema_echo", {"schema": dict(focal.input_schema)}, sink)


def _every_tool(*, must_succeed: bool) -> Scenario:
    async def run(gate: Gate, sink: UserAtTheGateway) -> None:
        """Call every tool the gateway serves, with arguments its schema requires."""
        for spec in gate.tools():
            if spec.toolbox == UPSTREAM:
                tool = spec.name.removeprefix(f"{UPSTREAM}.")
                arguments = _stub_arguments(spec.input_schema)
                await _call(gate, tool, arguments, sink, must_succeed=must_succeed)

    return run


async def _replay_tool_calls(gate: Gate, sink: UserAtTheGateway) -> None:
    """The exact calls the scenario gives in its context."""
    for call in _context().get("toolCalls", []):
        name = call["name"]
        if gate.tool(f"{UPSTREAM}.{name}") is None:
            _log(f"{name} is not served; not called")
            continue
        await _call(gate, name, call.get("arguments") or {}, sink, must_succeed=False)


ADD = ("add_numbers", {"a": 5, "b": 3})

SCENARIOS: dict[str, Scenario] = {
    "initialize": _list_only,
    "tools_call": _calls(ADD),
    # Its mock lists no tools: the listing's requests carry the _meta it checks.
    "request-metadata": _list_only,
    "http-standard-headers": _every_tool(must_succeed=True),
    "sse-retry": _calls(("test_reconnection", {})),
    "elicitation-sep1034-client-defaults": _calls(("test_client_elicitation_defaults", {})),
    "json-schema-ref-no-deref": _list_only,
    "json-schema-2020-12-preservation": _echo_schema,
    # Tools with malformed x-mcp-header annotations must not be served; the scenario
    # tolerates a failing call (allowClientError).
    "http-invalid-tool-headers": _every_tool(must_succeed=False),
    "http-custom-headers": _replay_tool_calls,
    "sep-2322-client-request-state": _calls(
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {}),
    ),
}
CLIENT_CREDENTIALS = frozenset({"auth/client-credentials-basic"})
"""Scenarios of the client credentials grant with a client secret (an extension): the
gateway is configured with the client's id and secret. (It has no private_key_jwt.)"""
ANSWERS: dict[str, dict[str, Any]] = {"sep-2322-client-request-state": {"confirmed": True}}


async def main(url: str, scenario: str) -> None:
    run = SCENARIOS.get(scenario, _list_only)
    # The other auth/* scenarios get no credential: the gateway authenticates to an
    # upstream only with a configured bearer token or client credentials.
    auth = await _client_credentials(url) if scenario in CLIENT_CREDENTIALS else ""
    with tempfile.TemporaryDirectory(prefix="callgate-conformance-") as folder:
        path = Path(folder) / "gateway.toml"
        path.write_text(_config(url, auth), encoding="utf-8")
        gate = load_config(path).build_gate("memory://")
        async with gate:
            await _connected(gate)
            await run(gate, UserAtTheGateway(ANSWERS.get(scenario)))


def _run(url: str, scenario: str) -> int:
    """Run the scenario; say on stdout how it went (the suite keeps stdout per
    scenario, but not the exit status, when it runs a suite)."""
    _log(
        f"scenario {scenario or '(none)'} at {os.environ.get('MCP_CONFORMANCE_PROTOCOL_VERSION')}, "
        f"upstream {url}"
    )
    try:
        anyio.run(main, url, scenario)
    except ScenarioFailed as exc:
        reason = str(exc)
    except Exception as exc:
        traceback.print_exc()
        reason = f"{type(exc).__name__}: {exc}"
    else:
        print(f"{MARKER}ok", flush=True)
        return 0
    _log(reason)
    print(f"{MARKER}failed: {reason.splitlines()[0] if reason else ''}", flush=True)
    return 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m tests.conformance.client SERVER_URL", file=sys.stderr)
        raise SystemExit(2)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    raise SystemExit(_run(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
