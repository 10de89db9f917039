"""Contract diff: each kind of change is named, and judged breaking or compatible
the way a caller (for inputs) or a consumer (for results) would find out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from callgate import Toolbox
from callgate.contract.diff import RULES, ContractDiff, diff_catalogues, read_catalogue
from callgate.errors import InvalidArgument

DOC = Path(__file__).parents[2] / "docs" / "contract-diff.md"


def entry(name: str = "shop.order_find", **fields: Any) -> dict[str, Any]:
    """One tool as ``callgate contract snapshot`` writes it."""
    return {
        "name": name,
        "title": None,
        "description": "Find orders.",
        "risk": "read",
        "scopes": ["orders:read"],
        "input_schema": {"type": "object", "properties": {}},
        "output_schema": None,
        "annotations": {"readOnlyHint": True},
        **fields,
    }


def compare(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> ContractDiff:
    return diff_catalogues(read_catalogue(old), read_catalogue(new))


def found(result: ContractDiff) -> dict[tuple[str, str], str]:
    """(rule, path) -> severity, over every tool."""
    return {(c.rule, c.path): c.severity.value for t in result.tools for c in t.changes}


def inputs(old: dict[str, Any], new: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The findings between two input schemas of one tool."""
    return found(compare([entry(input_schema=old)], [entry(input_schema=new)]))


def outputs(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[tuple[str, str], str]:
    """The findings between two output schemas of one tool."""
    return found(compare([entry(output_schema=old)], [entry(output_schema=new)]))


def obj(required: tuple[str, ...] = (), closed: bool = True, **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return schema


STR = {"type": "string"}
INT = {"type": "integer"}


# Tools -------------------------------------------------------------------------------
def test_identical_catalogues_have_no_changes() -> None:
    tools = [entry(input_schema=obj(("q",), q=STR)), entry("shop.refund", risk="write_high_risk")]

    result = compare(tools, tools)

    assert result.tools == ()
    assert result.unchanged == ("shop.order_find", "shop.refund")
    assert result.breaking is False
    assert result.counts == {"breaking": 0, "compatible": 0, "note": 0}


def test_a_removed_tool_breaks_and_an_added_one_does_not() -> None:
    result = compare([entry("a.old")], [entry("a.new")])

    by_name = {t.name: t for t in result.tools}
    assert by_name["a.old"].status == "removed"
    assert found(result) == {("tool-removed", ""): "breaking", ("tool-added", ""): "compatible"}
    assert result.breaking is True
    assert [t.name for t in result.tools] == ["a.old", "a.new"]  # breaking first


def test_raised_risk_breaks_and_lowered_risk_does_not() -> None:
    raised = compare([entry(risk="read")], [entry(risk="write_high_risk")])
    lowered = compare([entry(risk="write_high_risk")], [entry(risk="write_idempotent")])

    assert found(raised) == {("risk-raised", ""): "breaking"}
    assert "read -> write_high_risk" in raised.tools[0].changes[0].message
    assert found(lowered) == {("risk-lowered", ""): "compatible"}


def test_an_added_scope_breaks_and_a_removed_one_does_not() -> None:
    result = compare([entry(scopes=["a", "b"])], [entry(scopes=["b", "c"])])

    assert found(result) == {("scope-added", ""): "breaking", ("scope-removed", ""): "compatible"}
    assert "now needs c" in result.tools[0].changes[0].message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({"readOnlyHint": True}, {"readOnlyHint": False}, {"read-only-dropped": "breaking"}),
        ({"readOnlyHint": True}, {}, {"read-only-dropped": "breaking"}),
        ({}, {"readOnlyHint": True}, {"read-only-added": "compatible"}),
        ({"destructiveHint": False}, {"destructiveHint": True}, {"destructive-added": "breaking"}),
        ({"destructiveHint": False}, {}, {"destructive-added": "breaking"}),
        ({}, {"destructiveHint": False}, {"destructive-dropped": "compatible"}),
        ({"idempotentHint": True}, {}, {"idempotent-dropped": "breaking"}),
        ({"openWorldHint": False}, {"openWorldHint": True}, {"open-world-added": "breaking"}),
        ({}, {"openWorldHint": False}, {"open-world-dropped": "compatible"}),
    ],
)
def test_hints_are_compared_as_declared_with_the_mcp_defaults(
    old: dict[str, bool], new: dict[str, bool], expected: dict[str, str]
) -> None:
    result = compare([entry(annotations=old, risk=None)], [entry(annotations=new, risk=None)])

    assert {rule: severity for (rule, _), severity in found(result).items()} == expected


def test_a_tool_that_stops_being_read_only_is_named_once() -> None:
    # destructiveHint and idempotentHint follow from readOnlyHint: no second finding.
    result = compare([entry(annotations={"readOnlyHint": True})], [entry(annotations={})])

    [change] = result.tools[0].changes
    assert change.message.startswith("readOnlyHint true -> absent (false):")


def test_description_and_title_changes_are_notes() -> None:
    result = compare([entry()], [entry(description="Find orders by text.", title="Find")])

    assert found(result) == {("title-changed", ""): "note", ("description-changed", ""): "note"}
    assert result.breaking is False
    assert result.tools[0].status == "changed"


# Parameters --------------------------------------------------------------------------
def test_a_new_required_parameter_breaks() -> None:
    assert inputs(obj(("q",), q=STR), obj(("q", "region"), q=STR, region=STR)) == {
        ("param-required-added", "region"): "breaking"
    }


def test_a_new_optional_parameter_is_compatible() -> None:
    assert inputs(obj(q=STR), obj(q=STR, limit=INT)) == {("param-added", "limit"): "compatible"}


def test_a_removed_parameter_breaks_only_when_the_object_refuses_other_fields() -> None:
    assert inputs(obj(q=STR, limit=INT), obj(q=STR)) == {("param-removed", "limit"): "breaking"}
    assert inputs(obj(closed=False, q=STR, limit=INT), obj(closed=False, q=STR)) == {
        ("param-removed-open", "limit"): "compatible"
    }


def test_making_a_parameter_required_breaks_and_optional_does_not() -> None:
    assert inputs(obj(q=STR), obj(("q",), q=STR)) == {("param-made-required", "q"): "breaking"}
    assert inputs(obj(("q",), q=STR), obj(q=STR)) == {("param-made-optional", "q"): "compatible"}


@pytest.mark.parametrize(
    ("old", "new", "rule", "severity"),
    [
        ({"type": "number"}, INT, "type-narrowed", "breaking"),
        (INT, {"type": "number"}, "type-widened", "compatible"),
        (STR, {"type": ["string", "null"]}, "type-widened", "compatible"),
        ({"type": ["string", "integer"]}, STR, "type-narrowed", "breaking"),
        (STR, INT, "type-changed", "breaking"),
        ({}, STR, "type-narrowed", "breaking"),
    ],
)
def test_type_changes(old: dict[str, Any], new: dict[str, Any], rule: str, severity: str) -> None:
    assert inputs(obj(x=old), obj(x=new)) == {(rule, "x"): severity}


def test_a_changed_type_stops_the_comparison_of_its_other_keywords() -> None:
    old = {"type": "string", "maxLength": 5}
    new = {"type": "integer", "maximum": 5}

    assert inputs(obj(x=old), obj(x=new)) == {("type-changed", "x"): "breaking"}


def test_an_optional_anyof_with_null_is_read_as_a_nullable_type() -> None:
    optional = {"anyOf": [{"type": "integer", "maximum": 9}, {"type": "null"}], "default": None}
    plain = {"type": "integer", "maximum": 9, "default": None}

    assert inputs(obj(x=optional), obj(x=plain)) == {("type-narrowed", "x"): "breaking"}
    assert inputs(obj(x=plain), obj(x=optional)) == {("type-widened", "x"): "compatible"}


def test_a_narrowed_enum_breaks_and_a_widened_one_does_not() -> None:
    old = {"type": "string", "enum": ["active", "paused", "ended"]}

    narrowed = inputs(obj(s=old), obj(s={**old, "enum": ["active", "paused"]}))
    widened = inputs(obj(s=old), obj(s={**old, "enum": [*old["enum"], "draft"]}))
    limited = inputs(obj(s=STR), obj(s=old))

    assert narrowed == {("enum-narrowed", "s"): "breaking"}
    assert widened == {("enum-widened", "s"): "compatible"}
    assert limited == {("enum-narrowed", "s"): "breaking"}
    message = compare([entry(input_schema=obj(s=old))], [entry(input_schema=obj(s=STR))])
    assert found(message) == {("enum-widened", "s"): "compatible"}


def test_the_enum_message_names_the_lost_value() -> None:
    old = obj(s={"type": "string", "enum": ["active", "ended"]})
    new = obj(s={"type": "string", "enum": ["active"]})

    [change] = compare([entry(input_schema=old)], [entry(input_schema=new)]).tools[0].changes
    assert change.message == (
        'enum no longer has "ended": calls sending a value it lost now fail validation'
    )


@pytest.mark.parametrize(
    ("old", "new", "rule", "severity"),
    [
        ({"const": "v1"}, {"const": "v2"}, "const-changed", "breaking"),
        (STR, {**STR, "const": "v1"}, "const-added", "breaking"),
        ({**STR, "const": "v1"}, STR, "const-removed", "compatible"),
    ],
)
def test_const_changes(old: dict[str, Any], new: dict[str, Any], rule: str, severity: str) -> None:
    assert inputs(obj(x=old), obj(x=new)) == {(rule, "x"): severity}


@pytest.mark.parametrize(
    ("old", "new", "severity"),
    [
        ({"minimum": 1}, {"minimum": 5}, "breaking"),
        ({"maximum": 100}, {"maximum": 50}, "breaking"),
        ({}, {"maximum": 50}, "breaking"),
        ({"minLength": 1}, {"minLength": 3}, "breaking"),
        ({"maxLength": 200}, {"maxLength": 100}, "breaking"),
        ({"maxItems": 10}, {"maxItems": 5}, "breaking"),
        ({"exclusiveMinimum": 0}, {"exclusiveMinimum": 1}, "breaking"),
        ({"multipleOf": 2}, {"multipleOf": 4}, "breaking"),
        ({"uniqueItems": False}, {"uniqueItems": True}, "breaking"),
        ({"minimum": 5}, {"minimum": 1}, "compatible"),
        ({"maximum": 50}, {}, "compatible"),
        ({"maxLength": 100}, {"maxLength": 200}, "compatible"),
        ({"multipleOf": 4}, {"multipleOf": 2}, "compatible"),
    ],
)
def test_bounds_tightened_break_and_loosened_do_not(
    old: dict[str, Any], new: dict[str, Any], severity: str
) -> None:
    rule = "bound-tightened" if severity == "breaking" else "bound-loosened"

    assert inputs(obj(x=old), obj(x=new)) == {(rule, "x"): severity}


@pytest.mark.parametrize(
    ("old", "new", "rule", "severity"),
    [
        ({}, {"pattern": "^A"}, "pattern-added", "breaking"),
        ({"pattern": "^A"}, {"pattern": "^[AB]"}, "pattern-changed", "breaking"),
        ({"pattern": "^A"}, {}, "pattern-removed", "compatible"),
    ],
)
def test_pattern_changes(
    old: dict[str, Any], new: dict[str, Any], rule: str, severity: str
) -> None:
    assert inputs(obj(x={**STR, **old}), obj(x={**STR, **new})) == {(rule, "x"): severity}


def test_default_format_and_parameter_description_changes_are_notes() -> None:
    old = {"type": "integer", "default": 10, "description": "How many."}
    new = {"type": "integer", "default": 20, "description": "How many (1-50).", "format": "int32"}

    assert inputs(obj(n=old), obj(n=new)) == {
        ("default-changed", "n"): "note",
        ("format-changed", "n"): "note",
        ("description-changed", "n"): "note",
    }


def test_closing_an_object_breaks_and_opening_it_does_not() -> None:
    assert inputs(obj(closed=False, q=STR), obj(q=STR)) == {("object-closed", ""): "breaking"}
    assert inputs(obj(q=STR), obj(closed=False, q=STR)) == {("object-opened", ""): "compatible"}


def test_nested_objects_and_array_items_are_compared_with_their_paths() -> None:
    def schema(amount_max: int, line_required: tuple[str, ...]) -> dict[str, Any]:
        amount = {"type": "integer", "maximum": amount_max}
        line = obj(line_required, sku=STR, qty=INT)
        return obj(budget=obj(amount=amount), items={"type": "array", "items": line})

    result = inputs(schema(1000, ("sku",)), schema(500, ("sku", "qty")))

    assert result == {
        ("bound-tightened", "budget.amount"): "breaking",
        ("param-made-required", "items[].qty"): "breaking",
    }


def test_local_refs_are_inlined_and_compared_by_what_they_point_to() -> None:
    def schema(currencies: list[str]) -> dict[str, Any]:
        money = obj(currency={"type": "string", "enum": currencies})
        return {**obj(budget={"$ref": "#/$defs/Money"}), "$defs": {"Money": money}}

    inline = obj(budget=obj(currency={"type": "string", "enum": ["EUR"]}))

    assert inputs(schema(["EUR"]), inline) == {}
    assert inputs(schema(["EUR", "USD"]), schema(["EUR"])) == {
        ("enum-narrowed", "budget.currency"): "breaking"
    }


def test_a_recursive_schema_is_compared_down_to_its_first_repetition() -> None:
    def tree(max_label: int) -> dict[str, Any]:
        node = obj(
            label={"type": "string", "maxLength": max_label},
            children={"type": "array", "items": {"$ref": "#/$defs/Node"}},
        )
        return {**obj(root={"$ref": "#/$defs/Node"}), "$defs": {"Node": node}}

    assert inputs(tree(10), tree(10)) == {}
    assert inputs(tree(10), tree(5)) == {("bound-tightened", "root.label"): "breaking"}


def test_composition_it_does_not_judge_is_reported_as_breaking_for_review() -> None:
    old = {"oneOf": [STR, INT]}
    new = {"oneOf": [STR, {"type": "boolean"}]}

    assert inputs(obj(x=old), obj(x=new)) == {("composition-changed", "x"): "breaking"}


def test_composition_is_compared_with_its_refs_inlined() -> None:
    def schema(maximum: int) -> dict[str, Any]:
        union = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}
        defs = {"A": obj(a=STR), "B": obj(b={"type": "integer", "maximum": maximum})}
        return {**obj(x=union), "$defs": defs}

    assert inputs(schema(5), schema(5)) == {}
    assert inputs(schema(5), schema(3)) == {("composition-changed", "x"): "breaking"}


# Results ---------------------------------------------------------------------------
def test_a_removed_result_field_breaks_consumers_and_an_added_one_does_not() -> None:
    old = obj(("id", "total"), id=STR, total=INT)

    assert outputs(old, obj(("id",), id=STR)) == {("output-field-removed", "total"): "breaking"}
    assert outputs(old, obj(("id", "total"), id=STR, total=INT, note=STR)) == {
        ("output-field-added", "note"): "compatible"
    }
    assert outputs(old, obj(("id",), id=STR, total=INT)) == {
        ("output-field-made-optional", "total"): "breaking"
    }


def test_results_are_judged_the_other_way_round() -> None:
    status = {"type": "string", "enum": ["open", "shipped"]}

    assert outputs(obj(n=INT), obj(n={"type": "number"})) == {
        ("output-type-widened", "n"): "breaking"
    }
    assert outputs(obj(n={"type": "number"}), obj(n=INT)) == {
        ("output-type-narrowed", "n"): "compatible"
    }
    assert outputs(obj(s=status), obj(s={**status, "enum": ["open", "shipped", "lost"]})) == {
        ("output-enum-widened", "s"): "breaking"
    }
    assert outputs(obj(n=INT), obj(n=STR)) == {("output-type-changed", "n"): "breaking"}


def test_a_removed_output_schema_breaks_and_an_added_one_does_not() -> None:
    schema = obj(id=STR)

    assert outputs(schema, None) == {("output-schema-removed", ""): "breaking"}
    assert outputs(None, schema) == {("output-schema-added", ""): "compatible"}


# Reading ---------------------------------------------------------------------------
def mcp_tool(name: str, schema: dict[str, Any], **annotations: bool) -> dict[str, Any]:
    return {"name": name, "description": "x", "inputSchema": schema, "annotations": annotations}


def test_a_tools_list_is_read_without_risk_or_scopes_and_its_hints_compared() -> None:
    old = {"tools": [mcp_tool("get_time", obj(("tz",), tz=STR), readOnlyHint=True)]}
    new = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"tools": [mcp_tool("get_time", obj(("tz",), tz=STR))]},
    }

    catalogue = read_catalogue(old)
    result = diff_catalogues(catalogue, read_catalogue(new))

    assert catalogue["get_time"].risk is None
    assert catalogue["get_time"].scopes is None
    assert found(result) == {("read-only-dropped", ""): "breaking"}


def test_a_tools_list_against_a_snapshot_compares_no_risk() -> None:
    listed = [mcp_tool("shop.order_find", {"type": "object", "properties": {}}, readOnlyHint=True)]

    result = compare([entry(description="x")], listed)

    assert result.tools == ()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"callgate_contract_snapshot": 2, "tools": []}, "snapshot format 2"),
        ({"tool": []}, 'expected a "tools" list'),
        ("tools", "expected a list of tools, not str"),
        ([{"description": "x"}], "tools[0]: no name"),
        ([entry(), entry()], "listed twice"),
        ([entry(risk="dangerous")], "risk 'dangerous' is not one of"),
        ([entry(input_schema=[])], "the input schema is not an object"),
        ([entry(annotations={"readOnlyHint": "yes"})], "readOnlyHint is not true or false"),
        ([entry(scopes="a")], "scopes is not a list of strings"),
    ],
)
def test_what_is_not_a_catalogue_is_refused_with_the_reason(data: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(fragment)):
        read_catalogue(data)


def test_the_machine_form_carries_rule_severity_path_and_message() -> None:
    result = compare([entry(input_schema=obj(q=STR))], [entry(input_schema=obj(("q",), q=STR))])

    assert result.to_json() == {
        "breaking": True,
        "counts": {"breaking": 1, "compatible": 0, "note": 0},
        "tools": [
            {
                "name": "shop.order_find",
                "status": "changed",
                "breaking": True,
                "changes": [
                    {
                        "rule": "param-made-required",
                        "severity": "breaking",
                        "path": "q",
                        "message": "now required: calls without it now fail validation",
                    }
                ],
            }
        ],
        "unchanged": [],
    }


# A realistic case: two versions of one tool ------------------------------------------
class Budget(BaseModel):
    amount: int = Field(ge=1, le=1_000_000)
    currency: Literal["EUR", "USD"] = "EUR"


class BudgetV2(BaseModel):
    amount: int = Field(ge=1, le=500_000)
    currency: Literal["EUR", "USD", "GBP"] = "EUR"


class Campaign(BaseModel):
    id: str
    status: str
    daily_budget: int


class CampaignV2(BaseModel):
    id: str
    status: str


def version_one() -> Toolbox:
    box = Toolbox("ads")

    @box.tool(scopes=["campaigns:write"], destructive=False, idempotent=True, open_world=False)
    def campaign_update(
        campaign_id: str,
        budget: Budget,
        status: Literal["active", "paused", "ended"] | None = None,
        note: str | None = None,
    ) -> Campaign:
        """Update a campaign's budget and status.

        Args:
            campaign_id: The campaign, e.g. "C-1".
            budget: The new daily budget.
            status: The new status.
            note: Why, for the change log.
        """
        return Campaign(id=campaign_id, status=status or "active", daily_budget=budget.amount)

    return box


def version_two() -> Toolbox:
    box = Toolbox("ads")

    @box.tool(scopes=["campaigns:write", "campaigns:admin"], open_world=False)
    def campaign_update(
        campaign_id: str,
        budget: BudgetV2,
        reason: str,
        status: Literal["active", "paused"] | None = None,
    ) -> CampaignV2:
        """Update a campaign's budget and status.

        Args:
            campaign_id: The campaign, e.g. "C-1".
            budget: The new daily budget.
            reason: Why, for the change log.
            status: The new status.
        """
        return CampaignV2(id=campaign_id, status=status or "active")

    return box


def test_two_versions_of_a_real_tool() -> None:
    old = [spec.describe() for spec in version_one()]
    new = [spec.describe() for spec in version_two()]

    result = compare(old, new)

    [tool] = result.tools
    assert tool.name == "ads.campaign_update"
    assert found(result) == {
        ("risk-raised", ""): "breaking",
        ("scope-added", ""): "breaking",
        ("destructive-added", ""): "breaking",
        ("idempotent-dropped", ""): "breaking",
        ("bound-tightened", "budget.amount"): "breaking",
        ("enum-widened", "budget.currency"): "compatible",
        ("enum-narrowed", "status"): "breaking",
        ("param-removed", "note"): "breaking",
        ("param-required-added", "reason"): "breaking",
        ("output-field-removed", "daily_budget"): "breaking",
    }
    assert [c.severity.value for c in tool.changes] == ["breaking"] * 9 + ["compatible"]


# The rule table --------------------------------------------------------------------
def test_the_docs_list_every_rule_with_its_severity() -> None:
    text = DOC.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (breaking|compatible|note) \|", text, re.M))

    assert rows == {rule: severity.value for rule, (severity, _) in RULES.items()}
