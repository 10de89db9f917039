"""Each rule fires on a tool that breaks it and stays quiet on one that does not."""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Toolbox, Trusted
from callgate.lint import RULES, LintSettings, facts_from_schema, facts_from_spec, lint
from callgate.runtime.policy import Policy, Rule

GOOD_DESCRIPTION = (
    "Find orders by customer and status. Use it to look orders up before changing one; "
    "to read one order by order_id, use orders_get instead."
)


def tool(
    name: str = "shop.orders_find", description: str = GOOD_DESCRIPTION, **schema: Any
) -> dict[str, Any]:
    properties = schema.pop(
        "properties", {"limit": {"type": "integer", "description": "At most this many."}}
    )
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, **schema},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


def rules_of(*tools: dict[str, Any]) -> set[str]:
    return {f.rule for f in lint([facts_from_schema(t) for t in tools]).findings}


def param(**fields: Any) -> dict[str, Any]:
    return {
        "properties": {"limit": {"type": "integer", "description": "At most this many."}, **fields}
    }


CASES = [
    ("name-namespace", tool(name="orders_find"), tool()),
    ("name-verb", tool(name="shop.stock_levels"), tool(name="shop.orders_find")),
    ("description-missing", tool(description=""), tool()),
    ("description-short", tool(description="Finds orders."), tool()),
    ("description-long", tool(description="Find orders. " * 200), tool()),
    (
        "description-when",
        tool(description="Find orders by customer and status, newest first."),
        tool(),
    ),
    (
        "description-params",
        tool(
            description=GOOD_DESCRIPTION,
            required=["customer_ref"],
            **param(customer_ref={"type": "string", "description": "x", "maxLength": 9}),
        ),
        tool(
            description=GOOD_DESCRIPTION + " Give customer_ref.",
            required=["customer_ref"],
            **param(customer_ref={"type": "string", "description": "x", "maxLength": 9}),
        ),
    ),
    (
        "param-description",
        tool(**param(status={"type": "string", "enum": ["open"]})),
        tool(**param(status={"type": "string", "enum": ["open"], "description": "Which orders."})),
    ),
    (
        "param-format",
        tool(**param(created_date={"type": "string", "description": "When."})),
        tool(**param(created_date={"type": "string", "format": "date", "description": "When."})),
    ),
    (
        "param-example",
        tool(**param(sku={"type": "string", "maxLength": 9, "description": "The product's code."})),
        tool(
            **param(sku={"type": "string", "maxLength": 9, "description": "The code, e.g. 'P-1'."})
        ),
    ),
    (
        "param-enum",
        tool(
            **param(
                status={"type": "string", "description": "The status: either 'open' or 'closed'."}
            )
        ),
        tool(
            **param(
                status={
                    "type": "string",
                    "description": "A status such as 'open', 'closed', etc.",
                    "maxLength": 20,
                }
            )
        ),
    ),
    (
        "param-identifier",
        tool(**param(customer={"type": "integer", "description": "Who."})),
        tool(**param(customer_id={"type": "integer", "description": "Who."})),
    ),
    ("param-trusted", tool(**param(tenant_id={"type": "string", "description": "Whose."})), tool()),
    (
        "schema-required-default",
        tool(
            required=["limit"],
            **param(limit={"type": "integer", "default": 10, "description": "n"}),
        ),
        tool(required=["limit"]),
    ),
    (
        "schema-nesting",
        tool(
            **param(
                a={
                    "type": "object",
                    "description": "a",
                    "properties": {
                        "b": {
                            "type": "object",
                            "properties": {
                                "c": {
                                    "type": "object",
                                    "properties": {
                                        "d": {
                                            "type": "object",
                                            "properties": {"e": {"type": "integer"}},
                                        }
                                    },
                                }
                            },
                        }
                    },
                }
            )
        ),
        tool(
            **param(
                a={"type": "object", "description": "a", "properties": {"b": {"type": "integer"}}}
            )
        ),
    ),
    (
        "schema-free-object",
        tool(**param(filters={"type": "object", "description": "Anything."})),
        tool(
            **param(
                filters={
                    "type": "object",
                    "description": "f",
                    "properties": {"status": {"type": "string", "enum": ["open"]}},
                }
            )
        ),
    ),
    (
        "schema-unbounded-array",
        tool(**param(ids={"type": "array", "items": {"type": "integer"}, "description": "Ids."})),
        tool(
            **param(
                ids={
                    "type": "array",
                    "items": {"type": "integer"},
                    "maxItems": 50,
                    "description": "Ids.",
                }
            )
        ),
    ),
    (
        "schema-unbounded-string",
        tool(**param(note={"type": "string", "description": "A note."})),
        tool(**param(note={"type": "string", "maxLength": 200, "description": "A note."})),
    ),
    (
        "schema-boolean-mode",
        tool(**param(ascending={"type": "boolean", "description": "Oldest first."})),
        tool(**param(include_closed={"type": "boolean", "description": "Closed too."})),
    ),
    (
        "result-paging",
        tool(properties={"status": {"type": "string", "enum": ["open"], "description": "s"}}),
        tool(),
    ),
    (
        "result-concise",
        tool(),
        tool(
            **param(
                response_format={
                    "type": "string",
                    "enum": ["concise", "detailed"],
                    "description": "How much.",
                }
            )
        ),
    ),
    (
        "risk-destructive-unmarked",
        {**tool(name="shop.orders_delete"), "annotations": {"readOnlyHint": False}},
        {
            **tool(name="shop.orders_delete"),
            "annotations": {"readOnlyHint": False, "destructiveHint": True},
        },
    ),
    ("risk-hints-missing", {**tool(), "annotations": {}}, tool()),
]


@pytest.mark.parametrize(("rule", "bad", "good"), CASES, ids=[c[0] for c in CASES])
def test_a_rule_fires_on_the_bad_tool_and_not_on_the_good_one(
    rule: str, bad: dict[str, Any], good: dict[str, Any]
) -> None:
    assert rule in rules_of(bad)
    assert rule not in rules_of(good)


def test_every_rule_is_exercised_somewhere_in_these_tests() -> None:
    tested = {c[0] for c in CASES} | {
        "name-case",
        "name-lookalike",
        "description-lookalike",
        "error-next-step",
        "risk-unguarded-write",
        "risk-trifecta",
    }
    assert tested == set(RULES)


def test_look_alike_names_and_descriptions_and_mixed_case_are_found_across_tools() -> None:
    other = "Cancel an order that has not shipped. Use it when the customer asks to cancel."
    found = lint(
        [
            facts_from_schema(tool(name="shop.order_get")),
            facts_from_schema(tool(name="shop.orders_get", description=other)),
            facts_from_schema(tool(name="shop.cancelOrder", description=other + " ")),
            facts_from_schema(tool(name="shop.step_1")),
            facts_from_schema(tool(name="shop.step_2")),
            facts_from_schema(tool(name="shop.check_app_status")),
            facts_from_schema(tool(name="shop.check_vpn_status")),
        ]
    ).findings
    looks = {(f.tool, f.rule) for f in found}
    assert ("shop.order_get", "name-lookalike") in looks  # order / orders
    assert ("shop.orders_get", "name-lookalike") in looks
    assert not any(
        t in ("shop.step_1", "shop.check_app_status") and r == "name-lookalike" for t, r in looks
    )
    assert ("shop.cancelOrder", "name-case") in looks
    assert ("shop.orders_get", "description-lookalike") in looks
    lookalike = next(f for f in found if f.rule == "name-lookalike")
    assert lookalike.why and lookalike.fix and "edit" in lookalike.message


shop = Toolbox("shop", description="Orders.")
web = Toolbox("web", trusted=False)


@shop.tool(read_only=True, open_world=False, private_data=True)
def orders_find(customer_id: str, tenant_id: Trusted[str]) -> list[str]:
    """Find a customer's orders. Use it before changing one.

    Args:
        customer_id: The customer, e.g. "C-1".
    """
    if not customer_id.startswith("C-"):
        raise ValueError(f"No customer {customer_id}.")
    return []


@shop.tool(destructive=False, idempotent=False, open_world=False)
def refund_issue(order_id: str, amount: int, tenant_id: Trusted[str]) -> dict[str, Any]:
    """Refund part of an order. Use it when the customer returned goods.

    Args:
        order_id: The order, e.g. "O-1".
        amount: Whole currency units.
    """
    if amount <= 0:
        raise ValueError("The amount must be positive: give the refund in whole units, e.g. 20.")
    return {}


@web.tool(read_only=False, open_world=True)
def post_message(url: str, body: str) -> str:
    """Post a message to a web address. Use it to notify people outside."""
    return url


def test_callgate_tools_are_checked_with_the_policy_and_their_functions() -> None:
    specs = {s.name: s for s in [*shop.specs, *web.specs]}
    unguarded = lint([facts_from_spec(s, Policy()) for s in specs.values()])
    by_rule = {(f.tool, f.rule): f for f in unguarded.findings}
    # A write with no idempotency, no preview and no approval rule.
    assert ("shop.refund_issue", "risk-unguarded-write") in by_rule
    # The error that says what to do is fine; the one that does not is found.
    assert "No customer" in by_rule[("shop.orders_find", "error-next-step")].message
    assert ("shop.refund_issue", "error-next-step") not in by_rule
    # tenant_id is Trusted: the model never sees it, nothing to find.
    assert not any(rule == "param-trusted" for _, rule in by_rule)
    # Private data, untrusted content (an untrusted source) and a way out.
    assert by_rule[("web.post_message", "risk-trifecta")].severity == "error"

    guarded = Policy([Rule("require_approval", tools=["shop.refund_*"], reason="refunds")])
    again = lint([facts_from_spec(s, guarded) for s in specs.values()])
    unguarded_now = {f.tool for f in again.findings if f.rule == "risk-unguarded-write"}
    assert unguarded_now == {"web.post_message"}


def test_waivers_keep_a_finding_but_not_its_failure_and_disabled_rules_do_not_run() -> None:
    bad = [facts_from_schema(tool(description=""))]
    assert lint(bad).failed()
    waived = lint(bad, LintSettings(waivers={"shop.*": {"description-missing": "generated"}}))
    assert not waived.failed()
    assert [f.waived for f in waived.findings if f.rule == "description-missing"] == ["generated"]
    disabled = lint(bad, LintSettings(disable=frozenset({"description-missing"})))
    assert not any(f.rule == "description-missing" for f in disabled.findings)
    assert lint(bad).failed(fail_on="info") and not lint([facts_from_schema(tool())]).failed()


def test_a_definition_without_a_name_or_with_a_bad_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="without a name"):
        facts_from_schema({"description": "x"})
    with pytest.raises(ValueError, match="not an object"):
        facts_from_schema({"name": "x", "parameters": [1]})
    openai_style = facts_from_schema(
        {"type": "function", "function": {"name": "a.b", "parameters": {}}}
    )
    assert (openai_style.namespace, openai_style.local_name) == ("a", "b")
