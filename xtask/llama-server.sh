#!/usr/bin/env bash
# Makes the Python environment with llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) that the
# openai backend's tests and benchmarks serve the default model with, under the herd cache (the rule of
# herd_infer::herd_cache_dir), and prints its python last. Quick when the environment is already there.
# Called by `cargo xtask llama-server` and by .ci/run (which thus needs no xtask build).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=xtask/llama-cpp-flags.sh
. "$here/llama-cpp-flags.sh"
package="llama-cpp-python[server]==$llama_cpp_python_version"
venv="$cache/venvs/llama-server"
marker="$venv/herd-build-flags.txt"

ready() {
    [ -f "$marker" ] && [ "$(cat "$marker")" = "$flags" ] \
        && "$venv/bin/python" -c "import llama_cpp.server, uvicorn, fastapi" >/dev/null 2>&1
}

if ! ready; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    echo "building $package into $venv (compiles llama.cpp: about 15 minutes on 2 cores the first time)" >&2
    rm -f "$marker"
    # pip's wheel cache does not know the flags a cached wheel was built with: build afresh.
    CMAKE_ARGS="$flags" "$venv/bin/python" -m pip install --quiet --no-cache-dir --force-reinstall "$package" >&2
    printf '%s' "$flags" > "$marker"
    ready || { echo "$package installed into $venv but \`import llama_cpp.server\` fails" >&2; exit 1; }
fi
echo "$venv/bin/python"
