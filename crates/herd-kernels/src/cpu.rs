//! Which of the kernels' code paths this CPU takes: detected once at run time, and lowered on request
//! with `HERD_CPU_PATH`, so that one machine can test every path and a run can name the path its
//! numbers came from.
//!
//! The int8 products give the same bits on every path (the same integer sums and the same fused float
//! operations in the same order). Attention's AVX-512 path visits sixteen queries at once with a
//! vector `exp`, so its results differ from the other paths' in the last bits.

use crate::KernelError;

/// The environment variable that lowers the kernels' path (`avx2`, `baseline`, …); unset or empty
/// takes the best path this CPU has.
pub const CPU_PATH_VAR: &str = "HERD_CPU_PATH";

/// A set of instructions the kernels are written for, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuPath {
    /// AVX-512 F/BW with VNNI: 512-bit int8 tiles, sixteen-query attention (Ice Lake and later server
    /// CPUs, AMD Zen 4 and later).
    Avx512Vnni,
    /// AVX-512 F/BW without VNNI: sixteen-query attention, the AVX2 int8 tiles (Skylake-X).
    Avx512,
    /// AVX2, FMA and AVX-VNNI: 256-bit int8 tiles (Intel desktop and laptop CPUs since Alder Lake).
    AvxVnni,
    /// AVX2 and FMA: int8 tiles on `vpmaddwd`, attention compiled for AVX2 (Haswell to Comet Lake, Zen 1–3).
    Avx2,
    /// Whatever the build targets (SSE2 on x86-64; any other architecture).
    Baseline,
}

impl CpuPath {
    /// Every path, best first.
    pub const ALL: [CpuPath; 5] =
        [CpuPath::Avx512Vnni, CpuPath::Avx512, CpuPath::AvxVnni, CpuPath::Avx2, CpuPath::Baseline];

    /// The name runs record and `HERD_CPU_PATH` takes.
    pub fn name(self) -> &'static str {
        match self {
            CpuPath::Avx512Vnni => "avx512-vnni",
            CpuPath::Avx512 => "avx512",
            CpuPath::AvxVnni => "avx-vnni",
            CpuPath::Avx2 => "avx2",
            CpuPath::Baseline => "baseline",
        }
    }

    pub fn parse(name: &str) -> Option<CpuPath> {
        CpuPath::ALL.into_iter().find(|p| p.name() == name.trim().to_ascii_lowercase())
    }

    /// Whether this CPU has every instruction the path uses.
    pub fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let avx512 = || is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw");
            let avx2 = || is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
            match self {
                CpuPath::Avx512Vnni => avx512() && is_x86_feature_detected!("avx512vnni"),
                CpuPath::Avx512 => avx512(),
                CpuPath::AvxVnni => avx2() && is_x86_feature_detected!("avxvnni"),
                CpuPath::Avx2 => avx2(),
                CpuPath::Baseline => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == CpuPath::Baseline
        }
    }

    /// The paths this CPU can run, best first (`Baseline` always).
    pub fn available() -> Vec<CpuPath> {
        CpuPath::ALL.into_iter().filter(|p| p.runs_here()).collect()
    }

    /// The best path this CPU has.
    pub fn detected() -> CpuPath {
        CpuPath::ALL.into_iter().find(|p| p.runs_here()).unwrap_or(CpuPath::Baseline)
    }

    /// The path the kernels take: `HERD_CPU_PATH`'s when set, else [`CpuPath::detected`]. Read once per
    /// process. An unknown name, or a path this CPU cannot run, is an error that names the choices.
    pub fn active() -> Result<CpuPath, KernelError> {
        static ACTIVE: std::sync::OnceLock<Result<CpuPath, String>> = std::sync::OnceLock::new();
        ACTIVE
            .get_or_init(|| {
                let requested = std::env::var(CPU_PATH_VAR).unwrap_or_default();
                CpuPath::choose(&requested)
            })
            .clone()
            .map_err(KernelError::CpuPath)
    }

    /// The path named by `requested` (empty: the detected one), if this CPU runs it.
    fn choose(requested: &str) -> Result<CpuPath, String> {
        if requested.trim().is_empty() {
            return Ok(CpuPath::detected());
        }
        let here = CpuPath::available().iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
        match CpuPath::parse(requested) {
            Some(path) if path.runs_here() => Ok(path),
            Some(path) => Err(format!(
                "{CPU_PATH_VAR}={requested}: this CPU lacks the instructions of the {} path; it runs {here}",
                path.name()
            )),
            None => Err(format!(
                "{CPU_PATH_VAR}={requested} is not a path; choose one of {} (this CPU runs {here}), or unset it",
                CpuPath::ALL.map(CpuPath::name).join(", ")
            )),
        }
    }

    /// The path the kernels run on: [`CpuPath::active`], or `Baseline` (correct everywhere) where
    /// `HERD_CPU_PATH` is wrong; model loading calls `active` first and reports that error.
    pub(crate) fn current() -> CpuPath {
        CpuPath::active().unwrap_or(CpuPath::Baseline)
    }

    /// Whether the path uses AVX-512 F (attention's sixteen-query blocks, activation quantisation).
    pub(crate) fn avx512(self) -> bool {
        matches!(self, CpuPath::Avx512Vnni | CpuPath::Avx512)
    }

    /// Whether the path uses AVX2 and FMA.
    pub(crate) fn avx2(self) -> bool {
        self != CpuPath::Baseline
    }
}

impl std::fmt::Display for CpuPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_baseline_runs_everywhere() {
        for path in CpuPath::ALL {
            assert_eq!(CpuPath::parse(path.name()), Some(path));
        }
        assert_eq!(CpuPath::parse(" AVX2 "), Some(CpuPath::Avx2));
        assert!(CpuPath::available().contains(&CpuPath::Baseline));
        assert_eq!(CpuPath::available()[0], CpuPath::detected());
    }

    /// The suite runs on the path `HERD_CPU_PATH` names (CI runs it once per path): a name this CPU
    /// cannot run fails here rather than silently testing another path.
    #[test]
    fn the_kernels_take_the_requested_path() {
        let active = CpuPath::active().unwrap_or_else(|e| panic!("{e}"));
        eprintln!("kernels' path: {active}");
        match std::env::var(CPU_PATH_VAR).ok().filter(|v| !v.trim().is_empty()) {
            Some(requested) => assert_eq!(Some(active), CpuPath::parse(&requested)),
            None => assert_eq!(active, CpuPath::detected()),
        }
        assert_eq!(CpuPath::current(), active);
    }

    #[test]
    fn a_wrong_request_names_the_choices() {
        assert_eq!(CpuPath::choose(""), Ok(CpuPath::detected()));
        assert_eq!(CpuPath::choose("baseline"), Ok(CpuPath::Baseline));
        let err = CpuPath::choose("avx3").unwrap_err();
        assert!(err.contains("avx512-vnni, avx512, avx-vnni, avx2, baseline"), "{err}");
        if let Some(missing) = CpuPath::ALL.into_iter().find(|p| !p.runs_here()) {
            let err = CpuPath::choose(missing.name()).unwrap_err();
            assert!(err.contains("lacks the instructions"), "{err}");
        }
    }
}
