"""Argument validation throughput: callgate's ArgumentValidator vs the ``jsonschema`` package.

    python benchmarks/validation.py [--rounds 5] [--min-seconds 0.15]

Corpus: the function schemas of the Berkeley Function Calling Leaderboard as
shipped in the ``bfcl-eval`` package (``bfcl_eval/data/BFCL_v4_*.json``, JSON
lines whose ``function`` list holds the tools), and argument objects built from
its ground truth (``bfcl_eval/data/possible_answer/``), both read and converted to
JSON Schema by ``tests/agent/corpus.py``, the reader the agent adapters' tests use.

Both sides compile each schema once, as a gate does: ``ArgumentValidator`` (and
the ``jsonschema_rs.Draft202012Validator`` inside it) against
``jsonschema.Draft202012Validator``. Neither asserts ``format`` (an annotation
in Draft 2020-12 unless a format checker is asked for).

Timing, two ways, both in every row:

- **warm (back to back)**: each validator repeats passes over the whole set for
  at least ``--min-seconds``, then the other one (``--rounds`` rounds, the median
  rate): one side's code and data stay hot in the CPU caches while it runs.
- **alternating**: each argument set is validated by one side and at once by the
  other, in a shuffled order, each call timed alone (the timer's own cost taken
  off): between two validations of one side runs the other side's work on
  another schema, as other work runs between two validations in a gate. Caches
  are cold, and the gap between the two sides is smaller.

The target is judged on the alternating figure, the one a gate sees.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs

from callgate.runtime.validation import ArgumentValidator

# One reader of the corpus for tests and benchmarks: the tests check what it reads.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import table
from tests.agent.corpus import CorpusMissing, bfcl

TARGET_RATIO = 20.0

# A value of the wrong JSON type for each type (the invalid variant of an argument set).
WRONG_VALUE: dict[str, Any] = {
    "string": 12345,
    "integer": "not a number",
    "number": "not a number",
    "boolean": "yes",
    "array": "not an array",
    "object": "not an object",
    "null": 0,
}


def break_one_field(schema: Mapping[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    """``args`` with one field of the wrong type: a present one if possible."""
    props = schema.get("properties", {})
    typed = [name for name, sub in props.items() if isinstance(sub.get("type"), str)]
    present = [name for name in typed if name in args]
    target = (present or typed or [None])[0]
    if target is None:
        return None
    return {**args, target: WRONG_VALUE[props[target]["type"]]}


@dataclass
class Case:
    source: str
    tool: str
    schema_key: str
    args: dict[str, Any]


@dataclass
class Compiled:
    schema: dict[str, Any]
    callgate: ArgumentValidator
    rs: Any  # jsonschema_rs.Draft202012Validator, the engine inside ArgumentValidator
    py: jsonschema.protocols.Validator


def load_corpus() -> tuple[dict[str, dict[str, Any]], list[Case], dict[str, int]]:
    """Unique converted schemas, argument sets from the ground truth, and tallies.

    Raises:
        CorpusMissing: ``bfcl-eval`` is not installed.
    """
    corpus = bfcl()
    schemas: dict[str, dict[str, Any]] = {}
    for tool in corpus.tools:
        schemas.setdefault(json.dumps(tool.schema, sort_keys=True), tool.schema)
    cases = [
        Case(
            source=call.entry,
            tool=call.tool.name,
            schema_key=json.dumps(call.tool.schema, sort_keys=True),
            args=call.arguments,
        )
        for call in corpus.calls
    ]
    tally = {
        "tool definitions": len(corpus.tools),
        "ground-truth calls": len(corpus.calls) + corpus.unmatched_calls,
        "calls without a schema": corpus.unmatched_calls,
    }
    return schemas, cases, tally


def compile_all(schemas: dict[str, dict[str, Any]]) -> tuple[dict[str, Compiled], list[str]]:
    compiled: dict[str, Compiled] = {}
    failures: list[str] = []
    for key, schema in schemas.items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            compiled[key] = Compiled(
                schema=schema,
                callgate=ArgumentValidator(schema),
                rs=jsonschema_rs.Draft202012Validator(schema),
                py=jsonschema.Draft202012Validator(schema),
            )
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {str(exc)[:120]}")
    return compiled, failures


def check_agreement(
    label: str, cases: Sequence[Case], compiled: Mapping[str, Compiled]
) -> tuple[list[str], int]:
    """Every validator's verdict on every case; returns disagreements and the valid count."""
    disagreements = []
    valid = 0
    for case in cases:
        c = compiled[case.schema_key]
        verdicts = {
            "ArgumentValidator.errors": not c.callgate.errors(case.args),
            "jsonschema-rs is_valid": c.rs.is_valid(case.args),
            "jsonschema is_valid": c.py.is_valid(case.args),
            "jsonschema iter_errors": not list(c.py.iter_errors(case.args)),
        }
        if len(set(verdicts.values())) > 1:
            py_errors = [e.message for e in c.py.iter_errors(case.args)][:2]
            disagreements.append(
                f"{label} {case.source} {case.tool}: {verdicts}; args={json.dumps(case.args)[:200]}"
                f"; callgate says {c.callgate.errors(case.args)[:2]}; jsonschema says {py_errors}"
            )
        elif verdicts["jsonschema is_valid"]:
            valid += 1
    return disagreements, valid


Pass = Callable[[], None]


def rate(one_pass: Pass, n: int, min_ns: int) -> float:
    """Validations per second: whole passes repeated for at least ``min_ns``."""
    done = 0
    t0 = time.perf_counter_ns()
    while True:
        one_pass()
        done += n
        elapsed = time.perf_counter_ns() - t0
        if elapsed >= min_ns:
            return done * 1e9 / elapsed


def compare(ours: Pass, theirs: Pass, n: int, rounds: int, min_ns: int) -> tuple[float, float]:
    ours_rates, theirs_rates = [], []
    for _ in range(rounds):
        ours_rates.append(rate(ours, n, min_ns))
        theirs_rates.append(rate(theirs, n, min_ns))
    return statistics.median(ours_rates), statistics.median(theirs_rates)


Call = tuple[Callable[[Any], Any], Any]


def timer_cost() -> float:
    """Nanoseconds two back-to-back ``perf_counter_ns`` calls measure (median)."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(20_000):
        t0 = clock()
        samples.append(clock() - t0)
    return statistics.median(samples)


def alternate(
    ours: Sequence[Call], theirs: Sequence[Call], rounds: int, overhead: float
) -> tuple[float, float]:
    """Validations per second of each side when they take turns call by call, in
    a new shuffled order each round (median of the rounds)."""
    clock = time.perf_counter_ns
    order = list(range(len(ours)))
    shuffle = random.Random(10).shuffle
    ours_rates, theirs_rates = [], []
    for _ in range(rounds):
        shuffle(order)
        ours_ns = theirs_ns = 0.0
        for i in order:
            fn, args = ours[i]
            t0 = clock()
            fn(args)
            t1 = clock()
            fn, args = theirs[i]
            t2 = clock()
            fn(args)
            t3 = clock()
            ours_ns += t1 - t0 - overhead
            theirs_ns += t3 - t2 - overhead
        ours_rates.append(len(order) * 1e9 / ours_ns)
        theirs_rates.append(len(order) * 1e9 / theirs_ns)
    return statistics.median(ours_rates), statistics.median(theirs_rates)


def listing(errors: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def call(args: Any) -> Any:
        return list(errors(args))

    return call


def is_valid_pass(calls: Sequence[tuple[Callable[[Any], bool], Any]]) -> Pass:
    def run() -> None:
        for validate, args in calls:
            validate(args)

    return run


def all_errors_pass(calls: Sequence[tuple[Callable[[Any], Any], Any]]) -> Pass:
    def run() -> None:
        for errors, args in calls:
            list(errors(args))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per row")
    parser.add_argument("--min-seconds", type=float, default=0.15, help="per validator per round")
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    parser.add_argument(
        "--profile-errors",
        action="store_true",
        help="also cProfile ArgumentValidator.errors over the invalid set",
    )
    args = parser.parse_args()
    started = time.perf_counter()

    try:
        schemas, cases, tally = load_corpus()
    except CorpusMissing as missing:
        sys.exit(str(missing))
    compiled, failures = compile_all(schemas)
    built = [c for c in cases if c.schema_key in compiled]
    invalid_set = []
    for case in built:
        broken = break_one_field(compiled[case.schema_key].schema, case.args)
        if broken is not None:
            invalid_set.append(Case(**{**case.__dict__, "args": broken}))
    exercised = len({c.schema_key for c in built})

    disagreements, valid_ok = check_agreement("ground-truth", built, compiled)
    more, invalid_ok = check_agreement("wrong-type", invalid_set, compiled)
    disagreements += more
    checked = len(built) + len(invalid_set)
    # The valid set is what both validators accept; the ground-truth sets they
    # both reject are counted, with the first reason, but timed in no row.
    valid_set = [c for c in built if compiled[c.schema_key].py.is_valid(c.args)]
    rejected = Counter(
        next(compiled[c.schema_key].py.iter_errors(c.args)).validator
        for c in built
        if not compiled[c.schema_key].py.is_valid(c.args)
    )

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"## Validation throughput ({platform.machine()}, nproc {cores}, "
        f"Python {sys.version.split()[0]}, jsonschema-rs {_version('jsonschema_rs')}, "
        f"jsonschema {_version('jsonschema')}, load average {_load()})\n"
    )
    print(
        f"- BFCL v4 tool definitions: {tally['tool definitions']:,}; unique schemas after "
        f"conversion: {len(schemas):,} (compiled by both: {len(compiled):,}; failed: "
        f"{len(failures)}); schemas with argument sets: {exercised:,}"
    )
    reasons = ", ".join(f"{n} {kind}" for kind, n in rejected.most_common())
    print(
        f"- argument sets from the ground truth: {len(built):,} "
        f"({tally['calls without a schema']} ground-truth calls had no schema); "
        f"valid per both validators: {valid_ok:,} (the valid set); rejected by both: "
        f"{len(built) - len(valid_set):,} (first error: {reasons or 'none'}), not timed"
    )
    print(
        f"- invalid set: each ground-truth argument set with one field of the wrong type: "
        f"{len(invalid_set):,} ({invalid_ok} of them judged valid; "
        f"{len(built) - len(invalid_set)} sets have no typed field to break)"
    )
    print(
        f"- agreement on valid/invalid (ArgumentValidator.errors, jsonschema-rs is_valid, "
        f"jsonschema is_valid and iter_errors): {checked - len(disagreements):,} of "
        f"{checked:,} argument sets"
    )
    for failure in failures[: args.show]:
        print(f"  - schema not compiled: {failure}")
    for line in disagreements[: args.show]:
        print(f"  - disagreement: {line}")
    print()

    min_ns = int(args.min_seconds * 1e9)
    overhead = timer_cost()
    rows = []
    ratios = []
    warm_ratios = []
    # (set, callgate side, jsonschema side); each side is (label, kind of pass, method).
    plans = [
        ("valid", valid_set, "jsonschema-rs: is_valid", "rs", "is_valid"),
        ("valid", valid_set, "callgate: ArgumentValidator.errors", "callgate", "list(iter_errors)"),
        ("invalid", invalid_set, "jsonschema-rs: is_valid", "rs", "is_valid"),
        (
            "invalid",
            invalid_set,
            "callgate: ArgumentValidator.errors",
            "callgate",
            "list(iter_errors)",
        ),
        # Diagnostic, not scored: the engine's own error objects, without the
        # model-facing messages ArgumentValidator builds from them.
        (
            "invalid",
            invalid_set,
            "jsonschema-rs: list(iter_errors)",
            "diagnostic",
            "list(iter_errors)",
        ),
    ]
    for set_name, subset, ours_label, ours_kind, theirs_label in plans:
        pairs = [(compiled[c.schema_key], c.args) for c in subset]
        ours_calls: list[Call]
        theirs_calls: list[Call]
        if theirs_label == "is_valid":
            ours_calls = [(c.rs.is_valid, a) for c, a in pairs]
            theirs_calls = [(c.py.is_valid, a) for c, a in pairs]
            ours, theirs = is_valid_pass(ours_calls), is_valid_pass(theirs_calls)
        else:
            if ours_kind == "callgate":
                ours_calls = [(c.callgate.errors, a) for c, a in pairs]
            else:
                ours_calls = [(c.rs.iter_errors, a) for c, a in pairs]
            theirs_calls = [(c.py.iter_errors, a) for c, a in pairs]
            ours, theirs = all_errors_pass(ours_calls), all_errors_pass(theirs_calls)
            ours_calls = [(listing(fn), a) for fn, a in ours_calls]
            theirs_calls = [(listing(fn), a) for fn, a in theirs_calls]
        ours_rate, theirs_rate = compare(ours, theirs, len(pairs), args.rounds, min_ns)
        alt_ours, alt_theirs = alternate(ours_calls, theirs_calls, args.rounds, overhead)
        ratio, warm = alt_ours / alt_theirs, ours_rate / theirs_rate
        if ours_kind != "diagnostic":
            ratios.append(ratio)
            warm_ratios.append(warm)
        rows.append(
            [
                f"{set_name} ({len(pairs):,})",
                ours_label,
                f"jsonschema: {theirs_label}",
                f"{ours_rate:,.0f}",
                f"{theirs_rate:,.0f}",
                f"{warm:,.1f}x",
                f"{alt_ours:,.0f}",
                f"{alt_theirs:,.0f}",
                f"{ratio:,.1f}x",
                "(diagnostic)"
                if ours_kind == "diagnostic"
                else ("met" if ratio >= TARGET_RATIO else "MISSED"),
            ]
        )
    print(
        table(
            [
                "argument sets",
                "callgate side (compiled once)",
                "jsonschema side (Draft202012Validator)",
                "warm: callgate/s",
                "warm: jsonschema/s",
                "warm speed-up",
                "alternating: callgate/s",
                "alternating: jsonschema/s",
                "alternating speed-up",
                f"target >= {TARGET_RATIO:.0f}x (alternating)",
            ],
            rows,
            numeric=frozenset({3, 4, 5, 6, 7, 8}),
        )
    )
    met = sum(r >= TARGET_RATIO for r in ratios)
    print(
        f"\nTarget: at least {TARGET_RATIO:.0f}x faster, alternating: met in {met} of "
        f"{len(ratios)} rows (speed-ups {', '.join(f'{r:.1f}x' for r in ratios)}; warm, "
        f"back to back: {', '.join(f'{r:.1f}x' for r in warm_ratios)}). Timer cost taken "
        f"off each alternating call: {overhead:.0f} ns."
    )
    if args.profile_errors:
        profile_errors([(compiled[c.schema_key].callgate, c.args) for c in invalid_set])
    print(f"(benchmark took {time.perf_counter() - started:.1f} s; load average {_load()})")


def profile_errors(calls: Sequence[tuple[ArgumentValidator, dict[str, Any]]]) -> None:
    """Where ArgumentValidator.errors spends its time on invalid arguments."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(10):
        for validator, args in calls:
            validator.errors(args)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"validation\.py|json|jsonschema_rs", 15)
    print("\ncProfile of ArgumentValidator.errors on the invalid set (10 passes):")
    print(out.getvalue().split("\n\n", 2)[-1].rstrip())


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in (module, module.replace("_", "-")):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "?"


if __name__ == "__main__":
    main()
