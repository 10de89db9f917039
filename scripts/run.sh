#!/usr/bin/env bash
# The main job: install callgate into .venv and run the gateway: the bundled demo
# tools over MCP (Streamable HTTP at http://127.0.0.1:8765/mcp), governed by the
# demo policy, with a SQLite store created on first use in the user data
# directory. Extra arguments go to `callgate serve` (e.g. --port 9000, --stdio,
# --store sqlite:///./callgate.db). `callgate demo` runs a readable tour instead.
# The extras: postgres for a PostgreSQL store, openai for `callgate run` with
# --provider openai or openai-compatible (a local model: Ollama, vLLM, llama.cpp).
set -euo pipefail
CALLGATE_EXTRAS=postgres,openai,search,code source "$(dirname "$0")/_env.sh"
exec .venv/bin/callgate serve "$@"
