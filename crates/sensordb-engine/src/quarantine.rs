//! The quarantine: where start-up sets damaged files, and bytes it cuts off files, aside instead
//! of refusing to start or deleting them. `<data>/quarantine/` (layout in docs/FORMAT.md):
//!
//! - a whole file recovery cannot use (a segment or WAL file whose header is damaged) is moved
//!   there under its own name: `quarantine/<file name>`;
//! - bytes recovery cuts off the end of a file (a damaged WAL or catalog tail) are copied there
//!   first, as `quarantine/<file name>.cut-at-<offset>`, `offset` being where they started in
//!   the file.
//!
//! A name already taken gets `.1`, `.2`, … appended. The engine never reads quarantined bytes
//! again; it only counts them (`/metrics`, `sensordb inspect`). They are evidence for the
//! operator, who removes them once looked at.

use crate::error::{Error, Result};
use crate::fs::{FileSystem, StorageFile};
use std::path::{Path, PathBuf};

/// The quarantine directory's name inside the data directory.
pub const QUARANTINE_DIR: &str = "quarantine";

/// Most names tried for one file before giving up (`name`, `name.1`, … `name.999`).
const NAME_ATTEMPTS_MAX: usize = 1_000;

/// Bytes copied at a time by [`Quarantine::keep_bytes`].
const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// The quarantine of one data directory.
#[derive(Clone, Debug)]
pub struct Quarantine {
    dir: PathBuf,
    /// Sync what is set aside (file data and directory entries) before the caller goes on.
    sync: bool,
}

impl Quarantine {
    pub fn new(data_dir: &Path, sync: bool) -> Quarantine {
        Quarantine { dir: quarantine_dir(data_dir), sync }
    }

    /// Moves the file at `path` into the quarantine; returns where it went.
    pub fn set_aside(&self, fs: &dyn FileSystem, path: &Path) -> Result<PathBuf> {
        let target = self.free_name(fs, &file_name(path))?;
        fs.rename(path, &target).map_err(|e| Error::io(path, e))?;
        if self.sync {
            fs.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
            if let Some(parent) = path.parent() {
                fs.sync_dir(parent).map_err(|e| Error::io(parent, e))?;
            }
        }
        tracing::warn!(file = %path.display(), quarantined = %target.display(), "damaged file set aside");
        Ok(target)
    }

    /// Copies the bytes of `file` (found at `path`) from `offset` to its end into the quarantine,
    /// before the caller cuts them off. Returns where they went, or `None` when there is nothing
    /// after `offset`. On failure nothing is left behind, and the caller must not cut.
    pub fn keep_bytes(&self, fs: &dyn FileSystem, path: &Path, file: &dyn StorageFile, offset: u64) -> Result<Option<PathBuf>> {
        let len = file.len().map_err(|e| Error::io(path, e))?;
        if len <= offset {
            return Ok(None);
        }
        let name = format!("{}.cut-at-{offset}", file_name(path));
        // A restart before the damaged file is gone meets the same bytes again: keep them once.
        if let Some(kept) = self.holding(fs, &name, path, file, offset, len)? {
            return Ok(Some(kept));
        }
        let target = self.free_name(fs, &name)?;
        let copied = copy_range(fs, path, file, offset, len, &target, self.sync);
        if let Err(e) = copied {
            let _ = fs.remove(&target);
            return Err(e);
        }
        if self.sync {
            fs.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        tracing::warn!(file = %path.display(), offset, bytes = len - offset, kept = %target.display(), "bytes cut off a damaged file kept");
        Ok(Some(target))
    }

    /// The quarantined file under `name` (or `name.N`) that holds exactly bytes
    /// `[offset, len)` of `file`, if there is one.
    fn holding(
        &self,
        fs: &dyn FileSystem,
        name: &str,
        path: &Path,
        file: &dyn StorageFile,
        offset: u64,
        len: u64,
    ) -> Result<Option<PathBuf>> {
        for attempt in 0..NAME_ATTEMPTS_MAX {
            let candidate = if attempt == 0 { self.dir.join(name) } else { self.dir.join(format!("{name}.{attempt}")) };
            let Ok(kept) = fs.open_read(&candidate) else { return Ok(None) };
            if kept.len().ok() != Some(len - offset) {
                continue;
            }
            let mut ours = vec![0u8; (len - offset) as usize];
            let mut theirs = vec![0u8; (len - offset) as usize];
            file.read_exact_at(&mut ours, offset).map_err(|e| Error::io(path, e))?;
            kept.read_exact_at(&mut theirs, 0).map_err(|e| Error::io(&candidate, e))?;
            if ours == theirs {
                return Ok(Some(candidate));
            }
        }
        Ok(None)
    }

    /// A path in the quarantine for `name` that no file has yet; creates the directory.
    fn free_name(&self, fs: &dyn FileSystem, name: &str) -> Result<PathBuf> {
        fs.create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        for attempt in 0..NAME_ATTEMPTS_MAX {
            let candidate = if attempt == 0 { self.dir.join(name) } else { self.dir.join(format!("{name}.{attempt}")) };
            if !fs.exists(&candidate) {
                return Ok(candidate);
            }
        }
        Err(Error::io(&self.dir, std::io::Error::other(format!("{NAME_ATTEMPTS_MAX} quarantined files named {name} already"))))
    }
}

fn copy_range(fs: &dyn FileSystem, path: &Path, file: &dyn StorageFile, start: u64, end: u64, target: &Path, sync: bool) -> Result<()> {
    let out = fs.create(target).map_err(|e| Error::io(target, e))?;
    let mut buffer = vec![0u8; COPY_CHUNK_BYTES.min(end - start) as usize];
    let mut at = start;
    while at < end {
        let len = (end - at).min(COPY_CHUNK_BYTES) as usize;
        file.read_exact_at(&mut buffer[..len], at).map_err(|e| Error::io(path, e))?;
        out.write_all_at(&buffer[..len], at - start).map_err(|e| Error::io(target, e))?;
        at += len as u64;
    }
    if sync {
        out.sync_data().map_err(|e| Error::io(target, e))?;
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| "unnamed".to_string(), |name| name.to_string_lossy().into_owned())
}

/// `<data>/quarantine`.
pub fn quarantine_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(QUARANTINE_DIR)
}

/// The files in the quarantine of `data_dir` with their sizes, by name; empty when there is no
/// quarantine.
pub fn quarantined_files(fs: &dyn FileSystem, data_dir: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let dir = quarantine_dir(data_dir);
    if !fs.exists(&dir) {
        return Ok(Vec::new());
    }
    let mut files: Vec<(PathBuf, u64)> = fs
        .list(&dir)
        .map_err(|e| Error::io(&dir, e))?
        .into_iter()
        .map(|path| {
            let bytes = fs.open_read(&path).and_then(|f| f.len()).unwrap_or(0);
            (path, bytes)
        })
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn set_aside_moves_and_keep_bytes_copies_the_tail_under_free_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = RealFs;
        let quarantine = Quarantine::new(dir.path(), true);
        let source = dir.path().join("a.wal");
        std::fs::write(&source, b"0123456789").expect("write");
        let file = fs.open_read(&source).expect("open");
        let kept = quarantine.keep_bytes(&fs, &source, file.as_ref(), 4).expect("kept").expect("bytes after 4");
        assert_eq!(kept, dir.path().join("quarantine/a.wal.cut-at-4"));
        assert_eq!(std::fs::read(&kept).expect("read"), b"456789");
        assert!(quarantine.keep_bytes(&fs, &source, file.as_ref(), 10).expect("nothing").is_none());
        let again = quarantine.keep_bytes(&fs, &source, file.as_ref(), 4).expect("kept").expect("bytes");
        assert_eq!(again, kept, "the same bytes are kept once");
        std::fs::write(&source, b"0123abcdef").expect("rewrite");
        let other = quarantine.keep_bytes(&fs, &source, file.as_ref(), 4).expect("kept").expect("bytes");
        assert_eq!(other, dir.path().join("quarantine/a.wal.cut-at-4.1"), "a taken name is not overwritten");
        assert_eq!(std::fs::read(&kept).expect("read"), b"456789");

        let moved = quarantine.set_aside(&fs, &source).expect("moved");
        assert_eq!(moved, dir.path().join("quarantine/a.wal"));
        assert!(!source.exists());
        let listed = quarantined_files(&fs, dir.path()).expect("list");
        assert_eq!(listed.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(), vec![10, 6, 6]);
    }
}
