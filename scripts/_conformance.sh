# Shared by scripts/conformance.sh (server scenarios) and scripts/conformance-client.sh
# (client scenarios), sourced after ROOT and die are defined: the one pinned version
# of the official suite, installed with Node 22 into .cache/conformance/ and reused.

SUITE_PACKAGE="@modelcontextprotocol/conformance"
SUITE_VERSION="0.2.0-alpha.12"
CACHE="${CALLGATE_CONFORMANCE_CACHE:-$ROOT/.cache/conformance}"
SUITE_BIN="$CACHE/node_modules/$SUITE_PACKAGE/dist/index.js"

# shellcheck source=scripts/_node.sh
source "$ROOT/scripts/_node.sh"

ensure_installed() {
    ensure_node
    npm_cached_install "$CACHE" "$SUITE_BIN" "$SUITE_PACKAGE@$SUITE_VERSION"
}

run_suite() {
    run_node "$SUITE_BIN" "$@"
}
