//! Writing segments: building flush groups in memory and appending them with page-aligned writes.

use super::*;
use crate::block;
use crate::checksum::{align_up, crc32c};
use crate::error::{Error, Result};
use crate::filenames::{numbered_file, SEGMENT_EXTENSION};
use crate::fs::{AlignedBuffer, FileSystem, StorageFile};
use crate::model::ValueColumn;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a shared timestamp record sits in a group being built.
#[derive(Clone, Copy, Debug)]
pub struct SharedTimestamps {
    start: usize,
    length: u32,
}

/// The blocks of one flush, encoded into one buffer ready to be appended.
pub struct GroupBuilder {
    /// `buffer[base..]` holds the blocks. A builder made by [`GroupBuilder::with_capacity`] puts
    /// them on a page boundary, and while the buffer keeps its first allocation
    /// [`GroupBuilder::into_part`] hands it on for the direct write without copying it.
    buffer: Vec<u8>,
    base: usize,
    /// Entries with offsets relative to the start of the group (its header comes first).
    entries: Vec<IndexEntry>,
}

impl Default for GroupBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl GroupBuilder {
    pub fn new() -> Self {
        GroupBuilder { buffer: Vec::new(), base: 0, entries: Vec::new() }
    }

    /// A builder whose blocks start on a page boundary, with room for `bytes` of blocks (and
    /// their page padding) without moving: a group that stays within it reaches the disk with
    /// no copy after encoding.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buffer: Vec<u8> = Vec::with_capacity(bytes + 2 * PAGE_BYTES as usize);
        let base = buffer.as_ptr().align_offset(PAGE_BYTES as usize);
        buffer.resize(base, 0);
        GroupBuilder { buffer, base, entries: Vec::new() }
    }

    /// Offset relative to the start of the group of the buffer position `at`.
    fn group_offset(&self, at: usize) -> u64 {
        (at - self.base + GROUP_HEADER_BYTES) as u64
    }

    /// Encodes one block with inline timestamps; points sorted by timestamp without repeats.
    pub fn add_block(&mut self, series: SeriesId, timestamps: &[Timestamp], values: &ValueColumn) {
        self.add_block_with(series, timestamps, values, block::TimestampColumn::Inline);
    }

    /// Appends a shared timestamp record for the blocks of one row that follow.
    pub fn add_shared_timestamps(&mut self, timestamps: &[Timestamp]) -> SharedTimestamps {
        let start = self.buffer.len();
        block::encode_shared_timestamps(timestamps, &mut self.buffer);
        SharedTimestamps { start, length: u32::try_from(self.buffer.len() - start).expect("BUG: record over 4 GiB") }
    }

    /// Encodes one block whose timestamps are `shared` minus the positions in `missing`.
    pub fn add_block_sharing(
        &mut self,
        series: SeriesId,
        timestamps: &[Timestamp],
        values: &ValueColumn,
        shared: SharedTimestamps,
        missing: &[u32],
    ) {
        let distance = u32::try_from(self.buffer.len() - shared.start).expect("BUG: shared record too far back");
        self.add_block_with(series, timestamps, values, block::TimestampColumn::Shared { distance, length: shared.length, missing });
    }

    fn add_block_with(&mut self, series: SeriesId, timestamps: &[Timestamp], values: &ValueColumn, column: block::TimestampColumn<'_>) {
        let start = self.buffer.len();
        block::encode(series, timestamps, values, column, &mut self.buffer);
        self.entries.push(IndexEntry {
            series,
            kind: values.kind(),
            count: timestamps.len() as u32,
            length: u32::try_from(self.buffer.len() - start).expect("BUG: block over 4 GiB"),
            offset: self.group_offset(start),
            min_timestamp: timestamps[0],
            max_timestamp: timestamps[timestamps.len() - 1],
            sequence: 0,
        });
    }

    /// Copies a block read by `read_raw_block` from segment `source` as it is; a block
    /// with shared timestamps brings its record, copied once per group (`records` maps a source
    /// record's segment and offset to its copy in this group and must be cleared with each new
    /// group) and the block's reference is pointed at the copy.
    pub fn add_raw_block(&mut self, source: u64, raw: RawBlock, records: &mut std::collections::HashMap<(u64, u64), SharedTimestamps>) {
        let RawBlock { entry, header, mut bytes, shared } = raw;
        if let Some((source_offset, record)) = shared {
            let copy = *records.entry((source, source_offset)).or_insert_with(|| {
                let start = self.buffer.len();
                self.buffer.extend_from_slice(&record);
                SharedTimestamps { start, length: u32::try_from(record.len()).expect("BUG: record over 4 GiB") }
            });
            let distance = u32::try_from(self.buffer.len() - copy.start).expect("BUG: shared record too far back");
            block::set_shared_distance(&mut bytes, &header, distance);
        }
        let start = self.buffer.len();
        self.buffer.extend_from_slice(&bytes);
        let offset = self.group_offset(start);
        self.entries.push(IndexEntry { offset, sequence: 0, ..entry });
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of blocks and shared records so far.
    pub fn bytes(&self) -> usize {
        self.buffer.len() - self.base
    }

    pub fn block_count(&self) -> usize {
        self.entries.len()
    }

    /// The encoded blocks and shared timestamp records, and the blocks' entries with offsets
    /// into those bytes (sequence 0): for stores that keep blocks elsewhere than in segment files.
    /// The buffer itself, past its header room: a 64 KiB payload block is not moved again.
    pub fn into_blocks(mut self) -> (bytes::Bytes, Vec<IndexEntry>) {
        let mut blocks = bytes::Bytes::from(self.buffer);
        bytes::Buf::advance(&mut blocks, self.base);
        for entry in &mut self.entries {
            entry.offset -= GROUP_HEADER_BYTES as u64;
        }
        (blocks, self.entries)
    }

    /// The blocks as a page-aligned part, ready for `SegmentWriter::append_parts`: the buffer
    /// itself when its blocks start on a page boundary with room for the padding, else a copy.
    /// Done by each writer before group commit, so the committing thread only does I/O.
    pub fn into_part(mut self) -> GroupPart {
        let blocks_len = self.buffer.len() - self.base;
        let padded = align_up(blocks_len as u64, PAGE_BYTES) as usize;
        let aligned = (self.buffer.as_ptr() as usize + self.base).is_multiple_of(PAGE_BYTES as usize);
        let buffer = if aligned && self.base + padded <= self.buffer.capacity() {
            self.buffer.resize(self.base + padded, 0);
            AlignedBuffer::from_aligned_vec(self.buffer, self.base, padded)
        } else {
            let mut buffer = AlignedBuffer::default();
            buffer.zeroed(padded)[..blocks_len].copy_from_slice(&self.buffer[self.base..]);
            buffer
        };
        let entries = self
            .entries
            .into_iter()
            .map(|mut entry| {
                entry.offset -= GROUP_HEADER_BYTES as u64;
                entry
            })
            .collect();
        GroupPart { buffer, entries }
    }

    /// Finishes the group for writing at `group_offset`: fills in the header, the index and the
    /// padding, and returns the page-aligned bytes with the entries' absolute offsets.
    #[cfg(test)]
    pub(super) fn finish(mut self, sequence: u64, wal_checkpoint: u64, group_offset: u64) -> (Vec<u8>, Vec<IndexEntry>) {
        let blocks_bytes = (self.buffer.len() - self.base) as u64;
        let mut group = vec![0u8; GROUP_HEADER_BYTES];
        group.extend_from_slice(&self.buffer[self.base..]);
        self.buffer = group;
        for entry in &mut self.entries {
            entry.offset += group_offset;
            entry.sequence = sequence;
        }
        let index_start = self.buffer.len();
        IndexEntry::encode_list(&self.entries, &mut self.buffer);
        let index_bytes = (self.buffer.len() - index_start) as u64;
        let index_checksum = crc32c(&self.buffer[index_start..]);
        let header = &mut self.buffer[..GROUP_HEADER_BYTES];
        header[0..8].copy_from_slice(GROUP_MAGIC);
        header[8..16].copy_from_slice(&sequence.to_le_bytes());
        header[16..24].copy_from_slice(&wal_checkpoint.to_le_bytes());
        header[24..32].copy_from_slice(&blocks_bytes.to_le_bytes());
        header[32..36].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        header[36..40].copy_from_slice(&index_checksum.to_le_bytes());
        header[40..48].copy_from_slice(&index_bytes.to_le_bytes());
        let header_checksum = crc32c(&header[..60]);
        header[60..64].copy_from_slice(&header_checksum.to_le_bytes());
        let padded = align_up(self.buffer.len() as u64, PAGE_BYTES) as usize;
        self.buffer.resize(padded, 0);
        (self.buffer, self.entries)
    }
}

/// Blocks of one writer, page-aligned and padded to whole pages; entries' offsets are relative
/// to the part's start.
pub struct GroupPart {
    buffer: AlignedBuffer,
    entries: Vec<IndexEntry>,
}

impl GroupPart {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A group written but for its header ([`SegmentWriter::stage_parts`]): a zero page stands
/// where the header goes. [`StagedGroup::commit`] writes the header and syncs once every group
/// before it is durable; until then a crash leaves a group without a header, which recovery
/// does not take for a group (and a zero page after a group proves nothing about that group's
/// sync, see `scan_segment`).
pub struct StagedGroup {
    segment: u64,
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    offset: u64,
    end: u64,
    sequence: u64,
    wal_checkpoint: u64,
    header_page: AlignedBuffer,
    entries: Vec<IndexEntry>,
}

impl StagedGroup {
    /// The segment the group was written into.
    pub fn segment(&self) -> u64 {
        self.segment
    }

    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    pub fn wal_checkpoint(&self) -> u64 {
        self.wal_checkpoint
    }

    /// The group's blocks with their offsets in the segment.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// Writes the header over the zero page that held its place and, with `sync`, makes the
    /// group durable. Call only once every group staged before this one is durable: the header
    /// is what tells recovery that the group before it was synced. On failure nothing is undone
    /// here: the writer's [`SegmentWriter::unstage`] cuts the file back.
    pub fn commit(&self, sync: bool) -> Result<()> {
        let written =
            self.file
                .write_all_at(self.header_page.as_slice(), self.offset)
                .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        written.map_err(|e| Error::io(&self.path, e))
    }
}

/// The open segment: takes flush groups until it is sealed.
pub struct SegmentWriter {
    id: u64,
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    /// End of the last complete group: the next group starts here.
    end: u64,
    /// End of the last group staged (written but for its header, see [`StagedGroup`]); `end`
    /// when none is.
    staged_end: u64,
    entries: Vec<IndexEntry>,
    /// Blocks of the groups complete or staged: `entries` and those of staged groups.
    staged_blocks: usize,
    wal_checkpoint: u64,
    sync: bool,
    /// The file's format version, which decides the footer's layout.
    version: u16,
}

impl SegmentWriter {
    /// Creates segment `id` in `dir`. With `sync`, every group and the seal are fdatasynced.
    pub fn create(fs: &dyn FileSystem, dir: &Path, id: u64, sync: bool) -> Result<SegmentWriter> {
        Self::create_at(fs, dir, id, numbered_file(dir, id, SEGMENT_EXTENSION), sync, SEGMENT_FORMAT_VERSION)
    }

    /// Creates segment `id` in an older format `version` (1), as earlier builds wrote it: for
    /// tests that stores of those builds still open and work.
    #[cfg(test)]
    pub(crate) fn create_with_version(fs: &dyn FileSystem, dir: &Path, id: u64, sync: bool, version: u16) -> Result<SegmentWriter> {
        assert!((1..=SEGMENT_FORMAT_VERSION).contains(&version), "BUG: no segment format {version}");
        Self::create_at(fs, dir, id, numbered_file(dir, id, SEGMENT_EXTENSION), sync, version)
    }

    /// Creates segment `id` under its temporary name: it only becomes part of the store when
    /// it is sealed ([`SegmentWriter::seal_temporary`]) and its rewrite renames it into place.
    pub fn create_temporary(fs: &dyn FileSystem, dir: &Path, id: u64, sync: bool) -> Result<SegmentWriter> {
        Self::create_at(fs, dir, id, crate::filenames::temporary_segment(dir, id), sync, SEGMENT_FORMAT_VERSION)
    }

    fn create_at(fs: &dyn FileSystem, dir: &Path, id: u64, path: PathBuf, sync: bool, version: u16) -> Result<SegmentWriter> {
        let io = |e| Error::io(&path, e);
        let file = fs.create_for_appends(&path).map_err(io)?;
        let mut header = vec![0u8; FILE_HEADER_BYTES as usize];
        header[0..8].copy_from_slice(FILE_MAGIC);
        header[8..10].copy_from_slice(&version.to_le_bytes());
        header[16..24].copy_from_slice(&id.to_le_bytes());
        let checksum = crc32c(&header[..28]);
        header[28..32].copy_from_slice(&checksum.to_le_bytes());
        let written = file.write_all_at(&header, 0).and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written.and_then(|()| if sync { fs.sync_dir(dir) } else { Ok(()) }) {
            let _ = fs.remove(&path);
            return Err(io(e));
        }
        Ok(SegmentWriter {
            id,
            path,
            file,
            end: FILE_HEADER_BYTES,
            staged_end: FILE_HEADER_BYTES,
            entries: Vec::new(),
            staged_blocks: 0,
            wal_checkpoint: 0,
            sync,
            version,
        })
    }

    /// Continues an unsealed segment found at recovery, after its last complete group. A
    /// segment whose footer was damaged keeps its old footer and trailer past that group until
    /// [`SegmentWriter::seal`] replaces them: seal it before appending.
    pub fn resume(scan: &SegmentScan, sync: bool) -> SegmentWriter {
        assert!(!scan.sealed, "BUG: resuming a sealed segment");
        SegmentWriter {
            id: scan.id,
            path: scan.path.clone(),
            file: scan.file.clone(),
            end: scan.append_at,
            staged_end: scan.append_at,
            entries: scan.entries.clone(),
            staged_blocks: scan.entries.len(),
            wal_checkpoint: scan.wal_checkpoint,
            sync,
            version: scan.version,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file, for readers of blocks already written.
    pub fn file(&self) -> Arc<dyn StorageFile> {
        self.file.clone()
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.end
    }

    /// Bytes written so far, staged groups included.
    pub fn staged_bytes(&self) -> u64 {
        self.staged_end
    }

    /// Blocks of the groups written or staged so far.
    pub fn staged_blocks(&self) -> usize {
        self.staged_blocks
    }

    /// Index entries of every block written so far.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The file's format version: from 2, a seal writes a series directory.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Appends `group` and makes it durable. On failure the file is cut back to its previous
    /// end, so the segment stays valid and the group can be retried (for example once a full
    /// disk has room again).
    #[cfg(test)]
    pub fn append_group(&mut self, group: GroupBuilder, sequence: u64, wal_checkpoint: u64) -> Result<Vec<IndexEntry>> {
        assert!(!group.is_empty(), "BUG: empty flush group");
        self.append_parts(vec![group.into_part()], sequence, wal_checkpoint)
    }

    /// Appends one flush group made of `parts` and makes it durable: a page holding the group
    /// header, the parts back to back (each padded to whole pages, so the blocks region has
    /// zero gaps), then the group index. Every write is page-aligned, so it can bypass the page
    /// cache. On failure the file is cut back to its previous end, so the segment stays valid
    /// and the group can be retried (for example once a full disk has room again).
    pub fn append_parts(&mut self, parts: Vec<GroupPart>, sequence: u64, wal_checkpoint: u64) -> Result<Vec<IndexEntry>> {
        assert!(parts.iter().any(|p| !p.is_empty()), "BUG: empty flush group");
        assert_eq!(self.staged_end, self.end, "BUG: appending behind staged groups");
        let group_offset = self.end;
        let (header_page, index_page, entries, len) = lay_out(&parts, group_offset, sequence, wal_checkpoint);
        let write = || -> std::io::Result<()> {
            let mut pieces: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
            pieces.push(header_page.as_slice());
            pieces.extend(parts.iter().map(|part| part.buffer.as_slice()));
            pieces.push(index_page.as_slice());
            self.file.write_all_vectored_at(&pieces, group_offset)?;
            if self.sync {
                self.file.sync_data()?;
            }
            Ok(())
        };
        match write() {
            Ok(()) => {
                self.end = group_offset + len;
                self.staged_end = self.end;
                self.entries.extend_from_slice(&entries);
                self.staged_blocks = self.entries.len();
                self.wal_checkpoint = wal_checkpoint;
                Ok(entries)
            }
            Err(e) => {
                let _ = self.file.set_len(self.end);
                Err(Error::io(&self.path, e))
            }
        }
    }

    /// Writes one flush group made of `parts` after every group written or staged so far, all
    /// of it but its header page (a zero page, so the header's later write allocates nothing):
    /// the first half of a pipelined group commit, which may run while the group before is
    /// still syncing. [`StagedGroup::commit`] finishes it, then [`SegmentWriter::record`]. On
    /// failure the file is cut back to where the group began.
    pub fn stage_parts(&mut self, parts: Vec<GroupPart>, sequence: u64, wal_checkpoint: u64) -> Result<StagedGroup> {
        assert!(parts.iter().any(|p| !p.is_empty()), "BUG: empty flush group");
        let group_offset = self.staged_end;
        let (header_page, index_page, entries, len) = lay_out(&parts, group_offset, sequence, wal_checkpoint);
        let mut zero_page = AlignedBuffer::default();
        zero_page.zeroed(PAGE_BYTES as usize);
        let mut pieces: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
        pieces.push(zero_page.as_slice());
        pieces.extend(parts.iter().map(|part| part.buffer.as_slice()));
        pieces.push(index_page.as_slice());
        if let Err(e) = self.file.write_all_vectored_at(&pieces, group_offset) {
            let _ = self.file.set_len(group_offset);
            return Err(Error::io(&self.path, e));
        }
        self.staged_end = group_offset + len;
        self.staged_blocks += entries.len();
        Ok(StagedGroup {
            segment: self.id,
            path: self.path.clone(),
            file: self.file.clone(),
            offset: group_offset,
            end: group_offset + len,
            sequence,
            wal_checkpoint,
            header_page,
            entries,
        })
    }

    /// Takes a committed group (the oldest staged one) into the segment.
    pub fn record(&mut self, group: &StagedGroup) {
        assert!(group.segment == self.id && group.offset == self.end, "BUG: staged groups recorded out of order");
        self.end = group.end;
        self.entries.extend_from_slice(&group.entries);
        self.wal_checkpoint = group.wal_checkpoint;
    }

    /// Forgets every staged group and cuts the file back to the end of the last complete one,
    /// after a group failed to commit (the groups staged after it must not follow it either).
    pub fn unstage(&mut self) -> Result<()> {
        self.staged_blocks = self.entries.len();
        if self.staged_end != self.end {
            self.staged_end = self.end;
            self.file.set_len(self.end).map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Writes the footer and trailer. The segment is complete afterwards. Returns the series
    /// directory written (`None` for a file of format version 1, whose footer is a flat list).
    pub fn seal(self) -> Result<Option<DirectoryIndex>> {
        self.write_footer(&[])
    }

    /// Seals a segment made by [`SegmentWriter::create_temporary`] under its temporary name,
    /// naming the segments it replaces, for a caller that renames several outputs together.
    pub fn seal_temporary(self, replaced: &[u64]) -> Result<Option<DirectoryIndex>> {
        self.write_footer(replaced)
    }

    /// The footer as the file's version lays it out: the trailer's length and checksum cover
    /// what start-up reads (version 1: the whole list; version 2: the series directory, with
    /// the runs after it).
    fn write_footer(self, replaced: &[u64]) -> Result<Option<DirectoryIndex>> {
        // The footer is written in pieces (the part the trailer covers, the runs, the padding,
        // then the trailer) rather than copied into one buffer: the runs are most of it, 8 bytes
        // or so a block.
        let (covered, runs, directory) = if self.version >= 2 {
            let layout = super::EntryLayout::of_version(self.version);
            let (directory_bytes, runs) = super::directory::encode_footer(&self.entries, replaced, layout);
            let (directory, _) =
                DirectoryIndex::of(&directory_bytes, self.end, layout).expect("BUG: a directory just encoded fails to decode");
            (directory_bytes, runs, Some(directory))
        } else {
            let mut list = Vec::with_capacity(self.entries.len() * 16 + 64);
            IndexEntry::encode_list(&self.entries, &mut list);
            super::encode_replaced(replaced, &mut list);
            (list, Vec::new(), None)
        };
        // Version 3 stores the directory's index before the trailer, and the trailer covers
        // that instead of the directory: start-up reads 24 bytes per 32 series, not the
        // directory (issue 14: 2 M series in a hundred segments took 20 s to open).
        let stored = match &directory {
            Some(directory) if self.version >= 3 => directory.encode_stored(covered.len() as u64, replaced),
            _ => Vec::new(),
        };
        let trailer_covers: &[u8] = if self.version >= 3 { &stored } else { &covered };
        let footer_bytes = trailer_covers.len() as u64;
        let footer_checksum = crc32c(trailer_covers);
        let before_tail = covered.len() + runs.len();
        let total = align_up((before_tail + stored.len() + TRAILER_BYTES) as u64, PAGE_BYTES) as usize;
        let mut tail = vec![0u8; total - TRAILER_BYTES - stored.len() - before_tail];
        tail.extend_from_slice(&stored);
        let trailer_start = tail.len();
        tail.extend_from_slice(&self.end.to_le_bytes());
        tail.extend_from_slice(&footer_bytes.to_le_bytes());
        tail.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        tail.extend_from_slice(&footer_checksum.to_le_bytes());
        tail.extend_from_slice(&self.wal_checkpoint.to_le_bytes());
        tail.extend_from_slice(TRAILER_MAGIC);
        let trailer_checksum = crc32c(&tail[trailer_start..]);
        tail.extend_from_slice(&trailer_checksum.to_le_bytes());
        debug_assert_eq!(before_tail + tail.len(), total);
        let new_end = self.end + total as u64;
        let old_len = self.file.len().map_err(|e| Error::io(&self.path, e))?;
        // A segment whose damaged footer is being replaced still holds the old footer and
        // trailer past its groups; whatever of them the new footer does not cover is cut, so
        // the new trailer ends the file. A crash before the cut leaves the old trailer last,
        // pointing at a footer the new one overwrote: the next scan rebuilds it again.
        let cut_stale_tail = || if old_len > new_end { self.file.set_len(new_end) } else { Ok(()) };
        // The trailer goes last, after the rest is synced: a trailer that survives a crash then
        // vouches for runs that did too (its checksum covers the directory only; a run is
        // checked when read, and a run lost behind a valid trailer would hide acknowledged
        // blocks that the group headers still hold).
        let (padding, trailer) = tail.split_at(trailer_start);
        let sync = || if self.sync { self.file.sync_data() } else { Ok(()) };
        let pieces: [&[u8]; 3] = [&covered, &runs, padding];
        let written = self
            .file
            .write_all_vectored_at(&pieces, self.end)
            .and_then(|()| sync())
            .and_then(|()| self.file.write_all_at(trailer, new_end - trailer.len() as u64))
            .and_then(|()| cut_stale_tail())
            .and_then(|()| sync());
        if let Err(e) = written {
            // Back to the length before, so a damaged footer's old trailer (if the new footer
            // did not reach it) still marks the file as once sealed.
            let _ = self.file.set_len(old_len.max(self.end));
            return Err(Error::io(&self.path, e));
        }
        Ok(directory)
    }
}

/// Where `parts` go as one group starting at `group_offset`: a page holding the group header,
/// the parts back to back (each padded to whole pages, so the blocks region has zero gaps),
/// then the group index padded to whole pages. Returns the header page, the index pages, the
/// entries with their offsets in the segment, and the group's length.
fn lay_out(
    parts: &[GroupPart],
    group_offset: u64,
    sequence: u64,
    wal_checkpoint: u64,
) -> (AlignedBuffer, AlignedBuffer, Vec<IndexEntry>, u64) {
    let mut entries = Vec::with_capacity(parts.iter().map(|p| p.entries.len()).sum());
    let mut part_offset = group_offset + PAGE_BYTES;
    for part in parts {
        entries.extend(part.entries.iter().map(|entry| IndexEntry { offset: entry.offset + part_offset, sequence, ..*entry }));
        part_offset += part.buffer.as_slice().len() as u64;
    }
    let blocks_bytes = part_offset - group_offset - GROUP_HEADER_BYTES as u64;
    let mut index = Vec::with_capacity(entries.len() * 16);
    IndexEntry::encode_list(&entries, &mut index);
    let index_checksum = crc32c(&index);

    let mut header_page = AlignedBuffer::default();
    let header = header_page.zeroed(PAGE_BYTES as usize);
    header[0..8].copy_from_slice(GROUP_MAGIC);
    header[8..16].copy_from_slice(&sequence.to_le_bytes());
    header[16..24].copy_from_slice(&wal_checkpoint.to_le_bytes());
    header[24..32].copy_from_slice(&blocks_bytes.to_le_bytes());
    header[32..36].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    header[36..40].copy_from_slice(&index_checksum.to_le_bytes());
    header[40..48].copy_from_slice(&(index.len() as u64).to_le_bytes());
    let header_checksum = crc32c(&header[..60]);
    header[60..64].copy_from_slice(&header_checksum.to_le_bytes());
    let index_padded = align_up(index.len() as u64, PAGE_BYTES) as usize;
    let mut index_pages = AlignedBuffer::default();
    index_pages.zeroed(index_padded)[..index.len()].copy_from_slice(&index);
    let len = part_offset - group_offset + index_padded as u64;
    (header_page, index_pages, entries, len)
}
