from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from callgate import RiskTier, Toolbox, ToolContext, Trusted, TrustedField, tool
from callgate.contract import InvalidToolName, check_tool_name
from callgate.contract.toolbox import DuplicateTool


class Shipment(BaseModel):
    id: str
    weight_kg: float


def make_box() -> Toolbox:
    box = Toolbox("ship")

    @box.tool(scopes={"ship:read"}, read_only=True, input_examples=[{"shipment_id": "SH-1"}])
    def get_shipment(
        shipment_id: str,
        tenant_id: Trusted[str],
        project: Annotated[str, TrustedField(source="project")],
        ctx: ToolContext,
        unit: Literal["kg", "lb"] = "kg",
    ) -> Shipment:
        """Show one shipment.

        Use it to look up weight before changing it.

        Args:
            shipment_id: The shipment id, like SH-1.
            unit: Weight unit of the answer.
        """
        return Shipment(id=shipment_id, weight_kg=1.0)

    return box


def test_model_facing_schema_omits_trusted_fields_and_context() -> None:
    spec = make_box().get("get_shipment")
    assert spec is not None
    schema = spec.input_schema
    assert set(schema["properties"]) == {"shipment_id", "unit"}
    assert schema["required"] == ["shipment_id"]
    assert schema["additionalProperties"] is False
    assert set(spec.trusted_fields) == {"tenant_id", "project"}
    assert spec.trusted_fields["project"].source == "project"


def test_descriptions_come_from_the_docstring() -> None:
    spec = make_box().get("get_shipment")
    assert spec is not None
    assert spec.description.startswith("Show one shipment.")
    assert "Args:" not in spec.description
    props = spec.input_schema["properties"]
    assert props["shipment_id"]["description"] == "The shipment id, like SH-1."
    assert props["unit"]["enum"] == ["kg", "lb"]
    assert "title" not in props["shipment_id"]
    assert spec.summary == "Show one shipment."


def test_output_schema_from_return_type() -> None:
    spec = make_box().get("get_shipment")
    assert spec is not None
    assert spec.output_schema is not None
    assert set(spec.output_schema["properties"]) == {"id", "weight_kg"}


def test_property_named_title_is_kept() -> None:
    box = Toolbox("notes")

    @box.tool
    def create(title: str) -> None:
        """Create a note."""

    spec = box.get("create")
    assert spec is not None
    assert "title" in spec.input_schema["properties"]
    assert spec.output_schema is None


@pytest.mark.parametrize("name", ["", "a" * 129, "has space", "semi;colon", "ünï", "slash/name"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidToolName):
        check_tool_name(name)


def test_valid_names() -> None:
    assert check_tool_name("a" * 128) == "a" * 128
    assert check_tool_name("ops.deploy-status_v2") == "ops.deploy-status_v2"


def test_tool_names_are_namespaced_and_validated() -> None:
    with pytest.raises(InvalidToolName):
        Toolbox("bad name")
    box = Toolbox("ops")

    def f() -> None:
        """F."""

    with pytest.raises(InvalidToolName):
        box.add(f, name="has.dot")
    assert box.add(f).name == "ops.f"
    with pytest.raises(DuplicateTool):
        box.add(f)


def test_conservative_defaults_and_risk() -> None:
    box = Toolbox("t")

    @box.tool
    def anything() -> None:
        """Do something."""

    @box.tool(read_only=True)
    def look() -> None:
        """Look."""

    @box.tool(idempotent=True, destructive=False)
    def set_value(v: int) -> None:
        """Set."""

    @box.tool(read_only=True, risk="write_high_risk")
    def overridden() -> None:
        """Read, but reviewed as risky."""

    anything_spec = box.get("anything")
    assert anything_spec is not None
    eff = anything_spec.effective_annotations
    assert (eff.read_only, eff.destructive, eff.idempotent, eff.open_world) == (
        False,
        True,
        False,
        True,
    )
    assert anything_spec.risk is RiskTier.WRITE_HIGH_RISK
    assert anything_spec.annotations.to_mcp() == {}
    look_spec = box.get("look")
    assert look_spec is not None and look_spec.risk is RiskTier.READ
    assert look_spec.retry_safe
    set_spec = box.get("set_value")
    assert set_spec is not None and set_spec.risk is RiskTier.WRITE_IDEMPOTENT
    over = box.get("overridden")
    assert over is not None and over.risk is RiskTier.WRITE_HIGH_RISK


def test_untrusted_source_annotations_are_ignored() -> None:
    box = Toolbox("up", trusted=False)

    @box.tool(read_only=True, open_world=False)
    def claims_to_read() -> None:
        """Claims to be harmless."""

    spec = box.get("claims_to_read")
    assert spec is not None
    assert spec.risk is RiskTier.WRITE_HIGH_RISK
    assert spec.effective_annotations.open_world is True
    assert not spec.retry_safe
    # The claim is still shown as what it is: a claim.
    assert spec.annotations.to_mcp() == {"readOnlyHint": True, "openWorldHint": False}


def test_contract_hash_changes_with_any_visible_change() -> None:
    def build(doc: str, *, read_only: bool = True, typ: type = str) -> str:
        box = Toolbox("h")

        def f(x: str) -> None:
            pass

        f.__doc__ = doc
        f.__annotations__ = {"x": typ, "return": None}
        return box.add(f, read_only=read_only).contract_hash

    base = build("Read x.")
    assert base == build("Read x.")
    assert base != build("Read x!")
    assert base != build("Read x.", read_only=False)
    assert base != build("Read x.", typ=int)


def test_standalone_tool_decorator_and_examples() -> None:
    @tool(scopes={"a:b"}, read_only=True, input_examples=[{"q": "x"}])
    def search(q: str, limit: Annotated[int, Field(ge=1, le=50)] = 10) -> list[str]:
        """Search."""
        return []

    box = Toolbox("s", tools=[search])
    spec = box.get("search")
    assert spec is not None
    assert spec.scopes == frozenset({"a:b"})
    assert spec.input_examples == ({"q": "x"},)
    assert spec.input_schema["properties"]["limit"]["maximum"] == 50
    assert search("x") == []  # the function itself is unchanged


def test_functions_that_cannot_be_described_are_refused() -> None:
    box = Toolbox("x")

    def star(*args: int) -> None:
        pass

    def untyped(a) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TypeError, match="args"):
        box.add(star)
    with pytest.raises(TypeError, match="type hint"):
        box.add(untyped)


def test_toolbox_change_listeners() -> None:
    box = Toolbox("c")
    seen: list[int] = []
    box.on_change(lambda b: seen.append(len(b)))

    def f() -> None:
        """F."""

    box.add(f)
    box.remove("f")
    assert seen == [1, 0]


def test_input_examples_must_be_valid_calls() -> None:
    box = Toolbox("e")

    def search(q: str) -> None:
        """Search."""

    with pytest.raises(ValueError, match="input_examples"):
        box.add(search, input_examples=[{"query": "x"}])
