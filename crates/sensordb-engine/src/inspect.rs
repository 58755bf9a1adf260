//! Offline inspection of a data directory: reads every block of every segment, verifies it, and
//! reports where the bytes go (headers, timestamp and value columns by encoding, indexes,
//! padding) and every damaged spot with its file and offset. Backs `sensordb inspect`.
//!
//! Every file kind the engine keeps is verified, not only segments: each WAL file (header,
//! every record's checksum and batch encoding), the series catalog (header, every record, ids
//! dense), the `databases` file (checksum, syntax); files set aside in the quarantine are
//! listed. (The server's `transactions.log` is the server's to verify; the CLI adds it.)
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
    /// Group indexes plus footers (a sealed file's bytes from its footer on: directory, runs,
    /// stored index, padding and trailer).
    pub index_bytes: u64,
    pub catalog_bytes: u64,
    pub wal_bytes: u64,
    /// By encoding tag (first byte of the column).
    pub timestamp_encodings: BTreeMap<u8, EncodingUse>,
    pub value_encodings: BTreeMap<u8, EncodingUse>,
    /// Damage: (file, offset, what).
    pub problems: Vec<(PathBuf, u64, String)>,
    /// Files in the quarantine (damage set aside by an earlier start) and their sizes.
    pub quarantined: Vec<(PathBuf, u64)>,
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
        let files = crate::wal::list_files(fs, &wal)?;
        let last = files.last().map(|(id, _)| *id);
        for (id, path) in &files {
            verify_wal_file(fs, *id, path, Some(*id) == last, &mut report.problems)?;
        }
    }
    verify_catalog(fs, data_dir, &mut report.problems)?;
    verify_databases(fs, data_dir, &mut report.problems);
    report.quarantined = crate::quarantine::quarantined_files(fs, data_dir)?;
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
        let file_bytes = scan.file.len().map_err(|e| Error::io(&path, e))?;
        report.segment_bytes += file_bytes;
        // The group indexes hold the file's entries as one list would, to within a few bytes a
        // group; a sealed file's footer is everything from its offset on.
        let mut list = Vec::new();
        IndexEntry::encode_list(&scan.entries, &mut list);
        report.index_bytes += list.len() as u64 + if scan.sealed { file_bytes.saturating_sub(scan.end) } else { 0 };
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

/// Damage in one WAL file: its header, every record's framing and checksum, and the encoding
/// of the batch each record holds.
fn verify_wal_file(fs: &dyn FileSystem, id: u64, path: &Path, is_last: bool, problems: &mut Vec<(PathBuf, u64, String)>) -> Result<()> {
    use crate::wal::format::{decode_header, decode_record, header_checksum_matches, HeaderError, RecordStep, HEADER_LEN};
    let data = fs.open_read(path).and_then(|f| f.read_all()).map_err(|e| Error::io(path, e))?;
    let mut problem = |offset: u64, what: String| problems.push((path.to_path_buf(), offset, what));
    match decode_header(&data) {
        Ok(header) if header.file_id != id => {
            problem(0, format!("WAL header names file id {}, the file name {id}; the next start sets the file aside", header.file_id));
            return Ok(());
        }
        Ok(_) => {}
        Err(HeaderError::UnsupportedVersion(found)) if header_checksum_matches(&data) => {
            problem(0, format!("WAL file of format version {found}, written by a newer build; this build does not start over it"));
            return Ok(());
        }
        Err(_) if is_last && (data.len() < HEADER_LEN || data.iter().all(|&b| b == 0)) => {
            problem(0, "newest WAL file was never written (a crash while creating it); the next start removes it".into());
            return Ok(());
        }
        Err(e) => {
            problem(0, format!("damaged WAL header: {e}; the next start sets the file aside"));
            return Ok(());
        }
    }
    let mut offset = HEADER_LEN;
    loop {
        match decode_record(&data, offset) {
            RecordStep::Record { payload, next } => {
                if let Err(what) = crate::batch::WriteBatch::decode_with_marks(payload) {
                    problem(offset as u64, format!("WAL record with a sound checksum holds an undecodable batch: {what}"));
                }
                offset = next;
            }
            RecordStep::End | RecordStep::ZeroTail => return Ok(()),
            RecordStep::Bad { reason } => {
                let fate = if is_last { "the next start cuts the file here" } else { "the next start skips the rest of the file" };
                problem(offset as u64, format!("damaged WAL record: {reason}; {fate} (keeping the bytes in quarantine)"));
                return Ok(());
            }
        }
    }
}

/// Damage in the series catalog, and a missing catalog beside stored data.
fn verify_catalog(fs: &dyn FileSystem, data_dir: &Path, problems: &mut Vec<(PathBuf, u64, String)>) -> Result<()> {
    let path = catalog_path(data_dir);
    if !fs.exists(&path) {
        if fs.exists(&segment_dir(data_dir)) || fs.exists(&wal_dir(data_dir)) {
            problems.push((path, 0, "series catalog missing beside stored data".into()));
        }
        return Ok(());
    }
    let bytes = fs.open_read(&path).and_then(|f| f.read_all()).map_err(|e| Error::io(&path, e))?;
    if let Some((offset, what)) = crate::catalog::Catalog::verify(&path, &bytes) {
        problems.push((path, offset, what));
    }
    Ok(())
}

/// Damage in the `databases` file (retention of each database), which the engine refuses to
/// start over.
fn verify_databases(fs: &dyn FileSystem, data_dir: &Path, problems: &mut Vec<(PathBuf, u64, String)>) {
    let path = data_dir.join(crate::reclaim::policy::DATABASES_FILE);
    match crate::reclaim::policy::Databases::load(fs, &path) {
        Ok(_) => {}
        Err(Error::Corruption { path, offset, detail }) => problems.push((path, offset, detail)),
        Err(other) => problems.push((path, 0, other.to_string())),
    }
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
