"""The web console's server side: the approvals HTTP API and its authentication seam.

Example:
    from callgate.console import approvals_app, bearer_tokens

    app = approvals_app(gate, authenticate=bearer_tokens({token: bob}))
    # serve ``app`` with any ASGI server, e.g. ``uvicorn``
"""

from callgate.console.api import approvals_app
from callgate.console.auth import Authenticate, Unauthenticated, bearer, bearer_tokens

__all__ = ["Authenticate", "Unauthenticated", "approvals_app", "bearer", "bearer_tokens"]
