"""What a command works with: its config, its store, the demo's data, and who it acts for.

One rule for every command that makes calls (``call``, ``serve``, ``run``): the
calls are made for one local principal (``serve`` with ``[auth]`` takes each
request's caller from its token instead), from
the command's options, else the config file's ``[principal]``, else user
``local``, no tenant (``acme`` with the demo tools: the demo config's
``[principal]`` names it), every scope the served tools, resources and prompts
require, and no roles. :func:`callgate.config.local_principal` is that rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callgate.cli._common import CliError, safe_url, split_list

if TYPE_CHECKING:
    from callgate.config import GateConfig, PrincipalDefaults
    from callgate.contract import Principal
    from callgate.runtime.gate import Gate

# Restated from callgate.config for the options' help, so that ``callgate --help``
# need not import it (and SQLAlchemy with it); a test holds them equal.
DEMO_TENANT = "acme"
"""The tenant of the local principal when the demo tools are served."""
DEFAULT_USER = "local"
DEMO_STATE_ENV = "CALLGATE_DEMO_STATE"
"""The file the demo tools keep their data in (read by ``callgate.demo``)."""


@dataclass(kw_only=True, frozen=True)
class Globals:
    """The root command's ``--store`` and ``--config`` (``callgate --store X call ...``)."""

    store: str | None = None
    config: Path | None = None


def root_options(ctx: typer.Context) -> Globals:
    """The root command's options (defaults when a command runs on its own, in tests)."""
    return ctx.obj if isinstance(ctx.obj, Globals) else Globals()


def config_path(ctx: typer.Context, config: Path | None) -> Path | None:
    """The command's ``--config``, else the root command's."""
    return config or root_options(ctx).config


def load(
    ctx: typer.Context,
    config: Path | None,
    *,
    demo_default: bool = True,
    discovery: str | None = None,
    code_mode: bool = False,
) -> GateConfig:
    """The config file named by the options, else the demo (or an empty) config;
    with ``discovery`` (``--discovery``), its disclosure mode replaced; with
    ``code_mode`` (``--code-mode``), programs enabled.

    Raises:
        ConfigError: the file cannot be used.
        CliError: ``discovery`` is not a mode.
    """
    from callgate.config import GateConfig, default_config, load_config

    path = config_path(ctx, config)
    if path is not None:
        loaded = load_config(path)
    else:
        loaded = default_config() if demo_default else GateConfig()
    if code_mode:
        enabled = dataclasses.replace(loaded.code_mode, enabled=True)
        loaded = dataclasses.replace(loaded, code_mode=enabled)
    if discovery is None:
        return loaded
    if discovery not in ("auto", "direct", "search"):
        raise CliError(f"--discovery must be auto, direct or search, not {discovery!r}")
    settings = dataclasses.replace(loaded.discovery, mode=discovery)  # type: ignore[arg-type]
    return dataclasses.replace(loaded, discovery=settings)


def store_option(ctx: typer.Context, store: str | None) -> str | None:
    """The command's ``--store``, else the root command's."""
    return store or root_options(ctx).store


def store_gate(ctx: typer.Context, store: str | None, config: Path | None) -> Gate:
    """A gate on the store the options name, serving no tools, for the commands
    that only read or write the store (``audit``, ``approvals``): no toolbox is
    imported (no tool code runs) and no secret is read; ``--config`` gives the store.

    Raises:
        ConfigError: the config file or the store URL cannot be used.
    """
    cfg = load(ctx, config, demo_default=False)
    return dataclasses.replace(cfg, toolboxes=(), secrets={}).build_gate(store_option(ctx, store))


def demo_state_file(store_url: str) -> Path | None:
    """Where the demo keeps its data for the store ``store_url``.

    A SQLite file gets ``<name>.demo-state.json`` beside it; another
    persistent store one file per URL in the user data directory; an
    in-memory store none (its approvals die with the process, so should the
    demo's data).
    """
    import platformdirs
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if store_url in ("memory:", "memory://"):
        return None
    try:
        url = make_url(store_url)
    except ArgumentError:
        return None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return None
        db = Path(url.database).expanduser()
        return db.with_name(f"{db.name}.demo-state.json")
    digest = hashlib.sha256(store_url.encode()).hexdigest()[:12]
    return platformdirs.user_data_path("callgate", appauthor=False) / f"demo-state-{digest}.json"


@contextmanager
def shared_demo_state(store_url: str) -> Iterator[None]:
    """Set ``$CALLGATE_DEMO_STATE`` (unless set) while the command runs.

    One ``callgate call`` per process would otherwise start from freshly seeded
    data each time: a budget set by one command would be unknown to the next.
    The variable is removed again afterwards, for callers running commands in
    process (tests).
    """
    path = demo_state_file(store_url)
    if path is None or os.environ.get(DEMO_STATE_ENV):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ[DEMO_STATE_ENV] = str(path)
    try:
        yield
    finally:
        os.environ.pop(DEMO_STATE_ENV, None)


def demo_state_if(serves_demo: bool, store_url: str) -> AbstractContextManager[None]:
    """:func:`shared_demo_state` when the demo tools are served, else nothing."""
    return shared_demo_state(store_url) if serves_demo else nullcontext()


# Who the calls are made for ------------------------------------------------------
UserOption = Annotated[
    str | None,
    typer.Option(
        "--principal",
        metavar="USER",
        help="The user every call is made for; default: principal.user in the config "
        f"file, else {DEFAULT_USER}.",
        show_default=False,
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        metavar="TENANT",
        help="The principal's tenant; default: principal.tenant in the config "
        f"file, else {DEMO_TENANT} with the demo tools, else none.",
        show_default=False,
    ),
]
ScopesOption = Annotated[
    str | None,
    typer.Option(
        "--scopes",
        metavar="a,b",
        help="The principal's scopes, comma-separated; default: principal.scopes in "
        "the config file, else every scope the tools, resources and prompts require.",
        show_default=False,
    ),
]
RolesOption = Annotated[
    str | None,
    typer.Option(
        "--roles",
        metavar="a,b",
        help="The principal's roles, comma-separated (policies test them, e.g. the demo's "
        "rollback needs oncall); default: principal.roles in the config file, else none.",
        show_default=False,
    ),
]


def principal_from_options(
    gate: Gate,
    defaults: PrincipalDefaults,
    *,
    user: str | None,
    tenant: str | None,
    scopes: str | None,
    roles: str | None,
    attributes: Mapping[str, Any] | None = None,
) -> Principal:
    """:func:`callgate.config.local_principal` from a command's options, whose
    ``--scopes`` and ``--roles`` are comma-separated (see the module's rule).

    Args:
        gate: the gate the calls go to (its tools, resources and prompts give the
            default scopes).
        defaults: the config file's ``[principal]``.
        user: ``--principal``.
        tenant: ``--tenant``.
        scopes: ``--scopes``.
        roles: ``--roles``.
        attributes: ``--attr``'s, added to (and winning over) the config's.

    Raises:
        InvalidIdentity: a value is no identity (empty, control characters);
            ``cli_errors`` shows it in one line.
    """
    from callgate.config import local_principal

    return local_principal(
        gate,
        defaults,
        user=user,
        tenant=tenant,
        scopes=split_list(scopes) if scopes is not None else None,
        roles=split_list(roles) if roles is not None else None,
        attributes=attributes,
    )


def describe_principal(who: Principal) -> str:
    """``who`` in one line, for startup messages."""
    tenant = f" of tenant {who.tenant}" if who.tenant else " (no tenant)"
    scopes = ", ".join(sorted(who.scopes)) or "none"
    roles = ", ".join(sorted(who.roles)) or "none"
    return f"{who.user}{tenant}; scopes: {scopes}; roles: {roles}"


def startup_summary(gate: Gate, who: Principal) -> list[str]:
    """What a long-running command serves: the store, the principal, the toolboxes."""
    counts = Counter(spec.toolbox for spec in gate.tools())
    boxes = ", ".join(f"{name} ({n} tool{'s' if n != 1 else ''})" for name, n in counts.items())
    return [
        f"store: {safe_url(gate.store_url)}",
        f"principal: {describe_principal(who)}",
        f"toolboxes: {boxes}",
    ]


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config file (toolboxes, policy, limits, context, principal: "
        "docs/config.md); default: the demo tools.",
        show_default=False,
    ),
]
