"""The ``callgate`` command line: list tools, run governed calls, read the audit, tour the demo."""

from callgate.cli.app import app, main

__all__ = ["app", "main"]
