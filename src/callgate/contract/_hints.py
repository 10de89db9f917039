"""A function's type hints, as ``typing.get_type_hints(fn, include_extras=True)``
gives them, without compiling each string hint again for every function.

Under ``from __future__ import annotations`` every hint is a string, and
``get_type_hints`` compiles each one anew: a third of what registering a
typical tool cost. Here the compiled form of a hint's text is kept (the text
alone decides it) and evaluated in the function's own globals each time, so a
hint still means what its module says now. Whatever is not plainly a type
once evaluated (a nested string, ``ClassVar``, an error) is left to
``typing.get_type_hints``, which gives the answer or raises as it always did.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, ForwardRef, Literal, Union

_PLAIN_ORIGINS = frozenset(
    {
        Annotated,
        Literal,
        Union,
        types.UnionType,
        list,
        dict,
        set,
        frozenset,
        tuple,
        type,
        collections.abc.Sequence,
        collections.abc.Mapping,
        collections.abc.Iterable,
        collections.abc.Callable,
    }
)


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """``typing.get_type_hints(fn, include_extras=True)``, faster for plain hints.

    Raises:
        NameError: a string hint names something its module does not define.
    """
    raw = getattr(fn, "__annotations__", None)
    if isinstance(raw, dict):
        namespace: Any = fn
        while hasattr(namespace, "__wrapped__"):
            namespace = namespace.__wrapped__
        globalns = getattr(namespace, "__globals__", None)
        if isinstance(globalns, dict):
            hints: dict[str, Any] = {}
            try:
                for name, value in raw.items():
                    if isinstance(value, str):
                        value = eval(_compiled(value), globalns, globalns)
                    if value is None:
                        value = type(None)
                    if not _plain(value):
                        break
                    hints[name] = value
                else:
                    return hints
            except Exception:
                pass
    return typing.get_type_hints(fn, include_extras=True)


@functools.lru_cache(maxsize=2048)
def _compiled(source: str) -> types.CodeType:
    return compile(source, "<annotation>", "eval")


def _plain(value: Any) -> bool:
    """A type, ``Any``, or a generic alias of plain types (no strings left in it)."""
    if isinstance(value, type):
        return True
    if value is Any:
        return True
    origin = typing.get_origin(value)
    if origin not in _PLAIN_ORIGINS:
        return False
    if origin is Literal:
        return True
    args = typing.get_args(value)
    if origin is Annotated:
        args = args[:1]
    return all(
        not isinstance(arg, (str, ForwardRef)) and (arg is Ellipsis or _plain(arg)) for arg in args
    )
