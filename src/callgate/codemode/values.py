"""Values crossing the sandbox's boundary, made plain JSON under limits.

Whatever a program passes to a tool, and whatever it finally returns, arrives
as the sandbox produced it: nesting hundreds of thousands of levels deep,
integers of thousands of digits, NaN, strings of a hundred megabytes, proxies of
the program's own functions, classes and modules. Nothing else in callgate sees
such a value before :func:`plain` has turned it into JSON (dicts with string
keys, lists, strings, finite numbers, booleans, None) or refused it with a
sentence the model can act on.

The sandbox hands some of its objects back as their text: a function as
``"<function 'f' at 0xc>"``, a class as ``"<class 'A'>"``, a call never awaited
as ``"<coroutine object g>"``, a module as ``"<module 'json'>"``. Such a string
is refused too (an inert text, but never what the program meant to pass on).

The walk is iterative: a value nested deeper than Python's own recursion limit
is refused like any other, never by a ``RecursionError``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ValueLimits", "ValueRefused", "plain"]

MAX_SAFE_INTEGER = 2**53
"""Integers beyond +-2**53 lose precision in JSON readers (JavaScript's and
most others'): refused rather than silently changed."""


@dataclass(frozen=True, kw_only=True)
class ValueLimits:
    max_depth: int = 64
    """Containers inside containers."""
    max_bytes: int = 1_000_000
    """The value's size as JSON, roughly (strings counted by characters)."""
    max_items: int = 100_000
    """Values in all, containers and scalars."""


# The text the sandbox (pydantic-monty 1.x) gives its objects that have no value.
_SANDBOX_OBJECT = re.compile(
    r"<(?:(?P<function>function '[^']*' at 0x[0-9a-f]+)|(?P<cls>class '[^']*')"
    r"|(?P<coroutine>coroutine (?:object [^>]*|external_future\(\d+\)))|(?P<module>module '[^']*'))>"
)
_WHAT_IT_IS = {
    "function": "a function itself (call it, and pass on what it returns)",
    "cls": "a class itself",
    "coroutine": "a call that was never awaited (await it)",
    "module": "a module",
}


class ValueRefused(ValueError):
    """A value that cannot cross: the message says which part and why, for the model."""


def plain(value: Any, limits: ValueLimits, *, what: str = "the value") -> Any:
    """``value`` as plain JSON data, or :class:`ValueRefused`.

    Tuples become lists; dict keys must be strings; booleans, None, strings,
    integers within +-2**53 and finite floats pass; anything else (sets, bytes,
    functions, class instances, modules) is refused by name.
    """
    budget = [limits.max_bytes, limits.max_items]

    def spend(size: int, path: str) -> None:
        budget[0] -= size
        budget[1] -= 1
        if budget[0] < 0:
            raise ValueRefused(
                f"{what} is larger than {limits.max_bytes:,} bytes (at {_at(path)}): "
                "pass or return less (an aggregate, the rows you need, a page)."
            )
        if budget[1] < 0:
            raise ValueRefused(
                f"{what} holds more than {limits.max_items:,} values (at {_at(path)}): "
                "pass or return less."
            )

    def scalar(item: Any, path: str) -> Any:
        if item is None or isinstance(item, bool):
            spend(5, path)
            return item
        if isinstance(item, int):
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise ValueRefused(
                    f"{what} holds an integer beyond +-2**53 at {_at(path)}: "
                    "pass it as a string if you need it exactly."
                )
            spend(20, path)
            return int(item)
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueRefused(
                    f"{what} holds {item!r} at {_at(path)}, which JSON cannot carry: "
                    "use None or a number."
                )
            spend(24, path)
            return float(item)
        if isinstance(item, str):
            spend(len(item) + 2, path)
            if item.startswith("<") and item.endswith(">"):
                found = _SANDBOX_OBJECT.fullmatch(item)
                if found is not None:
                    kind = _WHAT_IT_IS[str(found.lastgroup)]
                    raise ValueRefused(
                        f"{what} holds {kind} at {_at(path)} ({item[:60]}): "
                        "only plain data can cross."
                    )
            return str(item)
        raise ValueRefused(
            f"{what} holds {_kind(item)} at {_at(path)}; only dicts, lists, strings, numbers, "
            "booleans and None can cross: convert it first."
        )

    root: list[Any] = [None]
    # (source, container to fill, key or index in it, path, depth)
    stack: list[tuple[Any, Any, Any, str, int]] = [(value, root, 0, "", 0)]
    while stack:
        item, parent, slot, path, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= limits.max_depth:
                raise _too_deep(what, limits, path)
            spend(2, path)
            out: Any = {}
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueRefused(
                        f"{what} has a dict key {_kind(key)} at {_at(path)}: keys must be strings."
                    )
                spend(len(key) + 3, path)
                out[key] = None
                stack.append((sub, out, key, f"{path}[{_short(key)}]", depth + 1))
        elif isinstance(item, list | tuple):
            if depth >= limits.max_depth:
                raise _too_deep(what, limits, path)
            spend(2, path)
            out = [None] * len(item)
            for i, sub in enumerate(item):
                stack.append((sub, out, i, f"{path}[{i}]", depth + 1))
        else:
            out = scalar(item, path)
        parent[slot] = out
    return root[0]


def _at(path: str) -> str:
    return path or "the top"


def _too_deep(what: str, limits: ValueLimits, path: str) -> ValueRefused:
    return ValueRefused(
        f"{what} is nested more than {limits.max_depth} levels deep (at {_at(path)}): flatten it."
    )


def _short(key: str) -> str:
    return repr(key if len(key) <= 40 else key[:37] + "...")


def _kind(item: Any) -> str:
    """What an unconvertible value is, in a few words (never its repr, which may
    be huge or the sandbox's own text)."""
    name = type(item).__name__
    proxy = {
        "MontyClassProxy": "an instance of a class the program defined",
        "MontyClassTypeProxy": "a class the program defined",
        "MontyStdTypeProxy": "a built-in function or type",
        "ExternalModule": "a module",
    }.get(name)
    if proxy is not None:
        return proxy
    if callable(item):
        return "a function"
    return f"a value of type {name}"
