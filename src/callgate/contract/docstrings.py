"""Split a Google-style docstring into the description and per-argument text."""

from __future__ import annotations

import inspect
import re

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = {"args", "arguments", "parameters", "params"}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return (description without the Args section, {argument: description}).

    Other sections (Returns, Raises, Examples) stay in the description: they tell
    the model what comes back and what to do next.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header and not line.startswith(" "):
            in_args = header.group(1).strip().lower() in _ARG_SECTIONS
            current = None
            if in_args:
                continue
        if in_args:
            if line and not line.startswith(" "):
                in_args = False
            else:
                stripped = line.strip()
                match = _ARG.match(stripped)
                indent = len(line) - len(line.lstrip())
                if match and indent <= 4:
                    current = match.group(1).lstrip("*")
                    args[current] = match.group(2).strip()
                elif current and stripped:
                    args[current] = f"{args[current]} {stripped}".strip()
                continue
        kept.append(line)
    return "\n".join(kept).strip(), args
