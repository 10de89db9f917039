"""Deployment tools: read a deployment's status, roll a deployment back."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from callgate.contract import Trusted, tool
from callgate.demo._models import Deployment, Rollback
from callgate.demo._records import DeploymentRecord
from callgate.demo._state import DemoState, owned
from callgate.errors import BusinessStateError

_ID_FORMAT = '"D-" and a number, e.g. "D-1"'
_FINDER = (
    "Use the deployment id from the alert, the release dashboard or the user; "
    "ask the user if you do not have it."
)


def _deployment(record: DeploymentRecord) -> Deployment:
    return Deployment(
        id=record.id,
        service=record.service,
        environment=record.environment,
        version=record.version,
        previous_version=record.previous_version,
        state=record.state,
        started_at=record.started_at,
        started_by=record.started_by,
        rolled_back_at=record.rolled_back_at,
        rolled_back_by=record.rolled_back_by,
        rollback_reason=record.rollback_reason,
    )


class DeployTools:
    """The deployment tools, bound to one demo state."""

    def __init__(self, state: DemoState) -> None:
        self._state = state

    def _get(self, deploy_id: str, tenant_id: str) -> DeploymentRecord:
        return owned(
            self._state.deployments,
            deploy_id,
            tenant_id,
            kind="deployment",
            id_format=_ID_FORMAT,
            finder=_FINDER,
        )

    @tool(
        title="Get a deployment's status",
        scopes=["deploy:read"],
        read_only=True,
        open_world=False,
        input_examples=[{"deploy_id": "D-1"}],
    )
    def deploy_status(self, deploy_id: str, tenant_id: Trusted[str]) -> Deployment:
        """Get the current state of one production deployment of your organization.

        Use it before any rollback (to see what is running and what a rollback
        would return to), after a rollback (to confirm it), and whenever a write
        timed out and you need to know whether it happened. It only reads. There is
        no search: you need the deployment's id.

        Args:
            deploy_id: The deployment's id, "D-" and a number, e.g. "D-1".

        Returns:
            The deployment: service, environment, version, previous_version (what a
            rollback returns to; null for a service's first deployment), state
            ("running": this version is live; "failed": the rollout failed;
            "rolled_back": replaced by previous_version), started_at (UTC, ISO
            8601), started_by, and for a rolled-back one who rolled it back, when
            and why.
        """
        with self._state.transaction():
            return _deployment(self._get(deploy_id, tenant_id))

    @tool(
        title="Roll back a deployment",
        scopes=["deploy:rollback"],
        destructive=True,
        idempotent=False,
        open_world=False,
        input_examples=[
            {
                "deploy_id": "D-1",
                "reason": "checkout 5xx above 6% since 14:05 after 2.4.0; rolling back to 2.3.2",
            }
        ],
    )
    def deploy_rollback(
        self,
        deploy_id: str,
        reason: Annotated[str, Field(min_length=10, max_length=500)],
        tenant_id: Trusted[str],
        user_id: Trusted[str],
    ) -> Rollback:
        """Roll a production deployment back to its previous version.

        Use it only when the user explicitly asks to roll back a deployment,
        after checking it with ops.deploy_status. It replaces the deployed version
        with the deployment's previous_version; you cannot choose another version.
        It is not idempotent: never call it twice for one deployment, and if it
        times out, check ops.deploy_status instead of calling it again. Do not use
        it for a service's first deployment (nothing to return to) or one that is
        already rolled back.

        Args:
            deploy_id: The deployment's id, "D-" and a number, e.g. "D-1".
            reason: Why it is rolled back, in words a colleague understands a month
                later (10-500 characters), e.g. "checkout 5xx above 6% after 2.4.0".
                Stored on the deployment and in the audit log.

        Returns:
            deploy_id, service, from_version, to_version, the new state
            ("rolled_back"), rolled_back_at (UTC), rolled_back_by and the reason.
            Tell the user which version now runs, and confirm with ops.deploy_status.
        """
        state = self._state
        with state.transaction():
            deployment = self._get(deploy_id, tenant_id)
            if deployment.state == "rolled_back":
                by = f" by {deployment.rolled_back_by}" if deployment.rolled_back_by else ""
                at = (
                    f" at {deployment.rolled_back_at:%Y-%m-%d %H:%M} UTC"
                    if deployment.rolled_back_at
                    else ""
                )
                raise BusinessStateError(
                    f"Deployment {deployment.id} ({deployment.service} {deployment.version}) "
                    f"was already rolled back to {deployment.previous_version}{by}{at}; "
                    "nothing was changed.",
                    next_step="Do not retry. Tell the user it is already rolled back; use "
                    "ops.deploy_status for details.",
                )
            target = deployment.previous_version
            if target is None:
                raise BusinessStateError(
                    f"Deployment {deployment.id} is the first deployment of "
                    f"{deployment.service}: there is no previous version to roll back to; "
                    "nothing was changed.",
                    next_step="Do not retry. Tell the user a rollback is impossible here; "
                    "a fix has to be deployed forward by the service's team.",
                )
            now = state.clock()
            state.update(
                state.deployments,
                deployment,
                state="rolled_back",
                rolled_back_at=now,
                rolled_back_by=user_id,
                rollback_reason=reason,
            )
        return Rollback(
            deploy_id=deployment.id,
            service=deployment.service,
            from_version=deployment.version,
            to_version=target,
            state="rolled_back",
            rolled_back_at=now,
            rolled_back_by=user_id,
            reason=reason,
        )
