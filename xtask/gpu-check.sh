#!/usr/bin/env bash
# herd's GPU check, run from the folder `cargo xtask cuda-build` packs (no cargo needed here):
#
#   bash gpu-check.sh [--device cuda[:N]|cpu] [--models "ALIAS ..."|none] [--model ALIAS=FILE]... [RESULTS_DIR]
#
# Compares, on the device against the CPU, the logits of the tiny random checkpoints of every family
# (llama, qwen2, qwen3, phi3, qwen3_vl, qwen2_vl, qwen2_5_vl, gemma3, mistral3; f32 and bf16) and the answer probabilities of the real models
# whose GGUF files are present (default: smollm2-135m and qwen2.5-coder-0.5b, looked up in the herd cache
# $HERD_CACHE/models, else ~/.cache/herd/models; or named with --model ALIAS=FILE), and prints scoring and
# society-generation throughput. Writes RESULTS_DIR/gpu-check.json and gpu-check.log (RESULTS_DIR: the
# argument, else $OUT, else ./results beside this script). Exit status: 0 all within tolerance, 1 a
# mismatch, 2 the check could not run (no driver, no CUDA libraries, no device), 124 over 8 minutes.
#
# The binary links CUDA 13's cuBLAS, cuBLASLt, cuRAND and NVRTC, which are too large to travel with it:
# they are taken from $CUDA_LIBS (colon-separated folders), else python3's nvidia wheels (PyTorch cu13x
# brings them), else /usr/local/cuda, else the herd cache's toolkit (`cargo xtask cuda-build` installs
# it). `--device cpu` compares the CPU with itself, where no GPU is, to show every step works.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
device=cuda
models="smollm2-135m qwen2.5-coder-0.5b"
files=()
out="${OUT:-$here/results}"
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="$2"; shift 2 ;;
        --models) models="$2"; shift 2 ;;
        --model) files+=("$2"); shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "gpu-check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) out="$1"; shift ;;
    esac
done
[ "$models" = none ] && models=""
mkdir -p "$out"
log="$out/gpu-check.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }

# Folders that may hold CUDA 13's libraries, most specific first.
candidates=()
IFS=: read -r -a from_env <<< "${CUDA_LIBS:-}"
candidates+=("${from_env[@]}")
for py in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$py" >/dev/null 2>&1; then
        while IFS= read -r site; do
            candidates+=("$site/nvidia/cu13/lib")
            for d in "$site"/nvidia/*/lib; do candidates+=("$d"); done
        done < <("$py" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true)
    fi
done
candidates+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64)
cache="${HERD_CACHE:-${XDG_CACHE_HOME:+$XDG_CACHE_HOME/herd}}"
cache="${cache:-$HOME/.cache/herd}"
for d in "$cache"/cuda/13.0/venv/lib/python3*/site-packages/nvidia/cu13/lib; do candidates+=("$d"); done

# The binary travels gzipped (see xtask/src/cuda_build.rs); it runs from a temporary folder.
bin="$(mktemp -d "${TMPDIR:-/tmp}/herd-gpu-check.XXXXXX")/gpu_check"
gzip -dc "$here/bin/gpu_check.gz" > "$bin"
chmod +x "$bin"
trap 'rm -rf "$(dirname "$bin")"' EXIT

libpath="$here/lib"
missing=()
for lib in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
    found=""
    for d in "${candidates[@]}"; do
        if [ -n "$d" ] && [ -e "$d/$lib" ]; then found="$d"; break; fi
    done
    if [ -z "$found" ]; then missing+=("$lib"); continue; fi
    case ":$libpath:" in *":$found:"*) ;; *) libpath="$libpath:$found" ;; esac
done
if [ ${#missing[@]} -gt 0 ]; then
    say "gpu-check.sh: CUDA 13 libraries not found: ${missing[*]}"
    say "  set CUDA_LIBS to the folder(s) holding them (e.g. a python site-packages/nvidia/cu13/lib)"
    exit 2
fi
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The driver's library: the machine's own; the stub (which makes CUDA fail to open) only for --device cpu.
if command -v ldd >/dev/null 2>&1 && ldd "$bin" | grep -q 'libcuda.so.1 => not found'; then
    if [ "$device" = cpu ]; then
        export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$here/cpu-only"
        say "no NVIDIA driver library here: using the stub, so only --device cpu can run"
    else
        say "gpu-check.sh: libcuda.so.1 (the NVIDIA driver's library) is not on this machine; is it a GPU machine?"
        exit 2
    fi
fi
if command -v ldd >/dev/null 2>&1 && ldd "$bin" | grep -q 'not found'; then
    say "gpu-check.sh: libraries still missing:"; ldd "$bin" | grep 'not found' | tee -a "$log"
    exit 2
fi

say "herd GPU check: $(cat "$here/BUILD.json" | tr -d '\n' | sed 's/  */ /g')"
say "libraries: $LD_LIBRARY_PATH"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | tee -a "$log" || true
fi
args=(check --dir "$here" --device "$device" --json "$out/gpu-check.json")
for m in $models; do args+=(--model "$m"); done
for f in "${files[@]}"; do args+=(--model "$f"); done

start=$(date +%s)
set +e
timeout 480 "$bin" "${args[@]}" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
set -e
say "gpu-check.sh: exit $status after $(( $(date +%s) - start )) s; results in $out/gpu-check.json and $log"
[ "$status" = 124 ] && say "gpu-check.sh: stopped at the 8-minute limit"
exit "$status"
