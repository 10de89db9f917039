"""The code-mode meta-tools of the gate's ``callgate`` toolbox.

- ``callgate.run_code(code)``: runs a short Python program in the sandbox
  (:class:`~callgate.codemode.program.Program`); every tool call inside it
  passes the governed chain.
- ``callgate.code_functions()``: the stubs of the functions the caller's
  programs may call (the agent loop also puts them in ``run_code``'s
  description, so a model there needs no extra turn).

``run_code`` itself is classified ``read``: the program touches nothing but
through tool calls, each decided on its own (approving a program approves none
of its calls). Its tools are the caller's, minus callgate's own: a program
cannot run a program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, Field

from callgate.codemode.program import RUN_CODE, Program, RunAnswer
from callgate.codemode.sandbox import Sandbox
from callgate.codemode.stubs import Catalogue
from callgate.contract import Principal, Toolbox, ToolContext
from callgate.errors import ConstructionError

if TYPE_CHECKING:
    from callgate.runtime.gate import Gate

__all__ = ["CODE_FUNCTIONS", "RUN_CODE", "add_code_tools", "catalogue_for", "run_code_description"]

CODE_FUNCTIONS = "callgate.code_functions"

_HOW = """Run a short Python program that calls tools, and get back only what it returns
and prints.

Use it for work of several steps over data: aggregate, filter then act, join two
tools' results, page to the end, summarize. Intermediate data stays in the program
instead of this conversation. The tools are async functions in modules named after
their toolboxes, already imported: `r = await ops.deploy_status(deploy_id="D-1")`.
Pass keyword arguments only. A tool's error is raised as an exception whose text
starts with its kind (ValueError for bad arguments, PermissionError, TimeoutError,
RuntimeError); catch it to go on. The value of the last expression is the result.
The sandbox has no files, network or environment; a subset of Python: no classes
that inherit, no third-party imports."""


def run_code_description(stubs: str | None = None) -> str:
    """``run_code``'s description, with the caller's function stubs when given."""
    if stubs is None:
        return _HOW + f"\n\nThe functions you may call: call {CODE_FUNCTIONS} first."
    return _HOW + "\n\nThe functions you may call:\n\n" + stubs


def catalogue_for(gate: Gate, principal: Principal) -> Catalogue:
    """The functions ``principal``'s programs may call: its tools, not callgate's own."""
    return Catalogue.of(gate.tools(principal, builtin=False))


Code = Annotated[str, Field(min_length=1)]


class CodeFunctions(BaseModel):
    stubs: str
    next_step: str


def add_code_tools(box: Toolbox, gate: Gate, sandbox: Sandbox) -> None:
    """Add ``run_code`` and ``code_functions`` to ``box`` (the gate's own)."""
    settings = sandbox.settings
    max_code = settings.max_code_kb * 1024

    @box.tool(
        description=run_code_description(),
        title="Run a program",
        risk="read",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        timeout=settings.max_seconds + 5,
    )
    async def run_code(code: Code, ctx: ToolContext) -> RunAnswer:
        """Run a program (see the description).

        Args:
            code: The Python program. Its last expression's value is the result.
        """
        if len(code) > max_code:
            raise ConstructionError(
                f"The program is {len(code):,} characters long; at most {max_code:,} are taken.",
                next_step="Write a shorter program: loop over data instead of spelling it out.",
            )
        catalogue = catalogue_for(gate, ctx.principal)
        return await Program(gate, ctx, sandbox, catalogue, code).run()

    @box.tool(read_only=True, open_world=False, title="Functions for programs")
    async def code_functions(ctx: ToolContext) -> CodeFunctions:
        """List the functions a program run by run_code may call, with their
        parameters and one line each.

        Use it before writing a program for run_code.
        """
        return CodeFunctions(
            stubs=catalogue_for(gate, ctx.principal).stubs(),
            next_step=f"Write a program that awaits these functions and run it with "
            f"{ctx.shown(RUN_CODE)}.",
        )
