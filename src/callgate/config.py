"""The gate's configuration file: tools, policy, limits, trusted context, secrets
and the local principal, in TOML.

Example ``callgate.toml``::

    store = "sqlite:///callgate.db"
    toolboxes = ["callgate.demo:toolboxes", "./my_tools.py:ops"]

    [policy]
    default = "allow"

    [[policy.rules]]
    name = "big-budgets"
    effect = "require_approval"
    tools = ["ops.budget_change_apply"]
    when = "args.new_daily_budget > 50000"
    reason = "budgets above 50,000 need a human"

    [limits]
    default_timeout = 30

    [context]
    region = "eu-west-1"

    [secrets]
    ops_api_key = { env = "OPS_API_KEY" }

    [principal]
    user = "alice@acme.example"
    tenant = "acme"
    roles = ["oncall"]

    [mcp]
    tool_separator = "__"       # ops__deploy_status on the wire ("." for ops.deploy_status)
    unprefixed = ["conformance"]

Every key is described in docs/config.md. A toolbox reference is ``module:attr``
or ``path.py:attr``; ``attr`` names a ``Toolbox``, a list of them, or a
zero-argument callable returning either. Relative paths (of toolbox files and of
a SQLite ``store``) are relative to the config file, and modules are imported
with the config file's directory first on ``sys.path``. Where the store comes
from, first match wins: the ``--store`` option, ``$CALLGATE_STORE``, the file's
``store``, the user's data directory. ``[principal]`` is who ``callgate serve``,
``run`` and ``call`` act for when their options do not say (the rule is
:func:`local_principal`'s); ``[mcp]`` how ``callgate serve`` names the tools.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from callgate._refs import RefError, resolve_ref, toolboxes_from
from callgate.auth.settings import AuthConfigError, AuthSettings, parse_auth
from callgate.codemode.settings import CodeModeSettings, parse_code_mode
from callgate.contract import Principal, Toolbox
from callgate.demo._skills import DEMO_SKILLS
from callgate.discovery.settings import DiscoverySettings, parse_discovery
from callgate.discovery.skills import SkillError
from callgate.errors import InvalidArgument, UserError
from callgate.gateway import upstream_toolboxes
from callgate.gateway.settings import UpstreamConfigError, UpstreamSettings, parse_upstreams
from callgate.lint.settings import LintSettings, parse_lint
from callgate.ratelimit import RateLimits, parse_rate_limits
from callgate.runtime.gate import Gate
from callgate.runtime.limits import Limits
from callgate.runtime.policy import Policy, PolicyError, Rule
from callgate.store.urls import STORE_ENV, default_store_url, store_from_url

__all__ = [
    "ConfigError",
    "GateConfig",
    "McpConfig",
    "PrincipalDefaults",
    "default_config",
    "load_config",
    "local_principal",
]

DEMO_TOOLBOXES = "callgate.demo:toolboxes"
DEMO_POLICY = "callgate.demo:demo_policy"
DEMO_TENANT = "acme"
"""The tenant of the built-in demo config's ``[principal]``: the demo's data is acme's."""
DEFAULT_USER = "local"
"""The local principal's user when neither a command's options nor ``[principal]`` name one."""
_BUILTIN_LABEL = "<built-in demo config>"

_LIMIT_FIELDS = tuple(f.name for f in dataclasses.fields(Limits))
_LIMITS_ADAPTER: pydantic.TypeAdapter[Limits] = pydantic.TypeAdapter(Limits)


class ConfigError(UserError, ValueError):
    """The configuration cannot be used; the message names the file and the key."""


# The file's schema -------------------------------------------------------------
class _ApproversFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    roles: list[str] = []
    users: list[str] = []
    owner: str | None = None


class _RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    effect: Literal["allow", "deny", "require_approval", "auto_approve"]
    name: str | None = None
    when: str | None = None
    tools: list[str] | None = None
    risk: list[Literal["read", "write_idempotent", "write_high_risk"]] | None = None
    reason: str | None = None
    approved_by: Literal["another", "requester"] | None = None
    approvers: _ApproversFile | None = None


class _PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: Literal["allow", "deny", "require_approval"] = "allow"
    approvers: _ApproversFile | None = None
    rules: list[_RuleFile] = []


class _PrincipalFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    tenant: str | None = None
    scopes: list[str] | None = None
    roles: list[str] | None = None
    attributes: dict[str, Any] = {}


class _SecretFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str
    """The environment variable holding the secret (never the secret itself)."""


class _McpFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool_separator: str | None = None
    unprefixed: list[str] = []


class _ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str | None = None
    toolboxes: list[str] = []
    policy: _PolicyFile = _PolicyFile()
    limits: dict[str, Any] = {}
    context: dict[str, Any] = {}
    secrets: dict[str, _SecretFile] = {}
    principal: _PrincipalFile = _PrincipalFile()
    mcp: _McpFile = _McpFile()
    upstreams: list[Any] = []
    """Checked by :func:`callgate.gateway.settings.parse_upstreams`."""
    auth: dict[str, Any] | None = None  # checked by callgate.auth.parse_auth
    discovery: dict[str, Any] = {}  # checked by callgate.discovery.parse_discovery
    code_mode: dict[str, Any] = {}  # checked by callgate.codemode.parse_code_mode
    lint: dict[str, Any] = {}  # checked by callgate.lint.parse_lint


@dataclass(kw_only=True, frozen=True)
class McpConfig:
    """How ``callgate serve`` names the tools (the ``[mcp]`` table); the command
    line's ``--tool-separator`` and ``--unprefixed`` win over it.

    Args:
        tool_separator: between toolbox and tool on the wire (None: the
            server's default, ``__``).
        unprefixed: toolboxes whose tools are served by their bare names.
    """

    tool_separator: str | None = None
    unprefixed: tuple[str, ...] = ()


# The loaded configuration ------------------------------------------------------
@dataclass(kw_only=True, frozen=True)
class PrincipalDefaults:
    """Who the CLI's calls are made for when its options do not say (``[principal]``).

    ``None`` means "not set here": :func:`local_principal`'s default applies.
    """

    user: str | None = None
    tenant: str | None = None
    scopes: tuple[str, ...] | None = None
    roles: tuple[str, ...] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True)
class GateConfig:
    """Everything needed to build a :class:`~callgate.Gate`, validated.

    Toolbox references are imported only by :meth:`build_gate` (or
    :meth:`load_toolboxes`), so reading the store URL never runs tool code.

    Args:
        source: the file this came from (None for a config built in code).
        store: the store URL from the file, if any.
        toolboxes: ``module:attr`` / ``path.py:attr`` references.
        policy: the gate's policy.
        limits: the gate's limits.
        context: gate-wide trusted values.
        secrets: gate-wide trusted values that are credentials: key -> the
            environment variable holding it, read by :meth:`build_gate`.
        principal: who the CLI acts for unless its options say otherwise.
        mcp: how the MCP server names the tools.
        upstreams: MCP servers whose tools the gate serves (``[[upstreams]]``, :mod:`callgate.gateway`).
        auth: the access tokens ``callgate serve`` accepts (``[auth]``); None: none.
        rate_limits: per-principal and per-tool rate limits (``[limits.rate]``).
        discovery: tool search, disclosure and skills (``[discovery]``).
        code_mode: programs run by ``callgate.run_code`` (``[code_mode]``).
        lint: the rules ``callgate lint`` leaves out, per tool (``[lint]``).
    """

    source: Path | None = None
    store: str | None = None
    toolboxes: tuple[str, ...] = ()
    policy: Policy = field(default_factory=Policy)
    limits: Limits = field(default_factory=Limits)
    context: Mapping[str, Any] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    principal: PrincipalDefaults = field(default_factory=PrincipalDefaults)
    mcp: McpConfig = field(default_factory=McpConfig)
    upstreams: tuple[UpstreamSettings, ...] = ()
    auth: AuthSettings | None = None
    rate_limits: RateLimits = field(default_factory=RateLimits)
    discovery: DiscoverySettings = field(default_factory=DiscoverySettings)
    code_mode: CodeModeSettings = field(default_factory=CodeModeSettings)
    lint: LintSettings = field(default_factory=LintSettings)

    @property
    def label(self) -> str:
        """How error messages name this configuration."""
        return str(self.source) if self.source is not None else _BUILTIN_LABEL

    @property
    def base_dir(self) -> Path:
        """Where relative paths are resolved: the file's directory, else the cwd."""
        return self.source.parent if self.source is not None else Path.cwd()

    def store_url(self, store_override: str | None = None) -> str:
        """The store URL: the override, else ``$CALLGATE_STORE``, else the file's, else the default."""
        return store_override or os.environ.get(STORE_ENV) or self.store or default_store_url()

    def _store_origin(self, store_override: str | None) -> str:
        if store_override:
            return "--store"
        if os.environ.get(STORE_ENV):
            return f"${STORE_ENV}"
        return f"{self.label}: store" if self.store else "store"

    def load_toolboxes(self) -> list[Toolbox]:
        """Import every toolbox reference, in order.

        Raises:
            ConfigError: a reference cannot be imported or names no toolbox.
        """
        boxes: list[Toolbox] = []
        for index, ref in enumerate(self.toolboxes):
            where = f"{self.label}: toolboxes[{index}] ({ref!r})"
            try:
                boxes.extend(toolboxes_from(resolve_ref(ref, self.base_dir, where), where))
            except RefError as exc:
                raise ConfigError(str(exc)) from None
        return boxes

    def build_gate(self, store_override: str | None = None) -> Gate:
        """A Gate with this configuration (not yet opened).

        Args:
            store_override: a store URL that wins over ``$CALLGATE_STORE`` and the file.

        Raises:
            ConfigError: a toolbox reference or the store URL is bad, or two
                toolboxes share a name.
        """
        toolboxes = self.load_toolboxes()
        try:
            store = store_from_url(self.store_url(store_override))
        except ValueError as exc:
            raise ConfigError(f"{self._store_origin(store_override)}: {exc}") from None
        secrets = {}
        for key, variable in self.secrets.items():
            value = os.environ.get(variable)
            if not value:
                raise ConfigError(
                    f"{self.label}: secrets.{key}: the environment variable {variable} is not set"
                )
            secrets[key] = value
        try:
            toolboxes.extend(upstream_toolboxes(self.upstreams, self.label))
        except UpstreamConfigError as exc:
            raise ConfigError(str(exc)) from None
        try:
            return Gate(
                toolboxes,
                store=store,
                policy=self.policy,
                limits=self.limits,
                context=self.context,
                secrets=secrets,
                rate_limits=self.rate_limits,
                discovery=self.discovery,
                code_mode=self.code_mode,
            )
        except SkillError as exc:
            raise ConfigError(f"{self.label}: discovery.skills: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{self.label}: toolboxes: {exc}") from None


def load_config(path: str | os.PathLike[str]) -> GateConfig:
    """Read and validate a TOML config file.

    Raises:
        ConfigError: the file is missing, not TOML, has an unknown key, a value of
            the wrong type, or a policy rule with an invalid condition.
    """
    source = Path(path).expanduser().resolve()
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the config file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: the config file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    try:
        parsed = _ConfigFile.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None
    return GateConfig(
        source=source,
        store=_resolve_store(parsed.store, source),
        toolboxes=tuple(parsed.toolboxes),
        policy=_build_policy(parsed.policy, str(source)),
        limits=_build_limits({k: v for k, v in parsed.limits.items() if k != "rate"}, str(source)),
        rate_limits=_build_rate_limits(parsed.limits.get("rate", {}), str(source)),
        context=dict(parsed.context),
        secrets={key: secret.env for key, secret in parsed.secrets.items()},
        principal=_build_principal(parsed.principal, str(source)),
        mcp=McpConfig(
            tool_separator=parsed.mcp.tool_separator, unprefixed=tuple(parsed.mcp.unprefixed)
        ),
        upstreams=_build_upstreams(parsed.upstreams, str(source), source.parent),
        auth=_build_auth(parsed.auth, str(source), source.parent),
        discovery=_build_discovery(parsed.discovery, str(source), source.parent),
        code_mode=_build_code_mode(parsed.code_mode, str(source)),
        lint=_build_lint(parsed.lint, str(source)),
    )


def default_config() -> GateConfig:
    """The configuration used without ``--config``: the demo tools and policy.

    Raises:
        ConfigError: the demo package cannot be imported.
    """
    try:
        policy = resolve_ref(DEMO_POLICY, Path.cwd(), f"{_BUILTIN_LABEL}: policy")
    except RefError as exc:
        raise ConfigError(str(exc)) from None
    if callable(policy) and not isinstance(policy, Policy):
        policy = policy()
    if not isinstance(policy, Policy):
        raise ConfigError(f"{_BUILTIN_LABEL}: policy: {DEMO_POLICY} is not a Policy")
    # The demo's data belongs to one tenant: without it, its tools refuse every call.
    return GateConfig(
        toolboxes=(DEMO_TOOLBOXES,),
        policy=policy,
        principal=PrincipalDefaults(tenant=DEMO_TENANT),
        discovery=DiscoverySettings(skills=(DEMO_SKILLS,)),
    )


def local_principal(
    gate: Gate,
    defaults: PrincipalDefaults | None = None,
    *,
    user: str | None = None,
    tenant: str | None = None,
    scopes: Iterable[str] | None = None,
    roles: Iterable[str] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Principal:
    """The local principal: who calls are made for where nobody authenticates.

    ``callgate call``, ``serve`` and ``run`` (and :func:`callgate.mcp.default_principal`)
    act for one principal, built here and nowhere else. Each value is the given one
    (a command's option; ``None``: not given), else the one in ``defaults`` (the
    config file's ``[principal]``), else:

    - user: ``local``;
    - tenant: none (the built-in demo config's ``[principal]`` names ``acme``,
      so without ``--config`` it is ``acme``);
    - scopes: every scope a tool, resource or prompt of ``gate`` requires
      (:meth:`Gate.required_scopes`), so everything served can be used;
    - roles: none;
    - attributes: ``defaults``' updated with ``attributes`` (they win).

    Raises:
        InvalidIdentity: a value is no identity (empty, control characters).
    """
    defaults = defaults or PrincipalDefaults()
    if scopes is None:
        scopes = defaults.scopes if defaults.scopes is not None else gate.required_scopes()
    if roles is None:
        roles = defaults.roles or ()
    return Principal(
        user if user is not None else defaults.user or DEFAULT_USER,
        tenant if tenant is not None else defaults.tenant,
        scopes=scopes,
        roles=roles,
        attributes={**defaults.attributes, **(attributes or {})},
    )


# Validation helpers ------------------------------------------------------------
def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _allowed_keys(loc: Sequence[int | str]) -> str:
    """The keys the table holding ``loc`` accepts."""
    tables: dict[str, type[BaseModel]] = {
        "policy": _PolicyFile,
        "rules": _RuleFile,
        "approvers": _ApproversFile,
        "principal": _PrincipalFile,
    }
    model: type[BaseModel] = _ConfigFile
    for part in loc[:-1]:
        if isinstance(part, str):
            model = tables.get(part, model)
    return ", ".join(model.model_fields)


def _describe(exc: pydantic.ValidationError) -> str:
    messages = []
    for err in exc.errors(include_url=False):
        if err["type"] == "extra_forbidden":
            msg = f"unknown key (allowed: {_allowed_keys(err['loc'])})"
        else:
            msg = err["msg"]
        messages.append(f"{_loc(err['loc'])}: {msg}")
    return "; ".join(messages)


def _build_policy(policy: _PolicyFile, label: str) -> Policy:
    rules = []
    for index, raw in enumerate(policy.rules):
        where = f"policy.rules[{index}]" + (f" ({raw.name!r})" if raw.name else "")
        try:
            rules.append(Rule(**raw.model_dump(exclude_none=True)))
        except PolicyError as exc:
            # The effect and risk values were checked above: what is left is the
            # condition or the approvers.
            message = str(exc).removeprefix(f"rule {raw.name or raw.when!r}: ")
            key = "approvers" if "approvers" in message else "when"
            raise ConfigError(f"{label}: {where}.{key}: {message}") from None
    try:
        default = policy.approvers.model_dump(exclude_none=True) if policy.approvers else None
        return Policy(rules, default=policy.default, approvers=default)
    except PolicyError as exc:
        raise ConfigError(f"{label}: policy.approvers: {exc}") from None


def _build_upstreams(
    raw: Sequence[Any], label: str, base_dir: Path
) -> tuple[UpstreamSettings, ...]:
    try:
        return parse_upstreams(raw, label, base_dir)
    except UpstreamConfigError as exc:
        raise ConfigError(str(exc)) from None


def _build_auth(raw: Mapping[str, Any] | None, label: str, base_dir: Path) -> AuthSettings | None:
    try:
        return None if raw is None else parse_auth(raw, label, base_dir=base_dir)
    except AuthConfigError as exc:
        raise ConfigError(str(exc)) from None


def _build_discovery(raw: Mapping[str, Any], label: str, base_dir: Path) -> DiscoverySettings:
    try:
        return parse_discovery(raw, label, base_dir=base_dir)
    except InvalidArgument as exc:
        raise ConfigError(str(exc)) from None


def _build_code_mode(raw: Mapping[str, Any], label: str) -> CodeModeSettings:
    try:
        return parse_code_mode(raw, label)
    except InvalidArgument as exc:
        raise ConfigError(str(exc)) from None


def _build_lint(raw: Mapping[str, Any], label: str) -> LintSettings:
    try:
        return parse_lint(raw, label)
    except InvalidArgument as exc:
        raise ConfigError(str(exc)) from None


def _build_rate_limits(raw: Any, label: str) -> RateLimits:
    try:
        return parse_rate_limits(raw, label)
    except InvalidArgument as exc:
        raise ConfigError(str(exc)) from None


def _build_limits(raw: Mapping[str, Any], label: str) -> Limits:
    unknown = sorted(set(raw) - set(_LIMIT_FIELDS))
    if unknown:
        raise ConfigError(
            f"{label}: limits.{unknown[0]}: unknown key (allowed: {', '.join(_LIMIT_FIELDS)})"
        )
    try:
        return _LIMITS_ADAPTER.validate_python(dict(raw))
    except pydantic.ValidationError as exc:
        messages = [
            f"{_loc(('limits', *err['loc']))}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors(include_url=False)
        ]
        raise ConfigError(f"{label}: {'; '.join(messages)}") from None


def _build_principal(raw: _PrincipalFile, label: str) -> PrincipalDefaults:
    defaults = PrincipalDefaults(
        user=raw.user,
        tenant=raw.tenant,
        scopes=tuple(raw.scopes) if raw.scopes is not None else None,
        roles=tuple(raw.roles) if raw.roles is not None else None,
        attributes=dict(raw.attributes),
    )
    try:  # refused now, with the file's name, rather than by the first command
        Principal(
            defaults.user if defaults.user is not None else DEFAULT_USER,
            defaults.tenant,
            scopes=defaults.scopes or (),
            roles=defaults.roles or (),
            attributes=defaults.attributes,
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: principal: {exc}") from None
    return defaults


def _resolve_store(url: str | None, source: Path) -> str | None:
    """A SQLite store path relative to the config file, made absolute."""
    if url is None:
        return None
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            f"{source}: store: not a database URL: {url!r}; use e.g. sqlite:///callgate.db"
        ) from None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if Path(database).expanduser().is_absolute():
        return url
    return parsed.set(database=str(source.parent / database)).render_as_string(hide_password=False)
