"""A catalogue of look-alike tools in several toolboxes, for the search tests."""

from __future__ import annotations

from callgate import Toolbox


def catalogue() -> list[Toolbox]:
    """Mail, deploys, billing (needs a scope), a Chinese-described helpdesk, a
    tenant-only toolbox: tools that look alike, so that ranking matters."""
    mail = Toolbox("mail")

    @mail.tool(read_only=True, open_world=False)
    def list_inbox(folder: str = "inbox") -> list[str]:
        """List the email messages in a mailbox folder, newest first.

        Args:
            folder: The folder, like inbox or archive.
        """
        return []

    @mail.tool(open_world=True)
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email message to a recipient.

        Args:
            to: The recipient's address.
            subject: The subject line.
            body: The message text.
        """
        return "sent"

    @mail.tool(open_world=False, idempotent=True)
    def archive_message(message_id: str) -> str:
        """Move one email message to the archive folder.

        Args:
            message_id: The message's id.
        """
        return "archived"

    ops = Toolbox("ops")

    @ops.tool(read_only=True, open_world=False)
    def deploy_status(deploy_id: str) -> dict[str, str]:
        """Get the current state of a production deployment (a release).

        Args:
            deploy_id: The deployment's id, like D-1.
        """
        return {"id": deploy_id}

    @ops.tool(destructive=True, open_world=False)
    def deploy_rollback(deploy_id: str, reason: str) -> str:
        """Roll a production deployment back to its previous version.

        Args:
            deploy_id: The deployment's id.
            reason: Why, for the audit.
        """
        return "rolled back"

    @ops.tool(read_only=True, open_world=False)
    def restartServer(hostName: str) -> str:  # camelCase on purpose
        """Restart a web server process on one host.

        Args:
            hostName: The host.
        """
        return "restarted"

    billing = Toolbox("billing")

    @billing.tool(scopes={"billing:write"}, open_world=False, idempotent=False)
    def refund_invoice(invoice_id: str, amount: int) -> str:
        """Refund part or all of a paid invoice to the customer.

        Args:
            invoice_id: The invoice.
            amount: Cents to refund.
        """
        return "refunded"

    helpdesk = Toolbox("helpdesk")

    @helpdesk.tool(read_only=True, open_world=False)
    def ticket_search(keyword: str) -> list[str]:
        """搜索客服工单，按关键词查找客户的投诉和问题。

        Args:
            keyword: 关键词
        """
        return []

    @helpdesk.tool(open_world=False, idempotent=False)
    def ticket_reply(ticket_id: str, text: str) -> str:
        """回复客户的工单，发送答复给客户。

        Args:
            ticket_id: 工单编号
            text: 答复内容
        """
        return "ok"

    partner = Toolbox("partner", tenants={"globex"})

    @partner.tool(read_only=True, open_world=False)
    def partner_invoice_list() -> list[str]:
        """List the invoices of a partner account."""
        return []

    return [mail, ops, billing, helpdesk, partner]
