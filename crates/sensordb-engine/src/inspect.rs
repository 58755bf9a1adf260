//! Offline inspection of a data directory: reads every block of every segment, verifies it, and
//! reports where the bytes go (headers, timestamp and value columns by encoding, indexes,
//! padding) and every damaged spot with its file and offset. Backs `sensordb inspect`.
//!
//! Run it on a directory no engine has open (it does not take the directory lock, but it also
//! never writes: segments are opened through a read-only view).

use crate::block::BlockHeader;
use crate::error::{Error, Result};
use crate::filenames::{catalog_path, parse_numbered_file, segment_dir, wal_dir, SEGMENT_EXTENSION};
use crate::fs::FileSystem;
use crate::segment::{read_block, scan_segment, IndexEntry};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The column encoding tags [`InspectReport::timestamp_encodings`] and
/// [`InspectReport::value_encodings`] are keyed by.
pub use crate::codec::tag;

/// Pseudo encoding tag under which [`InspectReport::timestamp_encodings`] counts references to
/// shared timestamp records (the records themselves count as other segment bytes).
pub const SHARED_REFERENCE_TAG: u8 = 0xfe;

/// Bytes and counts of one column encoding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodingUse {
    pub columns: u64,
    pub bytes: u64,
    pub values: u64,
}

/// What a data directory holds.
#[derive(Clone, Debug, Default)]
pub struct InspectReport {
    pub segments: usize,
    pub sealed_segments: usize,
    pub blocks: u64,
    pub points: u64,
    pub segment_bytes: u64,
    pub block_header_bytes: u64,
    pub timestamp_column_bytes: u64,
    pub value_column_bytes: u64,
    /// Group indexes plus footers.
    pub index_bytes: u64,
    pub catalog_bytes: u64,
    pub wal_bytes: u64,
    /// By encoding tag (first byte of the column).
    pub timestamp_encodings: BTreeMap<u8, EncodingUse>,
    pub value_encodings: BTreeMap<u8, EncodingUse>,
    /// Damage: (file, offset, what).
    pub problems: Vec<(PathBuf, u64, String)>,
}

impl InspectReport {
    /// Everything else in segment files: shared timestamp records, file headers, group headers,
    /// trailers, padding.
    pub fn other_segment_bytes(&self) -> u64 {
        self.segment_bytes
            .saturating_sub(self.block_header_bytes + self.timestamp_column_bytes + self.value_column_bytes + self.index_bytes)
    }
}

fn file_bytes(fs: &dyn FileSystem, path: &Path) -> u64 {
    fs.open_read(path).and_then(|f| f.len()).unwrap_or(0)
}

/// Inspects `data_dir`, reading and verifying every block.
pub fn inspect(fs: std::sync::Arc<dyn FileSystem>, data_dir: &Path) -> Result<InspectReport> {
    let fs = ReadOnlyFs(fs);
    let fs = &fs;
    let mut report = InspectReport { catalog_bytes: file_bytes(fs, &catalog_path(data_dir)), ..InspectReport::default() };
    let wal = wal_dir(data_dir);
    if fs.exists(&wal) {
        for path in fs.list(&wal).map_err(|e| Error::io(&wal, e))? {
            report.wal_bytes += file_bytes(fs, &path);
        }
    }
    let segments = segment_dir(data_dir);
    if !fs.exists(&segments) {
        return Ok(report);
    }
    for path in fs.list(&segments).map_err(|e| Error::io(&segments, e))? {
        if parse_numbered_file(&path, SEGMENT_EXTENSION).is_none() {
            continue;
        }
        let scan = match scan_segment(fs, &path) {
            Ok(scan) => scan,
            Err(e) => {
                report.problems.push((path.clone(), 0, e.to_string()));
                continue;
            }
        };
        report.segments += 1;
        report.sealed_segments += usize::from(scan.sealed);
        report.segment_bytes += scan.file.len().map_err(|e| Error::io(&path, e))?;
        // Group indexes plus the footer repeat the same list; its encoded size is close enough.
        let mut list = Vec::new();
        IndexEntry::encode_list(&scan.entries, &mut list);
        report.index_bytes += list.len() as u64 * if scan.sealed { 2 } else { 1 };
        for (offset, what) in &scan.problems {
            report.problems.push((path.clone(), *offset, what.clone()));
        }
        for entry in &scan.entries {
            report.blocks += 1;
            report.points += u64::from(entry.count);
            if let Err(e) = read_block(&path, scan.file.as_ref(), entry) {
                report.problems.push(match e {
                    Error::Corruption { path, offset, detail } => (path, offset, detail),
                    other => (path.clone(), entry.offset, other.to_string()),
                });
                continue;
            }
            let mut bytes = vec![0u8; entry.length as usize];
            scan.file.read_exact_at(&mut bytes, entry.offset).map_err(|e| Error::io(&path, e))?;
            let Ok(header) = BlockHeader::verified(&bytes) else { continue };
            let timestamps_len = header.timestamp_column_bytes as usize;
            let header_len = header.header_bytes as usize;
            report.block_header_bytes += (header_len + crate::block::CHECKSUM_BYTES) as u64;
            report.timestamp_column_bytes += timestamps_len as u64;
            report.value_column_bytes += u64::from(header.value_column_bytes);
            let tally = |map: &mut BTreeMap<u8, EncodingUse>, column: &[u8]| {
                let usage = map.entry(column.first().copied().unwrap_or(u8::MAX)).or_default();
                usage.columns += 1;
                usage.bytes += column.len() as u64;
                usage.values += u64::from(header.count);
            };
            let timestamps = &bytes[header_len..header_len + timestamps_len];
            if header.flags & crate::block::FLAG_SHARED_TIMESTAMPS != 0 {
                tally(&mut report.timestamp_encodings, &[SHARED_REFERENCE_TAG]);
                let usage = report.timestamp_encodings.entry(SHARED_REFERENCE_TAG).or_default();
                usage.bytes += timestamps_len as u64 - 1;
            } else {
                tally(&mut report.timestamp_encodings, timestamps);
            }
            let values_end = header_len + timestamps_len + header.value_column_bytes as usize;
            tally(&mut report.value_encodings, &bytes[header_len + timestamps_len..values_end]);
        }
    }
    Ok(report)
}

/// A view of a file system that refuses every change, so inspection cannot repair or cut files.
struct ReadOnlyFs(std::sync::Arc<dyn FileSystem>);

fn refused() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, "inspection is read-only")
}

impl FileSystem for ReadOnlyFs {
    fn create(&self, _: &Path) -> std::io::Result<std::sync::Arc<dyn crate::fs::StorageFile>> {
        Err(refused())
    }
    fn open_rw(&self, path: &Path) -> std::io::Result<std::sync::Arc<dyn crate::fs::StorageFile>> {
        self.0.open_read(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<std::sync::Arc<dyn crate::fs::StorageFile>> {
        self.0.open_read(path)
    }
    fn remove(&self, _: &Path) -> std::io::Result<()> {
        Err(refused())
    }
    fn rename(&self, _: &Path, _: &Path) -> std::io::Result<()> {
        Err(refused())
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        self.0.list(dir)
    }
    fn create_dir_all(&self, _: &Path) -> std::io::Result<()> {
        Err(refused())
    }
    fn sync_dir(&self, _: &Path) -> std::io::Result<()> {
        Ok(())
    }
}
