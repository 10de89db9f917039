"""What ``[discovery]`` asks for: :class:`DiscoverySettings`, read by :func:`parse_discovery`.

Example (TOML)::

    [discovery]
    mode = "auto"              # or "direct" (every tool listed), "search" (the meta-tools)
    max_tools = 15             # auto: more tools than this -> search
    max_share = 0.10           # auto: definitions above this share of the context window -> search
    context_window = 128000    # tokens, for max_share where the model's is not known
    limit = 5                  # results per search unless the model asks for more
    embeddings = "auto"        # "off", "auto" (if the extra is installed), or an encoder's name
    skills = ["skills"]        # folders of Agent Skills (relative to the config file)

    [[discovery.rules]]        # applied before ranking, in order
    tools = ["ops.deploy_status"]
    action = "pin"             # always offered directly, next to the meta-tools

    [[discovery.rules]]
    risk = ["write_high_risk"]
    action = "mention"         # found only when the query names the tool

    [discovery.clients]        # per MCP client (its clientInfo.name)
    "claude-code" = "search"
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from callgate._tables import parse_table
from callgate.errors import InvalidArgument

__all__ = [
    "DiscoveryMode",
    "DiscoveryRule",
    "DiscoverySettings",
    "RuleAction",
    "parse_discovery",
]

DiscoveryMode = Literal["auto", "direct", "search"]
RuleAction = Literal["pin", "hide", "mention"]


@dataclass(kw_only=True, frozen=True)
class DiscoveryRule:
    """A rule applied before ranking to the tools it matches.

    A tool matches when it matches every criterion given: a name pattern of
    ``tools`` (``fnmatch``: ``billing.*``), a tag of ``tags``, a risk tier of
    ``risk``. Actions: ``pin`` (always offered directly, beside the meta-tools),
    ``hide`` (never found by search, still callable by name where the caller
    may), ``mention`` (found only when the query names the tool: every word of
    its name is in the query).
    """

    action: RuleAction
    tools: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    risk: tuple[str, ...] = ()

    def matches(self, name: str, tags: Iterable[str], risk: str | None) -> bool:
        if self.tools and not any(fnmatch.fnmatchcase(name, p) for p in self.tools):
            return False
        if self.tags and not set(self.tags) & set(tags):
            return False
        return not self.risk or risk in self.risk


@dataclass(kw_only=True, frozen=True)
class DiscoverySettings:
    """How tools are disclosed to models and found by search (see the module docs).

    Args:
        mode: ``direct`` lists every tool, ``search`` the meta-tools (and
            pinned tools), ``auto`` picks: search above ``max_tools`` tools or
            above ``max_share`` of the context window in definitions.
        max_tools: the tool count ``auto`` switches above.
        max_share: the share of the context window ``auto`` switches above.
        context_window: the model's context window in tokens, where it is not known.
        limit: results per search by default; ``max_limit`` at most.
        embeddings: ``auto`` (dense search if the ``search`` extra is
            installed), ``off``, or an encoder's name (it must load).
        rules: applied before ranking (see :class:`DiscoveryRule`).
        skills: folders of Agent Skills.
        clients: a mode per MCP client name (``clientInfo.name``).
        expose_described: in the agent loop, tools the model described (or a
            loaded skill named) join the tool array from the next request; off
            by default, as a changing tool array defeats providers' prompt caches.
    """

    mode: DiscoveryMode = "auto"
    max_tools: int = 15
    max_share: float = 0.10
    context_window: int = 128_000
    limit: int = 5
    max_limit: int = 20
    embeddings: str = "auto"
    rules: tuple[DiscoveryRule, ...] = ()
    skills: tuple[Path, ...] = ()
    clients: Mapping[str, DiscoveryMode] = field(default_factory=dict)
    expose_described: bool = False

    def __post_init__(self) -> None:
        if self.mode not in get_args(DiscoveryMode):
            raise InvalidArgument(
                f"discovery mode must be auto, direct or search, not {self.mode!r}"
            )
        if self.max_tools < 0:
            raise InvalidArgument("max_tools must be 0 or more")
        if not 0 < self.max_share <= 1:
            raise InvalidArgument("max_share must be above 0 and at most 1")
        if self.context_window < 1:
            raise InvalidArgument("context_window must be at least 1 token")
        if not 1 <= self.limit <= self.max_limit:
            raise InvalidArgument("limit must be at least 1 and at most max_limit")

    def choose(
        self,
        *,
        tools: int,
        tokens: int,
        requested: DiscoveryMode | None = None,
        client: str | None = None,
        context_window: int | None = None,
    ) -> Literal["direct", "search"]:
        """Direct or search, for ``tools`` tools whose definitions take ``tokens``.

        What a client asked for explicitly (``requested``) wins, then the mode
        configured for its name, then :attr:`mode`.
        """
        mode = requested or (self.clients.get(client) if client else None) or self.mode
        if mode != "auto":
            return mode
        window = context_window or self.context_window
        if tools > self.max_tools or tokens > self.max_share * window:
            return "search"
        return "direct"

    def rule_for(
        self, action: RuleAction, name: str, tags: Iterable[str], risk: str | None
    ) -> bool:
        """Whether a rule with ``action`` matches the tool."""
        return any(rule.action == action and rule.matches(name, tags, risk) for rule in self.rules)


class _RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: RuleAction
    tools: list[str] = []
    tags: list[str] = []
    risk: list[Literal["read", "write_idempotent", "write_high_risk"]] = []


class _DiscoveryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: DiscoveryMode = "auto"
    max_tools: int = Field(15, ge=0)
    max_share: float = Field(0.10, gt=0, le=1)
    context_window: int = Field(128_000, ge=1)
    limit: int = Field(5, ge=1)
    max_limit: int = Field(20, ge=1, le=100)
    embeddings: str = "auto"
    rules: list[_RuleFile] = []
    skills: list[str] = []
    clients: dict[str, DiscoveryMode] = {}
    expose_described: bool = False


def parse_discovery(raw: Mapping[str, Any], label: str, *, base_dir: Path) -> DiscoverySettings:
    """``[discovery]`` of a config file, checked; skill folders resolved against ``base_dir``.

    Raises:
        InvalidArgument: an unknown key or a bad value (the message names it).
    """
    parsed = parse_table(_DiscoveryFile, raw, label, "discovery")
    for index, rule in enumerate(parsed.rules):
        if not (rule.tools or rule.tags or rule.risk):
            raise InvalidArgument(
                f"{label}: discovery.rules[{index}]: give tools, tags or risk (a rule "
                "matching every tool would pin, hide or gate them all)"
            )
    if parsed.limit > parsed.max_limit:
        raise InvalidArgument(f"{label}: discovery.limit: at most max_limit ({parsed.max_limit})")
    return DiscoverySettings(
        mode=parsed.mode,
        max_tools=parsed.max_tools,
        max_share=parsed.max_share,
        context_window=parsed.context_window,
        limit=parsed.limit,
        max_limit=parsed.max_limit,
        embeddings=parsed.embeddings,
        rules=tuple(
            DiscoveryRule(
                action=r.action, tools=tuple(r.tools), tags=tuple(r.tags), risk=tuple(r.risk)
            )
            for r in parsed.rules
        ),
        skills=tuple((base_dir / p).resolve() for p in parsed.skills),
        clients=dict(parsed.clients),
        expose_described=parsed.expose_described,
    )
