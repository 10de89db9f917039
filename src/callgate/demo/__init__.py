"""The demo toolset: a small operations domain with seeded data.

One toolbox, ``ops``, with tools over four kinds of things of two tenants
(``acme`` and ``globex``): advertising campaigns (``ops.campaigns_find``, and
the previewed change ``ops.budget_change_preview`` / ``ops.budget_change_apply``
/ ``ops.budget_change_status``), production deployments (``ops.deploy_status``,
``ops.deploy_rollback``), internal notes (``ops.notes_search``,
``ops.notes_read``; a runbook's checklist is worked through across calls with
``ops.runbook_start`` / ``ops.runbook_step_done`` / ``ops.runbook_status``, behind
a run handle that lives 2 hours after its last change) and outbound email
(``ops.send_email``). It is what the
README, the docs and the CLI demonstrate on, and a realistic target for evals.

A budget change is two steps: the preview computes the impact (before/after,
the change in absolute and percent) without changing anything and returns a
short-lived preview id; the apply takes only that id and makes exactly that
change, once. With ``demo_policy()``, an increase of more than 50% needs a
human's approval, filed as soon as the preview shows it.

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
        preview = await gate.call(
            "ops.budget_change_preview",
            {"campaign_id": "C-101", "new_daily_budget": 1500},
            principal=alice,
        )
        applied = await gate.call(
            "ops.budget_change_apply",
            {"preview_id": preview.payload["preview_id"]},
            principal=alice,
        )

State: by default every ``toolboxes()`` call creates a fresh, deterministically
seeded copy of the data, held in memory by that call's tools, so two gates (or
two tests) never see each other's changes.

When the environment variable ``CALLGATE_DEMO_STATE`` names a file,
``toolboxes()`` keeps the changeable data (campaigns, deployments, the email
outbox) in that JSON file instead: it is seeded on first use (when the file is
missing or empty), every read sees what other processes wrote, and every change
is written back atomically (a temporary file, then ``os.replace``). A change
reads, checks and writes under a thread lock and an exclusive ``fcntl.flock``
on ``<file>.lock``, so two processes never interleave. This is how a change
made by one ``callgate call`` command is seen by the next one (each is a new
process). Delete the file to start over from the seeded data. POSIX only.

Nothing leaves the process: ``ops.send_email`` records messages in an outbox
and never delivers them.
"""

from __future__ import annotations

import os

from callgate.contract import Toolbox
from callgate.demo._policy import demo_policy
from callgate.demo._state import DemoState
from callgate.demo._toolbox import build_toolboxes

__all__ = ["STATE_ENV", "demo_policy", "toolboxes"]

STATE_ENV = "CALLGATE_DEMO_STATE"
"""The environment variable naming the file that keeps the demo's state."""


def toolboxes() -> list[Toolbox]:
    """The demo toolboxes (one, ``ops``) over seeded data.

    Without ``CALLGATE_DEMO_STATE`` each call returns new objects over a fresh
    in-memory copy of the data. With it, the tools read and write the state in
    that file (created and seeded if needed), shared by every process using it.

    Returns:
        The toolbox ``ops``, in a list.

    Raises:
        DemoStateError: the file exists but is not a demo state.
    """
    path = os.environ.get(STATE_ENV, "").strip()
    return build_toolboxes(DemoState(path=path or None))
