"""How ``callgate --help`` draws options and usage lines.

Typer shows a flag with a value placeholder (``--json <bool>``, though ``--json
true`` is refused) and a required argument in braces (``call [OPTIONS]
{TOOL}``). These command classes show a flag without a placeholder and
arguments the way every other tool does (``TOOL``, ``[PROMPT]``). The root
group gives its classes to every command and subgroup under it, so a command
added later draws its help the same way without asking.
"""

from __future__ import annotations

from typing import Any

import typer.core


def _without_flag_placeholders(params: list[Any]) -> list[Any]:
    # Duck-typed: typer may bring its own copy of click, whose classes are not click's.
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class HelpCommand(typer.core.TyperCommand):
    """A command whose help shows flags without a placeholder and plain argument names."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_placeholders(list(super().get_params(ctx)))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or str(param.name).upper()
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class HelpGroup(typer.core.TyperGroup):
    """A group whose help, and its commands' and subgroups', shows flags without a
    placeholder and plain argument names."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _adopt(self)

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_placeholders(list(super().get_params(ctx)))


def _adopt(group: typer.core.TyperGroup) -> None:
    # Typer builds each command with its own class; these classes add behaviour
    # only (no state), so switching an instance's class is safe.
    for command in group.commands.values():
        if type(command) is typer.core.TyperCommand:
            command.__class__ = HelpCommand
        elif type(command) is typer.core.TyperGroup:
            command.__class__ = HelpGroup
            _adopt(command)
