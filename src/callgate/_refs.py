"""What a config file's references name: ``module:attr`` and ``path/to/file.py:attr``
(toolboxes, the demo's policy), imported the way ``python script.py`` would.

Failures raise :class:`RefError` with the place in the file (``where``) in the
message; :mod:`callgate.config` raises them as its ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from callgate.contract import Toolbox

__all__ = ["RefError", "resolve_ref", "toolboxes_from"]


class RefError(Exception):
    """A reference cannot be resolved (not part of the public error tree:
    :mod:`callgate.config` turns it into ``ConfigError``)."""


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def resolve_ref(ref: str, base_dir: Path, where: str) -> Any:
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise RefError(f"{where}: expected 'module:attr' or 'path/to/file.py:attr'")
    module = (
        _import_file(base_dir / Path(target).expanduser(), where)
        if _is_path(target)
        else _import_module(target, base_dir, where)
    )
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise RefError(f"{where}: {target!r} has no attribute {attr!r}") from None
    return value


def _import_module(name: str, base_dir: Path, where: str) -> ModuleType:
    # Like `python script.py`, modules next to the config file are importable.
    if str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))
    try:
        return importlib.import_module(name)
    except Exception as exc:  # whatever the module raises while importing
        raise RefError(f"{where}: cannot import {name!r}: {type(exc).__name__}: {exc}") from None


def _import_file(path: Path, where: str) -> ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise RefError(f"{where}: no such file: {path}")
    name = "_callgate_config_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RefError(f"{where}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # whatever the file raises while running
        del sys.modules[name]
        raise RefError(f"{where}: running {path} failed: {type(exc).__name__}: {exc}") from None
    return module


def toolboxes_from(value: Any, where: str) -> list[Toolbox]:
    if callable(value) and not isinstance(value, Toolbox):
        try:
            value = value()
        except Exception as exc:  # whatever the factory raises
            raise RefError(f"{where}: calling it failed: {type(exc).__name__}: {exc}") from None
    if isinstance(value, Toolbox):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, Toolbox) for v in value):
        return list(value)
    raise RefError(
        f"{where}: is a {type(value).__name__}, not a Toolbox, a list of Toolboxes "
        "or a callable returning one"
    )
