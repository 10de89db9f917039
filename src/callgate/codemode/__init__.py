"""Code mode: the model writes a short program, and every call inside it is governed.

See docs/code-mode.md. A program runs in a ``pydantic-monty`` sandbox worker
(:mod:`~callgate.codemode.sandbox`); its tool calls come back to the host and
pass :meth:`callgate.Gate.call` (:mod:`~callgate.codemode.program`); values
crossing the boundary are made plain JSON under limits
(:mod:`~callgate.codemode.values`).
"""

from callgate.codemode.program import RunAnswer
from callgate.codemode.sandbox import CodeModeUnavailable
from callgate.codemode.settings import CodeModeSettings, parse_code_mode
from callgate.codemode.tool import CODE_FUNCTIONS, RUN_CODE

__all__ = [
    "CODE_FUNCTIONS",
    "RUN_CODE",
    "CodeModeSettings",
    "CodeModeUnavailable",
    "RunAnswer",
    "parse_code_mode",
]
