"""Registering a tool writes its schemas without pydantic for the common types,
and they are the schemas pydantic writes: same keys, same order."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional

import annotated_types
import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import PydanticUndefined

from callgate import Toolbox
from callgate.contract import _fast_schema
from callgate.contract.schema import clean_schema, closed_objects


class Line(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1)] = 1


class Order(BaseModel):
    lines: list[Line]
    note: str | None = None


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


ANNOTATIONS: list[Any] = [
    int,
    float,
    str,
    bool,
    None,
    type(None),
    Any,
    int | None,
    Optional[str],  # noqa: UP045 - the spelling is what is tested
    int | str,
    int | str | None,
    Literal["a", "b"],
    Literal["a"],
    Literal[1, 2],
    Literal[1, "a"],
    Literal[True],
    Literal[True, False],
    Literal[1, True],
    list[str],
    list[int] | None,
    list[list[int]],
    list[Any],
    list,
    set[str],
    frozenset[int],
    dict[str, int],
    dict[str, Any],
    dict[str, list[str]],
    dict,
    Annotated[str, Field(min_length=2, max_length=4, pattern="^a")],
    Annotated[int, Field(ge=1, le=5, description="between one and five")],
    Annotated[float, Field(gt=0, lt=1, multiple_of=0.25)],
    Annotated[int, annotated_types.Gt(0)],
    Annotated[str, annotated_types.MaxLen(3), Field(description="short")],
    Annotated[list[int], Field(min_length=1, max_length=3)],
    Annotated[int, Field(strict=True)],
    Annotated[str, Field(description="d")] | None,
    list[Annotated[int, Field(ge=0)]],
    Line,
    list[Line],
    Line | None,
    Order,
    list[Order] | None,
    dict[str, Order],
    Open,
    Annotated[Line, Field(description="one line")],
]
DEFAULTS: list[Any] = [PydanticUndefined, None, 0, 2.5, "x", True]


def _pydantic_input(fields: Mapping[str, tuple[Any, Any, str | None]]) -> dict[str, Any]:
    definitions: dict[str, Any] = {
        name: (ann, Field(default=d, description=doc) if doc else Field(default=d))
        for name, (ann, d, doc) in fields.items()
    }
    model = pydantic.create_model("arguments", __config__=ConfigDict(extra="forbid"), **definitions)
    return closed_objects(clean_schema(model.model_json_schema()))


@pytest.mark.parametrize("annotation", ANNOTATIONS, ids=repr)
@pytest.mark.parametrize("default", DEFAULTS, ids=repr)
@pytest.mark.parametrize("doc", [None, "From the docstring."])
def test_input_schemas_are_pydantics(annotation: Any, default: Any, doc: str | None) -> None:
    fields = {"first": (annotation, default, doc), "second": (int, PydanticUndefined, None)}
    ours = _fast_schema.input_schema(fields)
    assert json.dumps(ours) == json.dumps(_pydantic_input(fields))


@pytest.mark.parametrize("annotation", ANNOTATIONS, ids=repr)
def test_output_schemas_are_pydantics(annotation: Any) -> None:
    theirs = clean_schema(TypeAdapter(annotation).json_schema(mode="serialization"))
    assert json.dumps(_fast_schema.output_schema(annotation)) == json.dumps(theirs)


def test_two_models_in_one_tool_share_their_definitions() -> None:
    fields = {
        "order": (Order, PydanticUndefined, None),
        "extra": (list[Line], PydanticUndefined, None),
    }
    assert json.dumps(_fast_schema.input_schema(fields)) == json.dumps(_pydantic_input(fields))


class Node(BaseModel):
    name: str
    children: list[Node] = []


@pytest.mark.parametrize(
    "annotation",
    [
        tuple[int, str],
        Node,
        Annotated[int, Field(examples=[1])],
        Annotated[int | None, Field(ge=1)],
        Annotated[int, Field(pattern="^1")],
        Annotated[str, Field(ge=1)],
        Literal[1.5],
        bytes,
    ],
    ids=repr,
)
def test_other_types_are_left_to_pydantic(annotation: Any) -> None:
    with pytest.raises(_fast_schema.Unsupported):
        _fast_schema.input_schema({"value": (annotation, PydanticUndefined, None)})


def test_names_pydantic_treats_specially_are_left_to_it() -> None:
    for name in ("_private", "model_name", "json", "schema"):
        with pytest.raises(_fast_schema.Unsupported):
            _fast_schema.input_schema({name: (int, PydanticUndefined, None)})


def test_a_tool_validates_and_serializes_with_its_model_built_on_first_call() -> None:
    box = Toolbox("shop")

    @box.tool
    def place(order: Order, express: bool = False) -> Order:
        """Place an order."""
        return order

    spec = box.get("place")
    assert spec is not None
    assert spec.input_schema["$defs"]["Line"]["additionalProperties"] is False
    kwargs, as_json = spec.handler.prepare({"order": {"lines": [{"sku": "a"}]}})
    assert isinstance(kwargs["order"], Order)
    assert as_json == {
        "order": {"lines": [{"sku": "a", "quantity": 1}], "note": None},
        "express": False,
    }
    with pytest.raises(pydantic.ValidationError):
        spec.handler.prepare({"order": {"lines": [{"sku": "a", "quantity": 0}]}})
    assert spec.handler.invoke(kwargs, {}, None) == as_json["order"]  # type: ignore[arg-type]


class Opaque:
    pass


def test_a_type_pydantic_cannot_describe_is_refused_at_registration() -> None:
    box = Toolbox("ops")

    def use(thing: Opaque) -> None:
        """Use a thing."""

    with pytest.raises(pydantic.PydanticSchemaGenerationError):
        box.add(use)
    assert len(box) == 0
