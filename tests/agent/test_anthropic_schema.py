"""Tool schemas for Anthropic's input_schema: the BFCL and tau2 corpora, and each rule on its own."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from callgate.agent._anthropic_schema import input_schema, strict_input_schema
from tests.agent.corpus import Bfcl, CorpusTool

# -- the corpora ----------------------------------------------------------


META = Draft202012Validator(Draft202012Validator.META_SCHEMA)
"""What ``check_schema`` does, built once: it builds a validator per call, 6,500 times here."""


@pytest.mark.slow
def test_every_corpus_schema_converts_to_an_input_schema_the_api_accepts(
    bfcl: Bfcl, tau2: tuple[CorpusTool, ...]
) -> None:
    tools = [*bfcl.unique_tools, *tau2]
    assert len(tools) == 3_200 + 72
    strict = 0
    for tool in tools:
        schema = input_schema(tool.schema)
        assert schema["type"] == "object", tool.name
        META.validate(schema)
        assert '"$ref"' not in json.dumps(schema) and "$defs" not in schema, tool.name
        closed = strict_input_schema(tool.schema)
        if closed is not None:
            META.validate(closed)
            strict += 1
    # Those without a strict form have open maps (BFCL "dict") or values of any type.
    assert strict == 3_131


def test_no_bfcl_ground_truth_call_is_lost_by_the_conversion(bfcl: Bfcl) -> None:
    checked = lost_to_strict = 0
    for call in bfcl.calls:
        if not Draft202012Validator(call.tool.schema).is_valid(call.arguments):
            continue  # BFCL's answer does not fit its own schema: nothing to keep
        checked += 1
        converted = Draft202012Validator(input_schema(call.tool.schema))
        assert converted.is_valid(call.arguments), (call.entry, call.tool.name)
        closed = strict_input_schema(call.tool.schema)
        if closed is not None:
            errors = list(Draft202012Validator(closed).iter_errors(call.arguments))
            # Strict closes objects: only arguments the schema never named are refused.
            assert all(e.validator == "additionalProperties" for e in errors), call.entry
            lost_to_strict += bool(errors)
    assert checked == 3_101
    assert lost_to_strict == 4


# -- what is done to a schema --------------------------------------------------

TREE = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        }
    },
    "type": "object",
    "properties": {
        "root": {"$ref": "#/$defs/Node", "description": "The top."},
        "elsewhere": {"$ref": "other.json#/Thing"},
    },
}


def test_references_are_inlined_and_recursion_is_cut_without_losing_values() -> None:
    schema = input_schema(TREE)
    root = schema["properties"]["root"]
    assert root["description"] == "The top."  # an annotating sibling overrides the target's
    assert root["properties"]["name"] == {"type": "string"}
    assert root["properties"]["children"]["items"] == {
        "description": "Any value: the same shape as Node (recursive)."
    }
    assert schema["properties"]["elsewhere"] == {
        "description": "Any value: the same shape as other.json#/Thing (not resolvable here)."
    }
    deep = {"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}}
    assert Draft202012Validator(TREE).is_valid(deep)
    assert Draft202012Validator(schema).is_valid(deep)
    assert strict_input_schema(TREE) is None  # strict mode compiles no recursion


def test_a_constraining_ref_sibling_is_kept_beside_the_target() -> None:
    schema = input_schema(
        {
            "definitions": {"Code": {"type": "string", "pattern": "^[A-Z]+$"}},
            "type": "object",
            "properties": {"code": {"$ref": "#/definitions/Code", "maxLength": 3}},
        }
    )
    assert schema["properties"]["code"] == {
        "allOf": [{"type": "string", "pattern": "^[A-Z]+$"}],
        "maxLength": 3,
    }


def test_names_and_data_that_look_like_keywords_are_left_alone() -> None:
    original = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "internal",
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$defs": {"type": "integer"},
            "query": {"type": "object", "default": {"$ref": "#/not/a/schema"}, "properties": {}},
        },
    }
    schema = input_schema(original)
    assert schema == {
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$defs": {"type": "integer"},
            "query": {"type": "object", "default": {"$ref": "#/not/a/schema"}, "properties": {}},
        },
    }


def test_the_root_becomes_an_object() -> None:
    assert input_schema({}) == {"type": "object"}
    assert input_schema({"type": ["object", "null"], "properties": {}})["type"] == "object"
    merged = input_schema(
        {
            "anyOf": [
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                {
                    "type": "object",
                    "properties": {"email": {"type": "string"}, "id": {"type": "integer"}},
                    "required": ["email"],
                },
            ]
        }
    )
    assert merged["type"] == "object" and "anyOf" not in merged and "required" not in merged
    assert merged["properties"]["id"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert "one of 2 forms" in merged["description"] and "(email)" in merged["description"]
    assert Draft202012Validator(merged).is_valid({"email": "a@b.c"})
    assert Draft202012Validator(merged).is_valid({"id": 7})
    both = input_schema(
        {
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        }
    )
    assert both == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    with pytest.raises(ValueError, match="must describe an object"):
        input_schema({"type": "string"})


def test_the_strict_form_closes_objects_and_describes_what_it_cannot_compile() -> None:
    strict = strict_input_schema(
        {
            "type": "object",
            "properties": {
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": "How many.",
                },
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "when": {"type": "string", "format": "date"},
                "zip": {"type": "string", "format": "postal-code"},
                "pick": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                "where": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    )
    assert strict == {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "How many. (minimum: 1, maximum: 10)"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "(minItems: 2)"},
            "when": {"type": "string", "format": "date"},
            "zip": {"type": "string", "description": "(format: 'postal-code')"},
            "pick": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "where": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }
    assert strict_input_schema({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    free_form = {"type": "object", "properties": {"extra": {"type": "object"}}}
    any_value = {"type": "object", "properties": {"value": {"description": "Anything."}}}
    assert strict_input_schema(free_form) is None
    assert strict_input_schema(any_value) is None


def test_definitions_that_double_at_every_level_are_inlined_only_so_far() -> None:
    # Inlined in full, this would hold 2**30 copies of the innermost object.
    depth = 30
    defs = {
        f"D{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"}, "b": {"$ref": f"#/$defs/D{i + 1}"}},
        }
        for i in range(depth)
    }
    defs[f"D{depth}"] = {"type": "string"}
    original = {"$defs": defs, "type": "object", "properties": {"top": {"$ref": "#/$defs/D0"}}}
    schema = input_schema(original)
    text = json.dumps(schema)
    assert text.count("not inlined: the schema is too large") > 0
    assert len(text) < 1_000_000
    value = {"top": {"a": {"a": {"b": {}}}, "b": {}}}
    assert Draft202012Validator(original).is_valid(value)
    assert Draft202012Validator(schema).is_valid(value)
