#!/usr/bin/env bash
# Makes the Python environment with llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) that the
# openai backend's tests and benchmarks serve the default model with, under the herd cache (the rule of
# herd_infer::herd_cache_dir), and prints its python last. Quick when the environment is already there.
# Called by `cargo xtask llama-server` and by .ci/run (which thus needs no xtask build).
set -euo pipefail

package="llama-cpp-python[server]==0.3.36"
# Built for the instruction sets of the CPU it runs on (read from /proc/cpuinfo), never with llama.cpp's
# AMX kernels: they crash in sandboxes that do not grant AMX state (a build with AMX segfaults on the first
# evaluation here). Not GGML_NATIVE: -march=native would turn AMX back on where the CPU has it. A cache
# shared with a CPU of other instruction sets rebuilds (the flags are the marker below).
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { case "$cpu_flags" in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
avx512=OFF
if [ "$(has avx512f)" = ON ] && [ "$(has avx512bw)" = ON ] && [ "$(has avx512vl)" = ON ]; then avx512=ON; fi
flags="-DGGML_NATIVE=OFF -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) -DGGML_F16C=$(has f16c) -DGGML_AVX512=$avx512 -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

if [ -n "${HERD_CACHE:-}" ]; then cache="$HERD_CACHE"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache="$XDG_CACHE_HOME/herd"
else cache="${HOME:-.}/.cache/herd"; fi
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
