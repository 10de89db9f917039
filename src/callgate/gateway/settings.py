"""The ``[[upstreams]]`` tables of the config file: other people's MCP servers the
gateway governs.

Example::

    [[upstreams]]
    name = "time"                       # its tools are time.<tool> (time__<tool> on the wire)
    command = "mcp-server-time"
    args = ["--local-timezone", "UTC"]
    env = { API_KEY = { env = "TIME_API_KEY" } }   # secrets only from the gateway's environment
    trust = "untrusted"                 # the default: its annotations do not count
    hide = ["*_debug"]

    [upstreams.tools.get_current_time]
    rename = "now"
    risk = "read"                       # the operator vouches for it
    pinned = { timezone = "UTC" }       # fixed by the gateway, not in the model's schema

    [[upstreams]]
    name = "docs"
    url = "https://docs.internal.example/mcp"
    auth = { type = "bearer", env = "DOCS_TOKEN" }

Parsed into frozen :class:`UpstreamSettings`; values read from the environment
(``{ env = "VAR" }``) are resolved only when the gateway is built
(:func:`resolve`), so reading a config never needs the secrets.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from callgate.contract.annotations import RiskTier
from callgate.contract.naming import InvalidToolName, check_toolbox_name
from callgate.errors import UserError

__all__ = [
    "MAX_ANSWER_BYTES",
    "PROTOCOLS",
    "Auth",
    "EnvValue",
    "ToolRule",
    "UpstreamConfigError",
    "UpstreamSettings",
    "parse_upstreams",
    "resolve",
]

PROTOCOLS = ("auto", "2025-11-25", "2026-07-28")
"""``auto`` tries 2026-07-28 discovery and falls back to the 2025-11-25 handshake."""
MAX_ANSWER_BYTES = 32 * 1024 * 1024
"""The default ``max_answer_bytes``: four times ``limits.max_result_bytes``'s default,
so an answer the chain can shape is read whole (a result's JSON text grows when
the SDK wraps and escapes it), while the largest answer read costs well under a
second and a bounded amount of memory (docs/gateway.md has the figures)."""


class UpstreamConfigError(UserError, ValueError):
    """An ``[[upstreams]]`` table cannot be used; the message names the key."""


# The file's schema -------------------------------------------------------------
class _Env(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = Field(min_length=1)


_Value = str | _Env


class _BearerFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["bearer"]
    env: str = Field(min_length=1)
    """The environment variable holding the token."""


class _ClientCredentialsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["client_credentials"]
    token_url: str
    client_id: str
    client_secret_env: str = Field(min_length=1)
    scope: str | None = None


class _ToolFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rename: str | None = None
    risk: Literal["read", "write_idempotent", "write_high_risk"] | None = None
    scopes: list[str] | None = None
    timeout: float | None = Field(default=None, gt=0)
    pinned: dict[str, Any] = {}
    inject: dict[str, str] = {}
    """Upstream argument -> where its value comes from (``tenant``, ``user``, a
    principal attribute or a key of the gateway's context)."""
    description: str | None = None


class _UpstreamFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    command: str | None = None
    args: list[str] = []
    env: dict[str, _Value] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, _Value] = {}
    auth: Annotated[_BearerFile | _ClientCredentialsFile, Field(discriminator="type")] | None = None
    trust: Literal["trusted", "untrusted"] = "untrusted"
    protocol: Literal["auto", "2025-11-25", "2026-07-28"] = "auto"
    expose: list[str] = ["*"]
    hide: list[str] = []
    scopes: list[str] = []
    """Scopes every tool of the upstream requires (a tool's own ``scopes`` replace them)."""
    timeout: float | None = Field(default=None, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    startup_wait: float = Field(default=5.0, ge=0)
    reconnect_max: float = Field(default=30.0, gt=0)
    max_answer_bytes: int = Field(default=MAX_ANSWER_BYTES, gt=0, strict=True)
    tools: dict[str, _ToolFile] = {}
    tenants: list[str] | None = None


# The parsed settings -------------------------------------------------------------
@dataclass(kw_only=True, frozen=True)
class EnvValue:
    """A value read from the gateway's environment when the gateway is built."""

    variable: str


Value = str | EnvValue


@dataclass(kw_only=True, frozen=True)
class Auth:
    """The gateway's own credential for an HTTP upstream (never the caller's)."""

    type: Literal["bearer", "client_credentials"]
    env: str | None = None
    """bearer: the variable holding the token."""
    token_url: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    scope: str | None = None


@dataclass(kw_only=True, frozen=True)
class ToolRule:
    """The operator's overrides for one upstream tool (``[upstreams.tools.NAME]``)."""

    rename: str | None = None
    risk: RiskTier | None = None
    scopes: frozenset[str] | None = None
    timeout: float | None = None
    pinned: Mapping[str, Any] = field(default_factory=dict)
    inject: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None


@dataclass(kw_only=True, frozen=True)
class UpstreamSettings:
    """One upstream MCP server, as configured."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, Value] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, Value] = field(default_factory=dict)
    auth: Auth | None = None
    trusted: bool = False
    protocol: str = "auto"
    expose: tuple[str, ...] = ("*",)
    hide: tuple[str, ...] = ()
    scopes: frozenset[str] = frozenset()
    timeout: float | None = None
    connect_timeout: float = 10.0
    startup_wait: float = 5.0
    reconnect_max: float = 30.0
    """The longest wait between two tries to reach an upstream that is down."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """The largest answer (one JSON-RPC message, as sent) read from it; a larger
    one is refused while it is read, and its call fails saying so."""
    tools: Mapping[str, ToolRule] = field(default_factory=dict)
    tenants: frozenset[str] | None = None

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """Where it is, for people: the URL (without credentials) or the command line."""
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return f"{parts.scheme}://{host}{port}{parts.path}"
        return shlex.join([self.command or "", *self.args])

    def exposes(self, tool: str) -> bool:
        """Whether the upstream tool ``tool`` (its upstream name) is served."""
        shown = any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.expose)
        return shown and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.hide)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_ARGUMENT = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _describe(exc: pydantic.ValidationError, where: str) -> str:
    messages = []
    for err in exc.errors(include_url=False):
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        # A discriminated union names the variant in the location: say it plainly.
        loc = loc.replace(".bearer", "").replace(".client_credentials", "")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "union_tag_invalid":
            msg = "type must be 'bearer' or 'client_credentials'"
        else:
            msg = err["msg"]
        messages.append(f"{where}{loc}: {msg}")
    return "; ".join(messages)


def _value(raw: _Value) -> Value:
    return EnvValue(variable=raw.env) if isinstance(raw, _Env) else raw


def _check(raw: _UpstreamFile, where: str) -> None:
    try:
        check_toolbox_name(raw.name)
    except InvalidToolName:
        raise UpstreamConfigError(
            f"{where}.name: {raw.name!r} must be 1-64 letters, digits, '_' or '-' "
            "(it prefixes the upstream's tool names)"
        ) from None
    if (raw.command is None) == (raw.url is None):
        raise UpstreamConfigError(
            f"{where}: give exactly one of command (a stdio server) or url (Streamable HTTP)"
        )
    if raw.command is not None:
        if not raw.command.strip():
            raise UpstreamConfigError(f"{where}.command: must not be empty")
        for key in ("headers", "auth"):
            if getattr(raw, key):
                raise UpstreamConfigError(f"{where}.{key}: only for an upstream with a url")
    if raw.url is not None:
        parts = urlsplit(raw.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamConfigError(
                f"{where}.url: {raw.url!r} is not an http:// or https:// URL with a host"
            )
        if parts.username or parts.password:
            raise UpstreamConfigError(
                f"{where}.url: credentials do not belong in the URL; use auth "
                "(a bearer token or client credentials from the environment)"
            )
        for key in ("args", "env", "cwd"):
            if getattr(raw, key):
                raise UpstreamConfigError(f"{where}.{key}: only for an upstream with a command")
        for header in raw.headers:
            if not _HEADER_NAME.fullmatch(header):
                raise UpstreamConfigError(f"{where}.headers: {header!r} is not a header name")
            if header.lower() == "authorization" and raw.auth is not None:
                raise UpstreamConfigError(
                    f"{where}.headers.{header}: give the credential in auth or in headers, not both"
                )
    if raw.auth is not None and isinstance(raw.auth, _ClientCredentialsFile):
        parts = urlsplit(raw.auth.token_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamConfigError(
                f"{where}.auth.token_url: {raw.auth.token_url!r} is not an http(s) URL"
            )
    for name, rule in raw.tools.items():
        at = f"{where}.tools.{name}"
        if rule.rename is not None:
            try:
                check_toolbox_name(rule.rename)
            except InvalidToolName:
                raise UpstreamConfigError(
                    f"{at}.rename: {rule.rename!r} must be 1-64 letters, digits, '_' or '-'"
                ) from None
        for key in (*rule.pinned, *rule.inject):
            if not _ARGUMENT.fullmatch(key):
                raise UpstreamConfigError(f"{at}: {key!r} is not an argument name")
        both = sorted(set(rule.pinned) & set(rule.inject))
        if both:
            raise UpstreamConfigError(f"{at}: {both[0]!r} is both pinned and injected")


def parse_upstreams(
    raw: Sequence[Any], label: str, base_dir: Path | None = None
) -> tuple[UpstreamSettings, ...]:
    """Validate the ``upstreams`` array of a config file.

    A ``command`` or ``cwd`` given as a relative path (``./bin/server``,
    ``../tools/server``) is relative to ``base_dir``, the config file's
    directory, like toolbox files; a bare command name is looked up on ``PATH``.

    Raises:
        UpstreamConfigError: an unknown key, a bad URL or command, a duplicate
            name, a rule that cannot work; the message names the key.
    """
    out: list[UpstreamSettings] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        where = f"{label}: upstreams[{index}]"
        try:
            parsed = _UpstreamFile.model_validate(item)
        except pydantic.ValidationError as exc:
            raise UpstreamConfigError(_describe(exc, where)) from None
        where = f"{label}: upstreams[{index}] ({parsed.name!r})"
        _check(parsed, where)
        if parsed.name in seen:
            raise UpstreamConfigError(
                f"{where}.name: upstreams[{seen[parsed.name]}] has that name already"
            )
        seen[parsed.name] = index
        auth = None
        if parsed.auth is not None:
            auth = Auth(**parsed.auth.model_dump())
        out.append(
            UpstreamSettings(
                name=parsed.name,
                command=_path(parsed.command, base_dir, bare=False),
                args=tuple(parsed.args),
                env={key: _value(value) for key, value in parsed.env.items()},
                cwd=_path(parsed.cwd, base_dir, bare=True),
                url=parsed.url,
                headers={key: _value(value) for key, value in parsed.headers.items()},
                auth=auth,
                trusted=parsed.trust == "trusted",
                protocol=parsed.protocol,
                expose=tuple(parsed.expose),
                hide=tuple(parsed.hide),
                scopes=frozenset(parsed.scopes),
                timeout=parsed.timeout,
                connect_timeout=parsed.connect_timeout,
                startup_wait=parsed.startup_wait,
                reconnect_max=parsed.reconnect_max,
                max_answer_bytes=parsed.max_answer_bytes,
                tools={
                    name: ToolRule(
                        rename=rule.rename,
                        risk=RiskTier(rule.risk) if rule.risk else None,
                        scopes=frozenset(rule.scopes) if rule.scopes is not None else None,
                        timeout=rule.timeout,
                        pinned=dict(rule.pinned),
                        inject=dict(rule.inject),
                        description=rule.description,
                    )
                    for name, rule in parsed.tools.items()
                },
                tenants=frozenset(parsed.tenants) if parsed.tenants is not None else None,
            )
        )
    return tuple(out)


def _path(value: str | None, base_dir: Path | None, *, bare: bool) -> str | None:
    """``value`` made absolute against ``base_dir`` when it is a relative path
    (for a command: when it names a directory too, not just a program)."""
    if value is None or base_dir is None:
        return value
    path = Path(value).expanduser()
    if path.is_absolute() or (not bare and "/" not in value):
        return str(path) if value.startswith("~") else value
    return os.path.normpath(base_dir / path)


@dataclass(kw_only=True, frozen=True)
class Resolved:
    """An upstream's environment, headers and credential with the secrets read."""

    env: Mapping[str, str]
    headers: Mapping[str, str]
    token: str | None = None
    client_secret: str | None = None
    secrets: frozenset[str] = frozenset()
    """Every value read from the environment: never shown to a person or model."""


def resolve(
    settings: UpstreamSettings, label: str, environ: Mapping[str, str] | None = None
) -> Resolved:
    """Read the values ``settings`` takes from the gateway's environment.

    Raises:
        UpstreamConfigError: a variable is not set; the message names the key.
    """
    environ = os.environ if environ is None else environ
    where = f"{label}: upstreams ({settings.name!r})"
    secrets: set[str] = set()

    def read(variable: str, key: str) -> str:
        value = environ.get(variable)
        if not value:
            raise UpstreamConfigError(
                f"{where}.{key}: the environment variable {variable} is not set"
            )
        secrets.add(value)
        return value

    def values(table: Mapping[str, Value], key: str) -> dict[str, str]:
        return {
            name: read(value.variable, f"{key}.{name}") if isinstance(value, EnvValue) else value
            for name, value in table.items()
        }

    env = values(settings.env, "env")
    headers = values(settings.headers, "headers")
    token = client_secret = None
    if settings.auth is not None and settings.auth.type == "bearer":
        assert settings.auth.env is not None
        token = read(settings.auth.env, "auth.env")
    elif settings.auth is not None:
        assert settings.auth.client_secret_env is not None
        client_secret = read(settings.auth.client_secret_env, "auth.client_secret_env")
    return Resolved(
        env=env,
        headers=headers,
        token=token,
        client_secret=client_secret,
        secrets=frozenset(secrets),
    )
