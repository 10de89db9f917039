"""Why a token is refused: :class:`InvalidToken`."""

from __future__ import annotations

from typing import Literal

from callgate.errors import RuntimeFailure

__all__ = ["InvalidToken", "TokenProblem"]

TokenProblem = Literal[
    "malformed",
    "algorithm_refused",
    "unknown_key",
    "keys_unavailable",
    "bad_signature",
    "expired",
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "missing_claim",
    "bad_claim",
]
"""What was wrong with a token, for code that answers differently (all of them
are a ``401``; ``keys_unavailable`` is the gateway's problem, not the caller's)."""


class InvalidToken(RuntimeFailure):
    """A bearer token that does not authenticate anyone.

    Attributes:
        code: what was wrong, as a fixed word (:data:`TokenProblem`).
        description: one line saying so, safe to send back in
            ``WWW-Authenticate``'s ``error_description`` and to log: it never
            holds the token nor a value taken from it.
    """

    def __init__(self, code: TokenProblem, description: str) -> None:
        super().__init__(description)
        self.code: TokenProblem = code
        self.description = description
