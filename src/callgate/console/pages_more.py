"""Runs (agent runs, code-mode programs, tasks), the tool catalogue with its
figures, and health.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from callgate import access
from callgate.cli.upstreams import _boxes, upstream_report
from callgate.store.console_records import AuditQuery, ToolWindows

if TYPE_CHECKING:
    from callgate.console.sessions import SignedIn
    from callgate.console.web import Console

__all__ = ["ROUTES"]

PROGRAM = "program:"
PROGRAM_POINTER = "program-approval:"
RUN_CODE = "callgate.run_code"


async def runs_page(console: Console, request: Request, signed_in: SignedIn) -> Response:
    scope = access.record_scope(signed_in.principal)
    store = await console.records()
    runs = [
        r for r in await store.list_runs(scope, limit=100) if not r.id.startswith(PROGRAM_POINTER)
    ]
    programs = await store.search_audit(
        AuditQuery(scope=scope, tool=RUN_CODE, phase="final", limit=25)
    )
    tasks = await store.list_tasks(scope, limit=50)
    return console.render(
        "runs.html",
        request,
        signed_in,
        runs=[{"record": r, "kind": _kind(r.id), "usage": r.state.get("usage")} for r in runs],
        programs=programs,
        tasks=tasks,
    )


def _kind(run_id: str) -> str:
    return "code mode (paused program)" if run_id.startswith(PROGRAM) else "agent run"


async def run_page(console: Console, request: Request, signed_in: SignedIn) -> Response:
    from callgate.console.web import ConsoleError

    run_id = request.path_params["run_id"]
    record = await (await console.records()).get_run(run_id)
    if record is None or not access.may_read(signed_in.principal, record):
        raise ConsoleError(404, f"There is no run {run_id} you can see.")
    turns: dict[int, list[dict[str, Any]]] = {}
    for entry in record.trace:
        turns.setdefault(int(entry.get("turn") or 0), []).append(entry)
    return console.render(
        "run.html",
        request,
        signed_in,
        run=record,
        kind=_kind(record.id),
        turns=sorted(turns.items()),
        usage=record.state.get("usage"),
        pending=record.state.get("pending") or record.state.get("pending_calls"),
    )


async def tools_page(console: Console, request: Request, signed_in: SignedIn) -> Response:
    who = signed_in.principal
    scope = access.record_scope(who)
    figures = await (await console.records()).tool_figures(scope, now=console.gate.clock.now())
    specs = console.gate.tools(who)
    upstreams = {box.name for box in _boxes(console.gate)}
    tools = [
        {
            "spec": spec,
            "upstream": spec.toolbox if spec.toolbox in upstreams else None,
            "figures": figures.get(spec.name, ToolWindows()),
            "annotations": spec.effective_annotations,
        }
        for spec in specs
    ]
    return console.render(
        "tools.html",
        request,
        signed_in,
        tools=tools,
        scope=scope,
    )


async def health_page(console: Console, request: Request, signed_in: SignedIn) -> Response:
    from callgate.cli._health import PING_TIMEOUT

    store_state, started = "ok", anyio.current_time()
    try:
        with anyio.fail_after(PING_TIMEOUT):
            await console.gate.ping()
    except Exception:  # whatever the driver raises: the store is not answering
        store_state = "not answering"
    ping_ms = (anyio.current_time() - started) * 1000
    reports = [upstream_report(console.gate, box) for box in _boxes(console.gate)]
    scope = access.record_scope(signed_in.principal)
    counters: dict[str, int | str] = {"calls": 0, "errors": 0, "pending approvals": 0}
    if store_state == "ok":
        figures = await (await console.records()).tool_figures(scope, now=console.gate.clock.now())
        counters["calls"] = sum(f.day.calls for f in figures.values())
        counters["errors"] = sum(f.day.error_count for f in figures.values())
        from callgate.console.pages_approvals import waiting

        counters["pending approvals"] = await waiting(console, signed_in)
    return console.render(
        "health.html",
        request,
        signed_in,
        store_state=store_state,
        store_url=_safe_url(console.gate.store_url),
        ping_ms=ping_ms,
        upstreams=reports,
        counters=counters,
        tools=len(console.gate.tools(signed_in.principal)),
    )


def _safe_url(url: str) -> str:
    """The store's URL without a password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a database URL (memory://)
        return url.split("@")[-1]


ROUTES = [
    ("/runs", runs_page, ["GET"]),
    ("/runs/{run_id:path}", run_page, ["GET"]),
    ("/tools", tools_page, ["GET"]),
    ("/health", health_page, ["GET"]),
]
