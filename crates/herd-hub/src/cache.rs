//! The Hub cache's layout, as `huggingface_hub` writes it: `models--org--name/blobs/<etag>` holds each
//! file's bytes once, `snapshots/<commit>/<path>` are relative symlinks into `blobs/`, `refs/<revision>`
//! holds the commit a branch pointed at, a download in progress is `blobs/<etag>.incomplete`, and
//! `.locks/models--org--name/<etag>.lock` keeps two downloaders (herd or `hf`) off one blob.

use crate::error::{Result, io_error};
use std::path::{Path, PathBuf};

/// `models--org--name`: a model repo's folder name in the cache.
pub fn repo_folder_name(repo: &str) -> String {
    format!("models--{}", repo.replace('/', "--"))
}

/// One repo's part of the cache.
#[derive(Clone, Debug)]
pub struct RepoCache {
    pub root: PathBuf,
    locks: PathBuf,
}

impl RepoCache {
    pub fn new(cache: &Path, repo: &str) -> Self {
        let folder = repo_folder_name(repo);
        RepoCache { root: cache.join(&folder), locks: cache.join(".locks").join(folder) }
    }

    pub fn blob(&self, etag: &str) -> PathBuf {
        self.root.join("blobs").join(etag)
    }

    pub fn incomplete(&self, etag: &str) -> PathBuf {
        self.root.join("blobs").join(format!("{etag}.incomplete"))
    }

    pub fn snapshot(&self, commit: &str) -> PathBuf {
        self.root.join("snapshots").join(commit)
    }

    /// `snapshots/<commit>/<file>`; `file` is a repo path checked by [`check_repo_path`].
    pub fn pointer(&self, commit: &str, file: &str) -> PathBuf {
        self.snapshot(commit).join(file)
    }

    /// The commit `refs/<revision>` names, if this cache has fetched that revision.
    pub fn read_ref(&self, revision: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.root.join("refs").join(revision)).ok()?;
        let commit = text.trim();
        is_commit(commit).then(|| commit.to_string())
    }

    /// Records that `revision` is at `commit` (a commit names itself: nothing written).
    pub fn write_ref(&self, revision: &str, commit: &str) -> Result<()> {
        if revision == commit {
            return Ok(());
        }
        let path = self.root.join("refs").join(revision);
        if self.read_ref(revision).as_deref() == Some(commit) {
            return Ok(());
        }
        std::fs::create_dir_all(path.parent().expect("refs has a parent")).map_err(io_error(&path))?;
        // Written whole, then renamed: a reader never sees half a commit hash.
        let partial = path.with_extension(format!("herd-{}", std::process::id()));
        std::fs::write(&partial, commit).map_err(io_error(&partial))?;
        std::fs::rename(&partial, &path).map_err(io_error(&path))
    }

    /// Takes the lock of one blob (blocking while another process downloads it); released on drop or
    /// when the process dies.
    pub fn lock(&self, etag: &str) -> Result<std::fs::File> {
        std::fs::create_dir_all(&self.locks).map_err(io_error(&self.locks))?;
        let path = self.locks.join(format!("{etag}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_error(&path))?;
        file.lock().map_err(io_error(&path))?;
        Ok(file)
    }

    /// Points `snapshots/<commit>/<file>` at `blobs/<etag>` with a relative symlink, as `huggingface_hub`
    /// does (a copy where the platform has no symlinks).
    pub fn link(&self, commit: &str, file: &str, etag: &str) -> Result<PathBuf> {
        let pointer = self.pointer(commit, file);
        let parent = pointer.parent().expect("a pointer has a parent");
        std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        let _ = std::fs::remove_file(&pointer);
        let depth = file.split('/').count() + 1;
        let target: PathBuf = std::iter::repeat_n("..", depth).collect::<PathBuf>().join("blobs").join(etag);
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &pointer).map_err(io_error(&pointer))?;
        #[cfg(not(unix))]
        std::fs::copy(self.blob(etag), &pointer).map_err(io_error(&pointer))?;
        Ok(pointer)
    }
}

/// A 40-hex-digit commit hash.
pub(crate) fn is_commit(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A repo path the Hub lists must stay inside the snapshot: relative, no `..`, no empty or `.` parts.
pub(crate) fn check_repo_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

/// An etag as a blob's file name: hex digits (and `-`) only, so a hostile header cannot name a path.
pub(crate) fn check_etag(etag: &str) -> bool {
    !etag.is_empty() && etag.len() <= 128 && etag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_huggingface_hubs() {
        let cache = RepoCache::new(Path::new("/c"), "Qwen/Qwen3-8B");
        assert_eq!(cache.root, Path::new("/c/models--Qwen--Qwen3-8B"));
        assert_eq!(cache.blob("ab"), Path::new("/c/models--Qwen--Qwen3-8B/blobs/ab"));
        assert_eq!(cache.incomplete("ab"), Path::new("/c/models--Qwen--Qwen3-8B/blobs/ab.incomplete"));
        assert_eq!(cache.pointer("c0", "a/b.json"), Path::new("/c/models--Qwen--Qwen3-8B/snapshots/c0/a/b.json"));
        assert_eq!(cache.locks, Path::new("/c/.locks/models--Qwen--Qwen3-8B"));
    }

    #[test]
    fn links_are_relative_and_refs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cache = RepoCache::new(dir.path(), "org/m");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(cache.root.join("blobs")).unwrap();
        std::fs::write(cache.blob("e1"), b"x").unwrap();
        let pointer = cache.link(commit, "sub/f.json", "e1").unwrap();
        assert_eq!(std::fs::read(&pointer).unwrap(), b"x");
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(&pointer).unwrap(), Path::new("../../../blobs/e1"));
        assert_eq!(cache.read_ref("main"), None);
        cache.write_ref("main", commit).unwrap();
        assert_eq!(cache.read_ref("main").as_deref(), Some(commit));
        assert_eq!(std::fs::read_to_string(cache.root.join("refs/main")).unwrap(), commit);
    }

    #[test]
    fn hostile_paths_and_etags_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\\b"] {
            assert!(!check_repo_path(bad), "{bad}");
        }
        assert!(check_repo_path("config.json") && check_repo_path("sub/model-00001-of-00002.safetensors"));
        assert!(!check_etag("../../x") && !check_etag("") && check_etag("0a1b-2c"));
    }
}
