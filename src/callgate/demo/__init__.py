"""The demo toolset: a small operations domain with seeded data.

One toolbox, ``ops``, with tools over four kinds of things of two tenants
(``acme`` and ``globex``): advertising campaigns (``ops.campaigns_find``,
``ops.campaign_set_budget``), production deployments (``ops.deploy_status``,
``ops.deploy_rollback``), internal notes (``ops.notes_search``,
``ops.notes_read``) and outbound email (``ops.send_email``). It is what the
README, the docs and the CLI demonstrate on, and a realistic target for evals.

Example:
    from callgate import Gate, Principal
    from callgate.demo import demo_policy, toolboxes

    alice = Principal(
        "alice@acme.example",
        tenant="acme",
        scopes=["campaigns:read", "campaigns:write"],
        attributes={"domain": "acme.example"},
    )
    async with Gate(toolboxes(), store="memory://", policy=demo_policy()) as gate:
        env = await gate.call("ops.campaigns_find", {"query": "Autumn Sale"}, principal=alice)

State: every ``toolboxes()`` call creates a fresh, deterministically seeded copy
of the data, held in memory by that call's tools (so tests are isolated).
Changes (a budget set, a rollback, a queued email) live only as long as those
toolbox objects: the ``callgate call`` CLI starts a new process per command, so
a change made by one command is not seen by the next. Nothing leaves the
process: ``ops.send_email`` records messages in an in-memory outbox and never
delivers them.
"""

from __future__ import annotations

from callgate.contract import Toolbox
from callgate.demo._policy import demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes

__all__ = ["demo_policy", "toolboxes"]


def toolboxes() -> list[Toolbox]:
    """Fresh demo toolboxes (one, ``ops``) over freshly seeded data.

    Each call returns new objects with their own state, so two gates (or two
    tests) never see each other's changes.
    """
    return build_toolboxes(DemoState())
