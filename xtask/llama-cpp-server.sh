#!/usr/bin/env bash
# Builds llama.cpp's own OpenAI-compatible server (`llama-server`, C++: a slot per parallel sequence,
# decoded together in one batch) under the herd cache and prints its path last. `cargo xtask bench serve`
# measures how busy herd keeps its slots; llama-cpp-python's server (xtask/llama-server.sh), which the tests
# use, serves one request at a time. No package registry ships llama-server built for any x86 CPU (the
# prebuilt wheels that exist are compiled for the builder's CPU, AVX-512 and AMX included), so it is built
# here from the llama.cpp sources that the pinned llama-cpp-python sdist vendors, with the CMake and Ninja
# wheels from PyPI, static, with the flags xtask/llama-server.sh uses. Quick when the binary is there.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=xtask/llama-cpp-flags.sh
. "$here/llama-cpp-flags.sh"
# No OpenSSL (loopback only), no web UI (it would be fetched from the network or built with npm), static.
server_flags="$flags -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
build_id="llama-cpp-python $llama_cpp_python_version $server_flags"
dir="$cache/llama-cpp-server"
binary="$dir/bin/llama-server"
marker="$dir/herd-build-flags.txt"

ready() {
    [ -x "$binary" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$build_id" ] \
        && "$binary" --version >/dev/null 2>&1
}

if ! ready; then
    echo "building llama.cpp's llama-server (llama-cpp-python $llama_cpp_python_version's sources) into $dir (about 10 minutes on 2 cores the first time)" >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    work="$dir/work"
    python3 -m venv "$work/tools"
    "$work/tools/bin/python" -m pip install --quiet "cmake==4.4.5" "ninja==1.13.2" >&2
    # --no-binary for the package alone: its build requirements still come as wheels.
    "$work/tools/bin/python" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        -d "$work/sdist" "llama-cpp-python==$llama_cpp_python_version" >&2
    tar xzf "$work/sdist/llama_cpp_python-$llama_cpp_python_version.tar.gz" -C "$work/sdist"
    sources="$work/sdist/llama_cpp_python-$llama_cpp_python_version/vendor/llama.cpp"
    export PATH="$work/tools/bin:$PATH"
    # shellcheck disable=SC2086 # the flags are words
    cmake -S "$sources" -B "$work/build" -G Ninja $server_flags >&2
    cmake --build "$work/build" --target llama-server -j "$(nproc 2>/dev/null || echo 2)" >&2
    mkdir -p "$dir/bin"
    cp "$work/build/bin/llama-server" "$binary"
    rm -rf "$work"
    printf '%s' "$build_id" > "$marker"
    ready || { echo "llama-server built at $binary but \`llama-server --version\` fails" >&2; exit 1; }
fi
echo "$binary"
