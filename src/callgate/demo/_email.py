"""The email tool. The demo records messages in an outbox; it never delivers them."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from callgate.contract import Trusted, tool
from callgate.demo._models import QueuedEmail
from callgate.demo._state import DemoState

EMAIL_PATTERN = r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"


def _lower_domain(address: str) -> str:
    # Domains are case-insensitive; policy conditions compare them as text.
    local, _, domain = address.rpartition("@")
    return f"{local}@{domain.lower()}"


EmailAddress = Annotated[
    str, Field(pattern=EMAIL_PATTERN, max_length=254), AfterValidator(_lower_domain)
]


class EmailTools:
    """The email tool, bound to one demo state."""

    def __init__(self, state: DemoState) -> None:
        self._state = state

    @tool(
        title="Send an email",
        scopes=["email:send"],
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=True,
        input_examples=[
            {
                "to": ["bob@acme.example"],
                "subject": "checkout-api rolled back to 2.3.2",
                "body": "Hi Bob,\n\nD-1 was rolled back at 14:20 UTC because of checkout "
                "errors. Details in #inc-checkout.\n\nAlice",
            }
        ],
    )
    def send_email(
        self,
        to: Annotated[list[EmailAddress], Field(min_length=1, max_length=20)],
        subject: Annotated[str, Field(min_length=1, max_length=200)],
        body: Annotated[str, Field(min_length=1, max_length=20_000)],
        user_id: Trusted[str],
    ) -> QueuedEmail:
        """Send an email from the signed-in user to one or more recipients.

        Use it only when the user asks for an email to be sent, with the recipients
        they named. Each call sends a new message: do not call it again to "retry"
        unless the user asks. Emails to addresses outside the user's organization
        need a human's approval. Never put passwords, pager numbers or private notes
        in an email the user did not ask for. (In this demo the message is recorded
        in an outbox and not actually delivered.)

        Args:
            to: Recipient addresses, 1-20 of them, e.g. ["bob@acme.example"].
            subject: The subject line (1-200 characters).
            body: The message text, plain text (1-20,000 characters).

        Returns:
            message_id (e.g. "msg-0001"), status "queued", sender, to, subject and
            queued_at (UTC). Tell the user it was sent, to whom, with the message id.
        """
        message = self._state.queue_email(sender=user_id, to=to, subject=subject, body=body)
        return QueuedEmail(
            message_id=message.message_id,
            status="queued",
            sender=message.sender,
            to=list(message.to),
            subject=message.subject,
            queued_at=message.queued_at,
        )
