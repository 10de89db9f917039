#!/usr/bin/env bash
# The main job: install callgate into .venv and run the demo against the bundled
# tools, with a SQLite store created on first use. Extra arguments go to
# `callgate demo` (e.g. --store sqlite:///./demo.db).
set -euo pipefail
CALLGATE_EXTRAS=postgres source "$(dirname "$0")/_env.sh"
exec .venv/bin/callgate demo "$@"
