"""Eval suites: what a task asks, how a scripted model answers it, what must happen.

A suite is one TOML file (the format of callgate's config, read by the standard
library, with comments and no implicit typing: ``no`` stays a string)::

    [suite]
    name = "demo"
    config = "callgate.toml"     # optional; default: the demo config
    check_tools = []             # tools only the state checks call; the model is not offered them
    [suite.principal]            # optional; who the runs act for
    roles = ["oncall"]

    [[tasks]]
    id = "budget-small-raise"
    prompt = "Set Autumn Sale_Search to 1,500 a day."
    split = "dev"                # dev (default) or heldout
    tags = ["campaigns"]
    script = [                   # the scripted model's turns, in order
      { call = "ops.budget_change_preview", args = { campaign_id = "C-101", new_daily_budget = 1500 } },
      { call = "ops.budget_change_apply", args = { preview_id = "${ops.budget_change_preview.preview_id}" } },
      { reply = "Done: 1,500 a day." },
    ]
    [tasks.expect]
    status = "completed"         # how the run must end (completed | waiting_approval | ...)
    calls = [{ tool = "ops.budget_change_apply" }]   # must be called (args: a subset)
    not_called = ["ops.send_email"]
    allowed = ["ops.campaigns_find"]   # may be called without counting as a wrong tool
    answer_contains = ["1,500"]
    answer_regex = "(?i)done"
    state = [{ tool = "ops.campaigns_find", args = { query = "Autumn Sale_Search" },
               path = "0.daily_budget", equals = 1500 }]

A ``${tool.path}`` string in a scripted call's arguments is read, when the turn
is made, from the last successful result of ``tool`` the model was sent: as a
model would copy a preview id from what it read.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from callgate.errors import InvalidArgument

__all__ = [
    "CallCheck",
    "Expect",
    "PrincipalSpec",
    "StateCheck",
    "Step",
    "Suite",
    "Task",
    "load_suite",
]

Split = Literal["dev", "heldout"]
RunEnd = Literal["completed", "waiting_approval", "stopped", "failed"]


# The file's shape (pydantic at the boundary) ------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Call(_Strict):
    call: str
    args: dict[str, Any] = Field(default_factory=dict)


class _Step(_Strict):
    call: str | None = None
    args: dict[str, Any] | None = None
    calls: list[_Call] | None = None
    reply: str | None = None
    text: str = ""


class _CallCheck(_Strict):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class _StateCheck(_Strict):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    path: str = ""
    equals: Any = None
    contains: str | None = None


class _Expect(_Strict):
    status: RunEnd = "completed"
    calls: list[_CallCheck] = Field(default_factory=list)
    not_called: list[str] = Field(default_factory=list)
    allowed: list[str] = Field(default_factory=list)
    answer_contains: list[str] = Field(default_factory=list)
    answer_regex: str | None = None
    state: list[_StateCheck] = Field(default_factory=list)


class _Principal(_Strict):
    user: str | None = None
    tenant: str | None = None
    scopes: list[str] | None = None
    roles: list[str] | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


class _Task(_Strict):
    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    split: Split = "dev"
    tags: list[str] = Field(default_factory=list)
    script: list[_Step] = Field(default_factory=list)
    expect: _Expect = Field(default_factory=_Expect)
    principal: _Principal | None = None


class _SuiteHead(_Strict):
    name: str = "suite"
    config: str | None = None
    system: str | None = None
    check_tools: list[str] = Field(default_factory=list)
    principal: _Principal = Field(default_factory=_Principal)


# What the runner works with ------------------------------------------------------
@dataclass(kw_only=True, frozen=True)
class Step:
    """One scripted turn: tool calls (name, arguments), or a text reply."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    reply: str | None = None
    text: str = ""


@dataclass(kw_only=True, frozen=True)
class CallCheck:
    """A call that must be made: ``tool`` with at least ``args``."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True)
class StateCheck:
    """After the run, call ``tool`` with ``args`` (through the gate, as the run's
    principal); the payload at ``path`` (dotted, list indexes as numbers) must
    equal ``equals`` or, as JSON text, contain ``contains``."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""
    equals: Any = None
    contains: str | None = None


@dataclass(kw_only=True, frozen=True)
class Expect:
    """What a successful run of a task looks like."""

    status: RunEnd = "completed"
    calls: tuple[CallCheck, ...] = ()
    not_called: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    answer_contains: tuple[str, ...] = ()
    answer_regex: str | None = None
    state: tuple[StateCheck, ...] = ()

    @property
    def expected_tools(self) -> frozenset[str]:
        """The tools a run may call without a wrong-tool count."""
        return frozenset({c.tool for c in self.calls} | set(self.allowed))


@dataclass(kw_only=True, frozen=True)
class PrincipalSpec:
    """Who runs act for; ``None`` leaves the config's default (see ``local_principal``)."""

    user: str | None = None
    tenant: str | None = None
    scopes: tuple[str, ...] | None = None
    roles: tuple[str, ...] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True)
class Task:
    """One eval task."""

    id: str
    prompt: str
    split: Split = "dev"
    tags: tuple[str, ...] = ()
    script: tuple[Step, ...] = ()
    expect: Expect = field(default_factory=Expect)
    principal: PrincipalSpec | None = None


@dataclass(kw_only=True, frozen=True)
class Suite:
    """A named list of tasks, the config they run against and who they run as.

    ``config`` is a config file path (None: the demo config). ``check_tools``
    are tools only the tasks' state checks call (a benchmark's final-database
    hash): the runs' model is not offered them.
    """

    name: str
    tasks: tuple[Task, ...]
    config: Path | None = None
    system: str | None = None
    principal: PrincipalSpec = field(default_factory=PrincipalSpec)
    source: Path | None = None
    check_tools: tuple[str, ...] = ()

    def select(self, *, split: str = "all", tags: Sequence[str] = ()) -> Suite:
        """The tasks of ``split`` (``dev``, ``heldout`` or ``all``) having every tag in ``tags``."""
        chosen = tuple(
            t
            for t in self.tasks
            if (split == "all" or t.split == split) and set(tags) <= set(t.tags)
        )
        return Suite(
            name=self.name,
            tasks=chosen,
            config=self.config,
            system=self.system,
            principal=self.principal,
            source=self.source,
            check_tools=self.check_tools,
        )


def _principal(raw: _Principal) -> PrincipalSpec:
    return PrincipalSpec(
        user=raw.user,
        tenant=raw.tenant,
        scopes=tuple(raw.scopes) if raw.scopes is not None else None,
        roles=tuple(raw.roles) if raw.roles is not None else None,
        attributes=dict(raw.attributes),
    )


def _step(raw: _Step, where: str) -> Step:
    given = [k for k in ("call", "calls", "reply") if getattr(raw, k) is not None]
    if len(given) != 1:
        raise InvalidArgument(f"{where}: a step has exactly one of call, calls or reply")
    if raw.call is not None:
        return Step(calls=((raw.call, raw.args or {}),), text=raw.text)
    if raw.calls is not None:
        return Step(calls=tuple((c.call, c.args) for c in raw.calls), text=raw.text)
    return Step(reply=raw.reply)


def _task(raw: _Task, where: str) -> Task:
    e = raw.expect
    steps = tuple(_step(s, f"{where}: script[{i}]") for i, s in enumerate(raw.script))
    return Task(
        id=raw.id,
        prompt=raw.prompt,
        split=raw.split,
        tags=tuple(raw.tags),
        script=steps,
        expect=Expect(
            status=e.status,
            calls=tuple(CallCheck(tool=c.tool, args=c.args) for c in e.calls),
            not_called=tuple(e.not_called),
            allowed=tuple(e.allowed),
            answer_contains=tuple(e.answer_contains),
            answer_regex=e.answer_regex,
            state=tuple(
                StateCheck(
                    tool=s.tool, args=s.args, path=s.path, equals=s.equals, contains=s.contains
                )
                for s in e.state
            ),
        ),
        principal=_principal(raw.principal) if raw.principal is not None else None,
    )


def _first_error(exc: pydantic.ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top)"
    return f"{loc}: {err['msg'].lower()}"


def parse_suite(data: Mapping[str, Any], *, source: Path | None = None) -> Suite:
    """A suite from the parsed TOML ``data``.

    Raises:
        InvalidArgument: a key is unknown or missing, a value has the wrong type,
            two tasks share an id; the message names the task and the field.
    """
    label = str(source) if source is not None else "suite"
    unknown = set(data) - {"suite", "tasks"}
    if unknown:
        raise InvalidArgument(
            f"{label}: unknown table {sorted(unknown)[0]!r} (expected suite, tasks)"
        )
    try:
        head = _SuiteHead.model_validate(data.get("suite", {}))
    except pydantic.ValidationError as exc:
        raise InvalidArgument(f"{label}: suite.{_first_error(exc)}") from None
    raw_tasks = data.get("tasks", [])
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise InvalidArgument(f"{label}: no tasks (add [[tasks]] tables)")
    tasks: list[Task] = []
    seen: set[str] = set()
    for index, item in enumerate(raw_tasks):
        name = item.get("id") if isinstance(item, dict) else None
        where = f"{label}: task {name!r}" if isinstance(name, str) else f"{label}: tasks[{index}]"
        try:
            raw = _Task.model_validate(item)
        except pydantic.ValidationError as exc:
            raise InvalidArgument(f"{where}: {_first_error(exc)}") from None
        if raw.id in seen:
            raise InvalidArgument(f"{where}: id: another task has this id")
        seen.add(raw.id)
        tasks.append(_task(raw, where))
    config = None
    if head.config:
        config = Path(head.config).expanduser()
        if not config.is_absolute() and source is not None:
            config = source.parent / config
    return Suite(
        name=head.name,
        tasks=tuple(tasks),
        config=config,
        system=head.system,
        principal=_principal(head.principal),
        source=source,
        check_tools=tuple(head.check_tools),
    )


def load_suite(path: str | Path) -> Suite:
    """Read the suite file at ``path``.

    Raises:
        InvalidArgument: the file cannot be read, is not TOML, or is not a suite.
    """
    source = Path(path).expanduser()
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"{source}: cannot read the suite ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"{source}: the suite is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{source}: invalid TOML: {exc}") from None
    return parse_suite(data, source=source)
