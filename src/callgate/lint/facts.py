"""What the linter knows of a tool, whatever it came from: a callgate
:class:`~callgate.contract.spec.ToolSpec` (with the gate's policy), or a bare
function schema (an MCP ``tools/list`` entry, an OpenAI-style function, a
corpus such as BFCL's).

A bare schema says less: no risk tier unless its annotations give one, no
trusted fields, no preview, no policy. Rules that need what a source cannot
say skip its tools rather than guess (:attr:`ToolFacts.governed`).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from callgate.contract.annotations import RiskTier, ToolAnnotations, derive_risk

if TYPE_CHECKING:
    from callgate.contract.spec import ToolSpec
    from callgate.runtime.policy import Policy

__all__ = ["ToolFacts", "facts_from_schema", "facts_from_spec"]


@dataclass(kw_only=True, frozen=True)
class ToolFacts:
    """One tool as the rules see it."""

    name: str
    """The name the model sees (``ops.campaigns_find``, ``get_weather``)."""
    local_name: str
    """The name without its namespace (``campaigns_find``)."""
    namespace: str | None
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    """As declared (None: not said)."""
    risk: RiskTier | None = None
    """None when the source does not say enough to tell."""
    governed: bool = False
    """A callgate tool: trusted fields, previews and the policy are known."""
    trusted_source: bool = True
    private_data: bool = False
    has_preview: bool = False
    """A previewed change's tool (its apply is idempotent by preview id)."""
    approval_rule: bool = False
    """A policy rule may require approval for it (or deny it)."""
    concise: bool = False
    """It offers a concise and a detailed result (``response_format``)."""
    trusted_fields: tuple[str, ...] = ()
    error_messages: tuple[str, ...] = ()
    """The literal messages of the exceptions its function raises (Python tools)."""
    source: str = ""
    """Where it came from: a toolbox, an upstream, a corpus file."""

    @property
    def parameters(self) -> Mapping[str, Any]:
        props = self.input_schema.get("properties")
        return props if isinstance(props, Mapping) else {}

    @property
    def required(self) -> frozenset[str]:
        req = self.input_schema.get("required")
        return frozenset(req) if isinstance(req, list) else frozenset()


def facts_from_spec(spec: ToolSpec, policy: Policy | None = None) -> ToolFacts:
    """The facts of a callgate tool; ``policy`` tells whether a rule may hold it for approval."""
    from callgate.runtime.policy import Effect

    approval = policy is not None and any(
        rule.effect in (Effect.REQUIRE_APPROVAL, Effect.DENY) and rule.applies_to(spec)
        for rule in policy.rules
    )
    if policy is not None and policy.default in (Effect.REQUIRE_APPROVAL, Effect.DENY):
        approval = True
    handler = spec.handler
    fn = getattr(handler, "fn", None)
    performer = spec.change.performer if spec.change is not None else None
    if performer is not None:
        fn = getattr(performer.handler, "fn", fn)
    return ToolFacts(
        name=spec.name,
        local_name=spec.local_name,
        namespace=spec.toolbox,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=spec.annotations,
        risk=spec.risk,
        governed=True,
        trusted_source=spec.trusted_source,
        private_data=spec.private_data,
        has_preview=spec.change is not None,
        approval_rule=approval,
        concise=spec.concise is not None
        or bool(getattr(handler, "accepts_response_format", False)),
        trusted_fields=tuple(sorted(spec.trusted_fields)),
        error_messages=_raised_messages(fn) if fn is not None else (),
        source=spec.toolbox,
    )


_SEPARATORS = (".", "__", "/")


def facts_from_schema(tool: Mapping[str, Any], *, source: str = "") -> ToolFacts:
    """The facts of a bare tool definition: MCP (``inputSchema``), OpenAI-style
    (``parameters``, possibly under ``function``) or callgate's ``describe()``
    (``input_schema``).

    Raises:
        ValueError: no name, or a schema that is not an object.
    """
    if isinstance(tool.get("function"), Mapping):
        tool = tool["function"]
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool without a name: {dict(tool)!r:.120}")
    schema = next(
        (tool[k] for k in ("inputSchema", "input_schema", "parameters") if k in tool), None
    )
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise ValueError(f"tool {name!r}: its input schema is not an object")
    output = tool.get("outputSchema", tool.get("output_schema"))
    hints = tool.get("annotations") or {}
    annotations = ToolAnnotations(
        read_only=hints.get("readOnlyHint"),
        destructive=hints.get("destructiveHint"),
        idempotent=hints.get("idempotentHint"),
        open_world=hints.get("openWorldHint"),
    )
    risk: RiskTier | None = None
    if isinstance(tool.get("risk"), str):
        risk = RiskTier(tool["risk"])
    elif annotations.read_only is not None:
        risk = derive_risk(annotations.effective(trusted=True))
    namespace, local = None, name
    for sep in _SEPARATORS:
        if sep in name:
            namespace, local = name.rsplit(sep, 1)
            break
    description = tool.get("description")
    return ToolFacts(
        name=name,
        local_name=local,
        namespace=namespace,
        description=description if isinstance(description, str) else "",
        input_schema=schema,
        output_schema=output if isinstance(output, Mapping) else None,
        annotations=annotations,
        risk=risk,
        trusted_source=bool(tool.get("trusted_source", True)),
        source=source,
    )


def _raised_messages(fn: Any) -> tuple[str, ...]:
    """The string literals of ``raise X("...")`` in ``fn``'s own source (f-strings'
    literal parts joined); nothing when the source is not available."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return ()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
            continue
        args = node.exc.args
        if not args:
            continue
        text = _literal_text(args[0])
        if text:
            found.append(text)
    return tuple(found)


def _literal_text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(part.value) if isinstance(part, ast.Constant) else "{...}" for part in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_text(node.left) + _literal_text(node.right)
    return ""
