"""Every way of declaring a tool takes the same options, with the same effect and
defaults; a change takes the ones that make sense for its three tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from callgate import RiskTier, Toolbox, ToolSpec, UserError, tool
from callgate.contract import spec_from_function
from callgate.contract.options import CHANGE_OPTIONS, TOOL_OPTIONS
from callgate.errors import InvalidDefinition


def _lookup() -> Callable[..., dict[str, str]]:
    # A new function each time: @tool marks the function it decorates.
    def lookup(city: str) -> dict[str, str]:
        """Find a city."""
        return {"city": city, "country": "FR"}

    return lookup


Check = Callable[[ToolSpec], bool]

# One value per option, and how the spec shows it (never true of the defaults).
TOOL_SAMPLES: dict[str, tuple[Any, Check]] = {
    "name": ("find", lambda s: s.name == "ops.find"),
    "title": ("Find a city", lambda s: s.title == "Find a city"),
    "description": ("Looks a city up.", lambda s: s.description == "Looks a city up."),
    "scopes": ({"geo:read"}, lambda s: s.scopes == {"geo:read"}),
    "read_only": (True, lambda s: s.annotations.read_only is True),
    "destructive": (False, lambda s: s.annotations.destructive is False),
    "idempotent": (True, lambda s: s.annotations.idempotent is True),
    "open_world": (False, lambda s: s.annotations.open_world is False),
    "risk": ("read", lambda s: s.risk_override is RiskTier.READ),
    "timeout": (5.0, lambda s: s.timeout == 5.0),
    "version": ("2", lambda s: s.version == "2"),
    "input_examples": ([{"city": "Paris"}], lambda s: s.input_examples == ({"city": "Paris"},)),
    "concise": (
        ["city"],
        lambda s: s.concise is not None and "response_format" in s.input_schema["properties"],
    ),
    "private_data": (True, lambda s: s.private_data is True),
    "tags": ({"geo"}, lambda s: s.tags == {"geo"}),
}


def _via_decorator(**options: Any) -> ToolSpec:
    marked = tool(**options)(_lookup())
    return Toolbox("ops", tools=[marked]).specs[0]


def _via_method(**options: Any) -> ToolSpec:
    box = Toolbox("ops")
    box.tool(**options)(_lookup())
    return box.specs[0]


def _via_add(**options: Any) -> ToolSpec:
    box = Toolbox("ops")
    return box.add(_lookup(), **options)


def _via_spec(**options: Any) -> ToolSpec:
    return spec_from_function(_lookup(), toolbox="ops", **options)


WAYS = [_via_decorator, _via_method, _via_add, _via_spec]


def test_every_tool_option_has_a_sample() -> None:
    assert set(TOOL_SAMPLES) == TOOL_OPTIONS


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__)
@pytest.mark.parametrize("option", sorted(TOOL_SAMPLES))
def test_each_way_of_declaring_a_tool_applies_each_option(
    way: Callable[..., ToolSpec], option: str
) -> None:
    value, shows = TOOL_SAMPLES[option]
    assert not shows(way())
    assert shows(way(**{option: value}))


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__)
def test_the_defaults_are_the_same_every_way(way: Callable[..., ToolSpec]) -> None:
    spec = way()
    assert spec.name == "ops.lookup"
    assert spec.title is None
    assert spec.description == "Find a city."
    assert spec.scopes == frozenset()
    assert (
        spec.annotations.read_only,
        spec.annotations.destructive,
        spec.annotations.idempotent,
        spec.annotations.open_world,
    ) == (None, None, None, None)
    assert spec.risk_override is None
    assert spec.timeout is None
    assert spec.version == "1"
    assert spec.input_examples == ()
    assert spec.concise is None
    assert "response_format" not in spec.input_schema["properties"]
    assert spec.private_data is False
    assert spec.tags == frozenset()


def test_options_given_to_add_override_those_of_the_decorator() -> None:
    marked = tool(scopes={"geo:read"}, version="2")(_lookup())
    box = Toolbox("ops")
    spec = box.add(marked, version="3")
    assert (spec.scopes, spec.version) == ({"geo:read"}, "3")


# The tool options a change does not take: its names and descriptions come from
# its functions, it is a write (the builder sets read_only and idempotent per
# tool: the preview reads, the apply is idempotent by preview id), and its
# preview's result is the preview id and the impact.
NOT_FOR_CHANGES = {"name", "description", "read_only", "idempotent", "concise"}


def test_a_change_takes_every_tool_option_but_those_it_sets_itself() -> None:
    assert {"ttl"} == CHANGE_OPTIONS - TOOL_OPTIONS
    assert TOOL_OPTIONS - CHANGE_OPTIONS == NOT_FOR_CHANGES


Tools = tuple[ToolSpec, ToolSpec, ToolSpec]
ChangeCheck = Callable[[Tools], bool]

CHANGE_SAMPLES: dict[str, tuple[Any, ChangeCheck]] = {
    "title": (
        "Budget",
        lambda t: [s.title for s in t] == ["Preview: Budget", "Budget", "Status: Budget"],
    ),
    "scopes": ({"ads:write"}, lambda t: all(s.scopes == {"ads:write"} for s in t)),
    "risk": ("write_idempotent", lambda t: t[1].risk_override is RiskTier.WRITE_IDEMPOTENT),
    "timeout": (7.0, lambda t: t[0].timeout == t[1].timeout == 7.0),
    "version": ("3", lambda t: all(s.version == "3" for s in t)),
    "input_examples": ([{"amount": 3}], lambda t: t[0].input_examples == ({"amount": 3},)),
    "private_data": (True, lambda t: t[0].private_data is True),
    "tags": ({"ads"}, lambda t: all(s.tags == {"ads"} for s in t)),
    "ttl": (60.0, lambda t: all(s.change is not None and s.change.ttl == 60.0 for s in t)),
    "destructive": (False, lambda t: t[1].annotations.destructive is False),
    "open_world": (True, lambda t: t[1].annotations.open_world is True),
}


def _change(**options: Any) -> Tools:
    box = Toolbox("ads")
    change = box.change("budget", **options)

    @change.preview
    def preview(amount: int) -> dict[str, int]:
        """Show the new budget."""
        return {"amount": amount}

    @change.apply
    def apply(amount: int) -> dict[str, int]:
        """Set the budget."""
        return {"amount": amount}

    tools = box.by_name
    return tools["ads.budget_preview"], tools["ads.budget_apply"], tools["ads.budget_status"]


def test_every_change_option_has_a_sample() -> None:
    assert set(CHANGE_SAMPLES) == CHANGE_OPTIONS


@pytest.mark.parametrize("option", sorted(CHANGE_SAMPLES))
def test_each_change_option_reaches_the_change_tools(option: str) -> None:
    value, shows = CHANGE_SAMPLES[option]
    assert not shows(_change())
    assert shows(_change(**{option: value}))


def test_the_change_defaults() -> None:
    preview, apply, status = _change()
    assert all(s.change is not None and s.change.ttl == 600.0 for s in (preview, apply, status))
    assert (apply.annotations.destructive, apply.annotations.open_world) == (True, False)
    assert apply.risk_override is RiskTier.WRITE_HIGH_RISK
    assert preview.annotations.read_only is True
    assert all(s.scopes == frozenset() and s.tags == frozenset() for s in (preview, apply, status))
    assert all(s.version == "1" and s.title is None for s in (preview, apply, status))


@pytest.mark.parametrize(
    "declare",
    [
        lambda: tool(read_onyl=True),
        lambda: Toolbox("ops").tool(read_onyl=True),
        lambda: Toolbox("ops").add(_lookup(), read_onyl=True),
        lambda: spec_from_function(_lookup(), toolbox="ops", read_onyl=True),
    ],
    ids=["decorator", "method", "add", "spec_from_function"],
)
def test_a_misspelt_option_is_refused_with_the_right_name(declare: Callable[[], object]) -> None:
    with pytest.raises(
        InvalidDefinition, match="unknown option 'read_onyl'; did you mean 'read_only'"
    ):
        declare()


def test_a_change_refuses_what_it_does_not_take() -> None:
    box = Toolbox("ads")
    with pytest.raises(TypeError, match="unknown option 'tll'; did you mean 'ttl'") as info:
        box.change("budget", tll=60)  # type: ignore[call-arg]
    assert isinstance(info.value, UserError)
    with pytest.raises(InvalidDefinition, match="unknown option 'read_only'"):
        box.change("budget", read_only=True)  # type: ignore[call-arg]
