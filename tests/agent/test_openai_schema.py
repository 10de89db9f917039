"""OpenAI strict-mode schema rewriting, and strict arguments mapped back, on real corpora."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from callgate.agent._openai_schema import JSON_TEXT_NOTE, loose_schema, strict_schema
from tests.agent.corpus import Bfcl, CorpusTool


def _objects(node: Any) -> Iterator[Mapping[str, Any]]:
    """Every schema node that is an object type, however deep (through $defs too)."""
    if isinstance(node, Mapping):
        types = node.get("type")
        if types == "object" or (isinstance(types, list) and "object" in types):
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def _keywords(node: Any) -> set[str]:
    """The keywords used anywhere in a schema (not property names or enum values)."""
    if not isinstance(node, Mapping):
        return set()
    found = set(node)
    for key in ("properties", "$defs"):
        for sub in (node.get(key) or {}).values():
            found |= _keywords(sub)
    for sub in node.get("anyOf") or ():
        found |= _keywords(sub)
    return found | _keywords(node.get("items"))


def _strict_form(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    """``value`` the way a strict-mode model must send it under ``schema``: every field
    present (null for one it leaves out), values the description asks for as JSON text
    written as JSON text."""
    if "$ref" in schema:
        return _strict_form(value, defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in schema:
        for branch in schema["anyOf"]:
            candidate = _strict_form(value, branch, defs)
            if Draft202012Validator({**branch, "$defs": dict(defs)}).is_valid(candidate):
                return candidate
        return value
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if isinstance(value, dict) and "object" in types:
        return {
            key: _strict_form(value[key], sub, defs) if key in value else None
            for key, sub in schema["properties"].items()
        }
    if isinstance(value, list) and "array" in types:
        return [_strict_form(item, schema["items"], defs) for item in value]
    if "string" in types and str(schema.get("description", "")).endswith(JSON_TEXT_NOTE):
        return json.dumps(value)
    return value


STRICT_KEYWORDS = {
    *("type", "description", "title", "properties", "required", "additionalProperties"),
    *("items", "anyOf", "$ref", "$defs", "enum", "const", "pattern", "format"),
    *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    *("minItems", "maxItems"),
}
"""What OpenAI's strict mode accepts."""


@pytest.mark.slow
def test_every_corpus_schema_converts_strict_and_loose(
    bfcl: Bfcl, tau2: tuple[CorpusTool, ...]
) -> None:
    tools = bfcl.unique_tools + tau2
    assert len(tools) == 3200 + 72
    json_text_tools = 0
    for tool in tools:
        strict = strict_schema(tool.schema)
        loose = loose_schema(tool.schema)
        Draft202012Validator.check_schema(strict.schema)
        Draft202012Validator.check_schema(loose)
        assert strict.schema["type"] == "object" == loose["type"]
        assert "properties" in loose
        for node in _objects(strict.schema):
            assert node["additionalProperties"] is False, (tool.name, node)
            assert node["required"] == list(node["properties"]), (tool.name, node)
        assert _keywords(strict.schema) <= STRICT_KEYWORDS, tool.name
        json_text_tools += strict.json_text > 0
    # Free-form values (BFCL's Java/JavaScript "any", dicts without properties,
    # tau2's `Model | dict` items) are what strict mode cannot express.
    assert json_text_tools == 144


def test_loose_schema_passes_the_schema_through(tau2: tuple[CorpusTool, ...]) -> None:
    tool = next(t for t in tau2 if "$defs" in t.schema)
    assert loose_schema(tool.schema) == tool.schema
    assert loose_schema({}) == {"type": "object", "properties": {}}


def _nulls_omitted(arguments: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """BFCL's ground truth writes null for an optional field left at its default even
    where the field's schema does not admit null: that null means "omitted"."""
    props, required = schema.get("properties", {}), set(schema.get("required", ()))
    return {
        key: value
        for key, value in arguments.items()
        if not (
            value is None
            and key not in required
            and not Draft202012Validator(props.get(key, {})).is_valid(None)
        )
    }


def _declared_only(value: Any, schema: Any) -> Any:
    """``value`` without keys its (open) objects' schemas do not declare: strict mode
    closes every object, so a model cannot send them."""
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict) and schema.get("properties"):
        props = schema["properties"]
        return {k: _declared_only(v, props[k]) for k, v in value.items() if k in props}
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_declared_only(item, schema["items"]) for item in value]
    return value


def test_every_bfcl_ground_truth_call_survives_strict_mode(bfcl: Bfcl) -> None:
    calls = bfcl.calls
    assert len(calls) == 3302
    compiled: dict[int, Any] = {}
    tally = {"as given": 0, "nulls omitted": 0, "extra keys": 0, "invalid in BFCL": 0}
    for call in calls:
        strict = compiled.get(id(call.tool))
        if strict is None:
            strict = compiled[id(call.tool)] = strict_schema(call.tool.schema)
        original = Draft202012Validator(call.tool.schema)
        omitted = _nulls_omitted(call.arguments, call.tool.schema)
        # An open object's undeclared keys ("data": {"name": ...} where only
        # param1/param2 are declared) cannot be sent to a strict-mode tool.
        expected = _declared_only(omitted, call.tool.schema)
        if not original.is_valid(expected):
            # BFCL accepts several forms of a value and the corpus takes the first,
            # sometimes of the wrong type, or leaves a required field out: not a
            # call a correct model makes (the gate refuses it as the tool would).
            tally["invalid in BFCL"] += 1
            continue
        sent = _strict_form(expected, strict.schema, strict.schema.get("$defs", {}))
        # What the model must send is what strict mode lets it send...
        assert Draft202012Validator(strict.schema).is_valid(sent), (call.entry, sent)
        # ...and it reaches the gate as the original call, valid as the tool defines it.
        restored = strict.restore(sent)
        assert restored == expected, (call.entry, sent, restored)
        assert original.is_valid(restored)
        if expected == call.arguments:
            tally["as given"] += 1
        else:
            tally["nulls omitted" if expected == omitted else "extra keys"] += 1
    assert tally == {
        "as given": 3097,
        "nulls omitted": 101,
        "extra keys": 4,
        "invalid in BFCL": 100,
    }


def test_tau2_calls_with_optional_and_nested_fields_map_back(
    tau2: tuple[CorpusTool, ...],
) -> None:
    tools = {t.name: t for t in tau2}
    book = tools["book_reservation"]
    strict = strict_schema(book.schema)
    arguments = {
        "user_id": "sara_doe_496",
        "origin": "SFO",
        "destination": "JFK",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "date": "2024-05-01"}],
        "passengers": [{"first_name": "Sara", "last_name": "Doe", "dob": "1990-01-01"}],
        "payment_methods": [{"payment_id": "credit_card_1", "amount": 100}],
        "total_baggages": 1,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    sent = _strict_form(arguments, strict.schema, strict.schema["$defs"])
    assert Draft202012Validator(strict.schema).is_valid(sent)
    assert strict.restore(sent) == arguments
    # The free-form branch (`FlightInfo | dict`) is JSON text and comes back a dict.
    as_text = {**sent, "flights": ['{"flight_number": "HAT002", "date": "2024-05-02"}']}
    assert strict.restore(as_text)["flights"] == [{"flight_number": "HAT002", "date": "2024-05-02"}]


def test_optional_fields_become_nullable_and_null_means_omitted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer", "minimum": 1, "maxLength": 3},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "where": {"$ref": "#/$defs/Point"},
            "tags": {"type": "array"},
        },
        "required": ["city"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }
    strict = strict_schema(schema)
    props = strict.schema["properties"]
    assert props["city"] == {"type": "string"}
    assert props["unit"] == {
        "anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}],
        "description": 'Default: "c".',
    }
    assert props["days"] == {"type": ["integer", "null"], "minimum": 1}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["where"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
    assert props["tags"] == {
        "type": ["array", "null"],
        "items": {"type": "string", "description": JSON_TEXT_NOTE},
    }
    assert strict.schema["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": ["number", "null"]}},
        "required": ["x"],
        "additionalProperties": False,
    }
    sent = {
        "city": "Paris",
        "unit": None,
        "days": None,
        "note": None,
        "where": {"x": None},
        "tags": ['"a"', "[1, 2]", "not json"],
    }
    # note admitted null originally: the model's null is a value, kept.
    assert strict.restore(sent) == {
        "city": "Paris",
        "note": None,
        "where": {},
        "tags": ["a", [1, 2], "not json"],
    }


def test_refs_with_descriptions_inline_and_recursive_refs_stay() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"$ref": "#/$defs/Mode", "description": "How to run."},
            "tree": {"$ref": "#/$defs/Node", "description": "lost: Node is recursive"},
        },
        "required": ["mode", "tree"],
        "$defs": {
            "Mode": {"type": "string", "enum": ["fast", "safe"]},
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["name"],
            },
            "Unused": {"type": "string"},
        },
    }
    strict = strict_schema(schema)
    props = strict.schema["properties"]
    assert props["mode"] == {
        "type": "string",
        "enum": ["fast", "safe"],
        "description": "How to run.",
    }
    assert props["tree"] == {"$ref": "#/$defs/Node"}
    assert set(strict.schema["$defs"]) == {"Node"}
    node = strict.schema["$defs"]["Node"]
    assert node["required"] == ["name", "children"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    sent = {
        "mode": "fast",
        "tree": {"name": "a", "children": [{"name": "b", "children": None}]},
    }
    assert Draft202012Validator(strict.schema).is_valid(sent)
    assert strict.restore(sent) == {
        "mode": "fast",
        "tree": {"name": "a", "children": [{"name": "b"}]},
    }


@pytest.mark.parametrize(
    ("node", "kind"),
    [
        ({"description": "any value"}, "json"),
        ({"type": "object", "description": "free-form"}, "json"),
        ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "json"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "json"),
        ({"$ref": "other.json#/x"}, "json"),
        ({"allOf": [{"type": "string"}]}, "plain"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "union"),
        ({"enum": ["a", 1]}, "plain"),
    ],
)
def test_what_strict_mode_cannot_express_becomes_json_text(node: dict[str, Any], kind: str) -> None:
    strict = strict_schema({"type": "object", "properties": {"v": node}, "required": ["v"]})
    out = strict.schema["properties"]["v"]
    Draft202012Validator.check_schema(strict.schema)
    if kind == "json":
        assert out["type"] == "string" and out["description"].endswith(JSON_TEXT_NOTE)
        assert strict.json_text == 1
        assert strict.restore({"v": '{"k": [1]}'}) == {"v": {"k": [1]}}
    elif kind == "union":
        assert out == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        assert strict.restore({"v": 3}) == {"v": 3}
    else:
        assert "type" in out and strict.json_text == 0


def test_roots_without_properties_take_no_arguments() -> None:
    for root in ({}, {"type": "object"}, {"type": "object", "properties": {}, "description": "d"}):
        strict = strict_schema(root)
        assert strict.schema["properties"] == {} and strict.schema["required"] == []
        assert strict.schema["additionalProperties"] is False
        assert strict.restore({}) == {}


def test_a_root_that_refers_to_its_definition_is_that_object() -> None:
    schema = {
        "$ref": "#/$defs/Args",
        "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}},
    }
    strict = strict_schema(schema)
    assert strict.schema == {
        "type": "object",
        "properties": {"q": {"type": ["string", "null"]}},
        "required": ["q"],
        "additionalProperties": False,
    }
    assert strict.restore({"q": None}) == {}
