"""Checking one table of a config file with its pydantic model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic

from callgate.errors import InvalidArgument

M = TypeVar("M", bound=pydantic.BaseModel)


def parse_table(model: type[M], raw: Mapping[str, Any], label: str, table: str) -> M:
    """``raw`` (the ``[table]`` of the file ``label``) checked by ``model``.

    Raises:
        InvalidArgument: an unknown key or a bad value, named as
            ``label: table.key: what is wrong``.
    """
    try:
        return model.model_validate(dict(raw))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidArgument(f"{label}: {table}.{where}: {first['msg']}") from None
