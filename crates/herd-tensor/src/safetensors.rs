//! A checkpoint folder's safetensors weights: which files hold them (the shards that
//! `model.safetensors.index.json` names, else `model.safetensors`), memory-mapped rather than read into
//! memory, so a multi-GB checkpoint costs page cache, not a copy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{Device, Tensor};

/// The index file of a sharded checkpoint.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// The weights of an unsharded checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";

/// Why a folder's weight files cannot be found or opened; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    /// A weight file is not there.
    #[error("missing file {path}: {what}")]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// Which file it is: a shard the index names, or the weights themselves.
        what: &'static str,
    },
    /// The index exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The index file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The index is not JSON with a `weight_map`.
    #[error("{path} is not a valid safetensors index (with a weight_map): {source}")]
    Index {
        /// The index file.
        path: PathBuf,
        /// The parse error (with line and column).
        source: serde_json::Error,
    },
    /// The index names no file.
    #[error("{path}: weight_map is empty")]
    EmptyIndex {
        /// The index file.
        path: PathBuf,
    },
}

/// What an index file holds that matters here: tensor name → shard file name.
#[derive(serde::Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

/// The safetensors files of one checkpoint folder, each once, in name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightFiles {
    files: Vec<PathBuf>,
}

impl WeightFiles {
    /// The files of `dir`: those named by `model.safetensors.index.json` when it is there (each must
    /// exist), else `model.safetensors`.
    pub fn find(dir: &Path) -> Result<Self, SafetensorsError> {
        let index = dir.join(INDEX_FILE);
        if index.is_file() {
            let text = std::fs::read_to_string(&index)
                .map_err(|source| SafetensorsError::Io { path: index.clone(), source })?;
            let parsed: Index = serde_json::from_str(&text)
                .map_err(|source| SafetensorsError::Index { path: index.clone(), source })?;
            let names: BTreeSet<String> = parsed.weight_map.into_values().collect();
            let files: Vec<PathBuf> = names.into_iter().map(|n| dir.join(n)).collect();
            if let Some(missing) = files.iter().find(|f| !f.is_file()) {
                return Err(SafetensorsError::Missing {
                    path: missing.clone(),
                    what: "a weight shard listed in model.safetensors.index.json",
                });
            }
            if files.is_empty() {
                return Err(SafetensorsError::EmptyIndex { path: index });
            }
            return Ok(Self { files });
        }
        let single = dir.join(SINGLE_FILE);
        if single.is_file() {
            return Ok(Self { files: vec![single] });
        }
        Err(SafetensorsError::Missing {
            path: single,
            what: "the weights (neither model.safetensors nor model.safetensors.index.json is there)",
        })
    }

    /// The files, in name order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.files
    }

    /// Memory-maps every file: tensors are read from the page cache when loaded, not copied up front.
    /// candle-nn's `VarBuilder::from_backend` takes the result as it is.
    #[allow(unsafe_code)]
    pub fn mmap(&self) -> candle_core::Result<MmapedSafetensors> {
        // SAFETY: the files are mapped read-only; this is sound as long as nobody modifies or truncates
        // them while the model is loaded, which a checkpoint folder does not do (the same contract as
        // every mmap-based loader, e.g. transformers' safetensors loading).
        unsafe { MmapedSafetensors::multi(&self.files) }
    }

    /// Every tensor of every file on `device`, in the files' order (for a loader that converts each
    /// tensor itself rather than building through a `VarBuilder`).
    pub fn load_all(&self, device: &Device) -> candle_core::Result<Vec<(String, Tensor)>> {
        let st = self.mmap()?;
        let mut names: Vec<String> = st.tensors().into_iter().map(|(name, _)| name).collect();
        names.sort();
        names.into_iter().map(|name| st.load(&name, device).map(|t| (name, t))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn write(dir: &Path, file: &str, tensors: &[(&str, f32)]) {
        let map: HashMap<String, Tensor> =
            tensors.iter().map(|&(n, x)| (n.to_string(), Tensor::new(&[x, x + 1.0], &Device::Cpu).unwrap())).collect();
        candle_core::safetensors::save(&map, dir.join(file)).unwrap();
    }

    #[test]
    fn a_single_file_is_found_and_its_tensors_load() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), SINGLE_FILE, &[("b", 2.0), ("a", 1.0)]);
        let files = WeightFiles::find(dir.path()).unwrap();
        assert_eq!(files.paths(), [dir.path().join(SINGLE_FILE)]);
        let all = files.load_all(&Device::Cpu).unwrap();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(all[1].1.to_vec1::<f32>().unwrap(), [2.0, 3.0]);
    }

    #[test]
    fn the_index_decides_the_shards_and_each_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "s2.safetensors", &[("y", 5.0)]);
        write(dir.path(), "s1.safetensors", &[("x", 4.0)]);
        // Not in the index: ignored.
        write(dir.path(), SINGLE_FILE, &[("z", 0.0)]);
        let index =
            r#"{"metadata": {}, "weight_map": {"y": "s2.safetensors", "x": "s1.safetensors", "x2": "s1.safetensors"}}"#;
        std::fs::write(dir.path().join(INDEX_FILE), index).unwrap();
        let files = WeightFiles::find(dir.path()).unwrap();
        assert_eq!(files.paths(), [dir.path().join("s1.safetensors"), dir.path().join("s2.safetensors")]);
        let st = files.mmap().unwrap();
        assert_eq!(st.load("y", &Device::Cpu).unwrap().to_vec1::<f32>().unwrap(), [5.0, 6.0]);
        assert!(st.get("z").is_err());

        std::fs::remove_file(dir.path().join("s2.safetensors")).unwrap();
        match WeightFiles::find(dir.path()).unwrap_err() {
            SafetensorsError::Missing { path, .. } => assert_eq!(path, dir.path().join("s2.safetensors")),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_broken_or_empty_index_and_a_folder_without_weights_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = WeightFiles::find(dir.path()).unwrap_err().to_string();
        assert!(e.contains("model.safetensors") && e.contains("index.json"), "{e}");
        std::fs::write(dir.path().join(INDEX_FILE), "{ not json").unwrap();
        let e = WeightFiles::find(dir.path()).unwrap_err();
        assert!(matches!(e, SafetensorsError::Index { .. }) && e.to_string().contains(INDEX_FILE), "{e}");
        std::fs::write(dir.path().join(INDEX_FILE), r#"{"weight_map": {}}"#).unwrap();
        let e = WeightFiles::find(dir.path()).unwrap_err();
        assert!(matches!(e, SafetensorsError::EmptyIndex { .. }), "{e}");
    }
}
