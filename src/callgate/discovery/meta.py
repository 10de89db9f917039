"""The meta-tools: search, describe, call; load a skill, read its files.

They are tools of the gate's own ``callgate`` toolbox, so every use of them
passes the governed chain (validated, rate-limited, audited) like any call:

- ``callgate.search_tools(query, limit)``: names and one line each, best
  first, of the tools (and skills) the caller may use;
- ``callgate.describe_tools(names)``: their full definitions;
- ``callgate.call_tool(name, arguments)``: runs one. The gate answers it
  itself (:meth:`callgate.Gate.call`): the named tool's call passes the whole
  chain as if called directly (scopes, policy, approvals, idempotency, audit),
  and its Envelope is the answer. A tool outside the caller's reach cannot be
  called this way any more than directly;
- ``callgate.load_skill(name)`` and ``callgate.read_skill_file(skill, path)``,
  where skills are configured: a skill's instructions, the definitions of the
  tools it names that the caller may use, and its files (never a file outside
  the skill's folder; its scripts are never run).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field

from callgate.contract import Toolbox, ToolContext, ToolSpec
from callgate.discovery.service import Discovery
from callgate.errors import ConstructionError
from callgate.runtime.suggest import close_matches, did_you_mean

__all__ = [
    "CALL_TOOL",
    "DESCRIBE_TOOLS",
    "LOAD_SKILL",
    "META_TOOLS",
    "READ_SKILL_FILE",
    "SEARCH_TOOLS",
    "add_meta_tools",
    "inner_call",
    "meta_tools",
]

SEARCH_TOOLS = "callgate.search_tools"
DESCRIBE_TOOLS = "callgate.describe_tools"
CALL_TOOL = "callgate.call_tool"
LOAD_SKILL = "callgate.load_skill"
READ_SKILL_FILE = "callgate.read_skill_file"
META_TOOLS = (SEARCH_TOOLS, DESCRIBE_TOOLS, CALL_TOOL, LOAD_SKILL, READ_SKILL_FILE)
"""Offered instead of the tools themselves when search is on (the skill tools
only where skills are configured)."""
MAX_DESCRIBE = 20


def meta_tools(discovery: Discovery) -> tuple[str, ...]:
    """The meta-tools a gate offers when search is on (the skill tools only
    where it has skills)."""
    if discovery.skills:
        return META_TOOLS
    return (SEARCH_TOOLS, DESCRIBE_TOOLS, CALL_TOOL)


class FoundTool(BaseModel):
    name: str
    summary: str


class SearchAnswer(BaseModel):
    tools: list[FoundTool]
    skills: list[FoundTool] = []
    next_step: str
    note: str | None = None


class ToolDefinition(BaseModel):
    name: str
    title: str | None = None
    description: str
    input_schema: dict[str, Any]
    risk: str


class DescribeAnswer(BaseModel):
    tools: list[ToolDefinition]
    not_found: list[str] = []
    next_step: str


class SkillAnswer(BaseModel):
    name: str
    description: str
    instructions: str
    files: list[str]
    tools: list[ToolDefinition]
    tools_not_available: list[str] = []
    next_step: str


class SkillFileAnswer(BaseModel):
    skill: str
    path: str
    text: str | None
    data_base64: str | None
    mime_type: str
    size: int
    truncated: bool


def definition(spec: ToolSpec, ctx: ToolContext) -> ToolDefinition:
    """A tool as the model sees it when described (its name as the caller calls it)."""
    return ToolDefinition(
        name=ctx.shown(spec.name),
        title=spec.title,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        risk=spec.risk.value,
    )


def add_meta_tools(box: Toolbox, discovery: Discovery) -> None:
    """Add the meta-tools to ``box`` (the gate's ``callgate`` toolbox)."""

    def reachable(ctx: ToolContext) -> dict[str, ToolSpec]:
        return {
            spec.name: spec
            for spec in discovery.registry.specs(ctx.principal)
            if spec.toolbox != box.name
        }

    def full_name(name: str, ctx: ToolContext) -> str:
        return ctx.names.full(name) or name

    @box.tool(read_only=True, open_world=False, title="Search the tools")
    async def search_tools(
        query: Annotated[str, Field(min_length=1, max_length=1000)],
        ctx: ToolContext,
        limit: Annotated[int, Field(ge=1, le=100)] = 5,
    ) -> SearchAnswer:
        """Find the tools for a task among all the tools you may use, best first.

        Use it first whenever you need a tool you do not see: describe what you want
        to do in plain words (any language), e.g. "roll back a failed deploy" or
        "send an email to a customer". It returns names with one line each; then call
        describe_tools with the names you want, to get their parameters.

        Args:
            query: What you want to do, in a few words.
            limit: How many results (default 5, at most 20 unless configured).
        """
        found = await discovery.search(ctx.principal, query, limit=limit)  # max_limit at most
        tools = [
            FoundTool(name=ctx.shown(hit.document.name), summary=hit.document.summary)
            for hit in found.hits
            if hit.document.kind == "tool"
        ]
        skills = [
            FoundTool(name=hit.document.name, summary=hit.document.summary)
            for hit in found.hits
            if hit.document.kind == "skill"
        ]
        if tools or skills:
            step = (
                f"Call {ctx.shown(DESCRIBE_TOOLS)} with the names you need to see their "
                f"parameters, then {ctx.shown(CALL_TOOL)} to run one."
            )
            if skills:
                step += f" A skill holds instructions for a whole task: {ctx.shown(LOAD_SKILL)}."
        else:
            step = "Nothing matched: search again with other words (what the tool does, not how)."
        return SearchAnswer(tools=tools, skills=skills, next_step=step, note=found.note)

    @box.tool(read_only=True, open_world=False, title="Describe tools")
    async def describe_tools(
        names: Annotated[list[str], Field(min_length=1, max_length=MAX_DESCRIBE)],
        ctx: ToolContext,
    ) -> DescribeAnswer:
        """Get the full definitions (description and parameters) of tools by name.

        Use it after search_tools, with names exactly as search_tools gave them, before
        calling a tool you have not used yet in this conversation.

        Args:
            names: Tool names from search_tools (at most 20).
        """
        reach = reachable(ctx)
        tools: list[ToolDefinition] = []
        missing: list[str] = []
        for name in dict.fromkeys(names):
            spec = reach.get(full_name(name, ctx))
            if spec is None:
                missing.append(name)
            else:
                tools.append(definition(spec, ctx))
        step = f"Call a tool with {ctx.shown(CALL_TOOL)}(name=..., arguments={{...}})."
        if missing:
            shown = [ctx.shown(name) for name in reach]
            hints = "".join(did_you_mean(name, shown) for name in missing[:3])
            step = (
                f"No tool {', '.join(repr(m) for m in missing)} of yours.{hints} "
                f"Use names exactly as {ctx.shown(SEARCH_TOOLS)} gave them. " + step
            )
        return DescribeAnswer(tools=tools, not_found=missing, next_step=step)

    @box.tool(open_world=True, title="Call a tool")
    async def call_tool(
        name: Annotated[str, Field(min_length=1, max_length=200)],
        ctx: ToolContext,
        arguments: dict[str, Any] | None = None,
    ) -> Any:
        """Run one tool by name with its arguments.

        Use it for tools found with search_tools and described with describe_tools:
        pass the tool's name and an object of its arguments. The answer is the tool's
        own result (or its error, which says what to fix).

        Args:
            name: The tool's name, as search_tools gave it.
            arguments: The tool's arguments, as its definition describes them.
        """
        # Reached only when the gate could not answer it as the named tool's call
        # (callgate.Gate.call does, for every well-formed call).
        raise ConstructionError(
            f"{ctx.shown(CALL_TOOL)} cannot run {name!r} here.",
            next_step="Call the tool directly by its name.",
        )

    if not discovery.skills:
        return

    def skill_named(name: str, ctx: ToolContext) -> Any:
        skill = discovery.skills.get(name)
        if skill is None:
            raise ConstructionError(
                f"No skill {name!r}." + did_you_mean(name, list(discovery.skills)),
                next_step=f"Find skills with {ctx.shown(SEARCH_TOOLS)}.",
            )
        return skill

    @box.tool(read_only=True, open_world=False, title="Load a skill")
    async def load_skill(
        name: Annotated[str, Field(min_length=1, max_length=64)], ctx: ToolContext
    ) -> SkillAnswer:
        """Load a skill: step-by-step instructions for a kind of task, the tools it
        uses and the files it comes with.

        Use it when search_tools lists a skill that fits the task, before starting
        the task. Follow its instructions; read its files with read_skill_file.

        Args:
            name: The skill's name, as search_tools gave it.
        """
        skill = skill_named(name, ctx)
        reach = reachable(ctx)
        tools = [definition(reach[tool], ctx) for tool in skill.tools if tool in reach]
        unavailable = [ctx.shown(tool) for tool in skill.tools if tool not in reach]
        step = f"Follow the instructions. Read a file with {ctx.shown(READ_SKILL_FILE)}."
        if tools:
            step += f" Its tools are described here: call them with {ctx.shown(CALL_TOOL)}."
        return SkillAnswer(
            name=skill.name,
            description=skill.description,
            instructions=skill.instructions,
            files=list(skill.files),
            tools=tools,
            tools_not_available=unavailable,
            next_step=step,
        )

    @box.tool(read_only=True, open_world=False, title="Read a skill's file")
    async def read_skill_file(
        skill: Annotated[str, Field(min_length=1, max_length=64)],
        path: Annotated[str, Field(min_length=1, max_length=500)],
        ctx: ToolContext,
    ) -> SkillFileAnswer:
        """Read one file of a loaded skill (a reference, an example, a template).

        Use it for the files load_skill listed; paths are relative to the skill.

        Args:
            skill: The skill's name.
            path: The file's path as load_skill listed it, e.g. references/checklist.md.
        """
        from callgate.discovery.skills import SkillError

        found = skill_named(skill, ctx)
        try:
            file = found.read(path)
        except SkillError as exc:
            hints = close_matches(path, found.files)
            raise ConstructionError(
                str(exc),
                next_step="Use one of the paths load_skill listed"
                + (f", like {hints[0]!r}." if hints else "."),
            ) from None
        return SkillFileAnswer(
            skill=found.name,
            path=file.path,
            text=file.text,
            data_base64=file.data_base64,
            mime_type=file.mime_type,
            size=file.size,
            truncated=file.truncated,
        )


def inner_call(arguments: Any) -> tuple[str, Any] | None:
    """The tool and arguments a well-formed ``callgate.call_tool`` call names; None
    for anything else (the call then runs as itself, and its validation or body
    says what is wrong)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping) or not set(arguments) <= {"name", "arguments"}:
        return None
    name, inner = arguments.get("name"), arguments.get("arguments")
    if not isinstance(name, str) or not name:
        return None
    if inner is None:
        inner = {}
    return (name, dict(inner)) if isinstance(inner, Mapping) else None
