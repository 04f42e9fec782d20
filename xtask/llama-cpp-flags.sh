# Sourced by xtask/llama-server.sh and xtask/llama-cpp-server.sh: the herd cache folder and the CMake flags
# every llama.cpp build of herd's uses. Sets `cache` and `flags`.
#
# Built for the instruction sets of the CPU it runs on (read from /proc/cpuinfo), never with llama.cpp's
# AMX kernels: they crash in sandboxes that do not grant AMX state (a build with AMX segfaults on the first
# evaluation here). Not GGML_NATIVE: -march=native would turn AMX back on where the CPU has it. A cache
# shared with a CPU of other instruction sets rebuilds (the scripts keep the flags as their marker).
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { case "$cpu_flags" in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
avx512=OFF
if [ "$(has avx512f)" = ON ] && [ "$(has avx512bw)" = ON ] && [ "$(has avx512vl)" = ON ]; then avx512=ON; fi
flags="-DGGML_NATIVE=OFF -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) -DGGML_F16C=$(has f16c) -DGGML_AVX512=$avx512 -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

# The rule of herd_backend::herd_cache_dir.
if [ -n "${HERD_CACHE:-}" ]; then cache="$HERD_CACHE"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache="$XDG_CACHE_HOME/herd"
else cache="${HOME:-.}/.cache/herd"; fi

# The llama-cpp-python release both scripts build from (the server package, and the llama.cpp sources it vendors).
llama_cpp_python_version="0.3.36"
