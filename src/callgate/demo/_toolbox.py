"""The ``ops`` toolbox: the demo's tools bound to one state."""

from __future__ import annotations

from callgate.contract import Toolbox
from callgate.demo._campaigns import CampaignTools
from callgate.demo._deploys import DeployTools
from callgate.demo._email import EmailTools
from callgate.demo._notes import NoteTools
from callgate.demo._state import DemoState

TOOLBOX = "ops"


def build_toolboxes(state: DemoState) -> list[Toolbox]:
    """The demo toolboxes over ``state`` (tests use it to inspect the state)."""
    campaigns = CampaignTools(state)
    deploys = DeployTools(state)
    notes = NoteTools(state)
    email = EmailTools(state)
    ops = Toolbox(
        TOOLBOX,
        description="Demo operations domain: ad campaigns, production deployments, "
        "internal notes and outbound email of the tenants acme and globex (seeded "
        "sample data; email is never delivered).",
        tools=[
            campaigns.campaigns_find,
            campaigns.campaign_set_budget,
            deploys.deploy_status,
            deploys.deploy_rollback,
            notes.notes_search,
            notes.notes_read,
            email.send_email,
        ],
    )
    return [ops]
