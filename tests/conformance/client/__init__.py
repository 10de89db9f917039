"""The client program the conformance suite's client scenarios run: callgate's gateway.

``@modelcontextprotocol/conformance client --command "python -m tests.conformance.client"``
starts a mock MCP server per scenario and runs the command with the server's URL as the
last argument, the scenario's name in ``MCP_CONFORMANCE_SCENARIO``, the spec version
the mock speaks in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, for some scenarios, a
JSON ``MCP_CONFORMANCE_CONTEXT`` (the arguments to send, pre-registered credentials).

What is tested is the gateway's client of an upstream, not a bare SDK client: the
program writes a config with one ``[[upstreams]]`` table for the URL, builds the gate
from it, opens it (the gateway connects and lists the upstream's tools) and calls the
scenario's tools through the governed chain with ``Gate.call``. Questions the upstream
asks (elicitation, sampling) reach the program through the call's sink, as they would
reach the gateway's own MCP client; it answers them as a user accepting the defaults.

Exit status: 0 when the scenario's steps succeeded, 1 otherwise (the reason on stderr,
which the suite saves next to the scenario's checks).
"""
