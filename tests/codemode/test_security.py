"""Code mode against hostile programs, in a real sandbox worker under small limits: each
attempt ends in a clear error, the gate is never bypassed (the audit shows every call
the program made, under its run, and never a tool its caller may not use), and the host
is unharmed. A secret in the host's environment never comes out of any run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import Envelope, ErrorKind, Gate, Policy, Principal, Rule, Status, Toolbox, Trusted
from callgate.codemode import CodeModeSettings
from callgate.runtime.approvals import ApprovalError
from callgate.store import AuditRecord

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", tenant="acme")
BOB = Principal("bob", tenant="globex")
CAROL = Principal("carol", tenant="acme")
ADMIN = Principal("root", tenant="acme", scopes={"admin"})
RUN = "callgate.run_code"
CANARY_VAR = "CALLGATE_TEST_CANARY"
CANARY = "canary-7f3a9c-must-never-leak"
SETTINGS = CodeModeSettings(
    enabled=True,
    max_seconds=5,
    max_cpu_seconds=0.5,
    max_memory_mb=32,
    max_calls=20,
    max_output_kb=4,
)
LIMIT_BYTES = SETTINGS.max_output_kb * 1024
APPROVAL = Rule("require_approval", tools=["vault.transfer"], reason="money moves need a person")
DENIAL = Rule("deny", tools=["vault.write"], when='args.item == "forbidden"', reason="not that")
POLICY = Policy([APPROVAL, DENIAL])


def toolboxes(ran: list[str]) -> list[Toolbox]:
    """The tools, each noting in ``ran`` what it really did."""
    vault = Toolbox("vault")

    @vault.tool(read_only=True, open_world=False)
    def whoami(tenant_id: Trusted[str], user_id: Trusted[str]) -> dict[str, str]:
        """Who is calling."""
        ran.append("whoami")
        return {"tenant": tenant_id, "user": user_id}

    @vault.tool(read_only=True, open_world=False)
    def echo(value: Any = None) -> dict[str, Any]:
        """Give a value back."""
        ran.append("echo")
        return {"value": value}

    @vault.tool(read_only=True, open_world=False, scopes={"admin"})
    def dump_secrets() -> str:
        """Admins only."""
        ran.append("dump_secrets")
        return "every secret"

    @vault.tool(read_only=False, idempotent=False, open_world=False)
    def write(item: str) -> str:
        """Write one item."""
        ran.append(f"write:{item}")
        return "written"

    @vault.tool(read_only=False, idempotent=False, open_world=False)
    def transfer(amount: int) -> str:
        """Move money (needs approval)."""
        ran.append(f"transfer:{amount}")
        return "moved"

    @vault.tool(read_only=False, idempotent=False, open_world=False)
    async def hang(item: str) -> str:
        """A write that never finishes."""
        ran.append(f"hang:{item}")
        await anyio.Event().wait()
        return "never"

    admin = Toolbox("admin")

    @admin.tool(read_only=True, open_world=False, scopes={"root"})
    def shutdown() -> str:
        """Root only."""
        ran.append("shutdown")
        return "down"

    return [vault, admin]


@dataclass
class Host:
    gate: Gate
    ran: list[str]
    sentinel: Path
    pid: int

    async def run(self, code: str, principal: Principal = ALICE) -> Envelope:
        """Run ``code`` (``SENTINEL`` stands for the sentinel file's path)."""
        code = code.replace("SENTINEL", str(self.sentinel))
        envelope = await self.gate.call(RUN, {"code": code}, principal=principal)
        assert CANARY not in envelope.model_dump_json()
        return envelope

    async def refused(self, code: str, phrase: str, principal: Principal = ALICE) -> Envelope:
        """Run ``code``, check it ended with a construction error saying ``phrase``,
        recorded so in the audit."""
        envelope = await self.run(code, principal)
        assert envelope.status is Status.ERROR, envelope.payload
        assert envelope.error is not None
        assert envelope.error.kind is ErrorKind.CONSTRUCTION, envelope.error.message_for_model
        assert phrase in envelope.error.message_for_model
        own = await self.gate.audit(call_id=envelope.call_id)
        assert [r.outcome for r in own if r.phase == "final"] == ["construction"]
        return envelope

    async def inner(self, envelope: Envelope) -> list[AuditRecord]:
        """The audit records of the tool calls the run made."""
        records = await self.gate.audit(tail=1000)
        return [r for r in records if r.detail.get("parent_call_id") == envelope.call_id]

    async def nothing_ran(self, envelope: Envelope) -> None:
        assert self.ran == []
        assert await self.inner(envelope) == []

    async def unharmed(self) -> None:
        """The host is as it was, and the gate still runs a normal program."""
        assert os.getpid() == self.pid
        assert self.sentinel.read_text() == "untouched"
        assert os.environ[CANARY_VAR] == CANARY
        envelope = await self.run("await vault.whoami()")
        assert envelope.status is Status.OK, envelope.error
        assert envelope.payload["result"] == {"tenant": "acme", "user": "alice"}


def said(envelope: Envelope) -> str:
    assert envelope.error is not None
    return envelope.error.message_for_model


@asynccontextmanager
async def open_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **limits: Any
) -> AsyncIterator[Host]:
    monkeypatch.setenv(CANARY_VAR, CANARY)  # before the gate starts its workers
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("untouched")
    ran: list[str] = []
    settings = replace(SETTINGS, **limits)
    async with Gate(toolboxes(ran), store="memory://", policy=POLICY, code_mode=settings) as gate:
        yield Host(gate, ran, sentinel, os.getpid())


@pytest.fixture
async def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Host]:
    async with open_host(tmp_path, monkeypatch) as opened:
        yield opened


def cases(table: dict[str, tuple[str, str]]) -> list[Any]:
    """``{id: (code, phrase)}`` as parameters."""
    return [pytest.param(*case, id=name) for name, case in table.items()]


# -- escaping the sandbox ----------------------------------------------------------------

ESCAPES = cases(
    {
        "os": ("import os\nos.system('touch SENTINEL')", "no attribute 'system'"),
        "subprocess": ("import subprocess\nsubprocess.run(['id'])", "No module named"),
        "socket": ("import socket\nsocket.socket()", "No module named 'socket'"),
        "ctypes": ("import ctypes", "No module named 'ctypes'"),
        "sys.modules": ("import sys\nsys.modules['os']", "no attribute 'modules'"),
        "builtins": ("import builtins\nbuiltins.open", "No module named 'builtins'"),
        "open-read": ("open('SENTINEL').read()", "Permission denied"),
        "open-write": ("open('SENTINEL', 'w').write('pwned')", "Permission denied"),
        "unlink": ("import pathlib\npathlib.Path('SENTINEL').unlink()", "Permission denied"),
        "listdir": ("import os\nos.listdir('/')", "Permission denied"),
        "__import__": ("__import__('os').system('id')", "NameError"),
        "subclasses": ("().__class__.__bases__[0].__subclasses__()", "no attribute '__class__'"),
        "object-subclasses": ("object.__subclasses__()", "no attribute '__subclasses__'"),
        "globals": ("def f():\n    pass\nf.__globals__['os']", "no attribute '__globals__'"),
        "code-object": ("f = lambda: 0\nf.__code__", "no attribute '__code__'"),
        "format": ("def f():\n    pass\n'{0.__globals__}'.format(f)", "no attribute"),
        "getattr-dunder": ("getattr(getattr(1, '__class__'), 'mro')()", "no attribute '__class__'"),
        "getattr-module": ("getattr(vault, '__dict__')", "no attribute '__dict__'"),
        "getframe": ("import sys\nsys._getframe(1).f_globals", "no attribute '_getframe'"),
        "tb_frame": (
            "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back",
            "no attribute '__traceback__'",
        ),
        "gi_frame": ("def g():\n    yield 1\ng().gi_frame.f_back", "yield"),
        "eval-import": ("eval(\"__import__('os')\")", "NameError"),
        "exec-os": ("exec('import os\\nos.system(\"id\")')", "no attribute 'system'"),
        "eval-open": ("eval(\"open('SENTINEL').read()\")", "Permission denied"),
        "compile": ("compile('1', 'x', 'eval')", "NameError"),
        "globals()": ("globals()['__builtins__']", "NameError"),
        "breakpoint": ("breakpoint()", "NameError"),
        "kill": ("import os\nos.kill(1, 9)", "no attribute 'kill'"),
        # The secret is in the host's environment; Host.run checks it never comes out.
        "getenv": (f"import os\nos.getenv('{CANARY_VAR}')", "not supported"),
        "environ": (f"import os\nos.environ['{CANARY_VAR}']", "not supported"),
        "environ-copy": ("import os\nstr(os.environ.copy())", "not supported"),
        "proc-environ": ("open('/proc/self/environ').read()", "Permission denied"),
        "exec-getenv": (f"exec(\"import os\\nos.getenv('{CANARY_VAR}')\")", "not supported"),
    }
)


@pytest.mark.parametrize(("code", "phrase"), ESCAPES)
async def test_an_escape_fails_and_touches_nothing(host: Host, code: str, phrase: str) -> None:
    envelope = await host.refused(code, phrase)
    assert "The program raised" in said(envelope)
    await host.nothing_ran(envelope)
    await host.unharmed()


async def test_no_state_carries_over_to_another_callers_program(host: Host) -> None:
    first = await host.run("secret = 'alice-private'\nsecret")
    assert first.payload["result"] == "alice-private"
    envelope = await host.refused("secret", "name 'secret' is not defined", principal=BOB)
    await host.nothing_ran(envelope)


# -- limits ---------------------------------------------------------------------------------

LIMITS = cases(
    {
        "infinite-loop": ("while True:\n    pass", "CPU time limit"),
        "recursion": ("def f(n):\n    return f(n + 1)\nf(0)", "recursion limit"),
        "string-bomb": ("x = 'x' * 10**9\nlen(x)", "memory limit"),
        "list-growth": ("a = []\nwhile True:\n    a.append([0] * 1000)", "memory limit"),
        "doubling": ("s = 'ab'\nfor i in range(40):\n    s = s + s", "memory limit"),
        "format-bomb": ("'{:>1000000000}'.format('x')", "memory limit"),
        "big-power": ("x = 10**10**10", "memory limit"),
        "list-bomb": ("x = [1] * 10**9", "memory limit"),
        "huge-result": ("'x' * 10**6", "larger than 4,096 bytes"),
        "nesting": ("v = []\nfor i in range(200000):\n    v = [v]\nv", "nested more than 64"),
        "big-int-result": ("10**5000", "integer beyond +-2**53"),
        "nan-result": ("float('nan')", "holds nan"),
        "inf-result": ("[1.0, float('-inf')]", "holds -inf"),
        "parse-bomb": ("x = " + "[" * 30000 + "]" * 30000, "too deeply nested"),
        "eval-parse-bomb": ("eval('[' * 100000 + ']' * 100000)", "too deeply nested"),
    }
)


@pytest.mark.parametrize(("code", "phrase"), LIMITS)
async def test_a_limit_ends_the_program_clearly(host: Host, code: str, phrase: str) -> None:
    envelope = await host.refused(code, phrase)
    assert envelope.error is not None and envelope.error.next_step
    await host.nothing_ran(envelope)
    await host.unharmed()


async def test_the_cpu_clock_is_not_reset_by_tool_calls(host: Host) -> None:
    # Each stretch of computing is under the limit (here); together they are not.
    code = (
        "for i in range(12):\n    await vault.echo(value=i)\n    x = 0\n"
        "    for j in range(2000000):\n        x += j\n'finished'"
    )
    envelope = await host.refused(code, "CPU time limit")
    assert 0 < host.ran.count("echo") < 12
    assert len(await host.inner(envelope)) == host.ran.count("echo")
    await host.unharmed()


async def test_the_wall_time_limit_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_host(tmp_path, monkeypatch, max_cpu_seconds=3, max_seconds=1) as host:
        envelope = await host.refused("while True:\n    pass", "time limit of 1 s")
        await host.nothing_ran(envelope)
        await host.unharmed()


@pytest.mark.parametrize(
    "call", ["await vault.echo(value=i)", "c = vault.echo(value=i)"], ids=["awaited", "not"]
)
async def test_the_tool_call_limit_holds(host: Host, call: str) -> None:
    envelope = await host.refused(f"for i in range(25):\n    {call}", "more than 20 tool calls")
    assert set(host.ran) == {"echo"} and len(host.ran) <= 20  # never a 21st
    assert {r.tool for r in await host.inner(envelope)} == {"vault.echo"}
    await host.unharmed()


async def test_huge_printing_is_cut_to_the_output_limit(host: Host) -> None:
    envelope = await host.run("for i in range(100000):\n    print('spam ' * 10)\n'done'")
    printed = envelope.payload["printed"]
    assert "[output cut: 4,096 of 5,100,000 characters printed are shown" in printed
    assert len(printed) < LIMIT_BYTES + 200
    await host.unharmed()


@pytest.mark.parametrize(
    "code",
    [
        "raise ValueError('boom' * 100000)",
        "for i in range(400):\n    await vault.echo(value=i)\n1 / 0",
    ],
    ids=["exception-text", "calls-made"],
)
async def test_a_failed_runs_message_stays_within_the_output_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    async with open_host(tmp_path, monkeypatch, max_calls=500) as host:
        envelope = await host.refused(code, "The program raised")
        assert len(said(envelope)) <= LIMIT_BYTES + 1024


async def test_a_time_out_during_a_write_says_the_write_may_have_happened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_host(tmp_path, monkeypatch, max_seconds=1) as host:
        envelope = await host.run("await vault.hang(item='x')")
        assert host.ran == ["hang:x"]
        assert envelope.error is not None
        assert envelope.error.kind is ErrorKind.UNKNOWN_OUTCOME
        assert "vault.hang" in envelope.error.message_for_model


# -- values crossing into tools -----------------------------------------------------------

BAD_ARGUMENTS = cases(
    {
        "big-int": ("10**5000", "integer beyond +-2**53"),
        "nan": ("float('nan')", "holds nan"),
        "inf": ("float('inf')", "holds inf"),
        "int-key": ("{1: 'a'}", "keys must be strings"),
        "set": ("{'a', 'b'}", "type set"),
        "bytes": ("b'raw'", "type bytes"),
        "huge": ("'x' * 10**5", "larger than 4,096 bytes"),
    }
)


@pytest.mark.parametrize(("value", "phrase"), BAD_ARGUMENTS)
async def test_a_bad_argument_never_reaches_the_tool(host: Host, value: str, phrase: str) -> None:
    envelope = await host.refused(f"await vault.echo(value={value})", phrase)
    assert "ValueError: the arguments of vault.echo" in said(envelope)
    await host.nothing_ran(envelope)


async def test_a_deeply_nested_argument_is_refused_and_catchable(host: Host) -> None:
    envelope = await host.run(
        "v = []\nfor i in range(200000):\n    v = [v]\n"
        "try:\n    await vault.echo(value=v)\nexcept ValueError as e:\n    r = str(e)\nr"
    )
    assert envelope.status is Status.OK
    assert "nested more than 64 levels" in envelope.payload["result"]
    await host.nothing_ran(envelope)
    await host.unharmed()


# -- forging who calls -------------------------------------------------------------------

FORGED = [
    pytest.param("tenant_id='globex', user_id='mallory'", id="trusted-keywords"),
    pytest.param("**{'tenant_id': 'globex', 'user_id': 'mallory'}", id="spread"),
]


@pytest.mark.parametrize("forged", FORGED)
async def test_trusted_fields_cannot_be_forged(host: Host, forged: str) -> None:
    envelope = await host.run(f"await vault.whoami({forged})")
    assert envelope.payload["result"] == {"tenant": "acme", "user": "alice"}
    [record] = [r for r in await host.inner(envelope) if r.phase == "final"]
    assert record.tool == "vault.whoami" and record.tenant == "acme" and record.user == "alice"
    assert set(record.dropped_fields) == {"tenant_id", "user_id"}
    envelope = await host.run(f"await vault.whoami({forged.replace('globex', 'acme')})", BOB)
    assert envelope.payload["result"] == {"tenant": "globex", "user": "bob"}


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param("tenant='globex'", id="tenant"),
        pytest.param("principal={'user': 'root', 'tenant': 'globex'}", id="principal"),
        pytest.param("**{'user': 'root', 'scopes': ['admin']}", id="spread"),
    ],
)
async def test_identity_keywords_are_refused_as_unknown_arguments(host: Host, forged: str) -> None:
    envelope = await host.refused(f"await vault.whoami({forged})", "Unknown argument")
    assert "ValueError: construction:" in said(envelope)
    assert host.ran == []
    [record] = [r for r in await host.inner(envelope) if r.phase == "final"]
    assert record.outcome == "construction" and record.tenant == "acme"


async def test_positional_arguments_are_a_catchable_type_error(host: Host) -> None:
    envelope = await host.run(
        "try:\n    await vault.echo('positional')\nexcept TypeError as e:\n    r = str(e)\nr"
    )
    assert "keyword arguments only: vault.echo(value=...)" in envelope.payload["result"]
    await host.nothing_ran(envelope)
    await host.refused("await vault.echo('positional')", "TypeError")


async def test_the_stubs_show_neither_trusted_fields_nor_hidden_tools(host: Host) -> None:
    envelope = await host.gate.call("callgate.code_functions", {}, principal=ALICE)
    stubs = envelope.payload["stubs"]
    assert "async def whoami() -> Any" in stubs
    for hidden in ("tenant_id", "user_id", "dump_secrets", "shutdown", "run_code"):
        assert hidden not in stubs


# -- tools the caller may not use ----------------------------------------------------------

HIDDEN = cases(
    {
        "scoped": ("await vault.dump_secrets()", "no attribute 'dump_secrets'"),
        "getattr": ("await getattr(vault, 'dump_secrets')()", "no attribute 'dump_secrets'"),
        "eval": ("await eval('vault.dump_secrets()')", "no attribute 'dump_secrets'"),
        "module": ("await admin.shutdown()", "name 'admin' is not defined"),
        "import": ("import admin", "No module named 'admin'"),
        "bare-name": ("await dump_secrets()", "NameError"),
        "nested-run": ("await callgate.run_code(code='1')", "name 'callgate' is not defined"),
        "import-callgate": ("import callgate", "No module named 'callgate'"),
        "bare-run-code": ("await run_code(code='1')", "NameError"),
        "run-code": ("await vault.run_code(code='1')", "no attribute 'run_code'"),
        "call_tool": ("await callgate.call_tool(name='vault.dump_secrets')", "name 'callgate'"),
    }
)


@pytest.mark.parametrize(("code", "phrase"), HIDDEN)
async def test_a_tool_out_of_reach_cannot_be_called(host: Host, code: str, phrase: str) -> None:
    envelope = await host.refused(code, phrase)
    await host.nothing_ran(envelope)
    records = await host.gate.audit(tail=100)
    assert {r.tool for r in records} == {RUN}  # no hidden tool, no nested run
    await host.unharmed()


async def test_the_same_tool_is_reachable_with_the_scope(host: Host) -> None:
    envelope = await host.run("await vault.dump_secrets()", principal=ADMIN)
    assert envelope.payload["result"] == "every secret"
    assert [r.tool for r in await host.inner(envelope)] == ["vault.dump_secrets"]


async def test_a_policy_denial_is_raised_in_the_program_and_holds(host: Host) -> None:
    envelope = await host.run(
        "try:\n    await vault.write(item='forbidden')\nexcept PermissionError as e:\n"
        "    r = str(e)\nr"
    )
    assert envelope.payload["result"].startswith("permission: ")
    assert "not that" in envelope.payload["result"]
    assert host.ran == []
    [record] = [r for r in await host.inner(envelope) if r.phase == "final"]
    assert record.tool == "vault.write" and record.outcome == "permission"


# -- smuggling calls out through values ------------------------------------------------

RETURNED = cases(
    {
        "tool-module": ("vault", "a module"),
        "instance": ("class A:\n    pass\nA()", "an instance of a class"),
        "builtin": ("len", "a built-in function"),
        "type": ("type(vault)", "a built-in function or type"),
        "locals": ("locals()", "a module"),
    }
)


@pytest.mark.parametrize(("code", "phrase"), RETURNED)
async def test_a_live_object_is_refused_by_name(host: Host, code: str, phrase: str) -> None:
    envelope = await host.refused(code, phrase)
    assert "only dicts, lists, strings, numbers" in said(envelope)
    await host.nothing_ran(envelope)


SMUGGLED = cases(
    {
        "function": ("def f():\n    pass\nf", "a function"),
        "class": ("class A:\n    pass\nA", "a class"),
        "coroutine": ("async def f():\n    pass\nf()", "coroutine"),
        "tool-function": ("vault.whoami", "a function"),
        "sandbox-module": ("import json\njson", "a module"),
        "tool-as-argument": ("await vault.echo(value=vault.whoami)", "a function"),
    }
)


@pytest.mark.parametrize(("code", "phrase"), SMUGGLED)
async def test_code_as_a_value_is_refused_by_name(host: Host, code: str, phrase: str) -> None:
    await host.refused(code, phrase)
    assert host.ran == []


# -- calls not awaited, and calls that wait for a person ------------------------------


async def test_a_call_not_awaited_is_still_governed(host: Host) -> None:
    envelope = await host.run("c = vault.write(item='stray')\n'not awaited'")
    assert envelope.payload == {"result": "not awaited", "printed": "", "calls": 1}
    assert host.ran == ["write:stray"]
    records = await host.inner(envelope)
    assert [(r.tool, r.phase, r.outcome) for r in records] == [
        ("vault.write", "intent", None),
        ("vault.write", "final", "ok"),
    ]
    assert records[-1].idempotency_key == f"{envelope.call_id}:1"


PAUSING = (
    "try:\n    r = await vault.transfer(amount=5)\nexcept BaseException as e:\n    r = str(e)\n"
    "await vault.write(item='after')\nr"
)


async def test_a_call_needing_approval_pauses_the_program_before_it(host: Host) -> None:
    # The program cannot catch the wait and go on to another write.
    envelope = await host.run(PAUSING)
    assert envelope.status is Status.PENDING_APPROVAL and envelope.approval is not None
    assert "The program is paused" in said(envelope)
    assert host.ran == []
    approval = await (await host.gate.approvals()).get(envelope.approval.approval_id)
    assert approval is not None and approval.id in said(envelope) and approval.state == "pending"
    assert approval.tool == "vault.transfer" and approval.user == "alice"
    assert approval.model_arguments == {"amount": 5}
    records = await host.inner(envelope)
    assert [(r.tool, r.outcome) for r in records] == [("vault.transfer", "pending_approval")]
    again = await host.run(PAUSING)  # before the decision: still paused, nothing runs
    assert again.approval is not None and again.approval.approval_id == approval.id
    assert host.ran == []
    await host.unharmed()


async def test_a_paused_program_is_only_its_callers(host: Host) -> None:
    paused = await host.run(PAUSING)
    assert paused.approval is not None
    approval_id = paused.approval.approval_id
    for other in (BOB, Principal("dave", tenant="acme")):  # same code, own program
        envelope = await host.run(PAUSING, other)
        assert envelope.approval is not None and envelope.approval.approval_id != approval_id
    with pytest.raises(ApprovalError, match="another user or tenant"):
        await host.gate.resume(approval_id, principal=BOB)
    with pytest.raises(ApprovalError, match="cannot decide it"):
        await (await host.gate.approvals()).approve(approval_id, by=ALICE)
    assert host.ran == []


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
async def test_a_decided_program_goes_on_once(host: Host, approve: bool) -> None:
    paused = await host.run(PAUSING)
    assert paused.approval is not None
    approvals, approval_id = await host.gate.approvals(), paused.approval.approval_id
    if approve:
        await approvals.approve(approval_id, by=CAROL)
    else:  # a denial is a PermissionError the program catches
        await approvals.deny(approval_id, by=CAROL, reason="no")
    envelope = await host.run(PAUSING)
    result = envelope.payload["result"]
    assert result == "moved" if approve else result.startswith("permission: ")
    made = ["transfer:5", "write:after"] if approve else ["write:after"]
    assert host.ran == made
    fresh = await host.run(PAUSING)  # the program ended: the same code starts afresh
    if approve:  # and its transfer needs an approval of its own
        assert fresh.status is Status.PENDING_APPROVAL and host.ran == made
    else:  # and the denial stands
        assert "denied this request" in fresh.payload["result"] and "transfer:5" not in host.ran


async def test_an_unawaited_call_that_needs_approval_is_not_made_and_said(host: Host) -> None:
    envelope = await host.run("c = vault.transfer(amount=7)\n'done'")
    assert host.ran == []
    approvals = await (await host.gate.approvals()).list(state="pending")
    [approval] = [a for a in approvals if a.tool == "vault.transfer"]
    assert envelope.payload["result"] == "done"
    [not_made] = envelope.payload["not_made"]
    assert "vault.transfer" in not_made and approval.id in not_made
