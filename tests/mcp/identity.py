"""Authenticated serving for the identity tests: static bearer tokens standing in for
an identity provider, a gate whose tools differ by scope and tenant, the app on a
loopback port, and the SDK client with a token (or a step-up flow)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from callgate import Gate, Policy, Principal, Rule, Toolbox
from callgate.console import Unauthenticated, bearer, bearer_tokens
from callgate.contract import ToolContext
from callgate.mcp import build_server, streamable_http_app
from callgate.store import MemoryStore
from tests.mcp.serving import serve_asgi

MODES = ["legacy", "2026-07-28"]

ALICE = Principal("alice", "acme", scopes={"deploy:read", "deploy:rollback"})
ALICE_READ = Principal("alice", "acme", scopes={"deploy:read"})
"""Alice again, from a token that grants less (what step-up starts from)."""
BOB = Principal("bob", "globex", scopes={"deploy:read"})
CAROL = Principal("carol", "acme", roles={"approver"})
"""Decides acme's approvals; calls no tool."""

TOKENS = {
    "t-alice": ALICE,
    "t-alice-refreshed": ALICE,
    "t-alice-read": ALICE_READ,
    "t-bob": BOB,
    "t-carol": CAROL,
}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def deploy_toolbox() -> Toolbox:
    box = Toolbox("deploy")

    @box.tool(scopes={"deploy:read"}, read_only=True, open_world=False)
    def status(service: str) -> str:
        """The running version of a service.

        Args:
            service: The service's name.
        """
        return f"{service}: v7"

    @box.tool(
        scopes={"deploy:read", "deploy:rollback"},
        destructive=True,
        idempotent=True,
        open_world=False,
    )
    def rollback(service: str, version: int) -> str:
        """Roll a service back to an earlier version.

        Args:
            service: The service's name.
            version: The version to run again, e.g. 6.
        """
        return f"{service} rolled back to v{version}"

    @box.tool(scopes={"deploy:rollback"}, idempotent=True, open_world=False, tags=["task"])
    def migrate(service: str) -> str:
        """Migrate a service's database (a long job: a task where the client can).

        Args:
            service: The service's name.
        """
        return f"{service} migrated"

    @box.tool(scopes={"deploy:read"}, read_only=True, open_world=False)
    async def whoami(ctx: ToolContext) -> dict[str, Any]:
        """Ask the user to confirm their name."""
        answer = await ctx.elicit("Your name?", NAME_FORM, key="name")
        return {"user": ctx.principal.user, "answer": dict(answer.content or {})}

    return box


def acme_toolbox() -> Toolbox:
    """Tools only acme's people may use."""
    box = Toolbox("acme", tenants=["acme"])

    @box.tool(read_only=True, open_world=False)
    def roadmap() -> str:
        """Acme's roadmap."""
        return "ship it"

    @box.tool(idempotent=False, open_world=False)
    def wire(to: str, amount: int) -> str:
        """Wire money.

        Args:
            to: Who is paid.
            amount: How much, in cents.
        """
        return f"wired {amount} to {to}"

    return box


POLICY = Policy(
    [Rule("require_approval", tools=["acme.wire"], reason="wires need a second person")],
    approvers={"roles": ["approver"]},
)


def build_gate() -> Gate:
    return Gate([deploy_toolbox(), acme_toolbox()], store=MemoryStore(), policy=POLICY)


def static_verifier(tokens: Mapping[str, Principal]) -> Any:
    """A stand-in for an OAuth token verifier: ``async verify(token) -> Principal``,
    refusing an unknown token with the reason a real one would give."""

    async def verify(token: str) -> Principal:
        found = tokens.get(token)
        if found is None:
            raise Unauthenticated("the token is not valid")
        return found

    return verify


AUTHENTICATE = bearer(static_verifier(TOKENS))
"""What a bearer-token verifier plugs in as (async, raising Unauthenticated)."""
STATIC = bearer_tokens(TOKENS)
"""The console's static tokens (sync, None for no principal)."""


@asynccontextmanager
async def serve(
    gate: Gate,
    *,
    authenticate: Any = AUTHENTICATE,
    principal: Principal | None = None,
    **app_options: Any,
) -> AsyncIterator[str]:
    """The gate's MCP app, authenticating every request, on a loopback port; its URL."""
    server = build_server(gate, principal=principal)
    app = streamable_http_app(server, authenticate=authenticate, **app_options)
    async with gate, serve_asgi(app) as url:
        yield url


@asynccontextmanager
async def connect(
    url: str, mode: str, *, token: str | None = None, auth: httpx2.Auth | None = None, **kw: Any
) -> AsyncGenerator[Client, None]:
    """The official SDK client, sending ``token`` (or authenticating with ``auth``)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with create_mcp_http_client(headers=headers, auth=auth) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, **kw) as client:
            yield client


class StepUp(httpx2.Auth):
    """A client's OAuth step-up, with the identity provider left out: on ``403``
    with ``insufficient_scope`` it takes a token granting what it held plus the
    challenge's ``scope`` and sends the request again (once)."""

    def __init__(self, held: frozenset[str], issue: Mapping[frozenset[str], str]) -> None:
        self.held = held
        self.issue = issue
        self.challenges: list[str] = []

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {self.issue[self.held]}"
        response = yield request
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code != 403 or 'error="insufficient_scope"' not in challenge:
            return
        self.challenges.append(challenge)
        wanted = challenge.split('scope="', 1)[1].split('"', 1)[0].split()
        self.held = self.held | frozenset(wanted)
        request.headers["Authorization"] = f"Bearer {self.issue[self.held]}"
        yield request
