//! `cargo xtask cuda-build [--out DIR]`: compiles herd's CUDA path (`--features cuda`) on a machine with no
//! GPU and no CUDA toolkit, and packs the GPU check into one folder for a GPU machine with no cargo.
//!
//! The toolkit comes from NVIDIA's PyPI wheels (nvcc, the runtime headers, cuBLAS, cuRAND, NVRTC), pip-
//! installed into a venv in the herd cache (`<cache>/cuda/13.0/`) the first time and reused after. Two
//! things wheels lack are made beside them: the unversioned `libX.so` names the linker looks for, and a
//! stub `libcuda.so` (the driver's library; candle links cudarc with `dynamic-linking`, so every symbol it
//! calls must resolve at link time), generated from the wheel's `cuda.h`. At run time the real driver
//! library and cuBLAS/cuRAND/NVRTC of the GPU machine are used.
//!
//! Why CUDA 13.0: the GPU machines this project is lent run driver 580 (CUDA 13.0) with CUDA 13 libraries
//! (PyTorch cu130's wheels), and a binary linked against `libcublas.so.12` would need 700 MB of CUDA 12
//! libraries carried along. PTX from a newer nvcc (13.1+) would not load on driver 580. Why compute
//! capability 8.0: candle-kernels compiles its kernels to PTX for `compute_80`, which the driver
//! JIT-compiles for any newer GPU (A100 natively; H100/H200, sm_90, at first use); "90" would become
//! `sm_90a`, which runs on Hopper only. candle's statically linked GGUF matmul kernels are machine code
//! for sm_80 only; herd does not use them on GPUs (GGUF weights are dequantised to f32 there).

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The CUDA release the wheels belong to (`cudarc`'s `cuda-13000`).
pub const CUDA_VERSION: &str = "13.0";
const CUDARC_CUDA_VERSION: &str = "13000";
/// See the module documentation.
pub const COMPUTE_CAP: &str = "80";

/// The wheels, pinned to CUDA 13.0's releases and installed without their (unpinned) dependencies.
pub const WHEELS: [(&str, &str); 8] = [
    // nvcc, ptxas, fatbinary; cicc and libdevice; the crt headers nvcc includes.
    ("nvidia-cuda-nvcc", "13.0.88"),
    ("nvidia-nvvm", "13.0.88"),
    ("nvidia-cuda-crt", "13.0.88"),
    // cuda.h, cuda_bf16.h, … and libcudart.so.13 (candle-kernels links it).
    ("nvidia-cuda-runtime", "13.0.96"),
    // cuda/std headers (libcu++), which the runtime headers include.
    ("nvidia-cuda-cccl", "13.0.85"),
    // What cudarc links: NVRTC, cuBLAS (with cuBLASLt), cuRAND.
    ("nvidia-cuda-nvrtc", "13.0.88"),
    ("nvidia-cublas", "13.0.2.14"),
    ("nvidia-curand", "10.4.0.35"),
];

/// The libraries the final link names without a version (`-lcublas`), and the wheel file each is.
const LINK_NAMES: [(&str, &str); 5] = [
    ("libcublas.so", "libcublas.so.13"),
    ("libcublasLt.so", "libcublasLt.so.13"),
    ("libcurand.so", "libcurand.so.10"),
    ("libnvrtc.so", "libnvrtc.so.13"),
    ("libcudart.so", "libcudart.so.13"),
];

/// The largest folder that can travel to a GPU machine with the device tool.
pub const MAX_FOLDER_BYTES: u64 = 64 << 20;

/// Raised when the way the toolkit folder is laid out changes, so older installs are redone.
const LAYOUT: &str = "layout 1";

/// The herd cache: `$HERD_CACHE`, else `$XDG_CACHE_HOME/herd`, else `~/.cache/herd` (as
/// `herd_infer::herd_cache_dir`).
fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HERD_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("herd")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("herd"))
}

/// `package==version` lines, as pip takes them and as the install marker records them.
pub fn requirements() -> Vec<String> {
    WHEELS.iter().map(|(p, v)| format!("{p}=={v}")).collect()
}

/// The toolkit's root (`…/site-packages/nvidia/cu13`: bin/nvcc, include/, lib/), installing it first if
/// needed.
pub fn toolkit() -> Result<PathBuf> {
    let base = cache_dir().join("cuda").join(CUDA_VERSION);
    let marker = base.join("herd-cuda-toolkit.txt");
    let want = format!("{}\n{LAYOUT}\n", requirements().join("\n"));
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == want)
        && let Some(root) = find_root(&base.join("venv"))
        && nvcc_version(&root).is_ok()
    {
        return Ok(root);
    }
    install(&base, &marker, &want)
}

/// `<venv>/lib/python3.X/site-packages/nvidia/cu13`, where the CUDA 13 wheels put everything.
fn find_root(venv: &Path) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13"))
        .find(|p| p.join("bin/nvcc").is_file())
}

fn install(base: &Path, marker: &Path, want: &str) -> Result<PathBuf> {
    let start = Instant::now();
    let venv = base.join("venv");
    let _ = std::fs::remove_file(marker);
    std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
    let python = venv.join("bin/python");
    if !python.is_file() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
            "install python3 with its venv module (Debian: python3-venv)",
        )?;
    }
    println!(
        "== installing the CUDA {CUDA_VERSION} toolkit from PyPI wheels into {} (about 680 MB of downloads)",
        venv.display()
    );
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--quiet"])
            .args(requirements()),
        "pip install of the CUDA wheels",
        "check that PyPI is reachable (pip's index settings) and the disk has 1.5 GB free, then run the command again",
    )?;
    let root = find_root(&venv).with_context(|| {
        format!("pip installed the wheels but {} has no site-packages/nvidia/cu13/bin/nvcc", venv.display())
    })?;
    let lib = root.join("lib");
    for (name, file) in LINK_NAMES {
        if !lib.join(file).is_file() {
            bail!(
                "{} is missing from the wheels; the pinned versions in xtask/src/cuda_build.rs no longer match",
                file
            );
        }
        let link = lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(file, &link).with_context(|| format!("linking {}", link.display()))?;
    }
    make_driver_stub(&root)?;
    let version = nvcc_version(&root)?;
    if !version.contains(&format!("release {CUDA_VERSION},")) {
        bail!("{} reports `{version}`, not CUDA {CUDA_VERSION}", root.join("bin/nvcc").display());
    }
    std::fs::write(marker, want)?;
    println!("   ready in {:.0} s: {}", start.elapsed().as_secs_f64(), root.display());
    Ok(root)
}

/// The `release …` line of `nvcc --version`: runs nvcc, which also shows the toolkit is usable.
fn nvcc_version(root: &Path) -> Result<String> {
    let nvcc = root.join("bin/nvcc");
    let out = Command::new(&nvcc).arg("--version").output().with_context(|| format!("running {}", nvcc.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find(|l| l.contains("release")) {
        Some(line) if out.status.success() => Ok(line.trim().to_string()),
        _ => bail!("{} --version failed: {}", nvcc.display(), String::from_utf8_lossy(&out.stderr)),
    }
}

/// Every driver function `cuda.h` declares, after the preprocessor maps API names to their current
/// versions (`cuCtxCreate` → `cuCtxCreate_v4`): identifiers `cuX…` followed by `(`.
pub fn driver_symbols(preprocessed: &str) -> Vec<String> {
    let bytes = preprocessed.as_bytes();
    let mut out = std::collections::BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &preprocessed[start..i];
            let mut j = i;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let called = bytes.get(j) == Some(&b'(');
            if called && word.len() > 2 && word.starts_with("cu") && word.as_bytes()[2].is_ascii_uppercase() {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// `lib/stubs/libcuda.so` (soname `libcuda.so.1`, with a `libcuda.so.1` link beside it for runs on
/// machines without a driver): each function returns CUDA_ERROR_STUB_LIBRARY (34), so a CUDA device
/// fails to open with that error rather than crashing.
fn make_driver_stub(root: &Path) -> Result<()> {
    let out = Command::new("cc")
        .args(["-E", "-P", "-x", "c", "-"])
        .arg(format!("-I{}", root.join("include").display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("piped stdin").write_all(b"#include <cuda.h>\n")?;
            child.wait_with_output()
        })
        .context("running the C compiler `cc` (Debian: gcc) to read cuda.h")?;
    if !out.status.success() {
        bail!("cc could not preprocess cuda.h: {}", String::from_utf8_lossy(&out.stderr));
    }
    let symbols = driver_symbols(&String::from_utf8_lossy(&out.stdout));
    if symbols.len() < 100 || !symbols.iter().any(|s| s == "cuInit") {
        bail!("found only {} driver functions in cuda.h (no cuInit?)", symbols.len());
    }
    let stubs = root.join("lib/stubs");
    std::fs::create_dir_all(&stubs)?;
    let source = stubs.join("libcuda-stub.c");
    let body: String = symbols.iter().map(|s| format!("int {s}(void) {{ return 34; }}\n")).collect();
    std::fs::write(&source, body)?;
    let lib = stubs.join("libcuda.so");
    run(
        Command::new("cc").args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"]).arg(&lib).arg(&source),
        "compiling the stub libcuda.so",
        "install gcc (Debian: gcc)",
    )?;
    let so1 = stubs.join("libcuda.so.1");
    let _ = std::fs::remove_file(&so1);
    std::os::unix::fs::symlink("libcuda.so", &so1)?;
    Ok(())
}

/// The variables a cargo build with `--features cuda` needs, for the toolkit at `root`: nvcc on the path
/// and named for cudaforge (candle-kernels' builder), the toolkit root for cudarc's link search (lib/ and
/// lib/stubs/), the CUDA version for cudarc, the compute capability (a `CUDA_COMPUTE_CAP` already set is
/// kept), and the libraries on `LD_LIBRARY_PATH` so `cargo run`/`cargo test` of that build find cuBLAS
/// and friends (the driver's `libcuda.so.1` still comes from the machine).
pub fn env_for(root: &Path) -> Vec<(String, String)> {
    let prepend = |var: &str, dir: PathBuf| match std::env::var(var) {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    };
    let root_s = root.display().to_string();
    let mut env = vec![("PATH".to_string(), prepend("PATH", root.join("bin")))];
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"] {
        env.push((var.to_string(), root_s.clone()));
    }
    env.push(("NVCC".into(), root.join("bin/nvcc").display().to_string()));
    env.push(("CUDARC_CUDA_VERSION".into(), CUDARC_CUDA_VERSION.into()));
    let cap = std::env::var("CUDA_COMPUTE_CAP").ok().filter(|c| !c.is_empty());
    env.push(("CUDA_COMPUTE_CAP".into(), cap.unwrap_or_else(|| COMPUTE_CAP.into())));
    env.push(("LD_LIBRARY_PATH".into(), prepend("LD_LIBRARY_PATH", root.join("lib"))));
    env
}

/// Installs the toolkit wheels if they are missing and returns the environment a cargo build with
/// `--features cuda` needs (see [`env_for`]).
pub fn cuda_env() -> Result<Vec<(String, String)>> {
    Ok(env_for(&toolkit()?))
}

fn run(command: &mut Command, what: &str, fix: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("{what}: could not start it; {fix}"))?;
    if !status.success() {
        bail!("{what} failed ({status}); {fix}");
    }
    Ok(())
}

/// Total bytes of the files under `dir`.
pub fn folder_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        total += if meta.is_dir() { folder_size(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// Fails when the folder cannot travel to a GPU machine.
pub fn check_size(dir: &Path, bytes: u64) -> Result<()> {
    let mib = bytes as f64 / f64::from(1 << 20);
    if bytes > MAX_FOLDER_BYTES {
        bail!("{} holds {mib:.1} MiB, over the {} MiB a GPU machine takes", dir.display(), MAX_FOLDER_BYTES >> 20);
    }
    Ok(())
}

const TARGET_DIR: &str = "target/cuda";

/// `cargo xtask cuda-build [--out DIR]`: builds and packs the GPU check into `out` (default `target/cuda/gpu-check`).
pub fn build(out: Option<PathBuf>) -> Result<()> {
    let out = out.unwrap_or_else(|| PathBuf::from(TARGET_DIR).join("gpu-check"));
    let start = Instant::now();
    let env = cuda_env()?;
    let root = PathBuf::from(env.iter().find(|(k, _)| k == "CUDA_HOME").map(|(_, v)| v.as_str()).unwrap_or_default());
    let cap = env.iter().find(|(k, _)| k == "CUDA_COMPUTE_CAP").map(|(_, v)| v.clone()).unwrap_or_default();
    println!(
        "== building herd-infer's gpu_check with --features cuda (release, CUDA {CUDA_VERSION}, compute {cap}, {TARGET_DIR})"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let t = Instant::now();
    run(
        Command::new(&cargo)
            .args(["build", "--release", "-p", "herd-infer", "--features", "cuda", "--example", "gpu_check"])
            .env("CARGO_TARGET_DIR", TARGET_DIR)
            .envs(env.iter().map(|(k, v)| (k, v))),
        "cargo build --features cuda",
        "see the compiler's output above (nvcc's errors name the kernel file)",
    )?;
    println!("   built in {:.0} s", t.elapsed().as_secs_f64());

    // A fresh folder, so nothing stale travels.
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing the old {}", out.display()))?;
    }
    for sub in ["bin", "lib", "cpu-only"] {
        std::fs::create_dir_all(out.join(sub))?;
    }
    let binary = out.join("bin/gpu_check");
    std::fs::copy(Path::new(TARGET_DIR).join("release/examples/gpu_check"), &binary)?;
    run(Command::new("strip").arg("--strip-all").arg(&binary), "strip", "install binutils (Debian: binutils)")?;
    // cudart is small and always the one built against; cuBLAS, cuRAND and NVRTC (800 MB) are the GPU
    // machine's. The stub driver library is only for `--device cpu` where no driver is installed.
    std::fs::copy(root.join("lib/libcudart.so.13"), out.join("lib/libcudart.so.13"))?;
    std::fs::copy(root.join("lib/stubs/libcuda.so"), out.join("cpu-only/libcuda.so.1"))?;
    std::fs::copy("xtask/gpu-check.sh", out.join("gpu-check.sh"))?;
    run(Command::new("chmod").arg("+x").arg(out.join("gpu-check.sh")), "chmod", "check the folder's permissions")?;

    println!("== writing the tiny checkpoints and prompts (gpu_check prepare)");
    let ld = format!("{}:{}:{}", out.join("lib").display(), root.join("lib").display(), out.join("cpu-only").display());
    run(
        Command::new(&binary).arg("prepare").arg(&out).env("LD_LIBRARY_PATH", ld),
        "gpu_check prepare",
        "see its error above",
    )?;
    // Stripped, the binary is about 69 MB, 32 MB of it candle's statically linked GGUF kernels (sm_80
    // machine code, never run by herd on a GPU): gzip brings it to about 19 MB, under the folder's limit.
    run(
        Command::new("gzip").args(["-n", "-6", "-f"]).arg(&binary),
        "gzip of the gpu_check binary",
        "install gzip (Debian: gzip)",
    )?;
    let git = Command::new("git").args(["rev-parse", "HEAD"]).output().ok().filter(|o| o.status.success());
    let build = serde_json::json!({
        "cuda": CUDA_VERSION,
        "compute_cap": cap,
        "wheels": requirements(),
        "commit": git.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        "needs_on_the_gpu_machine": ["libcuda.so.1 (the driver, 580 or newer)", "libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10", "libnvrtc.so.13"],
    });
    std::fs::write(out.join("BUILD.json"), serde_json::to_string_pretty(&build)? + "\n")?;

    let bytes = folder_size(&out)?;
    println!(
        "== {}: {:.1} MiB (limit {} MiB); cuda-build took {:.0} s",
        out.display(),
        bytes as f64 / f64::from(1 << 20),
        MAX_FOLDER_BYTES >> 20,
        start.elapsed().as_secs_f64()
    );
    check_size(&out, bytes)?;
    println!("   on a GPU machine: bash {}/gpu-check.sh [RESULTS_DIR]   (here: --device cpu)", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheels_are_one_cuda_release_and_pinned() {
        let reqs = requirements();
        assert_eq!(reqs.len(), WHEELS.len());
        for (package, version) in WHEELS {
            assert!(package.starts_with("nvidia-") && !package.ends_with("-cu12"), "{package}: a CUDA 13 wheel");
            // cuRAND numbers its releases on its own (10.4.0 is CUDA 13.0's); every other wheel is 13.0.x.
            let want = if package == "nvidia-curand" { "10.4.0." } else { "13.0." };
            assert!(version.starts_with(want), "{package}=={version} is not CUDA {CUDA_VERSION}'s");
        }
        assert_eq!(format!("{}0{}0", &CUDA_VERSION[..2], &CUDA_VERSION[3..]), CUDARC_CUDA_VERSION);
    }

    #[test]
    fn driver_symbols_are_the_functions_cuda_h_declares() {
        let text = "typedef enum cudaError_enum { CUDA_SUCCESS = 0 } CUresult;\n\
                    CUresult cuInit(unsigned int Flags);\n\
                    CUresult cuCtxCreate_v4 (CUcontext *pctx, void *params);\n\
                    typedef CUresult (*PFN_cuInit)(unsigned int);\n\
                    int cuda_helper(void); CUresult cuInit(unsigned int);";
        assert_eq!(driver_symbols(text), ["cuCtxCreate_v4", "cuInit"]);
    }

    #[test]
    fn env_names_the_toolkit_for_cudarc_and_cudaforge() {
        let root = Path::new("/cache/cuda/13.0/venv/lib/python3.11/site-packages/nvidia/cu13");
        let env: std::collections::BTreeMap<String, String> = env_for(root).into_iter().collect();
        assert!(env["PATH"].starts_with(&format!("{}/bin", root.display())));
        assert_eq!(env["NVCC"], format!("{}/bin/nvcc", root.display()));
        for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"] {
            assert_eq!(env[var], root.display().to_string());
        }
        assert_eq!(env["CUDARC_CUDA_VERSION"], "13000");
        assert!(!env["CUDA_COMPUTE_CAP"].is_empty());
        assert!(env["LD_LIBRARY_PATH"].starts_with(&format!("{}/lib", root.display())));
    }

    #[test]
    fn folder_size_counts_nested_files_and_the_limit_is_64_mib() {
        let dir = std::env::temp_dir().join(format!("herd-xtask-cuda-size-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("x"), vec![0u8; 1000]).unwrap();
        std::fs::write(dir.join("a/b/y"), vec![0u8; 24]).unwrap();
        let size = folder_size(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(size, 1024);
        assert!(check_size(&dir, MAX_FOLDER_BYTES).is_ok());
        let err = check_size(&dir, MAX_FOLDER_BYTES + 1).unwrap_err().to_string();
        assert!(err.contains("over the 64 MiB"), "{err}");
    }
}
