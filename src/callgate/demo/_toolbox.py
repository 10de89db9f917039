"""The ``ops`` toolbox: the demo's tools bound to one state."""

from __future__ import annotations

from callgate.contract import Toolbox
from callgate.demo._campaigns import BUDGET_PREVIEW_TTL, CampaignTools, add_budget_change
from callgate.demo._checklists import ChecklistTools
from callgate.demo._deploys import DeployTools
from callgate.demo._email import EmailTools
from callgate.demo._notes import NoteTools
from callgate.demo._state import DemoState
from callgate.demo._web import WebTools

TOOLBOX = "ops"


def build_toolboxes(state: DemoState, *, budget_ttl: float = BUDGET_PREVIEW_TTL) -> list[Toolbox]:
    """The demo toolboxes over ``state`` (tests use it to inspect the state).

    Args:
        state: The data the tools read and change.
        budget_ttl: Seconds a ``ops.budget_change_preview`` id stays valid.

    Returns:
        One toolbox, ``ops``.
    """
    campaigns = CampaignTools(state)
    deploys = DeployTools(state)
    notes = NoteTools(state)
    email = EmailTools(state)
    web = WebTools()
    checklists = ChecklistTools(state)
    ops = Toolbox(
        TOOLBOX,
        description="Demo operations domain: ad campaigns, production deployments, "
        "internal notes and runbook checklist runs, outbound email and an offline web "
        "reader, for the tenants acme and globex (seeded sample data; email is never "
        "delivered).",
        tools=[
            campaigns.campaigns_find,
            deploys.deploy_status,
            deploys.deploy_rollback,
            notes.notes_search,
            notes.notes_read,
            checklists.runbook_start,
            checklists.runbook_step_done,
            checklists.runbook_status,
            email.send_email,
            web.web_fetch,
        ],
    )
    add_budget_change(ops, state, ttl=budget_ttl)
    return [ops]
