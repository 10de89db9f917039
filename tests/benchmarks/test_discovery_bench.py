"""The tool-search benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.benchmarks.test_benchmarks_run import run_script

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bfcl_eval") is None,
    reason="the BFCL corpus needs bfcl-eval (pip install --no-deps bfcl-eval)",
)


@pytest.mark.slow
def test_the_discovery_benchmark_ranks_bfcl_queries_and_counts_tokens(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    args = ("--quick", "--encoder", "none", "--no-fastmcp", "--json", str(figures))
    done = run_script("discovery.py", *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "### Retrieval quality" in done.stdout
    assert "### Tool-definition tokens per request" in done.stdout
    report = json.loads(figures.read_text())

    quality = {row["pool"]: row for row in report["quality"]}
    assert {row["searcher"] for row in report["quality"]} == {"callgate bm25"}
    assert len(quality) == 3
    one_wording = quality["BFCL pool, one wording per name"]
    # Far from chance (1 in 894): a broken index or reader would score near zero.
    assert 0.3 < one_wording["recall@1"] <= one_wording["recall@5"] <= 1
    for row in quality.values():
        assert row["recall@1"] <= row["by_name_recall@1"]

    assert [(r["tools"], r["searcher"]) for r in report["scale"]] == [
        (1_000, "callgate bm25"),
        (10_000, "callgate bm25"),
    ]
    tokens = {row["catalogue"]: row for row in report["tokens"]["rows"]}
    assert report["tokens"]["meta_tools"] == [
        "callgate.call_tool",
        "callgate.describe_tools",
        "callgate.search_tools",
    ]
    thousand = tokens["1,000 BFCL functions"]
    assert thousand["tools"] == 1_000
    assert thousand["all_tools_tokens"] > 100 * thousand["meta_tools_tokens"]
    assert tokens["demo (callgate.demo)"]["tools"] > 5
