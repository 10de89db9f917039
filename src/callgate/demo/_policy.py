"""The demo's policy: three rules, each with a name and a reason."""

from __future__ import annotations

from callgate.runtime.policy import Policy, Rule

BUDGET_APPROVAL_THRESHOLD = 50_000
"""Daily budgets above this (whole currency units) need a human's approval."""


def demo_policy() -> Policy:
    """The policy the demo is meant to run with (everything else is allowed).

    - ``external-email-needs-approval``: ``ops.send_email`` to any recipient outside
      the sender's domain (``principal.attributes.domain``, e.g. ``acme.example``)
      waits for a human. A principal without a ``domain`` attribute needs approval
      for every email (fail closed).
    - ``large-budget-needs-approval``: ``ops.campaign_set_budget`` with
      ``new_daily_budget`` above 50,000 waits for a human.
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
            ),
            Rule(
                "require_approval",
                name="large-budget-needs-approval",
                tools=["ops.campaign_set_budget"],
                when=f"args.new_daily_budget > {BUDGET_APPROVAL_THRESHOLD}",
                reason=f"daily budgets above {BUDGET_APPROVAL_THRESHOLD:,} need a human's approval",
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
