//! Reading segments: the start-up scan (trailer and footer, or group headers of an unsealed
//! file) and single-block reads.

use super::*;
use crate::block::{self, Block};
use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::filenames::{parse_numbered_file, SEGMENT_EXTENSION};
use crate::fs::{FileSystem, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the start-up scan learned about one segment file.
pub struct SegmentScan {
    pub id: u64,
    pub path: PathBuf,
    pub file: Arc<dyn StorageFile>,
    /// Every block found, in file order.
    pub entries: Vec<IndexEntry>,
    /// True when the footer was intact: the file is complete and read-only from now on.
    pub sealed: bool,
    /// End of the last complete flush group.
    pub end: u64,
    /// Where a writer continues: `end`, or past every byte of the file (on a page boundary)
    /// when bytes after `end` are kept because they show that the groups before them were
    /// synced (see [`scan_segment`]).
    pub append_at: u64,
    /// WAL checkpoint of the last complete group (0 when there is none).
    pub wal_checkpoint: u64,
    /// Damage found, each with its file offset; the data outside it stayed readable.
    pub problems: Vec<(u64, String)>,
    /// Segments this one replaces (a compaction output), from the footer.
    pub replaced: Vec<u64>,
    /// The file's format version (1 or 2); a writer resuming the file keeps it.
    pub version: u16,
    /// The index of the series directory of a sealed version-2 file (the directory stays in
    /// the file). With [`scan_segment_directory`], `entries` stays empty: the runs are read
    /// when needed, see [`read_run`].
    pub directory: Option<DirectoryIndex>,
}

/// Builds the index of the segment at `path` without reading its blocks. An unsealed segment's
/// torn last group is left out (and reported in `problems`).
///
/// Bytes past the last complete group are kept only when the page right after it, where the
/// next group's header goes, holds a non-zero byte. A group's header is written only once the
/// group before it is durable (its blocks may be written earlier, while that group syncs, behind
/// a zero header page: see `store::segments::commit`), so such a byte proves the last group
/// acknowledged: kept, it stops a later scan (after a crash, or when a full disk keeps the seal
/// from being written) from taking damage in that group for a torn write and dropping the
/// group. Without it the last group may be torn, and the bytes after it (a group staged without
/// its header, or nothing) are cut off. A torn group that is left out gets its header
/// overwritten by a torn mark for the same reason; the writer continues past it all.
pub fn scan_segment(fs: &dyn FileSystem, path: &Path) -> Result<SegmentScan> {
    scan(fs, path, true)
}

/// As [`scan_segment`], but a sealed file of version 2 is indexed from its series directory
/// alone: `directory` is set and `entries` stays empty, so the cost is per series, not per
/// block. A run damaged behind an intact directory is found when it is read ([`read_run`]).
pub fn scan_segment_directory(fs: &dyn FileSystem, path: &Path) -> Result<SegmentScan> {
    scan(fs, path, false)
}

fn scan(fs: &dyn FileSystem, path: &Path, load_runs: bool) -> Result<SegmentScan> {
    let io = |e| Error::io(path, e);
    let id = parse_numbered_file(path, SEGMENT_EXTENSION).ok_or_else(|| Error::corruption(path, 0, "segment file name is not <id>.seg"))?;
    let file = fs.open_rw(path).map_err(io)?;
    let len = file.len().map_err(io)?;
    let mut scan = SegmentScan {
        id,
        path: path.to_path_buf(),
        file,
        entries: Vec::new(),
        sealed: false,
        end: FILE_HEADER_BYTES,
        append_at: FILE_HEADER_BYTES,
        wal_checkpoint: 0,
        problems: Vec::new(),
        replaced: Vec::new(),
        version: SEGMENT_FORMAT_VERSION,
        directory: None,
    };
    if len < FILE_HEADER_BYTES {
        // Crashed while creating the file: nothing in it was ever acknowledged.
        scan.end = 0;
        scan.append_at = 0;
        scan.problems.push((0, format!("file of {len} bytes has no complete header")));
        return Ok(scan);
    }
    scan.version = check_file_header(&scan, path)?;
    let mut scan_limit = len;
    let mut has_trailer = false;
    match read_footer(&scan, len, load_runs) {
        Ok(Some(Footer { footer_offset, entries, wal_checkpoint, replaced, directory })) => {
            scan.entries = entries;
            scan.replaced = replaced;
            scan.directory = directory;
            scan.sealed = true;
            scan.end = footer_offset;
            scan.append_at = footer_offset;
            scan.wal_checkpoint = wal_checkpoint;
            return Ok(scan);
        }
        Ok(None) => {}
        Err((offset, reason, footer_offset)) => {
            scan.problems.push((offset, format!("{reason}; rebuilding the index from group headers")));
            scan_limit = footer_offset.min(len);
            has_trailer = true;
        }
    }
    let last_group = scan_groups(&mut scan, scan_limit)?;
    if has_trailer {
        // A file with a trailer was sealed: its groups were all synced before it, so none is
        // torn. The damaged footer and the trailer stay until a new seal replaces them
        // ([`SegmentWriter::seal`] cuts what is left over): cut here, the file would look
        // unsealed to a second scan.
        return Ok(scan);
    }
    // Read once: it decides both whether the last group can be torn and whether the tail goes.
    // A group left out as torn covers the bytes up to where the tail began, so the tail after
    // its mark is the same.
    let unproven = next_header_is_zero(&scan, scan.append_at, len).map_err(io)?;
    if let (true, Some(last)) = (unproven, last_group) {
        // Only a group no header was written after can be torn.
        cut_torn_last_group(&mut scan, last).map_err(io)?;
    }
    let kept = scan.append_at;
    if len > kept {
        if unproven {
            if scan.problems.is_empty() {
                scan.problems.push((kept, format!("cut off {} bytes past the last flush group (no group header)", len - kept)));
            }
            scan.file.set_len(kept).map_err(io)?;
            scan.file.sync_data().map_err(io)?;
        } else {
            if scan.problems.is_empty() {
                scan.problems
                    .push((kept, format!("kept {} bytes of an incomplete flush group; the segment continues after them", len - kept)));
            }
            scan.append_at = len.next_multiple_of(PAGE_BYTES);
        }
    }
    Ok(scan)
}

/// Whether every byte of the page at `from` (where a group after the last would have its
/// header), up to `len`, is zero.
fn next_header_is_zero(scan: &SegmentScan, from: u64, len: u64) -> std::io::Result<bool> {
    let n = len.saturating_sub(from).min(PAGE_BYTES) as usize;
    let mut page = vec![0u8; n];
    scan.file.read_exact_at(&mut page, from)?;
    Ok(page.iter().all(|&b| b == 0))
}

fn check_file_header(scan: &SegmentScan, path: &Path) -> Result<u16> {
    let mut header = [0u8; 32];
    scan.file.read_exact_at(&mut header, 0).map_err(|e| Error::io(path, e))?;
    if &header[0..8] != FILE_MAGIC {
        return Err(Error::corruption(path, 0, "not a segment file (bad magic)"));
    }
    // The checksum before the version: a version with a matching checksum is a file of a newer
    // build (refused, never touched), a version without one is damage (the file is set aside).
    let stored = u32::from_le_bytes(header[28..32].try_into().expect("4 bytes"));
    if stored != crc32c(&header[..28]) {
        return Err(Error::corruption(path, 0, "segment header checksum mismatch"));
    }
    let version = u16::from_le_bytes([header[8], header[9]]);
    if !(1..=SEGMENT_FORMAT_VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion { path: path.into(), found: version, supported: SEGMENT_FORMAT_VERSION });
    }
    let id = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
    if id != scan.id {
        return Err(Error::corruption(path, 16, format!("header names segment {id}, file name {}", scan.id)));
    }
    Ok(version)
}

type FooterError = (u64, String, u64);

/// What a sealed file's footer says.
struct Footer {
    footer_offset: u64,
    /// Every block in file order; empty for a version-2 footer read without its runs.
    entries: Vec<IndexEntry>,
    wal_checkpoint: u64,
    replaced: Vec<u64>,
    directory: Option<DirectoryIndex>,
}

/// `Ok(None)` when there is no trailer (unsealed); `Err` when a trailer exists but the footer
/// it points to is damaged (offset, reason, footer offset). A version-2 footer's runs are read
/// and checked only with `load_runs`.
fn read_footer(scan: &SegmentScan, len: u64, load_runs: bool) -> std::result::Result<Option<Footer>, FooterError> {
    if len < FILE_HEADER_BYTES + TRAILER_BYTES as u64 || !len.is_multiple_of(PAGE_BYTES) {
        return Ok(None);
    }
    let trailer_offset = len - TRAILER_BYTES as u64;
    let mut trailer = [0u8; TRAILER_BYTES];
    if scan.file.read_exact_at(&mut trailer, trailer_offset).is_err() {
        return Ok(None);
    }
    let stored = u32::from_le_bytes(trailer[36..40].try_into().expect("4 bytes"));
    if &trailer[32..36] != TRAILER_MAGIC || stored != crc32c(&trailer[..36]) {
        return Ok(None);
    }
    let footer_offset = u64::from_le_bytes(trailer[0..8].try_into().expect("8 bytes"));
    let footer_len = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(trailer[16..20].try_into().expect("4 bytes")) as usize;
    let footer_checksum = u32::from_le_bytes(trailer[20..24].try_into().expect("4 bytes"));
    let wal_checkpoint = u64::from_le_bytes(trailer[24..32].try_into().expect("8 bytes"));
    if footer_offset < FILE_HEADER_BYTES || footer_offset.saturating_add(footer_len) > trailer_offset {
        return Err((trailer_offset, "trailer points outside the file".into(), trailer_offset));
    }
    if scan.version >= 3 {
        let stored_at = trailer_offset - footer_len;
        let at = StoredIndexAt { footer_offset, stored_at, trailer_offset, count, checksum: footer_checksum, wal_checkpoint };
        return read_stored_index(scan, at, load_runs);
    }
    let mut footer = vec![0u8; footer_len as usize];
    if let Err(e) = scan.file.read_exact_at(&mut footer, footer_offset) {
        return Err((footer_offset, format!("footer unreadable: {e}"), footer_offset));
    }
    if crc32c(&footer) != footer_checksum {
        return Err((footer_offset, "footer checksum mismatch".into(), footer_offset));
    }
    if scan.version >= 2 {
        // `footer` is the series directory; the runs follow it.
        let runs_start = footer_offset + footer_len;
        let damaged = |reason: String| (footer_offset, reason, footer_offset);
        let layout = super::EntryLayout::of_version(scan.version);
        let (directory, replaced) = DirectoryIndex::of(&footer, footer_offset, layout).map_err(damaged)?;
        if directory.runs_end > trailer_offset {
            return Err(damaged(format!("series runs end at {}, past the trailer at {trailer_offset}", directory.runs_end)));
        }
        if directory.blocks != count as u64 {
            return Err(damaged(format!("series directory lists {} blocks, trailer says {count}", directory.blocks)));
        }
        let mut entries = Vec::new();
        if load_runs {
            let (runs, _) = super::directory::decode_directory(&footer, runs_start, layout).map_err(damaged)?;
            entries = read_footer_runs(scan, &runs, footer_offset)?;
        }
        return Ok(Some(Footer { footer_offset, entries, wal_checkpoint, replaced, directory: Some(directory) }));
    }
    let (entries, used) = IndexEntry::decode_list_prefix(&footer).map_err(|reason| (footer_offset, reason, footer_offset))?;
    let replaced = super::decode_replaced(&footer[used..]).map_err(|reason| (footer_offset, reason, footer_offset))?;
    if entries.len() != count {
        return Err((footer_offset, format!("footer lists {} blocks, trailer says {count}", entries.len()), footer_offset));
    }
    Ok(Some(Footer { footer_offset, entries, wal_checkpoint, replaced, directory: None }))
}

/// What a version-3 trailer says: where the directory starts, and the stored index it covers.
struct StoredIndexAt {
    footer_offset: u64,
    stored_at: u64,
    trailer_offset: u64,
    count: usize,
    checksum: u32,
    wal_checkpoint: u64,
}

/// The footer of a version-3 file: the directory's index stored before the trailer (whose
/// checksum covers it) instead of the directory, which stays unread until a read needs a chunk
/// of it. With `load_runs` (inspect, recovery tools) the directory is read too and must give the
/// same index, and every run is read.
fn read_stored_index(scan: &SegmentScan, at: StoredIndexAt, load_runs: bool) -> std::result::Result<Option<Footer>, FooterError> {
    let layout = super::EntryLayout::of_version(scan.version);
    let StoredIndexAt { footer_offset, stored_at, trailer_offset, count, checksum, wal_checkpoint } = at;
    let damaged_at = |offset: u64| move |reason: String| (offset, reason, footer_offset);
    let mut stored = vec![0u8; (trailer_offset - stored_at) as usize];
    scan.file.read_exact_at(&mut stored, stored_at).map_err(|e| damaged_at(stored_at)(format!("directory index unreadable: {e}")))?;
    if crc32c(&stored) != checksum {
        return Err(damaged_at(stored_at)("directory index checksum mismatch".into()));
    }
    let (directory, replaced, directory_len) =
        DirectoryIndex::decode_stored(&stored, footer_offset, stored_at, layout).map_err(damaged_at(stored_at))?;
    if directory.blocks != count as u64 {
        return Err(damaged_at(stored_at)(format!("directory index lists {} blocks, trailer says {count}", directory.blocks)));
    }
    let mut entries = Vec::new();
    if load_runs {
        let damaged = damaged_at(footer_offset);
        let mut bytes = vec![0u8; directory_len as usize];
        scan.file.read_exact_at(&mut bytes, footer_offset).map_err(|e| damaged(format!("series directory unreadable: {e}")))?;
        let (read, read_replaced) = DirectoryIndex::of(&bytes, footer_offset, layout).map_err(damaged)?;
        if read != directory || read_replaced != replaced {
            return Err(damaged_at(footer_offset)("series directory differs from its stored index".into()));
        }
        let (runs, _) =
            super::directory::decode_directory(&bytes, footer_offset + directory_len, layout).map_err(damaged_at(footer_offset))?;
        entries = read_footer_runs(scan, &runs, footer_offset)?;
    }
    Ok(Some(Footer { footer_offset, entries, wal_checkpoint, replaced, directory: Some(directory) }))
}

/// Every run of a sealed file's directory, for a full scan: a damaged run is a damaged footer
/// (reported at the run's offset; the index is then rebuilt from the group headers).
fn read_footer_runs(scan: &SegmentScan, runs: &[SeriesRun], footer_offset: u64) -> std::result::Result<Vec<IndexEntry>, FooterError> {
    read_all_runs(&scan.path, scan.file.as_ref(), runs).map_err(|e| match e {
        Error::Corruption { offset, detail, .. } => (offset, detail, footer_offset),
        other => (footer_offset, other.to_string(), footer_offset),
    })
}

/// Reads the entries of chunks `chunks` of a sealed segment's series directory, which stays
/// in the file (see [`DirectoryIndex`]): one pread, each chunk's checksum verified. Damage is
/// reported with the file and the chunk's offset.
pub fn read_directory_chunks(
    path: &Path,
    file: &dyn StorageFile,
    directory: &DirectoryIndex,
    chunks: std::ops::Range<usize>,
) -> Result<Vec<SeriesRun>> {
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    let (offset, length) = directory.span(chunks.clone());
    let mut bytes = vec![0u8; length];
    file.read_exact_at(&mut bytes, offset).map_err(|e| Error::io(path, e))?;
    directory.decode_chunks(chunks, &bytes).map_err(|(offset, what)| Error::corruption(path, offset, format!("series directory: {what}")))
}

/// Reads and checks the run of one series in one segment: its index entries, in file order.
/// Damage is reported with the file and the run's offset.
pub fn read_run(path: &Path, file: &dyn StorageFile, run: &RunShape) -> Result<Vec<IndexEntry>> {
    if run.length == 0 {
        // A one-block entry of a compact directory: nothing to read.
        return decode_run_at(path, run, &[]);
    }
    let mut bytes = vec![0u8; run.length as usize];
    file.read_exact_at(&mut bytes, run.offset).map_err(|e| Error::io(path, e))?;
    decode_run_at(path, run, &bytes)
}

/// Decodes the run `run` describes from its `bytes`; damage is reported at the run's offset.
pub fn decode_run_at(path: &Path, run: &RunShape, bytes: &[u8]) -> Result<Vec<IndexEntry>> {
    let decoded = super::directory::decode_run_shaped(run, bytes);
    decoded.map(|(entries, _)| entries).map_err(|what| Error::corruption(path, run.offset, format!("series run: {what}")))
}

/// The bytes of several runs of one segment, read with one pread (runs lie back to back after
/// the directory). A run of length 0 (a one-block entry of a compact directory) takes no bytes
/// and is not read.
pub struct RunSpan {
    start: u64,
    bytes: Vec<u8>,
}

impl RunSpan {
    /// Reads the bytes from the first to the end of the last of `runs` (offset, length).
    pub fn read(path: &Path, file: &dyn StorageFile, runs: impl Iterator<Item = (u64, u32)> + Clone) -> Result<RunSpan> {
        let with_bytes = runs.filter(|&(_, length)| length > 0);
        let start = with_bytes.clone().map(|(offset, _)| offset).min().unwrap_or(0);
        let end = with_bytes.map(|(offset, length)| offset.saturating_add(u64::from(length))).max().unwrap_or(start);
        let length = usize::try_from(end - start).map_err(|_| Error::corruption(path, start, "series runs too long"))?;
        let mut bytes = vec![0u8; length];
        if length > 0 {
            file.read_exact_at(&mut bytes, start).map_err(|e| Error::io(path, e))?;
        }
        Ok(RunSpan { start, bytes })
    }

    /// The bytes of the run at `offset`, `length` long (none for a run of length 0).
    pub fn run(&self, path: &Path, offset: u64, length: u32) -> Result<&[u8]> {
        if length == 0 {
            return Ok(&[]);
        }
        let at = offset.checked_sub(self.start).and_then(|at| usize::try_from(at).ok());
        at.and_then(|at| self.bytes.get(at..at.checked_add(length as usize)?))
            .ok_or_else(|| Error::corruption(path, offset, "run out of place"))
    }
}

/// Reads every run of `directory` with one read (they are back to back): every block of the
/// segment, in file order.
pub fn read_all_runs(path: &Path, file: &dyn StorageFile, directory: &[SeriesRun]) -> Result<Vec<IndexEntry>> {
    let span = RunSpan::read(path, file, directory.iter().map(|run| (run.run_offset, run.run_length)))?;
    let mut entries = Vec::with_capacity(directory.iter().map(|run| run.blocks as usize).sum());
    for run in directory {
        let run_bytes = span.run(path, run.run_offset, run.run_length)?;
        let decoded = super::directory::decode_run(run, run_bytes)
            .map_err(|what| Error::corruption(path, run.run_offset, format!("series run: {what}")))?;
        entries.extend(decoded);
    }
    entries.sort_by_key(|entry| entry.offset);
    Ok(entries)
}

/// Walks the flush groups from the first page up to `limit`. A damaged group is reported and
/// skipped by searching the following page boundaries for the next intact group header. In an
/// `unsealed` file (no trailer: the writer stopped mid-file) the last group may be torn: it is
/// returned unless a torn mark follows it, for [`cut_torn_last_group`] to check block by block.
fn scan_groups(scan: &mut SegmentScan, limit: u64) -> Result<Option<LastGroup>> {
    let path = scan.path.clone();
    let io = |e| Error::io(&path, e);
    let mut offset = FILE_HEADER_BYTES;
    let mut damaged_since: Option<u64> = None;
    let mut header = [0u8; GROUP_HEADER_BYTES];
    let mut last_group: Option<LastGroup> = None;
    // Whether a torn mark follows the last intact group.
    let mut followed = false;
    while offset + GROUP_HEADER_BYTES as u64 <= limit {
        scan.file.read_exact_at(&mut header, offset).map_err(io)?;
        if let Some(mark_end) = parse_torn_mark(&header, offset, limit) {
            // A group an earlier scan left out as torn: no blocks, nothing to report again.
            if let Some(start) = damaged_since.take() {
                scan.problems.push((start, format!("damaged flush group; skipped {} bytes", offset - start)));
            }
            followed = true;
            offset = mark_end;
            scan.append_at = mark_end;
            continue;
        }
        match parse_group(scan, &header, offset, limit).map_err(io)? {
            Some((entries, group_end, wal_checkpoint)) => {
                if let Some(start) = damaged_since.take() {
                    scan.problems.push((start, format!("damaged flush group; skipped {} bytes", offset - start)));
                }
                last_group = Some(LastGroup { offset, entries_before: scan.entries.len(), checkpoint_before: scan.wal_checkpoint });
                followed = false;
                scan.entries.extend(entries);
                scan.wal_checkpoint = wal_checkpoint;
                scan.end = group_end;
                scan.append_at = group_end;
                offset = group_end;
            }
            None if header.iter().all(|&b| b == 0) && damaged_since.is_none() => break,
            None => {
                damaged_since.get_or_insert(offset);
                offset += PAGE_BYTES;
            }
        }
    }
    if let Some(start) = damaged_since {
        scan.problems.push((start, "damaged or incomplete flush group at the end of the file".into()));
    }
    Ok(last_group.filter(|_| !followed))
}

/// The last intact group of a walk: its offset, the entries before it, the WAL checkpoint
/// before it.
struct LastGroup {
    offset: u64,
    entries_before: usize,
    checkpoint_before: u64,
}

/// The end of the region a torn mark at `offset` covers, if `header` is one.
fn parse_torn_mark(header: &[u8; GROUP_HEADER_BYTES], offset: u64, limit: u64) -> Option<u64> {
    if &header[0..8] != TORN_MAGIC {
        return None;
    }
    let stored = u32::from_le_bytes(header[60..64].try_into().expect("4 bytes"));
    if stored != crc32c(&header[..60]) {
        return None;
    }
    let covered = u64::from_le_bytes(header[24..32].try_into().expect("8 bytes"));
    let end = offset.checked_add(covered)?.checked_next_multiple_of(PAGE_BYTES)?.max(offset + PAGE_BYTES);
    Some(end.min(limit.next_multiple_of(PAGE_BYTES)))
}

/// Checks every block of the last group of an unsealed segment, and cuts the group off if one
/// is damaged. A power loss during the group's fdatasync can leave its header and index on disk
/// without all of its block pages (the page cache writes pages back in any order), and the sync
/// never returned, so nothing in the group was acknowledged: its points are still in the WAL,
/// which its WAL checkpoint must then not let recovery delete. Groups before the last were
/// synced before its header was written, so only the last one can be torn this way; damage
/// there is taken for a torn write, not for decay of acknowledged data.
///
/// The group's bytes stay, its header overwritten by a torn mark (synced): they show that the
/// group before it was synced, so a later scan never takes that group for torn too.
fn cut_torn_last_group(scan: &mut SegmentScan, last: LastGroup) -> std::io::Result<()> {
    let LastGroup { offset: group_offset, entries_before, checkpoint_before } = last;
    let mut records = std::collections::HashMap::new();
    let damage = scan.entries[entries_before..]
        .iter()
        .find_map(|entry| read_raw_block(&scan.path, scan.file.as_ref(), entry, &mut records).err().map(|e| (entry.offset, e)));
    if let Some((offset, error)) = damage {
        scan.problems.push((group_offset, format!("last flush group torn (block at offset {offset}: {error}); left out")));
        let covered = scan.end - group_offset;
        scan.entries.truncate(entries_before);
        scan.wal_checkpoint = checkpoint_before;
        scan.end = group_offset;
        scan.append_at = group_offset + covered;
        let mut mark = [0u8; GROUP_HEADER_BYTES];
        mark[0..8].copy_from_slice(TORN_MAGIC);
        mark[24..32].copy_from_slice(&covered.to_le_bytes());
        let checksum = crc32c(&mark[..60]);
        mark[60..64].copy_from_slice(&checksum.to_le_bytes());
        scan.file.write_all_at(&mark, group_offset)?;
        scan.file.sync_data()?;
    }
    Ok(())
}

type GroupFound = (Vec<IndexEntry>, u64, u64);

fn parse_group(scan: &SegmentScan, header: &[u8; GROUP_HEADER_BYTES], offset: u64, limit: u64) -> std::io::Result<Option<GroupFound>> {
    if &header[0..8] != GROUP_MAGIC {
        return Ok(None);
    }
    let stored = u32::from_le_bytes(header[60..64].try_into().expect("4 bytes"));
    if stored != crc32c(&header[..60]) {
        return Ok(None);
    }
    let field = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    let wal_checkpoint = field(16);
    let blocks_bytes = field(24);
    let count = u32::from_le_bytes(header[32..36].try_into().expect("4 bytes")) as u64;
    let index_checksum = u32::from_le_bytes(header[36..40].try_into().expect("4 bytes"));
    let index_len = field(40);
    // Lengths come from the file: a damaged (or hostile) header may hold any value, so every
    // sum is checked rather than trusted to stay in range.
    let index_offset = (offset + GROUP_HEADER_BYTES as u64).checked_add(blocks_bytes);
    let group_end = index_offset.and_then(|at| at.checked_add(index_len)).and_then(|end| end.checked_next_multiple_of(PAGE_BYTES));
    let (Some(index_offset), Some(group_end)) = (index_offset, group_end) else {
        return Ok(None);
    };
    if group_end > limit {
        return Ok(None);
    }
    let mut index = vec![0u8; index_len as usize];
    scan.file.read_exact_at(&mut index, index_offset)?;
    if crc32c(&index) != index_checksum {
        return Ok(None);
    }
    let Ok(entries) = IndexEntry::decode_list(&index) else { return Ok(None) };
    if entries.len() as u64 != count {
        return Ok(None);
    }
    let inside = |e: &IndexEntry| e.offset >= offset + GROUP_HEADER_BYTES as u64 && e.offset + u64::from(e.length) <= index_offset;
    if !entries.iter().all(inside) {
        return Ok(None);
    }
    Ok(Some((entries, group_end, wal_checkpoint)))
}

/// Reads and verifies one block. Damage is reported with the file and the block's offset.
pub fn read_block(path: &Path, file: &dyn StorageFile, entry: &IndexEntry) -> Result<Block> {
    let mut bytes = vec![0u8; entry.length as usize];
    file.read_exact_at(&mut bytes, entry.offset).map_err(|e| Error::io(path, e))?;
    let mut load_shared = |distance: u32, length: u32| {
        let start = entry.offset.checked_sub(u64::from(distance)).filter(|&s| s >= FILE_HEADER_BYTES);
        let start = start.ok_or_else(|| block::BlockError::SharedTimestamps(format!("reference {distance} bytes back leaves the file")))?;
        if length > distance {
            return Err(block::BlockError::SharedTimestamps(format!(
                "record of {length} bytes overlaps the block {distance} bytes after it"
            )));
        }
        let mut record = vec![0u8; length as usize];
        file.read_exact_at(&mut record, start)
            .map_err(|e| block::BlockError::SharedTimestamps(format!("unreadable at offset {start}: {e}")))?;
        block::decode_shared_timestamps(&record).map_err(|e| block::BlockError::SharedTimestamps(format!("at offset {start}: {e}")))
    };
    let block = block::decode_with_shared(&bytes, &mut load_shared).map_err(|e| Error::corruption(path, entry.offset, e.to_string()))?;
    let header = &block.header;
    if header.series != entry.series
        || header.count != entry.count
        || header.min_timestamp != entry.min_timestamp
        || header.max_timestamp != entry.max_timestamp
    {
        return Err(Error::corruption(path, entry.offset, "block does not match its index entry"));
    }
    Ok(block)
}

/// A block as stored, verified by its checksums but not decoded: what merges copy.
#[derive(Clone, Debug)]
pub struct RawBlock {
    pub entry: IndexEntry,
    pub header: block::BlockHeader,
    pub bytes: Vec<u8>,
    /// The shared timestamp record the block refers to: its offset in the source file (to copy
    /// it once for all the blocks of its row) and its bytes.
    pub shared: Option<(u64, Arc<[u8]>)>,
}

/// Reads one block without decoding it, checking its checksum, its index entry and, for a block
/// with shared timestamps, the checksum of the record (read through `records`, a cache by
/// offset, since the blocks of one row share one record). Damage is reported with the file and
/// the offset.
pub fn read_raw_block(
    path: &Path,
    file: &dyn StorageFile,
    entry: &IndexEntry,
    records: &mut std::collections::HashMap<u64, Arc<[u8]>>,
) -> Result<RawBlock> {
    let mut bytes = vec![0u8; entry.length as usize];
    file.read_exact_at(&mut bytes, entry.offset).map_err(|e| Error::io(path, e))?;
    let corrupt = |offset: u64, what: String| Error::corruption(path, offset, what);
    let header = block::BlockHeader::verified(&bytes).map_err(|e| corrupt(entry.offset, e.to_string()))?;
    if header.series != entry.series
        || header.count != entry.count
        || header.min_timestamp != entry.min_timestamp
        || header.max_timestamp != entry.max_timestamp
    {
        return Err(corrupt(entry.offset, "block does not match its index entry".to_string()));
    }
    let shared = match block::shared_reference(&bytes, &header).map_err(|e| corrupt(entry.offset, e.to_string()))? {
        None => None,
        Some((distance, length)) => {
            let start = entry.offset.checked_sub(u64::from(distance)).filter(|&s| s >= FILE_HEADER_BYTES && length <= distance);
            let start =
                start.ok_or_else(|| corrupt(entry.offset, format!("shared timestamp record {distance} bytes back is outside the file")))?;
            let record = match records.get(&start) {
                Some(record) if record.len() == length as usize => record.clone(),
                _ => {
                    let mut record = vec![0u8; length as usize];
                    file.read_exact_at(&mut record, start).map_err(|e| Error::io(path, e))?;
                    block::verify_shared_record(&record).map_err(|e| corrupt(start, e.to_string()))?;
                    let record: Arc<[u8]> = record.into();
                    records.insert(start, record.clone());
                    record
                }
            };
            Some((start, record))
        }
    };
    Ok(RawBlock { entry: *entry, header, bytes, shared })
}
