"""The demo's policy: three rules, each with a name and a reason."""

from __future__ import annotations

from callgate.runtime.policy import Approvers, Policy, Rule

BUDGET_INCREASE_APPROVAL_PCT = 50
"""Budget increases of more than this percentage of the current budget need approval."""


def demo_policy() -> Policy:
    """The policy the demo is meant to run with (everything else is allowed).

    - ``external-email-needs-approval``: ``ops.send_email`` to any recipient outside
      the sender's domain (``principal.attributes.domain``, e.g. ``acme.example``)
      waits for a human: the sender may confirm the exact message themself (an MCP
      client asks them through elicitation), or someone else approves it. A
      principal without a ``domain`` attribute needs approval for every email
      (fail closed).
    - ``budget-increase-over-50pct``: ``ops.budget_change_apply`` of a preview
      whose impact raises the daily budget by more than 50% waits for a human:
      the campaign owner (``impact.owner``, e.g. bob@acme.example for C-101), and
      nobody else, may approve it. The approval is filed, and the model told, as soon as
      ``ops.budget_change_preview`` computes the impact.
    - ``rollback-needs-oncall``: ``ops.deploy_rollback`` is refused unless the
      principal has the role ``oncall``. (Another tenant's deployment is refused by
      the tool itself.)
    """
    return Policy(
        [
            Rule(
                "require_approval",
                name="external-email-needs-approval",
                tools=["ops.send_email"],
                when=(
                    "!has(principal.attributes.domain) || "
                    'args.to.exists(r, !r.endsWith("@" + principal.attributes.domain))'
                ),
                reason="emails to recipients outside your organization need a human's approval",
                # The sender confirms the exact message (e.g. in their MCP client).
                approved_by="requester",
            ),
            Rule(
                "require_approval",
                tools=["ops.budget_change_apply"],
                when=f"impact.increase_pct > {BUDGET_INCREASE_APPROVAL_PCT}",
                name="budget-increase-over-50pct",
                reason="an increase of more than 50% over the current daily budget needs the "
                "campaign owner's approval",
                # Enforced, not only said: the owner named by the preview's impact.
                approvers=Approvers(owner="impact.owner"),
            ),
            Rule(
                "deny",
                name="rollback-needs-oncall",
                tools=["ops.deploy_rollback"],
                when='!("oncall" in principal.roles)',
                reason="only on-call engineers (role 'oncall') may roll back production "
                "deployments",
            ),
        ],
        default="allow",
    )
