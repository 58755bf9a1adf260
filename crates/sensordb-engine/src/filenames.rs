//! The engine's on-disk file names and extensions, in one place. Three names live beside the
//! code that owns them instead: `quarantine/` (`crate::quarantine`), `databases` (and
//! `databases.tmp` while it is replaced), written by `reclaim`, and the server's
//! `transactions.log` (and `.tmp`), see docs/FORMAT.md.
//!
//! ```text
//! <data>/series.catalog            series catalog (append-only)
//! <data>/wal/<20-digit id>.wal     write-ahead log files, ids ascending
//! <data>/segments/<20-digit id>.seg segment files, ids ascending = creation order
//! <data>/segments/<id>.seg.tmp     a compaction output not yet complete (removed at start-up)
//! <data>/segments/<id>.rewrite     a rewrite with several outputs being put in place (its
//!                                  first output's id; `.rewrite.tmp` while written)
//! <data>/LOCK                      held while an engine has the directory open
//! <data>/databases                 databases and their retention (reclaim/policy.rs)
//! <data>/transactions.log          completed native-protocol transaction ids (server)
//! <data>/quarantine/               damaged files and cut-off bytes set aside (quarantine.rs)
//! ```

use std::path::{Path, PathBuf};

pub const CATALOG_FILE: &str = "series.catalog";
pub const WAL_DIR: &str = "wal";
pub const WAL_EXTENSION: &str = "wal";
pub const SEGMENT_DIR: &str = "segments";
pub const SEGMENT_EXTENSION: &str = "seg";
pub const LOCK_FILE: &str = "LOCK";
/// Suffix of a compaction output until it is complete: `<id>.seg.tmp`.
pub const TEMPORARY_SUFFIX: &str = "tmp";

/// Where a compaction writes segment `id` before renaming it into place.
pub fn temporary_segment(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.{SEGMENT_EXTENSION}.{TEMPORARY_SUFFIX}"))
}

/// Extension of the manifest of a rewrite with several outputs: `<first output id>.rewrite`.
pub const REWRITE_MANIFEST_EXTENSION: &str = "rewrite";

/// The manifest of the rewrite whose first output is segment `id`.
pub fn rewrite_manifest(dir: &Path, id: u64) -> PathBuf {
    numbered_file(dir, id, REWRITE_MANIFEST_EXTENSION)
}

/// Where a rewrite manifest is written before it is renamed into place.
pub fn temporary_rewrite_manifest(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.{REWRITE_MANIFEST_EXTENSION}.{TEMPORARY_SUFFIX}"))
}

/// True for a name made by [`temporary_rewrite_manifest`].
pub fn is_temporary_rewrite_manifest(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(&format!(".{REWRITE_MANIFEST_EXTENSION}.{TEMPORARY_SUFFIX}")))
}

/// True for a name made by [`temporary_segment`].
pub fn is_temporary_segment(path: &Path) -> bool {
    path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.ends_with(&format!(".{SEGMENT_EXTENSION}.{TEMPORARY_SUFFIX}")))
}

pub fn catalog_path(data_dir: &Path) -> PathBuf {
    data_dir.join(CATALOG_FILE)
}

pub fn wal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(WAL_DIR)
}

pub fn segment_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(SEGMENT_DIR)
}

/// `<dir>/<id, 20 digits>.<extension>`: zero padding makes name order equal id order.
pub fn numbered_file(dir: &Path, id: u64, extension: &str) -> PathBuf {
    dir.join(format!("{id:020}.{extension}"))
}

/// The id of a file named by [`numbered_file`], or `None` for any other name.
pub fn parse_numbered_file(path: &Path, extension: &str) -> Option<u64> {
    if path.extension()?.to_str()? != extension {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    if stem.len() != 20 {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_files_round_trip_and_sort_by_id() {
        let dir = Path::new("/d");
        let a = numbered_file(dir, 9, "wal");
        let b = numbered_file(dir, 10, "wal");
        assert!(a < b);
        assert_eq!(parse_numbered_file(&b, "wal"), Some(10));
        assert_eq!(parse_numbered_file(&b, "seg"), None);
        assert_eq!(parse_numbered_file(Path::new("/d/x.wal"), "wal"), None);
    }
}
