"""One program's run: the sandbox drives the code, the gate runs every tool call.

:class:`Program` feeds the code to a sandbox worker and answers each tool call
the program makes, the moment it makes it (awaited or not): the call passes
:meth:`callgate.Gate.call` with the outer call's principal, session and trace,
its parent call id in the audit, and, for a tool that is not read-only, an
idempotency key derived from the run and the call's position. The program gets
the tool's payload, or an exception carrying the error's kind and its message
for the model (``ValueError`` for construction, ``PermissionError`` for
permission, ``TimeoutError`` for transient, ``RuntimeError`` otherwise; the
text starts with the kind: ``"permission: ..."``).

What crosses back (arguments, the final value) is made plain JSON under limits
first (:mod:`callgate.codemode.values`); what the program prints is kept up to
the output limit, with a notice past it.

A call parked for approval stops the program where it is: it is kept in the
store and goes on when ``run_code`` is called again with the same code
(:mod:`callgate.codemode.suspend`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from callgate.codemode import suspend
from callgate.codemode.sandbox import Sandbox, monty
from callgate.codemode.stubs import Catalogue, Function
from callgate.codemode.suspend import Parked, Suspended
from callgate.codemode.values import ValueLimits, ValueRefused, plain
from callgate.errors import (
    ConstructionError,
    ErrorKind,
    UnknownOutcomeError,
    UnrecoverableError,
    WaitingForApproval,
)
from callgate.runtime.envelope import Envelope, Status
from callgate.store.base import RunStatus

if TYPE_CHECKING:
    from callgate.contract import ToolContext
    from callgate.runtime.gate import Gate

__all__ = ["RUN_CODE", "Program", "RunAnswer"]

RUN_CODE = "callgate.run_code"
"""The meta-tool that runs a program (:mod:`callgate.codemode.tool` adds it)."""
MAX_LISTED = 20
"""Calls named in the message of a run that stopped (the audit has every one)."""
MAX_RAISED_CHARS = 2000
"""The longest text of the program's own exception a message carries."""

_EXCEPTION_OF_KIND = {
    ErrorKind.CONSTRUCTION: "ValueError",
    ErrorKind.PERMISSION: "PermissionError",
    ErrorKind.TRANSIENT: "TimeoutError",
}


class RunAnswer(BaseModel):
    """What the model reads of a run: the program's final value and its prints."""

    result: Any = None
    """The value of the program's last expression (None if it ends with a statement)."""
    printed: str = ""
    calls: int = 0
    """Tool calls the program made."""
    not_made: list[str] = []
    """Calls the program started without awaiting them that wait for an approval
    (left out when there are none)."""

    @model_serializer(mode="wrap")
    def _without_empty(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("not_made"):
            data.pop("not_made", None)
        return data


class _Printed:
    """The program's ``print`` output, kept up to ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.total = 0

    def keep(self, earlier: str) -> None:
        """What was printed before the program last stopped to wait."""
        self.parts.append(earlier)
        self.size = self.total = len(earlier)

    def __call__(self, stream: str, text: str) -> None:
        self.total += len(text)
        room = self.limit - self.size
        if room > 0:
            kept = text[:room]
            self.parts.append(kept)
            self.size += len(kept)

    def text(self) -> str:
        out = "".join(self.parts)
        if self.total > self.size:
            out += (
                f"\n[output cut: {self.size:,} of {self.total:,} characters printed are shown; "
                "print less, or return an aggregate]"
            )
        return out


class _Limit(Exception):
    """A limit the host counts was reached: the run ends (the message says which)."""


@dataclass(frozen=True)
class _Waits:
    """A call parked for approval: the program stops until it is decided."""

    parked: Parked
    envelope: Envelope


Answer = dict[str, Any] | _Waits
"""A call's answer to the sandbox (a value or an exception), or a parked call."""


@dataclass
class _Inner:
    function: Function | None
    task: asyncio.Future[Answer]
    writes: bool


@dataclass
class Program:
    """One run of ``code`` for the caller of ``ctx`` (see the module docs)."""

    gate: Gate
    ctx: ToolContext
    sandbox: Sandbox
    catalogue: Catalogue
    code: str
    calls: int = 0
    _inner: dict[int, _Inner] = field(default_factory=dict)
    _done: list[str] = field(default_factory=list)
    """``tool: outcome`` of each call that finished, for the messages of a failed run."""
    run_key: str = ""
    """Whose write keys the calls carry: the first ``run_code`` call of this program."""
    session_id: str = ""
    _printed: _Printed = field(default_factory=lambda: _Printed(0))
    _not_made: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._printed = _Printed(self.sandbox.settings.max_output_kb * 1024)
        self.run_key = self.ctx.call_id
        # Inner calls share a session, so that what one brings into the program
        # (untrusted content, private data) is seen when another would send it out.
        self.session_id = self.ctx.session_id or f"program:{self.ctx.call_id}"
        self.pid = suspend.program_id(self.ctx.principal, self.ctx.session_id, self.code)

    @property
    def _limits(self) -> ValueLimits:
        settings = self.sandbox.settings
        return ValueLimits(max_bytes=settings.max_output_kb * 1024)

    async def run(self) -> RunAnswer:
        """Run the program to its end, or on from where it waited.

        Raises:
            ConstructionError: the code does not parse, raised an exception, or
                went over a limit (the message says which and what to do).
            UnknownOutcomeError: it stopped while a write it started was running.
            UnrecoverableError: the sandbox worker crashed (it is replaced).
            WaitingForApproval: a call it made waits for a person (it is kept).
            CodeModeUnavailable: the sandbox is not installed.
        """
        store = await self.gate.runs()
        principal = self.ctx.principal
        waiting = await suspend.load(store, principal, self.pid)
        ended: RunStatus = "failed"
        try:
            answer = await self._guarded(waiting)
            ended = "completed"
            return answer
        except WaitingForApproval:
            ended = "waiting_approval"
            raise
        finally:
            for inner in self._inner.values():
                inner.task.cancel()
            if waiting is not None and ended != "waiting_approval":
                await suspend.finish(store, self.gate.clock, principal, self.pid, ended)

    async def _guarded(self, waiting: Suspended | None) -> RunAnswer:
        """The run, its failures made the errors the model reads."""
        m = monty()
        settings = self.sandbox.settings
        try:
            async with asyncio.timeout(settings.max_seconds):
                output = await self._in_sandbox(waiting)
        except TimeoutError:
            raise self._failure(
                f"The program ran over its time limit of {settings.max_seconds:g} s "
                "(tool calls included).",
                "Do less in one program (fewer calls, smaller pages), or split the work.",
            ) from None
        except _Limit as exc:
            raise self._failure(str(exc), "Split the work into smaller programs.") from None
        except m.MontySyntaxError as exc:
            raise ConstructionError(
                f"The program does not parse: {_located(exc)}",
                next_step="Fix the code and run it again.",
            ) from None
        except m.MontyRuntimeError as exc:
            raise self._raised(exc, settings) from None
        except (m.MontyCrashedError, m.MontyDisconnectError):
            raise UnrecoverableError(
                "The sandbox running the program crashed; it has been replaced." + self._so_far(),
                next_step="Do not run the same program again as is; simplify it.",
            ) from None
        result = None
        if isinstance(output, str) and self.catalogue.get(output) is not None:
            raise self._failure(
                f"The program's result is a function itself ({output}), not what it returns.",
                f"Call it and return its result: await {output}(...).",
            )
        if output is not None:
            try:
                result = plain(output, self._limits, what="the program's result")
            except ValueRefused as exc:
                raise self._failure(
                    str(exc), "Return plain data: dicts, lists, strings, numbers."
                ) from None
        return RunAnswer(
            result=result,
            printed=self._printed.text(),
            calls=self.calls,
            not_made=self._not_made,
        )

    async def _in_sandbox(self, waiting: Suspended | None) -> Any:
        m = monty()
        modules = {
            name: m.ExternalModule({f.name: _host_only for f in functions})
            for name, functions in self.catalogue.modules.items()
        }
        pool = await self.sandbox.pool()
        async with pool.checkout(
            external_modules=modules,
            limits=self.sandbox.limits(),
            script_name="program.py",
            os_policy={"sleep": "zero"},
        ) as session:
            if waiting is not None:
                self._take_up(waiting)
                snapshot = await session.load_snapshot(
                    waiting.snapshot, print_callback=self._printed
                )
            else:
                if modules:  # every toolbox module imported up front
                    await self._drive(await session.feed_start("import " + ", ".join(modules)))
                snapshot = await session.feed_start(self.code, print_callback=self._printed)
            output = await self._drive(snapshot)
        await self._settle_strays()
        return output

    def _take_up(self, waiting: Suspended) -> None:
        """Go on with a program that waited: its state, the answers it had not taken
        yet, and each parked call made again (same inputs, same key)."""
        self.run_key, self.session_id = waiting.run, waiting.session_id
        self.calls, self._done = waiting.calls, list(waiting.done)
        self._printed.keep(waiting.printed)
        loop = asyncio.get_running_loop()
        for call_id, answer in waiting.answers.items():
            done: asyncio.Future[Answer] = loop.create_future()
            done.set_result(answer)
            self._inner[call_id] = _Inner(None, done, False)
        reach = {f.spec.name: f for f in self.catalogue.functions}
        for call_id, parked in waiting.parked.items():
            function = reach.get(parked.tool)
            if function is None:  # no longer the caller's to use
                gone: asyncio.Future[Answer] = loop.create_future()
                gone.set_result(
                    _raise("PermissionError", f"permission: you may no longer call {parked.tool}.")
                )
                self._inner[call_id] = _Inner(None, gone, False)
                continue
            writes = not function.spec.effective_annotations.read_only
            task = asyncio.ensure_future(
                self._settled(function, parked.arguments, parked.position, writes)
            )
            self._inner[call_id] = _Inner(function, task, writes)

    # -- driving the sandbox --------------------------------------------------------
    async def _drive(self, snapshot: Any) -> Any:
        m = monty()
        while not isinstance(snapshot, m.MontyComplete):
            if isinstance(snapshot, m.AsyncFunctionSnapshot):
                if snapshot.is_os_function:
                    # Imports of the toolbox modules (and the sandbox's own modules)
                    # resolve; every other OS call (files, environment) is refused.
                    if snapshot.function_name == "import":
                        snapshot = await snapshot.resume_auto()
                    else:
                        snapshot = await snapshot.resume_not_handled()
                    continue
                snapshot = await snapshot.resume(self._start(snapshot))
            elif isinstance(snapshot, m.AsyncFutureSnapshot):
                results: dict[int, dict[str, Any]] = {}
                parked: dict[int, _Waits] = {}
                for call_id in snapshot.pending_call_ids:
                    # Kept in _inner until answered: a run that stops meanwhile
                    # (its time is up) must know which of its calls still run.
                    answer = await self._inner[call_id].task
                    del self._inner[call_id]
                    if isinstance(answer, _Waits):
                        parked[call_id] = answer
                    else:
                        results[call_id] = answer
                if parked:
                    await self._wait_for_approval(snapshot, results, parked)
                snapshot = await snapshot.resume(results)
            else:  # a name the program never defined: the sandbox raises NameError
                snapshot = await snapshot.resume()
        return snapshot.output

    def _start(self, snapshot: Any) -> dict[str, Any]:
        """Answer one tool call as the program makes it: a future for the
        governed call now running, or an exception for a call that cannot be made."""
        path = str(snapshot.function_name)
        function = self.catalogue.get(path)
        if function is None:  # a name the sandbox does not have, and no tool of the caller's
            return _raise("NameError", f"name {path!r} is not defined in the sandbox.")
        if snapshot.args:
            example = ", ".join(f"{name}=..." for name in _parameters(function)[:2])
            return _raise(
                "TypeError",
                f"{path} takes keyword arguments only: {path}({example}).",
            )
        if self.calls >= self.sandbox.settings.max_calls:
            raise _Limit(
                f"The program made more than {self.sandbox.settings.max_calls} tool calls, "
                "its limit."
            )
        try:
            arguments = plain(dict(snapshot.kwargs), self._limits, what=f"the arguments of {path}")
        except ValueRefused as exc:
            return _raise("ValueError", str(exc))
        for name, value in arguments.items():
            if isinstance(value, str) and self.catalogue.get(value) is not None:
                return _raise(
                    "ValueError",
                    f"{path}'s argument {name} is a function itself ({value}): "
                    f"pass what it returns (await {value}(...)).",
                )
        self.calls += 1
        writes = not function.spec.effective_annotations.read_only
        task = asyncio.ensure_future(self._settled(function, arguments, self.calls, writes))
        self._inner[snapshot.call_id] = _Inner(function, task, writes)
        return {"future": ...}

    async def _settled(
        self, function: Function, arguments: dict[str, Any], position: int, writes: bool
    ) -> Answer:
        envelope = await self._call(function, arguments, position, writes)
        if envelope.ok and envelope.truncated is not None and envelope.raw_ref:
            # The model would get the first page; the program gets the whole result
            # (kept by the chain, within Limits.max_result_bytes).
            stored = await self.gate.kept_result(envelope.raw_ref)
            if stored is not None:
                return {"return_value": stored.content}
        if envelope.status is Status.PENDING_APPROVAL and envelope.approval is not None:
            parked = Parked(function.spec.name, arguments, position, envelope.approval.approval_id)
            return _Waits(parked, envelope)
        return self._answer(function, envelope)

    async def _call(
        self, function: Function, arguments: dict[str, Any], position: int, writes: bool
    ) -> Envelope:
        ctx = self.ctx
        envelope = await self.gate.call(
            function.spec.name,
            arguments,
            principal=ctx.principal,
            session_id=self.session_id,
            trace_id=ctx.trace_id,
            # A write's key is the run's and the call's position in it: the same
            # write of the same run is never done twice.
            idempotency_key=f"{self.run_key}:{position}" if writes else None,
            parent_call_id=ctx.call_id,
        )
        self._done.append(f"{function.path}: {_outcome(envelope)}")
        return envelope

    def _answer(self, function: Function, envelope: Envelope) -> dict[str, Any]:
        path = function.path
        if envelope.status is Status.OK:
            return {"return_value": envelope.payload}
        if envelope.error is None:
            return _raise("RuntimeError", f"{path} ended with status {envelope.status.value}.")
        error = envelope.error
        text = f"{error.kind.value}: {error.message_for_model}"
        if error.next_step:
            text += f" Next step: {error.next_step}"
        return _raise(_EXCEPTION_OF_KIND.get(error.kind, "RuntimeError"), text)

    async def _settle_strays(self) -> None:
        """Wait for calls the program started but never awaited: they are governed
        calls like the others, and the run is not over before they are (one that
        waits for an approval is not made; the result says so)."""
        strays, self._inner = list(self._inner.values()), {}
        for inner in strays:
            answer = await inner.task
            if isinstance(answer, _Waits):
                self._not_made.append(
                    f"{inner.function.path if inner.function else answer.parked.tool} "
                    f"(waits for approval {answer.parked.approval_id}; the program did not "
                    "await it)"
                )

    async def _wait_for_approval(
        self, snapshot: Any, results: dict[int, dict[str, Any]], parked: dict[int, _Waits]
    ) -> None:
        """Keep the program where it stopped (see :mod:`callgate.codemode.suspend`)
        and end this run with the approval it waits for."""
        blob = snapshot.dump()
        answers = dict(results)
        for call_id, inner in list(self._inner.items()):  # started, not yet awaited
            answer = await inner.task
            if isinstance(answer, _Waits):
                parked[call_id] = answer
            else:
                answers[call_id] = answer
        self._inner = {}
        kept = Suspended(
            run=self.run_key,
            session_id=self.session_id,
            outer_session=self.ctx.session_id,
            code=self.code,
            snapshot=blob,
            answers=answers,
            parked={call_id: waits.parked for call_id, waits in parked.items()},
            calls=self.calls,
            done=self._done,
            printed=self._printed.text() if self._printed else "",
        )
        await suspend.save(
            await self.gate.runs(), self.gate.clock, self.ctx.principal, self.pid, kept
        )
        first = next(iter(parked.values()))
        approval = first.envelope.approval
        assert approval is not None
        tool = self.ctx.shown(first.parked.tool)
        raise WaitingForApproval(
            f"The program is paused: its call of {tool} needs a person's approval "
            f"({approval.approval_id}: {approval.reason}). Nothing after that call has run; "
            "the calls before it are done.",
            approval=approval,
            next_step=f"Once the approval is decided, call {self.ctx.shown(RUN_CODE)} "
            "again with exactly the same code: the program goes on where it stopped.",
        )

    # -- failures --------------------------------------------------------------------
    def _so_far(self) -> str:
        if not self._done:
            return " No tool call had finished."
        shown = self._done[:MAX_LISTED]
        more = len(self._done) - len(shown)
        tail = f"; and {more} more (the audit has them all)" if more else ""
        return f" Tool calls made before it stopped: {'; '.join(shown)}{tail}."

    def _failure(self, message: str, next_step: str) -> Exception:
        """The error of a run that stopped: unknown outcome when a write it started
        was still running, else a construction error naming the calls made."""
        # Unanswered calls: still running, or cancelled with the run (time was up
        # while the program awaited them).
        running = [
            inner
            for inner in self._inner.values()
            if not inner.task.done() or inner.task.cancelled()
        ]
        for inner in running:
            inner.task.cancel()
        if any(inner.writes for inner in running):
            names = ", ".join(
                inner.function.path for inner in running if inner.writes and inner.function
            )
            return UnknownOutcomeError(
                f"{message} It stopped while {names} was running: that change may or may "
                "not have happened." + self._so_far(),
                next_step="Do not run the program again: check whether the change happened first.",
            )
        return ConstructionError(message + self._so_far(), next_step=next_step)

    def _raised(self, exc: Any, settings: Any) -> Exception:
        kind = exc.display("type-msg").split(":", 1)[0]
        limit = {
            "TimeoutError": f"The program computed for longer than {settings.max_cpu_seconds:g} s, "
            "its CPU time limit.",
            "MemoryError": f"The program used more than {settings.max_memory_mb} MB, "
            "its memory limit.",
            "RecursionError": f"The program nested calls more than {settings.max_recursion} "
            "deep, its recursion limit.",
        }.get(kind)
        if limit is not None:
            return self._failure(limit, "Do less in one program: loop less, keep less in memory.")
        return self._failure(
            f"The program raised {_located(exc)}",
            "Fix the code (or catch the exception) and run it again.",
        )


async def _host_only(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover
    """Stands for every tool in the sandbox's modules: calls are answered by
    :meth:`Program._start`, never by running this."""
    raise AssertionError("tool calls of a program are answered by the host")


def _raise(exc_type: str, message: str) -> dict[str, Any]:
    return {"exc_type": exc_type, "message": message}


def _parameters(function: Function) -> list[str]:
    properties = function.spec.input_schema.get("properties")
    return list(properties) if isinstance(properties, dict) else []


def _outcome(envelope: Envelope) -> str:
    if envelope.error is not None:
        return envelope.error.kind.value
    return envelope.status.value


def _located(exc: Any) -> str:
    """``TypeError: ... (line 3, column 5: `x = f(1)`)`` from a sandbox error."""
    text = str(exc.display("type-msg"))
    if len(text) > MAX_RAISED_CHARS:
        text = f"{text[:MAX_RAISED_CHARS]}... ({len(text):,} characters)"
    frames = [f for f in exc.traceback() if f.filename.endswith("program.py")] or list(
        exc.traceback()
    )
    if frames:
        frame = frames[-1]
        where = f"line {frame.line}, column {frame.column}"
        source = (frame.source_line or "").strip()
        text += f" ({where}" + (f": `{source[:120]}`" if source else "") + ")"
    return text
