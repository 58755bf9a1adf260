//! Recovery: reads every log file of a directory, oldest first, and replays its intact records.
//!
//! This module owns the decisions about damaged files. The rules (also in `docs/format/wal.md`):
//!
//! - Files are replayed in id order; within a file, records in file order.
//! - A header with an unknown version under a matching header checksum stops recovery with
//!   [`Error::UnsupportedVersion`] before any record is replayed (all headers are checked
//!   first): the file is perfectly good data of a newer build, and cutting it off would destroy
//!   it. An unknown version under a checksum that does not match is damage (a flipped bit in
//!   the version field), handled like any other bad header below.
//! - **Quarantine** (when the options name one, as the engine's always do): a file with a bad
//!   header is moved there whole, and bytes given up on (a cut tail, the skipped rest of an
//!   older file, which goes with the file at the next trim) are copied there first, so the
//!   evidence outlives the repair. If the copy fails (a full disk), the last file is not cut:
//!   no record is ever appended to it again, so its damaged tail is harmless where it is.
//! - **Last file**, the only one a crash can leave half-written: a torn or corrupt record (bad
//!   length, bad checksum, short record, garbage) ends the replay of that file; the file is
//!   truncated right after the last intact record, the truncation is synced, and the cut is
//!   reported. Records after a damaged one in the same file are lost: without a trustworthy
//!   length there is no way to find where the next record starts.
//! - **Older files**: damage is reported the same way, the rest of that file is skipped, and
//!   replay continues with the next file. The file is left untouched (it is evidence, and not
//!   written to any more). We continue rather than stop because the later files hold records
//!   that were acknowledged as durable; dropping them too would turn one bad sector into the
//!   loss of everything after it. The price is a gap in the replayed history; point writes of a
//!   time series are idempotent per timestamp, so a gap loses those points without corrupting
//!   others.
//! - A bad header (bad magic, bad checksum, file id that does not match the name) is reported
//!   at offset 0 and the whole file is skipped (set aside into the quarantine, if there is one).
//! - A last file that holds nothing at all (shorter than a header, or all zeros) is one whose
//!   creation a crash interrupted: records are written only after the header, so it never held
//!   an acknowledged record. It is reported and removed first, and the file before it is then
//!   the last one (and repaired as such).
//! - A zero-filled tail (eight zero bytes where a record header should be, and only zeros after)
//!   is a clean end of the file, not damage: it is neither reported nor truncated.
//! - Every cut is reported in [`WalRecovery::truncated`] and with `tracing::warn!`.
//!
//! After recovery the log never appends to an existing file: the writer starts a new file with
//! a larger id, so a repaired tail is never written over.

use super::format::{self, HeaderError, RecordStep, HEADER_LEN};
use super::WalRecovery;
use crate::error::{Error, Result};
use crate::filenames::{parse_numbered_file, WAL_EXTENSION};
use crate::fs::FileSystem;
use crate::quarantine::Quarantine;
use std::path::{Path, PathBuf};

/// The log files in `dir`, by ascending id. Other names are ignored.
pub(crate) fn list_files(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut files: Vec<(u64, PathBuf)> = fs
        .list(dir)
        .map_err(|e| Error::io(dir, e))?
        .into_iter()
        .filter_map(|path| parse_numbered_file(&path, WAL_EXTENSION).map(|id| (id, path)))
        .collect();
    files.sort();
    Ok(files)
}

/// Replays every intact record of the log files in `dir` through `replay`, repairs the last
/// file, and returns what it found plus the largest file id seen (0 when there is none).
pub(crate) fn recover(
    fs: &dyn FileSystem,
    dir: &Path,
    quarantine: Option<&Quarantine>,
    replay: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<(WalRecovery, u64)> {
    let mut files = list_files(fs, dir)?;
    check_versions(fs, &files)?;
    let max_id = files.last().map_or(0, |(id, _)| *id);
    let mut recovery = WalRecovery::default();
    // Drop files whose creation a crash interrupted before replaying, so that the file before
    // them is treated (and repaired) as the last one.
    while let Some((_, path)) = files.last() {
        let Some(reason) = unfinished_file(fs, path)? else { break };
        report(&mut recovery, path, 0, format!("{reason}; empty file removed"));
        fs.remove(path).map_err(|e| Error::io(path, e))?;
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        files.pop();
    }
    let last_index = files.len().checked_sub(1);
    for (index, (id, path)) in files.iter().enumerate() {
        let file = WalFile { id: *id, path, is_last: Some(index) == last_index };
        replay_file(fs, &file, quarantine, replay, &mut recovery)?;
    }
    Ok((recovery, max_id))
}

/// Why the file at `path` is one whose creation never finished (shorter than a header, or all
/// zeros), or `None` for any other file. Such a file never held an acknowledged record: records
/// are only written after the header.
fn unfinished_file(fs: &dyn FileSystem, path: &Path) -> Result<Option<String>> {
    let file = fs.open_read(path).map_err(|e| Error::io(path, e))?;
    let data = file.read_all().map_err(|e| Error::io(path, e))?;
    match format::decode_header(&data) {
        Ok(_) => Ok(None),
        Err(error) if data.len() < HEADER_LEN || data.iter().all(|&b| b == 0) => Ok(Some(error.to_string())),
        Err(_) => Ok(None),
    }
}

/// Fails with [`Error::UnsupportedVersion`] if any file carries a version this build cannot read
/// under a matching header checksum (a newer build's file, not damage).
fn check_versions(fs: &dyn FileSystem, files: &[(u64, PathBuf)]) -> Result<()> {
    for (_, path) in files {
        let file = fs.open_read(path).map_err(|e| Error::io(path, e))?;
        let len = file.len().map_err(|e| Error::io(path, e))?;
        let mut bytes = vec![0u8; HEADER_LEN.min(usize::try_from(len).unwrap_or(HEADER_LEN))];
        file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io(path, e))?;
        if !format::header_checksum_matches(&bytes) {
            continue;
        }
        if let Err(HeaderError::UnsupportedVersion(found)) = format::decode_header(&bytes) {
            return Err(Error::UnsupportedVersion { path: path.clone(), found, supported: format::FormatVersion::CURRENT as u16 });
        }
    }
    Ok(())
}

/// One log file as recovery meets it.
struct WalFile<'a> {
    id: u64,
    path: &'a Path,
    /// The newest file, the only one a crash can leave half-written: its damaged tail is cut.
    is_last: bool,
}

fn replay_file(
    fs: &dyn FileSystem,
    wal_file: &WalFile<'_>,
    quarantine: Option<&Quarantine>,
    replay: &mut dyn FnMut(&[u8]) -> Result<()>,
    recovery: &mut WalRecovery,
) -> Result<()> {
    let (id, path, is_last) = (wal_file.id, wal_file.path, wal_file.is_last);
    // The whole file is read at once: files are bounded by `file_bytes_max` plus one group.
    let file = if is_last { fs.open_rw(path) } else { fs.open_read(path) }.map_err(|e| Error::io(path, e))?;
    let data = file.read_all().map_err(|e| Error::io(path, e))?;

    let header_error = match format::decode_header(&data) {
        Ok(header) if header.file_id != id => Some(format!("file header names file id {}, the file name {id}", header.file_id)),
        Ok(_) => None,
        // Only reached under a bad checksum (`check_versions` refused the others): damage.
        Err(HeaderError::UnsupportedVersion(found)) => Some(format!("damaged file header: version {found} under a bad header checksum")),
        Err(error) => Some(error.to_string()),
    };
    if let Some(reason) = header_error {
        drop(file);
        let outcome = match quarantine {
            Some(quarantine) => match quarantine.set_aside(fs, path) {
                Ok(target) => format!("file set aside as {}", target.display()),
                Err(e) => format!("file skipped; setting it aside failed: {e}"),
            },
            None => "file skipped".to_string(),
        };
        report(recovery, path, 0, format!("{reason}; {outcome}"));
        return Ok(());
    }

    let mut offset = HEADER_LEN;
    loop {
        match format::decode_record(&data, offset) {
            RecordStep::Record { payload, next } => {
                replay(payload)?;
                recovery.records += 1;
                recovery.bytes += payload.len() as u64;
                offset = next;
            }
            RecordStep::End | RecordStep::ZeroTail => return Ok(()),
            RecordStep::Bad { reason } => {
                let offset = offset as u64;
                let kept = match quarantine.map(|q| q.keep_bytes(fs, path, file.as_ref(), offset)) {
                    None => Ok(String::new()),
                    Some(Ok(Some(target))) => Ok(format!(" (bytes kept as {})", target.display())),
                    Some(Ok(None)) => Ok(String::new()),
                    Some(Err(e)) => Err(e),
                };
                match (is_last, kept) {
                    (true, Ok(kept)) => {
                        report(recovery, path, offset, format!("{reason}; file truncated{kept}"));
                        file.set_len(offset).map_err(|e| Error::io(path, e))?;
                        file.sync_data().map_err(|e| Error::io(path, e))?;
                    }
                    // Nothing is ever appended to a recovered file, so a tail that could not be
                    // kept is left where it is rather than destroyed.
                    (true, Err(e)) => report(recovery, path, offset, format!("{reason}; file left uncut, keeping its tail failed: {e}")),
                    (false, Ok(kept)) => report(recovery, path, offset, format!("{reason}; rest of file skipped{kept}")),
                    (false, Err(e)) => report(recovery, path, offset, format!("{reason}; rest of file skipped, keeping it failed: {e}")),
                }
                return Ok(());
            }
        }
    }
}

fn report(recovery: &mut WalRecovery, path: &Path, offset: u64, reason: String) {
    tracing::warn!(file = %path.display(), offset, %reason, "damaged write-ahead log");
    recovery.truncated.push((path.to_path_buf(), offset, reason));
}
