#!/usr/bin/env bash
# Run the official MCP conformance suite's client scenarios against callgate's gateway
# (its client of an upstream MCP server), driven by tests/conformance/client/.
#
#   scripts/conformance-client.sh --spec-version 2025-11-25
#   scripts/conformance-client.sh --spec-version 2026-07-28 --scenario tools_call
#   scripts/conformance-client.sh --spec-version 2026-07-28 --scenario auth/client-credentials-basic --force
#   scripts/conformance-client.sh list [--spec-version V]     # the suite's client scenarios
#   scripts/conformance-client.sh install                      # install only
#
# For each scenario the suite starts a mock MCP server and runs
# `python -m tests.conformance.client URL` from the checkout: a gateway config with the
# mock as its one [[upstreams]], the gate opened, the scenario's tools called through it.
# Node 22 and the suite are installed as for scripts/conformance.sh (same cache, same lock).
# conformance/expected-failures-client.yml is passed as the baseline: a listed scenario
# (or scenario:check) may fail; an unlisted failure, an unlisted WARNING, or a listed
# entry that now passes ("stale") fails the run. So does a scenario whose client program
# failed (its steps did not work) unless the whole scenario is listed, or the scenario
# is listed under the file's client-program: key (and a client-program: entry whose
# client now succeeds is stale too): the suite ignores the client's exit status when
# it compares against a baseline.
#
# Options:
#   --spec-version V        2025-11-25 or 2026-07-28 (required)
#   --suite S               all | core | extensions | backcompat | auth | metadata | draft | sep-835
#                           (default: all; the suite runs a suite's scenarios side by side)
#   --scenario NAME         run one scenario only
#   --force                 run it even if it is not on the spec version's timeline (extensions)
#   --expected-failures F   baseline file (default: conformance/expected-failures-client.yml)
#   --output-dir D          where checks.json files go (default: .cache/conformance/results/client-<spec>-<time>)
#   --timeout MS            per-scenario timeout (default: 60000; scenarios run side by side)
#   --python P              the Python that runs the client (default: .venv/bin/python, else python3)
#   --verbose               the suite's JSON output
# Exit status: 0 when every scenario passed or failed as expected, 1 otherwise, 2 for
# usage or install errors.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MARKER="conformance client: "

die() {
    echo "conformance-client: $*" >&2
    exit 2
}

# shellcheck source=scripts/_conformance.sh
source "$ROOT/scripts/_conformance.sh"

usage() {
    sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

[ $# -gt 0 ] || { usage >&2; exit 2; }

case "$1" in
    -h | --help)
        usage
        exit 0
        ;;
    install)
        ensure_installed
        exit 0
        ;;
    list)
        shift
        ensure_installed
        run_suite list --client "$@"
        exit $?
        ;;
esac

spec_version=""
suite="all"
scenario=""
baseline=""
output_dir=""
timeout="60000"
verbose=""
force=""
python=""
while [ $# -gt 0 ]; do
    case "$1" in
        --spec-version) spec_version="${2:-}"; shift 2 || die "--spec-version needs a value" ;;
        --suite) suite="${2:-}"; shift 2 || die "--suite needs a value" ;;
        --scenario) scenario="${2:-}"; shift 2 || die "--scenario needs a value" ;;
        --expected-failures) baseline="${2:-}"; shift 2 || die "--expected-failures needs a value" ;;
        --output-dir) output_dir="${2:-}"; shift 2 || die "--output-dir needs a value" ;;
        --timeout) timeout="${2:-}"; shift 2 || die "--timeout needs a value" ;;
        --python) python="${2:-}"; shift 2 || die "--python needs a value" ;;
        --verbose) verbose="--verbose"; shift ;;
        --force) force="--force"; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

case "$spec_version" in
    2025-11-25 | 2026-07-28) ;;
    "") die "--spec-version is required: 2025-11-25 or 2026-07-28" ;;
    *) die "--spec-version must be 2025-11-25 or 2026-07-28 (got $spec_version)" ;;
esac
case "$suite" in
    all | core | extensions | backcompat | auth | metadata | draft | sep-835) ;;
    *) die "--suite must be all, core, extensions, backcompat, auth, metadata, draft or sep-835 (got $suite)" ;;
esac
baseline="${baseline:-$ROOT/conformance/expected-failures-client.yml}"
[ -f "$baseline" ] || die "expected-failures file not found: $baseline"
baseline="$(cd "$(dirname "$baseline")" && pwd)/$(basename "$baseline")"
output_dir="${output_dir:-$CACHE/results/client-$spec_version-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$output_dir"
output_dir="$(cd "$output_dir" && pwd)"

if [ -z "$python" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then python="$ROOT/.venv/bin/python"; else python="python3"; fi
fi
# The suite splits the command at spaces (and runs it with a shell).
case "$python" in
    *[[:space:]]*) die "the Python path must not contain spaces (got '$python'); pass --python" ;;
esac
"$python" -c 'import callgate' 2>/dev/null || die "$python cannot import callgate (pass --python)"

ensure_installed

args=(client --command "$python -m tests.conformance.client" --spec-version "$spec_version")
args+=(--output-dir "$output_dir" --timeout "$timeout" --expected-failures "$baseline")
if [ -n "$scenario" ]; then
    args+=(--scenario "$scenario")
    [ -z "$force" ] || args+=("$force")
else
    args+=(--suite "$suite")
fi
[ -z "$verbose" ] || args+=("$verbose")

echo "conformance-client: $SUITE_PACKAGE@$SUITE_VERSION, node $(run_node --version)," \
    "spec $spec_version, ${scenario:-suite $suite}, client $python -m tests.conformance.client" >&2
echo "conformance-client: expected failures from $baseline" >&2
status=0
# From the checkout: the client is the module tests.conformance.client.
(cd "$ROOT" && run_suite "${args[@]}") || status=$?

entries() {
    # entries SECTION: the names listed under the baseline's top-level key SECTION.
    awk -v want="$1:" '
        /^[^[:space:]#-]/ { section = $1 }
        section == want && /^[[:space:]]*-[[:space:]]/ {
            sub(/^[[:space:]]*-[[:space:]]*/, ""); sub(/[[:space:]]*#.*$/, ""); print
        }' "$baseline"
}
contains() {
    # contains NAME LIST...: NAME is one of LIST.
    local name="$1" item
    shift
    for item in "$@"; do [ "$item" != "$name" ] || return 0; done
    return 1
}

# The client program's own verdict per scenario (its last line on stdout). Its failure
# is expected where the whole scenario is listed under client:, or the scenario under
# client-program: (every check passes, but the gateway could not finish its steps).
mapfile -t whole < <(entries client | grep -v ':' || true)
mapfile -t program < <(entries client-program || true)
client_failed=()
program_stale=()
while IFS= read -r out; do
    dir="$(dirname "$out")"
    name="${dir#"$output_dir"/}"
    name="$(printf '%s' "$name" | sed -E 's/-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9-]+Z$//')"
    verdict="$(grep "^$MARKER" "$out" | tail -n 1 || true)"
    if [ "$verdict" = "${MARKER}ok" ]; then
        ! contains "$name" "${program[@]}" || program_stale+=("$name")
        continue
    fi
    contains "$name" "${whole[@]}" "${program[@]}" && continue
    [ -n "$verdict" ] || verdict="${MARKER}no verdict (it crashed or timed out)"
    client_failed+=("$name: ${verdict#"$MARKER"}")
done < <(find "$output_dir" -name stdout.txt | sort)
if [ "${#program_stale[@]}" -gt 0 ]; then
    echo "" >&2
    echo "Stale client-program entries (the client now succeeds - remove from baseline):" >&2
    printf '  ✓ %s\n' "${program_stale[@]}" >&2
    [ "$status" -ne 0 ] || status=1
fi
if [ "${#client_failed[@]}" -gt 0 ]; then
    echo "" >&2
    echo "Client program failures (not in baseline; its stderr.txt says more):" >&2
    printf '  ✗ %s\n' "${client_failed[@]}" >&2
    [ "$status" -ne 0 ] || status=1
fi
echo "conformance-client: per-check results in $output_dir" >&2
exit "$status"
