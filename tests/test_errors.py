"""One exception root: every exception callgate raises is a ``CallgateError``, in
the branch of its kind, and still an instance of the builtin it was before."""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import re
from datetime import timedelta
from pathlib import Path

import pytest

import callgate
from callgate import CallgateError, Gate, Limits, RuntimeFailure, Toolbox, ToolError, UserError
from callgate import errors as errors_module
from callgate.contract import DuplicateTool, HandleKind, spec_from_function
from callgate.errors import InvalidArgument, InvalidDefinition
from callgate.runtime.runner import NotStarted

# Each public exception: the branch it belongs to, and the builtin it was (and stays).
EXPECTED: dict[str, tuple[type[CallgateError], type[Exception]]] = {
    "InvalidArgument": (UserError, ValueError),
    "InvalidDefinition": (UserError, TypeError),
    "InvalidToolName": (UserError, ValueError),
    "InvalidIdentity": (UserError, ValueError),
    "DuplicateTool": (UserError, ValueError),
    "DuplicateResource": (UserError, ValueError),
    "DuplicatePrompt": (UserError, ValueError),
    "MissingPromptArgument": (UserError, ValueError),
    "DuplicateToolbox": (UserError, ValueError),
    "PolicyError": (UserError, ValueError),
    "BadCursor": (UserError, ValueError),
    "ConfigError": (UserError, ValueError),
    "UpstreamConfigError": (UserError, ValueError),
    "AuthConfigError": (UserError, ValueError),
    "SkillError": (UserError, ValueError),
    "SkillFileError": (UserError, ValueError),
    "EmbeddingsUnavailable": (UserError, Exception),
    "CodeModeUnavailable": (UserError, Exception),
    "MissingCredentials": (UserError, ValueError),
    "ScriptExhausted": (UserError, RuntimeError),
    "ApprovalError": (RuntimeFailure, Exception),
    "PolicyEvaluationError": (RuntimeFailure, RuntimeError),
    "Unresponsive": (RuntimeFailure, Exception),
    "NotStarted": (RuntimeFailure, TimeoutError),
    "Overran": (RuntimeFailure, TimeoutError),
    "StoreUnavailable": (RuntimeFailure, Exception),
    "ModelError": (RuntimeFailure, Exception),
    "CliError": (RuntimeFailure, Exception),
    "UpstreamUnavailable": (RuntimeFailure, Exception),
    "UpstreamLost": (RuntimeFailure, Exception),
    "TokenError": (RuntimeFailure, Exception),
    "InvalidToken": (RuntimeFailure, Exception),
    "Unauthenticated": (RuntimeFailure, Exception),
    "DemoStateError": (RuntimeFailure, RuntimeError),
    "ConstructionError": (ToolError, Exception),
    "PermissionDenied": (ToolError, Exception),
    "BusinessStateError": (ToolError, Exception),
    "WaitingForApproval": (ToolError, Exception),
    "TransientError": (ToolError, Exception),
    "UnknownOutcomeError": (ToolError, Exception),
    "UnrecoverableError": (ToolError, Exception),
    "ClientCannot": (ToolError, Exception),
    "InputRequired": (ToolError, Exception),
    "UnknownHandle": (ToolError, Exception),
    "HandleConflict": (ToolError, Exception),
}

# Control flow inside one module, never seen by a caller (see docs/errors.md).
LEFT_OUT = {
    "_Stop",
    "_NotStrict",
    "Unsupported",
    "_ApiError",
    "RefError",
    "IssuerUnavailable",
    # Code mode's own, raised and caught inside callgate.codemode.program.
    "_Limit",
    "ValueRefused",
    # The web console's own, raised by a page handler and rendered as its error page.
    "ConsoleError",
    # The tau2 converter's own: a value TOML cannot hold, caught to skip the task.
    "_NotToml",
}

BRANCHES = {"CallgateError", "UserError", "RuntimeFailure", "ToolError"}


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(callgate.__path__, "callgate."):
        # The Alembic environment runs migrations when imported; __main__ runs the CLI.
        if info.name.startswith("callgate.store.migrations") or info.name == "callgate.__main__":
            continue
        names.append(info.name)
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a callgate module, by name."""
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                assert value.__name__ not in found, f"two exceptions named {value.__name__}"
                found[value.__name__] = value
    return found


CLASSES = _exception_classes()


def test_every_exception_is_in_the_tree_or_deliberately_left_out() -> None:
    assert set(CLASSES) == set(EXPECTED) | BRANCHES | LEFT_OUT
    for name in LEFT_OUT:
        assert not issubclass(CLASSES[name], CallgateError), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_exception_is_in_its_branch_and_keeps_its_builtin(name: str) -> None:
    cls = CLASSES[name]
    branch, builtin = EXPECTED[name]
    assert issubclass(cls, CallgateError)
    assert issubclass(cls, branch)
    assert issubclass(cls, builtin)
    others = {UserError, RuntimeFailure, ToolError} - {branch}
    assert not any(issubclass(cls, other) for other in others)


def test_the_branches_are_exported_from_the_package() -> None:
    for name in ("CallgateError", "UserError", "RuntimeFailure", "ToolError"):
        assert name in callgate.__all__
        assert getattr(callgate, name) is CLASSES[name]


def _drawn_tree() -> dict[str, tuple[str, str | None]]:
    """The tree at the top of errors.py: each class's drawn parent and bracketed builtin."""
    assert errors_module.__doc__ is not None
    drawn: dict[str, tuple[str, str | None]] = {}
    stack: list[tuple[int, str]] = []
    for line in errors_module.__doc__.splitlines():
        match = re.match(r"^\s*(?:[│ ]*[├└]── )?(\w+)(?: \[(\w+)\])?(\s|$)", line)
        if match is None or match.group(1) not in CLASSES:
            continue
        depth = match.start(1)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            drawn[match.group(1)] = (stack[-1][1], match.group(2))
        stack.append((depth, match.group(1)))
    return drawn


def test_the_drawn_tree_is_the_real_one() -> None:
    drawn = _drawn_tree()
    assert set(drawn) == set(EXPECTED) | (BRANCHES - {"CallgateError"})
    for name, (parent, builtin) in drawn.items():
        assert CLASSES[parent] in CLASSES[name].__bases__, (name, parent)
        if builtin is not None:
            assert getattr(builtins, builtin) in CLASSES[name].__bases__, (name, builtin)


def _tree_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "CallgateError")
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start][indent:]]
    for line in lines[start + 1 :]:
        if not re.match(r"\s*[│ ]*[├└]── ", line):
            break
        block.append(line[indent:])
    return block


def test_the_docs_show_the_drawn_tree() -> None:
    assert errors_module.__doc__ is not None
    docs = (Path(__file__).parents[1] / "docs" / "errors.md").read_text(encoding="utf-8")
    assert _tree_block(docs) == _tree_block(errors_module.__doc__)
    assert len(_tree_block(docs)) == len(EXPECTED) + len(BRANCHES)


def test_a_duplicate_tool_is_caught_as_before_and_as_a_user_error() -> None:
    box = Toolbox("ops")

    @box.tool
    def ping() -> str:
        return "pong"

    for caught in (ValueError, UserError, CallgateError):
        with pytest.raises(caught, match=r"already has a tool 'ops\.ping'"):
            box.add(ping)
    with pytest.raises(DuplicateTool):
        box.add(ping)


def test_bad_limits_and_gate_arguments_are_user_errors_and_value_errors() -> None:
    with pytest.raises(InvalidArgument, match="max_attempts") as info:
        Limits(max_attempts=0)
    assert isinstance(info.value, ValueError)
    with pytest.raises(UserError, match="both as context and as secrets") as clash:
        Gate(store="memory://", context={"key": "a"}, secrets={"key": "b"})
    assert isinstance(clash.value, ValueError)
    with pytest.raises(ValueError, match="prefix") as prefix:
        HandleKind(name="run", prefix="R", ttl=timedelta(hours=1), created_by="ops.start")
    assert isinstance(prefix.value, UserError)


def test_a_function_that_cannot_be_a_tool_is_a_type_error_and_a_user_error() -> None:
    def spread(*values: int) -> int:
        return sum(values)

    with pytest.raises(InvalidDefinition, match=r"\*args") as info:
        spec_from_function(spread, toolbox="ops")
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, UserError)


def test_a_timed_out_thread_wait_is_still_a_timeout_error() -> None:
    error = NotStarted("ops.slow")
    assert isinstance(error, TimeoutError)
    assert isinstance(error, RuntimeFailure)
    assert not isinstance(error, UserError)
