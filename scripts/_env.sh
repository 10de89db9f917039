# Shared by scripts/run.sh and scripts/test.sh: make .venv and install callgate
# with the extras given in $CALLGATE_EXTRAS. Re-installs only when pyproject.toml
# changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "callgate needs Python 3.11 or newer (found: $("$PY" --version 2>&1))" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
STAMP=".venv/.callgate-installed-${CALLGATE_EXTRAS:-base}"
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${CALLGATE_EXTRAS:-postgres}]"
    touch "$STAMP"
fi
