"""A small MCP server for the gateway's tests, run as a stdio subprocess.

Written with the official SDK's ``MCPServer``, so the gateway meets an upstream
it did not make: tools with and without annotations, one that writes to a file
(to count how often a write ran), one that reports progress, one that dies in
the middle of a call, one that adds a tool and announces it; resources, one
read of which answers with two contents (a text and a blob) and one with none.

    python tests/gateway/stub_server.py LOGFILE
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    BlobResourceContents,
    ReadResourceResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

LOG = sys.argv[1] if len(sys.argv) > 1 else os.devnull
if os.environ.get("STUB_BROKEN"):  # a server that dies at start (its config is wrong, say)
    sys.exit(4)

server = MCPServer("stub-upstream")


def _note(line: str) -> None:
    with open(LOG, "a", encoding="utf-8") as out:
        out.write(line + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def append(line: str, tenant: str = "none") -> str:
    """Append a line to the server's log (a write without annotations)."""
    _note(f"{tenant}:{line}")
    return f"appended {line!r} for {tenant}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(tenant: str, region: str) -> dict[str, Any]:
    """Tell which tenant and region the call was made for."""
    return {"tenant": tenant, "region": region}


@server.tool()
def fail(reason: str) -> str:
    """Always fail with the reason."""
    raise ToolError(f"cannot do that: {reason}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def count(to: int, ctx: Context) -> str:
    """Count up, reporting progress."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
    return f"counted to {to}"


@server.tool()
def die(line: str) -> str:
    """Write a line, then exit the process before answering."""
    _note(f"die:{line}")
    sys.stdout.flush()
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def die_reading() -> str:
    """Exit the process before answering (a read)."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def slow(seconds: float) -> str:
    """Take its time."""
    time.sleep(seconds)
    return "done"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def linger(seconds: float) -> str:
    """Wait, and note it when the wait is cancelled."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _note("linger:cancelled")
        raise
    return "waited"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def chatty(ctx: Context) -> str:
    """Log a message while it works."""
    await ctx.info("halfway there")
    return "done talking"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big(lines: int) -> str:
    """Return many lines of text."""
    return "\n".join(f"line {number}: {'x' * 60}" for number in range(lines))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def muse(topic: str, ctx: Context) -> str:
    """Ask the client's model for a line about the topic."""
    result = await ctx.session.create_message(
        messages=[
            SamplingMessage(role="user", content=TextContent(type="text", text=f"About {topic}?"))
        ],
        max_tokens=50,
    )
    return f"the model said: {result.content.text}"  # type: ignore[union-attr]


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called NAME and tell the client the list changed."""

    def added() -> str:
        return f"{name} here"

    server.add_tool(added, name=name, description=f"The tool {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.resource("stub://motd", mime_type="text/plain")
def motd() -> str:
    """The message of the day."""
    return "all systems nominal"


@server.resource("stub://notes/{name}")
def note(name: str) -> str:
    """One note, by name."""
    return f"note {name}"


README = "# The bundle\n\nTwo files.\n"
LOGO = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
"""Not text: bytes that are no UTF-8, so a blob that became text would show."""


@server.resource("stub://bundle/{file}")
def bundle_file(file: str) -> str | bytes:
    """One file of the bundle (readme.md or logo.png)."""
    return {"readme.md": README, "logo.png": LOGO}[file]


@server.resource("stub://bundle", mime_type="text/markdown")
def bundle() -> str:
    """The bundle's two files at once (answered by ``SeveralContents``)."""
    return README


@server.resource("stub://empty")
def empty() -> str:
    """A read with no contents at all (answered by ``SeveralContents``)."""
    return "never sent"


class SeveralContents:
    """Answers ``resources/read`` of ``stub://bundle`` with its two files, each at
    its own URI, and of ``stub://empty`` with no contents: ``MCPServer``'s resource
    functions give exactly one content per read, at the URI read."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        uri = (ctx.params or {}).get("uri") if ctx.method == "resources/read" else None
        if uri == "stub://bundle":
            # Signed with a value of its environment: a secret, if the gateway made it one.
            signed = f"{README}Signed: {os.environ.get('STUB_SIGNATURE', 'nobody')}\n"
            return ReadResourceResult(
                contents=[
                    TextResourceContents(
                        uri="stub://bundle/readme.md", mime_type="text/markdown", text=signed
                    ),
                    BlobResourceContents(
                        uri="stub://bundle/logo.png",
                        mime_type="image/png",
                        blob=base64.b64encode(LOGO).decode("ascii"),
                    ),
                ]
            )
        if uri == "stub://empty":
            return ReadResourceResult(contents=[])
        return await call_next(ctx)


server.middleware.append(SeveralContents())


@server.prompt()
def review(subject: str) -> str:
    """Ask for a review of a subject."""
    return f"Please review {subject}."


if __name__ == "__main__":
    server.run("stdio")
