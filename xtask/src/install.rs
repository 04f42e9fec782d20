//! `cargo xtask install`: puts the release `herd` on the PATH by copying the binary `cargo xtask
//! replicate` (or `test`) already built, so nothing compiles again; `cargo install --path
//! crates/herd-cli` builds the whole tree a second time in a target folder of its own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::replicate;

/// Builds (a no-op when the release binary is current) and copies `herd` into `to`, or the first of
/// `$CARGO_HOME/bin`, `~/.cargo/bin`, `~/.local/bin`; says whether that folder is on the PATH.
pub fn run(to: Option<PathBuf>, device: &str) -> Result<()> {
    let herd = replicate::build_herd(device)?;
    let dir = match to {
        Some(dir) => dir,
        None => default_dir().context("no install folder: set HOME or CARGO_HOME, or pass --to DIR")?,
    };
    let installed = install_into(&herd, &dir)?;
    println!("installed {} (a copy of {})", installed.display(), herd.display());
    let path = std::env::var_os("PATH").unwrap_or_default();
    match first_on_path(&path, "herd") {
        Some(found) if found == installed => println!("`herd` on your PATH is this binary: try `herd --help`"),
        Some(found) => println!(
            "another `herd` comes first on your PATH: {}; put {} before its folder, or remove it",
            found.display(),
            dir.display()
        ),
        None => println!(
            "{} is not on your PATH: export PATH=\"{}:$PATH\" (add the line to ~/.bashrc to keep it)",
            dir.display(),
            dir.display()
        ),
    }
    Ok(())
}

fn default_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return Some(PathBuf::from(home).join("bin"));
    }
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let cargo = home.join(".cargo/bin");
    Some(if cargo.is_dir() { cargo } else { home.join(".local/bin") })
}

/// Copies `binary` into `dir` as `herd`, through a temporary file renamed into place so that a `herd`
/// already running from there keeps its file and a half-written copy is never left under the name.
pub(crate) fn install_into(binary: &Path, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = binary.file_name().context("the built binary has no file name")?;
    let target = dir.join(name);
    let partial = dir.join(format!(".{}.partial", name.to_string_lossy()));
    std::fs::copy(binary, &partial)
        .with_context(|| format!("copying {} to {}", binary.display(), partial.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", partial.display()))?;
    }
    std::fs::rename(&partial, &target).with_context(|| format!("moving the copy to {}", target.display()))?;
    Ok(target)
}

/// The first `name` in the folders of `path` (a PATH value), as the shell would find it.
pub(crate) fn first_on_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_copied_executable_and_found_first_on_the_path() {
        let temp = std::env::temp_dir().join(format!("herd-xtask-install-{}", std::process::id()));
        let (built, bin, other) = (temp.join("target"), temp.join("bin"), temp.join("other"));
        std::fs::create_dir_all(&built).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(built.join("herd"), b"#!/bin/sh\necho herd\n").unwrap();
        let installed = install_into(&built.join("herd"), &bin).unwrap();
        assert_eq!(installed, bin.join("herd"));
        assert_eq!(std::fs::read(&installed).unwrap(), b"#!/bin/sh\necho herd\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777, 0o755);
        }
        // Installing again replaces the copy; no partial file is left behind.
        std::fs::write(built.join("herd"), b"v2").unwrap();
        install_into(&built.join("herd"), &bin).unwrap();
        assert_eq!(std::fs::read(&installed).unwrap(), b"v2");
        assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 1);
        // The shell's order: the first folder holding `herd` wins; none when no folder has one.
        std::fs::write(other.join("herd"), b"old").unwrap();
        let path = std::env::join_paths([&other, &bin]).unwrap();
        assert_eq!(first_on_path(&path, "herd"), Some(other.join("herd")));
        let path = std::env::join_paths([&bin, &other]).unwrap();
        assert_eq!(first_on_path(&path, "herd"), Some(installed));
        assert_eq!(first_on_path(&std::env::join_paths([&built.join("none")]).unwrap(), "herd"), None);
        std::fs::remove_dir_all(&temp).unwrap();
    }
}
