"""Tool schemas become the subset Gemini accepts, and no correct call is lost on the way."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema_rs
import pytest

from callgate.agent._gemini_schema import to_gemini_parameters, to_gemini_schema
from tests.agent.corpus import Bfcl, CorpusTool

types = pytest.importorskip("google.genai.types")

# What the Gemini API refuses in function declarations (its error messages say
# these: "enum: only allowed for STRING type", "properties: only allowed for
# OBJECT type", "items: missing field", "should be non-empty for OBJECT type",
# "format: only 'enum' and 'date-time' are supported for STRING type").
_FORMATS = {
    "STRING": {"enum", "date-time"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}
_FIELDS = {
    "type", "format", "description", "nullable", "enum", "properties", "required", "items",
    "anyOf", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "minProperties", "maxProperties", "default", "example",
}  # fmt: skip


def _violations(schema: Mapping[str, Any], path: str = "$") -> Iterator[str]:
    unknown = set(schema) - _FIELDS
    if unknown:
        yield f"{path}: fields Gemini does not take: {sorted(unknown)}"
    kind = schema.get("type")
    if kind is None and "anyOf" not in schema:
        yield f"{path}: no type"
    if "enum" in schema and (
        kind != "STRING" or not all(isinstance(v, str) for v in schema["enum"])
    ):
        yield f"{path}: enum on {kind}"
    if "format" in schema and schema["format"] not in _FORMATS.get(kind or "", set()):
        yield f"{path}: format {schema['format']!r} on {kind}"
    if "properties" in schema and (kind != "OBJECT" or not schema["properties"]):
        yield f"{path}: properties {schema['properties']!r} on {kind}"
    if set(schema.get("required", ())) - set(schema.get("properties", {})):
        yield f"{path}: required names no property"
    if kind == "ARRAY" and "items" not in schema:
        yield f"{path}: array without items"
    if "items" in schema and kind != "ARRAY":
        yield f"{path}: items on {kind}"
    for name, sub in schema.get("properties", {}).items():
        yield from _violations(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _violations(schema["items"], f"{path}[]")
    for i, sub in enumerate(schema.get("anyOf", ())):
        yield from _violations(sub, f"{path}|{i}")


def _as_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A Gemini schema read as JSON Schema: what it lets through."""
    out: dict[str, Any] = {}
    for key in ("enum", "required", "minimum", "maximum", "minItems", "maxItems", "minLength",
                "maxLength", "pattern", "minProperties", "maxProperties"):  # fmt: skip
        if key in schema:
            out[key] = schema[key]
    if "type" in schema:
        out["type"] = schema["type"].lower()
    if "properties" in schema:
        out["properties"] = {k: _as_json_schema(v) for k, v in schema["properties"].items()}
    if "items" in schema:
        out["items"] = _as_json_schema(schema["items"])
    if "anyOf" in schema:
        out["anyOf"] = [_as_json_schema(sub) for sub in schema["anyOf"]]
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


_CONVERTED: dict[int, dict[str, Any] | None] = {}


def _converted(tool: CorpusTool) -> dict[str, Any] | None:
    # Corpus tools live as long as the (cached) corpus: their ids are stable keys.
    if id(tool) not in _CONVERTED:
        _CONVERTED[id(tool)] = to_gemini_parameters(tool.schema)
    return _CONVERTED[id(tool)]


def _declaration(tool: CorpusTool) -> Any:
    parameters = _converted(tool)
    return types.FunctionDeclaration(
        name="f",
        description=tool.description,
        parameters=None if parameters is None else types.Schema.model_validate(parameters),
    )


@pytest.mark.parametrize("corpus", ["bfcl", "tau2"])
def test_every_corpus_schema_becomes_a_declaration_gemini_accepts(
    corpus: str, request: pytest.FixtureRequest
) -> None:
    # Each corpus's own fixture: without its package, only its case is skipped.
    found = request.getfixturevalue(corpus)
    tools = found.unique_tools if corpus == "bfcl" else found
    problems: list[str] = []
    without_parameters = 0
    for tool in tools:
        declaration = _declaration(tool)  # the SDK's model forbids unknown fields
        if declaration.parameters is None:
            without_parameters += 1
            assert not tool.schema.get("properties"), tool.name
            continue
        problems += [f"{tool.name}: {p}" for p in _violations(_converted(tool) or {})]
    assert problems == []
    assert len(tools) == (3200 if corpus == "bfcl" else 72)
    assert without_parameters == sum(1 for t in tools if not t.schema.get("properties"))


def test_every_valid_bfcl_call_is_valid_for_the_converted_schema(bfcl: Bfcl) -> None:
    checked, lost = 0, []
    validators: dict[int, Any] = {}
    for call in bfcl.calls:
        if not jsonschema_rs.Draft202012Validator(call.tool.schema).is_valid(call.arguments):
            continue  # BFCL ground truth that its own schema refuses: nothing to keep
        checked += 1
        key = id(call.tool)
        if key not in validators:
            converted = _converted(call.tool) or {"type": "OBJECT"}
            validators[key] = jsonschema_rs.Draft202012Validator(_as_json_schema(converted))
        if not validators[key].is_valid(call.arguments):
            lost.append((call.entry, call.tool.name, call.arguments))
    assert lost == []
    assert checked > 3000


def test_tau2_refs_are_inlined_and_optional_fields_become_nullable(
    tau2: tuple[CorpusTool, ...],
) -> None:
    tool = next(t for t in tau2 if t.name == "book_reservation")
    converted = _converted(tool)
    assert converted is not None
    assert "$ref" not in str(converted) and "$defs" not in str(converted)
    passenger = converted["properties"]["passengers"]["items"]["anyOf"][0]
    assert passenger["required"] == ["first_name", "last_name", "dob"]
    assert "title" not in str(converted)
    # pydantic's Optional[str] (anyOf with null, inside a $defs entry) is a nullable string.
    apn = _converted(next(t for t in tau2 if t.name == "set_apn_settings")) or {}
    settings = apn["properties"]["apn_settings"]["anyOf"][0]["properties"]
    assert settings["mms_apn"] == {
        "type": "STRING",
        "description": "Specific APN name used for MMS traffic, if different from general data.",
        "default": "mms",
        "nullable": True,
    }
    assert settings["apn_name"]["enum"] == ["internet", "broken"]  # a $ref beside a description


def test_recursive_refs_become_loose_objects_with_a_description() -> None:
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "description": "A tree node.",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["label"],
            }
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    converted = to_gemini_parameters(tree)
    assert converted is not None
    root = converted["properties"]["root"]
    assert root["required"] == ["label"]
    child = root["properties"]["children"]["items"]
    assert child["type"] == "OBJECT" and "properties" not in child
    assert "same shape as its enclosing Node" in child["description"]
    assert list(_violations(converted)) == []
    types.Schema.model_validate(converted)


def test_doubling_references_stay_bounded() -> None:
    defs = {f"D{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"},
                                                      "b": {"$ref": f"#/$defs/D{i + 1}"}}}
            for i in range(30)}  # fmt: skip
    defs["D30"] = {"type": "string"}
    converted = to_gemini_parameters({"$defs": defs, "$ref": "#/$defs/D0"})
    assert converted is not None
    assert len(json.dumps(converted)) < 1_000_000  # 2**30 leaves if all were inlined
    assert list(_violations(converted)) == []


def test_types_enums_const_and_formats_follow_gemini_rules() -> None:
    schema = {
        "type": "object",
        "properties": {
            "either": {"type": ["string", "integer", "null"], "description": "Id or name."},
            "level": {"type": "integer", "enum": [1, 2, 4]},
            "mode": {"const": "fast"},
            "color": {"enum": ["red", "blue", None]},
            "url": {"type": "string", "format": "uri"},
            "when": {"type": "string", "format": "date-time"},
            "pair": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
            "choice": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
            "anything": {},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        },
        "additionalProperties": False,
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    p = to_gemini_parameters(schema)
    assert p is not None
    props = p["properties"]
    assert props["either"] == {
        "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}],
        "description": "Id or name.",
        "nullable": True,
    }
    assert props["level"] == {"type": "INTEGER", "description": "One of: 1, 2, 4."}
    assert props["mode"] == {"type": "STRING", "enum": ["fast"]}
    assert props["color"] == {"type": "STRING", "enum": ["red", "blue"], "nullable": True}
    assert props["url"] == {"type": "STRING", "description": "Format: uri."}
    assert props["when"] == {"type": "STRING", "format": "date-time"}
    assert props["pair"] == {"type": "ARRAY", "items": {"type": "NUMBER"}}
    assert props["choice"] == {"anyOf": [{"type": "STRING"}, {"type": "BOOLEAN"}]}
    assert props["anything"]["nullable"] is True and len(props["anything"]["anyOf"]) == 5
    assert props["labels"] == {
        "type": "OBJECT",
        "description": "Any keys; values are of type string.",
    }
    assert props["ratio"] == {"type": "NUMBER", "minimum": 0, "maximum": 1}
    assert "additionalProperties" not in p and "$schema" not in p
    assert list(_violations(p)) == []
    types.Schema.model_validate(p)


def test_constraint_only_branches_and_allof_keep_the_object() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
                "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
            },
            "merged": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            },
        },
        "required": ["target", "ghost"],
    }
    p = to_gemini_parameters(schema)
    assert p is not None
    assert p["required"] == ["target"]  # a required name without a property is dropped
    assert set(p["properties"]["target"]["properties"]) == {"id", "name"}
    merged = p["properties"]["merged"]
    assert merged["type"] == "OBJECT" and set(merged["properties"]) == {"a", "b"}
    assert merged["required"] == ["a", "b"]
    assert list(_violations(p)) == []


def test_tools_without_parameters_send_none() -> None:
    assert to_gemini_parameters({"type": "object", "properties": {}}) is None
    assert to_gemini_parameters({}) is None
    assert to_gemini_schema({"type": "null"}) == {"type": "STRING", "nullable": True}
