#!/usr/bin/env bash
# Run callgate's benchmarks and print their figures (Markdown tables).
#
#   bash benchmarks/run.sh            # chain overhead, validation, agent loop, large results (~50 s)
#   bash benchmarks/run.sh --quick    # fewer iterations: a smoke test, not figures
#   bash benchmarks/run.sh --profile  # also where the time of a call goes
#   bash benchmarks/run.sh --serve    # also callgate serve vs the bare SDK server and
#                                     # FastMCP under wrk (~5 min; needs Debian's wrk)
#   bash benchmarks/run.sh --discovery  # also tool search on BFCL vs FastMCP's BM25, latency
#                                     # at 10,000 tools, definition tokens (~10 min)
#   bash benchmarks/run.sh --code-mode  # also code mode: five multi-step tasks as tool calls
#                                     # and as one program, the sandbox's overheads (~1 min)
#
# Uses the project's .venv (or $PYTHON). Installs what the benchmarks need and the
# package does not: the BFCL corpus (bfcl-eval, without its many dependencies)
# and the jsonschema package to compare against. Set CALLGATE_BENCH_POSTGRES_URL
# to use another PostgreSQL server; its rows are skipped when none is reachable.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-.venv/bin/python}"
if [[ ! -x "$PY" ]]; then
    echo "no Python at $PY: create the venv first (python -m venv .venv && .venv/bin/pip install -e '.[dev]')" >&2
    exit 1
fi
if ! "$PY" -c 'import callgate' 2>/dev/null; then
    echo "callgate is not installed in $PY: .venv/bin/pip install -e '.[dev]'" >&2
    exit 1
fi

has() { "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
if ! has bfcl_eval; then
    echo "installing bfcl-eval (--no-deps: only its data files are used)"
    "$PY" -m pip install -q --no-deps bfcl-eval
fi
if ! has jsonschema; then
    echo "installing jsonschema (the baseline of the validation benchmark)"
    "$PY" -m pip install -q jsonschema
fi

chain_args=()
validation_args=()
agent_args=()
large_args=()
profile=0
serve=0
discovery=0
discovery_args=()
code_mode=0
code_mode_args=()
for arg in "$@"; do
    case "$arg" in
        --quick)
            chain_args+=(--calls 200 --warmup 40 --batches 4)
            validation_args+=(--rounds 1 --min-seconds 0.05)
            agent_args+=(--turns 5 --rounds 1)
            large_args+=(--rounds 1 --calls 1)
            discovery_args+=(--quick)
            code_mode_args+=(--quick)
            ;;
        --profile) profile=1 ;;
        --serve) serve=1 ;;
        --discovery) discovery=1 ;;
        --code-mode) code_mode=1 ;;
        *) echo "unknown option $arg (use --quick, --profile, --serve, --discovery, --code-mode)" >&2; exit 2 ;;
    esac
done

"$PY" benchmarks/chain_overhead.py "${chain_args[@]}"
echo
"$PY" benchmarks/validation.py "${validation_args[@]}"
echo
"$PY" benchmarks/agent_loop.py "${agent_args[@]}"
echo
"$PY" benchmarks/large_results.py "${large_args[@]}"
if [[ $profile == 1 ]]; then
    echo
    "$PY" benchmarks/profile_chain.py
    echo
    "$PY" benchmarks/whatif_audit.py
fi
if [[ $serve == 1 ]]; then
    if ! command -v wrk >/dev/null; then
        echo "--serve needs wrk (Debian: apt-get install wrk)" >&2
        exit 2
    fi
    echo
    "$PY" benchmarks/serve_http.py
fi
if [[ $discovery == 1 ]]; then
    echo
    "$PY" benchmarks/discovery.py "${discovery_args[@]}"
fi
if [[ $code_mode == 1 ]]; then
    if ! has pydantic_monty; then
        echo "--code-mode needs the sandbox: $PY -m pip install -e '.[code]'" >&2
        exit 2
    fi
    echo
    "$PY" benchmarks/code_mode.py "${code_mode_args[@]}"
fi
