"""FastMCP's BM25 tool search over a given catalogue: FastMCP's own code, in its venv.

Not a benchmark itself: ``discovery.py`` runs it with the Python of FastMCP's venv
(``_upstream.fastmcp_python``; FastMCP is never installed in callgate's), the
request on standard input and the answer on standard output, both JSON:

    .cache/bench-fastmcp/bin/python benchmarks/_fastmcp_search.py < request.json

Request: ``{"tools": [{"name", "description", "parameters"}], "queries": [...],
"limit": 10, "timed": [...]}``. A FastMCP server gets every tool (a ``Tool`` with
the given JSON Schema), then ``BM25SearchTransform(max_results=limit)``; each of
``queries`` is asked through an in-memory ``fastmcp.Client`` calling the
transform's ``search_tools``, exactly as a model would, and the ranked names it
answers are returned. Each of ``timed`` is then searched directly with the
transform's ``_search`` (the ranking, with the staleness check it runs on every
search, without the MCP round trip), each search timed alone.

Answer: ``{"version", "ranked": [[name, ...], ...], "first_search_ms",
"latencies_ms": [...]}``; ``first_search_ms`` is the first ``search_tools`` call,
which builds the index.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import Any


async def run(request: dict[str, Any]) -> dict[str, Any]:
    import fastmcp  # type: ignore[import-not-found]
    from fastmcp import Client, FastMCP
    from fastmcp.server.transforms.search import (  # type: ignore[import-not-found]
        BM25SearchTransform,
    )
    from fastmcp.tools.base import Tool, ToolResult  # type: ignore[import-not-found]

    class CatalogueTool(Tool):  # type: ignore[misc]
        """A tool that is only searched, never run."""

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            raise RuntimeError("catalogue tools are not run")

    server = FastMCP("catalogue")
    tools = [
        CatalogueTool(name=t["name"], description=t["description"], parameters=t["parameters"])
        for t in request["tools"]
    ]
    for tool in tools:
        server.add_tool(tool)
    transform = BM25SearchTransform(max_results=request["limit"])
    server.add_transform(transform)

    ranked: list[list[str]] = []
    first_ms = 0.0
    async with Client(server) as client:
        for number, query in enumerate(request["queries"]):
            started = time.perf_counter()
            result = await client.call_tool("search_tools", {"query": query})
            if number == 0:
                first_ms = (time.perf_counter() - started) * 1000
            found = result.structured_content
            if isinstance(found, dict) and "result" in found:
                found = found["result"]
            if not isinstance(found, list):  # a text answer: the JSON of the list
                found = json.loads(result.content[0].text) if result.content else []
            ranked.append([tool["name"] for tool in found])

    latencies: list[float] = []
    timed = request.get("timed") or []
    if timed:
        await transform._search(tools, timed[0])  # builds the index for this list
        for query in timed:
            started = time.perf_counter_ns()
            await transform._search(tools, query)
            latencies.append((time.perf_counter_ns() - started) / 1e6)
    return {
        "version": fastmcp.__version__,
        "ranked": ranked,
        "first_search_ms": first_ms,
        "latencies_ms": latencies,
    }


def main() -> None:
    logging.disable(logging.WARNING)  # FastMCP warns about BFCL's tool names
    request = json.load(sys.stdin)
    json.dump(asyncio.run(run(request)), sys.stdout)


if __name__ == "__main__":
    main()
