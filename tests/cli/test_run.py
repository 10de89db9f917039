"""``callgate run`` against a local OpenAI-compatible server (a fake one speaking the wire format).

The server is ours: it answers ``POST /v1/chat/completions`` the way the Chat
Completions API does, from a script of turns, and records the requests. ``callgate
run`` runs as a real process against it, with the demo tools and a SQLite store.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

Turn = Callable[[dict[str, Any]], dict[str, Any]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1764576000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def tool_call(tool_suffix: str, arguments: dict[str, Any]) -> Turn:
    """A turn that calls the offered tool whose name ends with ``tool_suffix``."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        names = [t["function"]["name"] for t in request.get("tools", [])]
        name = next(n for n in names if n.endswith(tool_suffix))
        call = {
            "id": f"call_{len(request['messages'])}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return _completion(
            {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        )

    return answer


def text(content: str) -> Turn:
    return lambda request: _completion({"role": "assistant", "content": content}, "stop")


class FakeServer:
    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("authorization", ""))
        if not self.turns:
            return JSONResponse({"error": {"message": "no more turns"}}, status_code=500)
        return JSONResponse(self.turns.pop(0)(body))


@asynccontextmanager
async def fake_openai(turns: list[Turn]) -> AsyncIterator[tuple[str, FakeServer]]:
    fake = FakeServer(turns)
    app = Starlette(routes=[Route("/v1/chat/completions", fake.completions, methods=["POST"])])
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(10):
            while True:
                if server.started:
                    break
                await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/v1", fake
        server.should_exit = True


async def callgate_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "CALLGATE_DEMO_STATE": str(tmp_path / "demo.json"),
        "OPENAI_API_KEY": "",
        "COLUMNS": "200",
    }
    command = [sys.executable, "-m", "callgate", "run", *args]
    command += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    with anyio.fail_after(60):
        return await anyio.run_process(command, env=env, check=False, stdin=subprocess.DEVNULL)


async def test_run_against_a_local_openai_compatible_server(tmp_path: Path) -> None:
    turns = [tool_call("deploy_status", {"deploy_id": "D-1"}), text("D-1 is running fine.")]
    async with fake_openai(turns) as (url, fake):
        done = await callgate_run(
            tmp_path,
            "How is deployment D-1?",
            "--provider",
            "openai-compatible",
            "--base-url",
            url,
            "--model",
            "fake-model",
        )
    out = done.stdout.decode()

    assert done.returncode == 0, done.stderr.decode()
    assert "call    #1 ops.deploy_status" in out and "D-1 is running fine." in out
    # The run id comes first (a slow model is silent for minutes), the result names its call.
    assert out.lstrip().startswith("run     run_") and "openai-compatible:fake-model" in out
    assert "  ok       #1 ops.deploy_status: " in out, out
    assert (
        "2 model requests, 100 tokens in (~100 of them tool definitions, estimated) / 20 out" in out
    )
    first, second = fake.requests
    assert first["model"] == "fake-model"
    assert first["messages"][-1] == {"role": "user", "content": "How is deployment D-1?"}
    # The demo's tools, under names the API accepts, model-facing schemas only.
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    status = next(v for k, v in offered.items() if k.endswith("deploy_status"))
    assert "tenant_id" not in json.dumps(status["parameters"])
    # The result went back paired with the call's id.
    result = second["messages"][-1]
    # (the server's id: call_ and the number of messages it got, an empty system one first)
    assert result["role"] == "tool" and result["tool_call_id"] == "call_2"
    assert "D-1" in result["content"]


async def test_a_run_waits_for_approval_and_resumes_from_the_cli(tmp_path: Path) -> None:
    email = {"to": ["partner@example.org"], "subject": "Q4", "body": "Attached."}
    async with fake_openai([tool_call("send_email", email)]) as (url, _):
        paused = await callgate_run(
            tmp_path,
            "Send the Q4 note to partner@example.org",
            "--provider",
            "openai-compatible",
            "--base-url",
            url,
            "--model",
            "fake-model",
            "--json",
        )
    waiting = json.loads(paused.stdout)
    assert waiting["status"] == "waiting_approval", paused.stderr.decode()
    assert paused.returncode == 3  # waiting for a human
    [approval_id] = waiting["pending_approvals"]

    store = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    env = {**os.environ, "CALLGATE_DEMO_STATE": str(tmp_path / "demo.json")}
    approve = [sys.executable, "-m", "callgate", "approvals", "approve", approval_id]
    approve += ["--principal", "local", "--tenant", "acme", "--note", "fine", *store]
    approved = await anyio.run_process(approve, env=env, check=False)
    assert approved.returncode == 0, approved.stderr.decode()

    async with fake_openai([text("Sent.")]) as (url, fake):
        resumed = await callgate_run(
            tmp_path, "--resume", waiting["run_id"], "--base-url", url, "--json"
        )
    finished = json.loads(resumed.stdout)

    assert resumed.returncode == 0
    assert finished["status"] == "completed" and finished["output"] == "Sent."
    assert finished["usage"]["approvals"] == 1
    [request] = fake.requests
    result = request["messages"][-1]
    assert result["role"] == "tool" and '"status":"queued"' in result["content"]


async def test_resume_alone_goes_back_to_the_same_server_and_counts_each_call_once(
    tmp_path: Path,
) -> None:
    email = {"to": ["partner@example.org"], "subject": "Q4", "body": "Attached."}
    run = ("--provider", "openai-compatible", "--model", "fake-model", "--temperature", "0")
    async with fake_openai([tool_call("send_email", email), text("Sent.")]) as (url, fake):
        paused = await callgate_run(tmp_path, "Send the Q4 note", *run, "--base-url", url)
        out = paused.stdout.decode()
        run_id = out.split()[1]
        # The hint is a command that works as printed: the store it ran with, no URL.
        hint = f"callgate run --resume {run_id} --store sqlite:///{tmp_path / 'runs.db'}"
        assert hint in " ".join(out.split()), out
        # Resumed before anyone decided: still waiting, the call not counted again.
        early = await callgate_run(tmp_path, "--resume", run_id, "--json")
        assert early.returncode == 3, early.stdout.decode()
        assert json.loads(early.stdout)["usage"]["tool_calls"] == 1
        [approval_id] = json.loads(early.stdout)["pending_approvals"]

        approve = [sys.executable, "-m", "callgate", "approvals", "approve", approval_id]
        approve += ["--principal", "local", "--tenant", "acme", "--note", "fine"]
        approve += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
        env = {**os.environ, "CALLGATE_DEMO_STATE": str(tmp_path / "demo.json")}
        assert (await anyio.run_process(approve, env=env, check=False)).returncode == 0

        # No --provider, --model or --base-url: the run kept them (never a key).
        resumed = await callgate_run(tmp_path, "--resume", run_id, "--json")
    finished = json.loads(resumed.stdout)

    assert paused.returncode == 3
    assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
    assert finished["output"] == "Sent." and len(fake.requests) == 2
    assert [request["temperature"] for request in fake.requests] == [0, 0]  # kept too
    usage = finished["usage"]
    assert (usage["tool_calls"], usage["approvals"], usage["errors"]) == (1, 1, 0)
    assert usage["outcomes"] == {"ok": 1}


async def test_an_unreachable_server_fails_the_run_naming_the_url_tried(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    url = f"http://someone:s3cret@127.0.0.1:{port}/v1"

    failed = await callgate_run(
        tmp_path, "Hi", "--provider", "openai-compatible", "--base-url", url, "--model", "m"
    )
    said = failed.stdout.decode() + failed.stderr.decode()

    assert failed.returncode == 1
    tried = f"http://127.0.0.1:{port}/v1/chat/completions"
    assert f"could not reach the OpenAI-compatible server at {tried} (connection error)" in said
    assert "OpenAI API" not in said
    assert "s3cret" not in said and "someone" not in said


async def test_without_a_key_the_error_names_the_variable(tmp_path: Path) -> None:
    failed = await callgate_run(tmp_path, "Hi", "--provider", "openai", "--model", "gpt-x")
    assert failed.returncode == 2
    assert "set the environment variable OPENAI_API_KEY" in failed.stderr.decode()


async def test_the_openai_key_never_goes_to_a_compatible_server(tmp_path: Path) -> None:
    env_key = "sk-secret-openai-key"
    async with fake_openai([text("hi")]) as (url, fake):
        command = [sys.executable, "-m", "callgate", "run", "Hi", "--provider"]
        command += ["openai-compatible", "--base-url", url, "--model", "m", "--json"]
        command += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
        env = {
            **os.environ,
            "OPENAI_API_KEY": env_key,
            "CALLGATE_DEMO_STATE": str(tmp_path / "demo.json"),
        }
        with anyio.fail_after(60):
            done = await anyio.run_process(command, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert fake.authorizations and all(env_key not in a for a in fake.authorizations)
