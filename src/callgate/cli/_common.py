"""Plumbing shared by the commands: input parsing, stores, exit codes, the CLI's errors
and text made safe to print.

Exit codes, the same for every command:

- 0 (:data:`EXIT_OK`): done; a call's Envelope is ok (or a task was started), a
  run completed.
- 1 (:data:`EXIT_FAILED`): what was asked failed: a call's Envelope is an
  error, a run failed. The output says why.
- 2 (:data:`EXIT_CLI_ERROR`): the CLI itself could not run (bad option or
  config, unreachable store, unreadable ``--args`` file): one line on stderr.
- 3 (:data:`EXIT_WAITING`): nothing failed, but it waits for a human: a call
  parked for approval or input, a run waiting for an approval.
- 4 (:data:`EXIT_STOPPED`): a run was stopped by one of its limits (turns, tool
  calls, tokens, wall time) before the model answered; the output names the limit.
- 130 (:data:`EXIT_INTERRUPTED`): stopped with Ctrl-C; ``eval run`` still
  prints and writes the result of the runs that ended.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from callgate.errors import RuntimeFailure

if TYPE_CHECKING:
    from rich.console import Console

    from callgate.runtime.gate import Gate

# The command modules import only typer and this package at their top: what a
# command needs (the gate, the store's SQLAlchemy, the MCP SDK, rich) is
# imported when it runs, so ``callgate --help`` starts in a fraction of the time.

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CLI_ERROR = 2
EXIT_WAITING = 3
EXIT_STOPPED = 4
EXIT_INTERRUPTED = 130


class CliError(RuntimeFailure):
    """The CLI cannot do what was asked; the message is shown as is."""


# Options shared by the commands -------------------------------------------------
DiscoveryOption = Annotated[
    str | None,
    typer.Option(
        "--discovery",
        metavar="MODE",
        help="How the model sees the tools: direct (every tool), search (the meta-tools "
        "search_tools, describe_tools and call_tool), or auto (search above the threshold). "
        "Default: the config's discovery table (auto).",
        show_default=False,
    ),
]
CodeModeOption = Annotated[
    bool,
    typer.Option(
        "--code-mode",
        help="Offer callgate.run_code: the model writes a short Python program, run in a "
        "sandbox, and every tool call in it passes the chain (as enabled = true in the code_mode table of the config).",
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        help="Store URL (sqlite:///file.db, postgresql://..., memory://); "
        "default: $CALLGATE_STORE, the config file's store, the user data directory.",
        show_default=False,
    ),
]
StoreOnlyConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config file; only its store is used.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a readable form.")]


def fail(message: str) -> NoReturn:
    """Print ``message`` as one line on stderr and exit with code 2."""
    first_line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    typer.echo(f"callgate: error: {first_line}", err=True)
    raise typer.Exit(EXIT_CLI_ERROR)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn the CLI's own failures into a one-line message and exit code 2."""
    try:
        yield
    except CliError as exc:
        fail(str(exc))
    except Exception as exc:
        message = _known_failure(exc)
        if message is None:
            raise
        fail(message)


def _known_failure(exc: Exception) -> str | None:
    """The one-line message for a failure of the config, an identity or the store.

    Their modules are looked up, not imported: an exception of a class whose
    module was never imported cannot be one of them.
    """
    config = sys.modules.get("callgate.config")
    if config is not None and isinstance(exc, config.ConfigError):
        return str(exc)
    identity = sys.modules.get("callgate.contract.identity")
    if identity is not None and isinstance(exc, identity.InvalidIdentity):
        # --principal "", a tenant with a control character
        return f"--principal/--tenant/--roles: {exc}"
    sql = sys.modules.get("sqlalchemy.exc")
    if isinstance(exc, OSError) or (sql is not None and isinstance(exc, sql.SQLAlchemyError)):
        return f"the store failed: {type(exc).__name__}: {exc}"
    return None


def console() -> Console:
    """A rich console on the current stdout (made per command, so tests can capture it)."""
    from rich.console import Console

    return Console(highlight=False)


def print_json(data: Any) -> None:
    """Write exactly one JSON document to stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def safe_url(url: str) -> str:
    """``url`` with any password masked, for messages."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me", "Zl", "Zp"})
_BLANK_LETTERS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0"})
"""Letters that render as nothing (Hangul fillers)."""


def visible(text: str) -> str:
    """``text`` with everything that could hide or disguise content escaped.

    Arguments come from a model; a terminal must not be made to hide, reorder or
    smuggle any part of what a person approves: control and format characters
    (ANSI escapes, bidi overrides), combining marks and variation selectors
    (which can carry hidden bytes), line/paragraph separators, unassigned and
    private-use code points, and blank letters are shown as ``\\uXXXX``.
    Newlines and ordinary non-ASCII text stay as they are.
    """
    out = []
    for ch in text:
        hidden = ch != "\n" and (
            unicodedata.category(ch) in _HIDDEN_CATEGORIES
            or ch in _BLANK_LETTERS
            or (ch != " " and ch.isspace())
        )
        out.append(
            (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}") if hidden else ch
        )
    return "".join(out)


@asynccontextmanager
async def opened(gate: Gate) -> AsyncIterator[Gate]:
    """Open ``gate`` (its store) and close it on exit, so audit records are flushed.

    Raises:
        CliError: the store cannot be opened.
    """
    try:
        await gate.open()
    except Exception as exc:  # connection refused, bad credentials, missing driver, ...
        hint = " (install callgate[postgres])" if isinstance(exc, ModuleNotFoundError) else ""
        raise CliError(
            f"cannot open the store {safe_url(gate.store_url)}: {type(exc).__name__}: {exc}{hint}"
        ) from None
    try:
        yield gate
    finally:
        await gate.aclose()


def split_list(value: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    if not value:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_attributes(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` (a string) or ``key:=json`` (a JSON value) pairs.

    Raises:
        CliError: an item has no ``=``, no key, or invalid JSON after ``:=``.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.rstrip(":"):
            raise CliError(f"--attr {item!r}: expected key=value or key:=json")
        if key.endswith(":"):
            key = key[:-1]
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise CliError(f"--attr {item!r}: not JSON after ':=' ({exc.msg})") from None
        else:
            out[key] = value
    return out


def read_arguments(value: str | None) -> str | None:
    """The raw ``--args`` text: inline, ``@file.json`` or ``-`` for stdin.

    The text is not parsed here: malformed JSON goes to the gate, which answers
    with a construction error as it would to a model.

    Raises:
        CliError: the file cannot be read.
    """
    if value is None:
        return None
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise CliError(f"--args {value}: cannot read {path} ({reason})") from None
    return value
