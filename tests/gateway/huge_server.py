"""A stdio MCP server for tests/gateway/test_huge_answers.py whose answers can be
any size, written by hand: the SDK's server builds a message whole before it
writes it, and this one must send 100 MB without holding it (it writes a block
of 1 MiB again and again).

It speaks just enough of 2025-11-25 for the gateway: ``initialize``, ``ping``,
``tools/list`` and ``tools/call`` of

- ``fill`` (a read) and ``fill_write`` (a write): a text result whose line is
  exactly ``size`` bytes, its id where ``order`` says: ``head`` (the Python SDK's
  order, ``{"jsonrpc":..,"id":..,"result":..}``), ``tail`` (the TypeScript SDK's,
  ``{"result":..,"jsonrpc":..,"id":..}``) or ``middle`` (between the result and
  padding: no transport can tell it from either end);
- ``chatter``: a log notification of ``size`` bytes (no id at all), then a small answer;

and one resource, ``huge://big``, whose read answers a line of 3,000,000 bytes.

    python tests/gateway/huge_server.py
"""

from __future__ import annotations

import json
import sys
from typing import Any

BLOCK = b"x" * (1 << 20)
out = sys.stdout.buffer

TEXT_TOOL = {
    "type": "object",
    "properties": {"size": {"type": "integer"}, "order": {"type": "string"}},
    "required": ["size"],
}
TOOLS = [
    {"name": "fill", "inputSchema": TEXT_TOOL, "annotations": {"readOnlyHint": True}},
    {"name": "fill_write", "inputSchema": TEXT_TOOL},
    {
        "name": "chatter",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "annotations": {"readOnlyHint": True},
    },
]


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    out.flush()


def xs(count: int) -> None:
    for _ in range(count // len(BLOCK)):
        out.write(BLOCK)
    out.write(BLOCK[: count % len(BLOCK)])


def send_padded(prefix: bytes, suffix: bytes, size: int, middle: bytes = b"") -> None:
    """One line of exactly ``size`` bytes: prefix, as many x as it takes (``middle``
    halfway through them), suffix."""
    fill = size - len(prefix) - len(middle) - len(suffix)
    assert fill >= 0, "size too small for the message around it"
    out.write(prefix)
    xs(fill // 2)
    out.write(middle)
    xs(fill - fill // 2)
    out.write(suffix + b"\n")
    out.flush()


def fill(request: Any, size: int, order: str) -> None:
    rid = json.dumps(request).encode()
    text = b'{"content":[{"type":"text","text":"'
    if order == "head":
        send_padded(b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + text, b'"}]}}', size)
    elif order == "tail":
        send_padded(b'{"result":' + text, b'"}]},"jsonrpc":"2.0","id":' + rid + b"}", size)
    else:
        middle = b'"}]},"id":' + rid + b',"pad":"'
        send_padded(b'{"jsonrpc":"2.0","result":' + text, b'"}', size, middle)


def read(request: Any) -> None:
    rid = json.dumps(request).encode()
    prefix = (
        b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"contents":[{"uri":"huge://big","text":"'
    )
    send_padded(prefix, b'"}]}}', 3_000_000)


def call(request: Any, params: dict[str, Any]) -> None:
    arguments = params.get("arguments") or {}
    size = int(arguments.get("size", 0))
    if params["name"] in ("fill", "fill_write"):
        fill(request, size, arguments.get("order", "head"))
        return
    notice = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
    send_padded(notice, b'"}}', size)
    send({"jsonrpc": "2.0", "id": request, "result": {"content": [{"type": "text", "text": "ok"}]}})


def main() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request = message.get("method"), message.get("id")
        if request is None:  # a notification (initialized, cancelled): nothing to answer
            continue
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "logging": {}, "resources": {}},
                "serverInfo": {"name": "huge", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "resources/list":
            result = {"resources": [{"uri": "huge://big", "name": "big"}]}
        elif method == "resources/templates/list":
            result = {"resourceTemplates": []}
        elif method == "resources/read":
            read(request)
            continue
        elif method == "tools/call":
            call(request, message["params"])
            continue
        elif method in ("ping", "logging/setLevel"):
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": request, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": request, "result": result})


if __name__ == "__main__":
    main()
