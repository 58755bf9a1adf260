//! The footer of segment format version 2: the index entries grouped by series into *runs*
//! behind a small *series directory*, so that start-up reads only the directory (one entry per
//! series, whatever its number of blocks) and a read fetches the one run it needs.
//!
//! ```text
//! footer (on a 4 KiB boundary)
//!   directory: varint series count S, then S entries, then the replaced list (as version 1)
//!   runs: S runs back to back, in directory order
//! directory entry (ids never decrease; the first relative to zero)
//!   varint  series id − previous id
//!   u8      value kind
//!   varint  blocks B (≥ 1)
//!   varint  points
//!   varint  block bytes (sum of the blocks' lengths)
//!   zigzag  min timestamp
//!   varint  max timestamp − min timestamp
//!   varint  min sequence
//!   varint  max sequence − min sequence
//!   varint  run length in bytes
//!   u32 LE  CRC32C of the run
//! directory entry of version 4 (compact): as above up to the min sequence, except that the
//! min timestamp is relative to the previous entry's in its chunk of 32 (the chunk's first
//! is absolute), then
//!   B > 1:  varint max sequence − min sequence, varint run length, u32 LE run CRC32C
//!   B = 1:  varint block offset, and no run: the entry says all its block's index entry
//!           holds (points, bytes, times, sequence), which saves about 36 bytes a series and
//!           segment where a flush or compaction wrote one block per series, and a read of
//!           such a series reads no run
//! run: B entries in file order, each relative to the one before (the first relative to zero)
//!   varint  point count (≥ 1)
//!   varint  group sequence − previous sequence
//!   varint  block offset − end of the previous block
//!   varint  block length
//!   zigzag  min timestamp − previous min timestamp
//!   varint  max timestamp − min timestamp
//! ```
//! A run's offset is not stored: runs follow the directory back to back. The trailer's checksum
//! covers the directory; each run carries its own in the directory, so a run read alone is
//! verified alone, and damage is reported with the run's file offset.

use super::IndexEntry;
use crate::checksum::{crc32c, get_varint, put_varint, unzigzag, zigzag};
use crate::model::{add_time_span, time_span, SeriesId, Timestamp, ValueKind};

/// How a directory's entries are laid out: versions 2 and 3 alike (full), version 4 compact
/// (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryLayout {
    Full,
    Compact,
}

impl EntryLayout {
    /// The layout of a segment file of format `version` (2 or later).
    pub fn of_version(version: u16) -> EntryLayout {
        if version >= 4 {
            EntryLayout::Compact
        } else {
            EntryLayout::Full
        }
    }

    /// Fewest bytes an entry can take: varints of one byte, and the run's checksum if any.
    fn entry_bytes_min(self) -> usize {
        match self {
            EntryLayout::Full => 14,
            EntryLayout::Compact => 9,
        }
    }
}

/// One series' blocks in one segment, as the series directory describes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRun {
    pub series: SeriesId,
    pub kind: ValueKind,
    pub blocks: u32,
    pub points: u64,
    /// Sum of the blocks' lengths.
    pub bytes: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    pub min_sequence: u64,
    pub max_sequence: u64,
    /// Where the run's bytes are in the file (absolute), how many, and their CRC32C. A
    /// series with one block in a compact directory has no run: its length is 0 and the
    /// offset is the block's.
    pub run_offset: u64,
    pub run_length: u32,
    pub run_checksum: u32,
}

/// What a run must hold, as the in-memory index remembers it: enough to verify a run read
/// alone (its checksum, block count, bytes and time range) and to name the blocks' series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunShape {
    pub series: SeriesId,
    pub kind: ValueKind,
    pub blocks: u32,
    /// Points and smallest sequence: with `length` 0 (one block, no run), its count and
    /// sequence.
    pub points: u64,
    pub sequence: u64,
    pub bytes: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    pub offset: u64,
    pub length: u32,
    pub checksum: u32,
}

impl SeriesRun {
    pub fn shape(&self) -> RunShape {
        RunShape {
            series: self.series,
            kind: self.kind,
            blocks: self.blocks,
            points: self.points,
            sequence: self.min_sequence,
            bytes: self.bytes,
            min_timestamp: self.min_timestamp,
            max_timestamp: self.max_timestamp,
            offset: self.run_offset,
            length: self.run_length,
            checksum: self.run_checksum,
        }
    }
}

/// Encodes the footer of `entries` (in file order): returns (directory bytes with the
/// replaced list, run bytes). Each directory entry is encoded as its
/// run is, with no list of them: a compaction output of a million series would hold 80 MB of
/// such a list at its seal (issue 14, heaptrack).
pub fn encode_footer(entries: &[IndexEntry], replaced: &[u64], layout: EntryLayout) -> (Vec<u8>, Vec<u8>) {
    encode_footer_visiting(entries, replaced, layout, |_| {})
}

/// [`encode_footer`] for a footer at `footer_offset`, with the directory's entries (as a
/// decoder finds them).
#[cfg(test)]
pub fn encode_footer_listed(
    entries: &[IndexEntry],
    replaced: &[u64],
    footer_offset: u64,
    layout: EntryLayout,
) -> (Vec<u8>, Vec<u8>, Vec<SeriesRun>) {
    let mut directory = Vec::new();
    let (directory_bytes, runs) = encode_footer_visiting(entries, replaced, layout, |run| directory.push(run));
    let runs_start = footer_offset + directory_bytes.len() as u64;
    for run in directory.iter_mut().filter(|run| run.run_length > 0) {
        run.run_offset += runs_start;
    }
    (directory_bytes, runs, directory)
}

/// [`encode_footer`], calling `visit` with each directory entry (its run offset relative to
/// the first run; a block's offset where it has none).
fn encode_footer_visiting(
    entries: &[IndexEntry],
    replaced: &[u64],
    layout: EntryLayout,
    mut visit: impl FnMut(SeriesRun),
) -> (Vec<u8>, Vec<u8>) {
    // Stable by file position within a series (and kind, should one id hold two kinds).
    let mut order: Vec<u32> = (0..u32::try_from(entries.len()).expect("BUG: over 4 G blocks in a segment")).collect();
    let key = |i: u32| (entries[i as usize].series, entries[i as usize].kind as u8);
    order.sort_by_key(|&i| key(i));
    let series = order.iter().enumerate().filter(|&(at, &i)| at == 0 || key(order[at - 1]) != key(i)).count();
    // About 8 bytes a block; reserved so the buffer is not copied while it grows.
    let mut runs_bytes = Vec::with_capacity(entries.len() * 9 + 64);
    let mut directory_bytes = Vec::with_capacity(series * 28 + 16);
    put_varint(&mut directory_bytes, series as u64);
    let (mut start, mut previous) = (0, None::<SeriesRun>);
    let mut at = 0usize;
    let mut run: Vec<IndexEntry> = Vec::new();
    while start < order.len() {
        let first = key(order[start]);
        let end = start + order[start..].iter().take_while(|&&i| key(i) == first).count();
        run.clear();
        run.extend(order[start..end].iter().map(|&i| entries[i as usize]));
        let run_start = runs_bytes.len();
        let inline = layout == EntryLayout::Compact && run.len() == 1;
        if !inline {
            encode_run(&run, &mut runs_bytes);
        }
        let entry = SeriesRun {
            series: run[0].series,
            kind: run[0].kind,
            blocks: u32::try_from(run.len()).expect("BUG: over 4 G blocks"),
            points: run.iter().map(|e| u64::from(e.count)).sum(),
            bytes: run.iter().map(|e| u64::from(e.length)).sum(),
            min_timestamp: run.iter().map(|e| e.min_timestamp).min().unwrap_or(0),
            max_timestamp: run.iter().map(|e| e.max_timestamp).max().unwrap_or(0),
            min_sequence: run.iter().map(|e| e.sequence).min().unwrap_or(0),
            max_sequence: run.iter().map(|e| e.sequence).max().unwrap_or(0),
            run_offset: if inline { run[0].offset } else { run_start as u64 },
            run_length: u32::try_from(runs_bytes.len() - run_start).expect("BUG: run over 4 GiB"),
            run_checksum: if inline { 0 } else { crc32c(&runs_bytes[run_start..]) },
        };
        // Within a chunk, a compact entry's times are relative to the entry before it.
        let chunk_previous = previous.filter(|_| !at.is_multiple_of(ENTRIES_PER_CHECKPOINT));
        put_entry(&mut directory_bytes, &entry, previous.map_or(0, |p| p.series.0), layout, chunk_previous.map(|p| p.min_timestamp));
        previous = Some(entry);
        at += 1;
        visit(entry);
        start = end;
    }
    super::encode_replaced(replaced, &mut directory_bytes);
    (directory_bytes, runs_bytes)
}

/// Appends the directory entry of `run`, whose id is relative to `previous`; in the compact
/// layout its min timestamp is relative to `previous_min` (the entry before it in its chunk).
fn put_entry(out: &mut Vec<u8>, run: &SeriesRun, previous: u32, layout: EntryLayout, previous_min: Option<Timestamp>) {
    assert!(run.series.0 >= previous, "BUG: series directory out of order");
    put_varint(out, u64::from(run.series.0 - previous));
    out.push(run.kind as u8);
    put_varint(out, u64::from(run.blocks));
    put_varint(out, run.points);
    put_varint(out, run.bytes);
    let base = match layout {
        EntryLayout::Full => 0,
        EntryLayout::Compact => previous_min.unwrap_or(0),
    };
    put_varint(out, zigzag(run.min_timestamp.wrapping_sub(base)));
    put_varint(out, time_span(run.min_timestamp, run.max_timestamp));
    put_varint(out, run.min_sequence);
    if layout == EntryLayout::Compact && run.blocks == 1 {
        assert!(run.run_length == 0 && run.min_sequence == run.max_sequence, "BUG: a one-block entry with a run");
        put_varint(out, run.run_offset);
        return;
    }
    put_varint(out, run.max_sequence - run.min_sequence);
    put_varint(out, u64::from(run.run_length));
    out.extend_from_slice(&run.run_checksum.to_le_bytes());
}

/// Parses a directory and the replaced list after it, which must fill `bytes`; runs are placed
/// back to back from `runs_start`. Checksum of `bytes` already verified.
pub fn decode_directory(bytes: &[u8], runs_start: u64, layout: EntryLayout) -> Result<(Vec<SeriesRun>, Vec<u64>), String> {
    let (count, mut entries) = EntryReader::after_count(bytes, runs_start, layout)?;
    let mut directory = Vec::with_capacity(count);
    for _ in 0..count {
        directory.push(entries.next_entry()?);
    }
    let replaced = super::decode_replaced(&bytes[entries.position..])?;
    Ok((directory, replaced))
}

/// Reads directory entries one after the other from `bytes`, from the start of a chunk.
struct EntryReader<'a> {
    bytes: &'a [u8],
    position: usize,
    series: u32,
    run_offset: u64,
    layout: EntryLayout,
    /// Entries read, and the last one's min timestamp (compact entries are relative to it).
    read: usize,
    previous_min: Timestamp,
}

impl<'a> EntryReader<'a> {
    fn new(bytes: &'a [u8], run_offset: u64, layout: EntryLayout) -> EntryReader<'a> {
        EntryReader { bytes, position: 0, series: 0, run_offset, layout, read: 0, previous_min: 0 }
    }

    /// A reader of the entries after the series count that starts `bytes`, with the count.
    fn after_count(bytes: &'a [u8], runs_start: u64, layout: EntryLayout) -> Result<(usize, EntryReader<'a>), String> {
        let mut entries = EntryReader::new(bytes, runs_start, layout);
        let count = entries.varint()?;
        if count > (bytes.len() / layout.entry_bytes_min()) as u64 {
            return Err(format!("implausible series count {count}"));
        }
        Ok((count as usize, entries))
    }

    // Inlined: called six times an entry, the call and its `Result` through memory cost 75
    // instructions a varint (callgrind, a first read of the large-store bench).
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, String> {
        match get_varint(self.bytes, &mut self.position) {
            Some(value) => Ok(value),
            None => Err(self.truncated()),
        }
    }

    #[cold]
    fn truncated(&self) -> String {
        format!("series directory truncated at byte {}", self.position)
    }

    fn next_entry(&mut self) -> Result<SeriesRun, String> {
        let series = u32::try_from(self.varint()?).ok().and_then(|d| self.series.checked_add(d)).ok_or("series id out of range")?;
        self.series = series;
        let kind_tag = *self.bytes.get(self.position).ok_or("series directory truncated")?;
        self.position += 1;
        let kind = ValueKind::try_from(kind_tag).map_err(|t| format!("unknown value kind {t}"))?;
        let blocks = u32::try_from(self.varint()?).map_err(|_| "block count out of range")?;
        let points = self.varint()?;
        let block_bytes = self.varint()?;
        let compact = self.layout == EntryLayout::Compact;
        let base = if compact && !self.read.is_multiple_of(ENTRIES_PER_CHECKPOINT) { self.previous_min } else { 0 };
        let min_timestamp = base.wrapping_add(unzigzag(self.varint()?));
        let max_timestamp = add_time_span(min_timestamp, self.varint()?).ok_or("time span out of range")?;
        let min_sequence = self.varint()?;
        if blocks == 0 || points < u64::from(blocks) {
            return Err(format!("series {series} has {blocks} blocks of {points} points"));
        }
        self.read += 1;
        self.previous_min = min_timestamp;
        let (max_sequence, run_offset, run_length, run_checksum) = if compact && blocks == 1 {
            // No run: the offset is the block's, and the entry is all its index entry.
            let block_offset = self.varint()?;
            if u32::try_from(points).is_err() || u32::try_from(block_bytes).is_err() || block_offset.checked_add(block_bytes).is_none() {
                return Err(format!("series {series}: a block of {points} points, {block_bytes} bytes at offset {block_offset}"));
            }
            (min_sequence, block_offset, 0, 0)
        } else {
            let max_sequence = min_sequence.checked_add(self.varint()?).ok_or("sequence overflow")?;
            let run_length = u32::try_from(self.varint()?).map_err(|_| "run length out of range")?;
            let checksum = self.bytes.get(self.position..self.position + 4).ok_or("series directory truncated")?;
            let run_checksum = u32::from_le_bytes(checksum.try_into().map_err(|_| "series directory truncated")?);
            self.position += 4;
            // A run of B entries takes at least 6 bytes each; length 0 means "no run" alone.
            if u64::from(run_length) < 6 * u64::from(blocks) {
                return Err(format!("series {series}: a run of {run_length} bytes for {blocks} blocks"));
            }
            let run_offset = self.run_offset;
            self.run_offset = run_offset.checked_add(u64::from(run_length)).ok_or("run offset overflow")?;
            (max_sequence, run_offset, run_length, run_checksum)
        };
        Ok(SeriesRun {
            series: SeriesId(series),
            kind,
            blocks,
            points,
            bytes: block_bytes,
            min_timestamp,
            max_timestamp,
            min_sequence,
            max_sequence,
            run_offset,
            run_length,
            run_checksum,
        })
    }
}

/// Directory entries a [`DirectoryIndex`] keeps one checkpoint for.
pub const ENTRIES_PER_CHECKPOINT: usize = 32;

/// Magic of a directory index stored in a sealed file (format version 3), between the runs'
/// padding and the trailer, whose length and checksum cover it:
/// ```text
///   0  8  magic "SDBDIRIX"
///   8  8  directory length D (entries and replaced list; the runs start at footer offset + D)
///  16  8  file offset just past the last entry         u64 LE (as all below)
///  24  8  file offset just past the last run
///  32  8  entries, 40 blocks, 48 points, 56 block bytes (sums over the directory)
///  64  8  min timestamp (i64), 72 max timestamp, 80 min sequence, 88 max sequence
///  96  4  smallest series id, 100 largest, 104..112 the widest gap of ids between (u32 pairs)
/// 112  8  checkpoint count C (one per 32 entries)
/// 120  C × 24: file offset of the chunk's first entry u64, its first run's offset u64, its
///          first series id u32, CRC32C of the chunk's bytes u32
///    then the replaced list (as in the directory)
/// ```
pub const INDEX_MAGIC: &[u8; 8] = b"SDBDIRIX";
const STORED_HEADER_BYTES: usize = 120;
const STORED_CHECKPOINT_BYTES: usize = 24;

/// A series directory left on disk, summarised in memory: one checkpoint every
/// [`ENTRIES_PER_CHECKPOINT`] entries (where its chunk of entries lies in the file, its first
/// series id and run offset, the CRC32C of its bytes: 24 bytes, under one byte an entry) and
/// the directory's totals. A lookup bisects the checkpoints and decodes one chunk read from
/// the file ([`DirectoryIndex::decode_chunks`]); the chunk's own checksum catches damage done
/// after the whole directory was checked at open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryIndex {
    /// How the entries the chunks hold are laid out (the file's version).
    pub layout: EntryLayout,
    checkpoints: Box<[Checkpoint]>,
    /// File offset just past the last entry (where the replaced list starts).
    entries_end: u64,
    /// Entries (an id holding two kinds counts twice).
    pub len: usize,
    pub blocks: u64,
    pub points: u64,
    /// Sum of the blocks' lengths.
    pub block_bytes: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    pub min_sequence: u64,
    pub max_sequence: u64,
    /// Smallest and largest series id ((0, 0) when empty).
    pub series_ids: (u32, u32),
    /// The widest stretch of ids missing between those two: no entry's id lies strictly
    /// between the pair ((0, 0) when there is none). A fleet's flush that wraps around from
    /// its last sensors to its first holds two slices of the id space, not all of it.
    pub series_gap: (u32, u32),
    /// File offset just past the last run.
    pub runs_end: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Checkpoint {
    /// File offset of the chunk's first entry.
    at: u64,
    run_offset: u64,
    series: SeriesId,
    checksum: u32,
}

impl DirectoryIndex {
    /// Indexes the directory `bytes` (the replaced list after it included, checksum already
    /// verified) that starts at file offset `footer_offset`: checks every entry, as
    /// [`decode_directory`] does, and returns the index with the replaced list.
    pub fn of(bytes: &[u8], footer_offset: u64, layout: EntryLayout) -> Result<(DirectoryIndex, Vec<u64>), String> {
        let runs_start = footer_offset + bytes.len() as u64;
        let (len, mut entries) = EntryReader::after_count(bytes, runs_start, layout)?;
        let mut index = DirectoryIndex {
            layout,
            checkpoints: Box::default(),
            entries_end: 0,
            len,
            blocks: 0,
            points: 0,
            block_bytes: 0,
            min_timestamp: Timestamp::MAX,
            max_timestamp: Timestamp::MIN,
            min_sequence: u64::MAX,
            max_sequence: 0,
            series_ids: (0, 0),
            series_gap: (0, 0),
            runs_end: runs_start,
        };
        let mut checkpoints = Vec::with_capacity(len.div_ceil(ENTRIES_PER_CHECKPOINT));
        for at in 0..len {
            let (start, run_offset) = (entries.position, entries.run_offset);
            let run = entries.next_entry()?;
            if at % ENTRIES_PER_CHECKPOINT == 0 {
                checkpoints.push(Checkpoint { at: footer_offset + start as u64, run_offset, series: run.series, checksum: 0 });
            }
            // Saturating: a damaged directory's sums must not panic (its checksum held).
            index.blocks = index.blocks.saturating_add(u64::from(run.blocks));
            index.points = index.points.saturating_add(run.points);
            index.block_bytes = index.block_bytes.saturating_add(run.bytes);
            index.min_timestamp = index.min_timestamp.min(run.min_timestamp);
            index.max_timestamp = index.max_timestamp.max(run.max_timestamp);
            index.min_sequence = index.min_sequence.min(run.min_sequence);
            index.max_sequence = index.max_sequence.max(run.max_sequence);
            let previous = index.series_ids.1;
            let step = run.series.0.saturating_sub(previous);
            if at > 0 && step > 1 && step > index.series_gap.1 - index.series_gap.0 {
                index.series_gap = (previous, run.series.0);
            }
            index.series_ids = (if at == 0 { run.series.0 } else { index.series_ids.0 }, run.series.0);
        }
        index.checkpoints = checkpoints.into_boxed_slice();
        index.entries_end = footer_offset + entries.position as u64;
        index.runs_end = entries.run_offset;
        // Each chunk's bytes, which its checksum covers, end where the next chunk's begin.
        for chunk in 0..index.checkpoints.len() {
            let (at, length) = index.span(chunk..chunk + 1);
            let start = (at - footer_offset) as usize;
            index.checkpoints[chunk].checksum = crc32c(&bytes[start..start + length]);
        }
        let replaced = super::decode_replaced(&bytes[entries.position..])?;
        Ok((index, replaced))
    }

    /// The index as format version 3 stores it after the runs (see [`INDEX_MAGIC`]): start-up
    /// reads this instead of the directory, whose chunks are then checked one by one as reads
    /// need them. `directory_bytes` is the directory's length with its replaced list.
    pub fn encode_stored(&self, directory_bytes: u64, replaced: &[u64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(STORED_HEADER_BYTES + self.checkpoints.len() * STORED_CHECKPOINT_BYTES + 16);
        out.extend_from_slice(INDEX_MAGIC);
        for value in [directory_bytes, self.entries_end, self.runs_end, self.len as u64, self.blocks, self.points, self.block_bytes] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&self.min_timestamp.to_le_bytes());
        out.extend_from_slice(&self.max_timestamp.to_le_bytes());
        out.extend_from_slice(&self.min_sequence.to_le_bytes());
        out.extend_from_slice(&self.max_sequence.to_le_bytes());
        for id in [self.series_ids.0, self.series_ids.1, self.series_gap.0, self.series_gap.1] {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend_from_slice(&(self.checkpoints.len() as u64).to_le_bytes());
        debug_assert_eq!(out.len(), STORED_HEADER_BYTES);
        for checkpoint in self.checkpoints.iter() {
            out.extend_from_slice(&checkpoint.at.to_le_bytes());
            out.extend_from_slice(&checkpoint.run_offset.to_le_bytes());
            out.extend_from_slice(&checkpoint.series.0.to_le_bytes());
            out.extend_from_slice(&checkpoint.checksum.to_le_bytes());
        }
        super::encode_replaced(replaced, &mut out);
        out
    }

    /// Parses [`DirectoryIndex::encode_stored`]'s bytes (checksum already verified) of a
    /// directory at file offset `footer_offset`, stored at `stored_at`: the index, the
    /// replaced list and the directory's length. Checks that the layout is consistent (chunks
    /// in order inside the directory, runs after it and before the stored index), so damage
    /// that passed the checksum cannot send a read outside the footer.
    pub fn decode_stored(
        bytes: &[u8],
        footer_offset: u64,
        stored_at: u64,
        layout: EntryLayout,
    ) -> Result<(DirectoryIndex, Vec<u64>, u64), String> {
        if bytes.len() < STORED_HEADER_BYTES || &bytes[..8] != INDEX_MAGIC {
            return Err("directory index: bad magic or truncated".into());
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let (directory_bytes, entries_end, runs_end, len) = (u64_at(8), u64_at(16), u64_at(24), u64_at(32));
        let count = u64_at(112);
        let runs_start = footer_offset.checked_add(directory_bytes).ok_or("directory index: directory length overflows")?;
        if entries_end < footer_offset || entries_end > runs_start || runs_end < runs_start || runs_end > stored_at {
            return Err(format!(
                "directory index: directory {footer_offset}+{directory_bytes}, entries end {entries_end}, runs end {runs_end}, index at {stored_at}"
            ));
        }
        if count != len.div_ceil(ENTRIES_PER_CHECKPOINT as u64) || len > directory_bytes {
            return Err(format!("directory index: {count} checkpoints for {len} entries"));
        }
        let checkpoints_end = usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(STORED_CHECKPOINT_BYTES))
            .and_then(|bytes| bytes.checked_add(STORED_HEADER_BYTES))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| format!("directory index of {} bytes holds no {count} checkpoints", bytes.len()))?;
        let mut checkpoints = Vec::with_capacity(count as usize);
        for chunk in bytes[STORED_HEADER_BYTES..checkpoints_end].chunks_exact(STORED_CHECKPOINT_BYTES) {
            let at = u64::from_le_bytes(chunk[0..8].try_into().expect("8 bytes"));
            let run_offset = u64::from_le_bytes(chunk[8..16].try_into().expect("8 bytes"));
            let series = SeriesId(u32::from_le_bytes(chunk[16..20].try_into().expect("4 bytes")));
            let checksum = u32::from_le_bytes(chunk[20..24].try_into().expect("4 bytes"));
            let in_order = checkpoints.last().is_none_or(|p: &Checkpoint| p.at < at && p.run_offset <= run_offset && p.series <= series);
            if !in_order || at <= footer_offset || at >= entries_end || run_offset < runs_start || run_offset > runs_end {
                return Err(format!("directory index: checkpoint {} out of place", checkpoints.len()));
            }
            checkpoints.push(Checkpoint { at, run_offset, series, checksum });
        }
        if checkpoints.first().is_some_and(|c| c.run_offset != runs_start) {
            return Err("directory index: the first run does not follow the directory".into());
        }
        let index = DirectoryIndex {
            layout,
            checkpoints: checkpoints.into_boxed_slice(),
            entries_end,
            len: usize::try_from(len).map_err(|_| "directory index: entry count overflows")?,
            blocks: u64_at(40),
            points: u64_at(48),
            block_bytes: u64_at(56),
            min_timestamp: u64_at(64) as i64,
            max_timestamp: u64_at(72) as i64,
            min_sequence: u64_at(80),
            max_sequence: u64_at(88),
            series_ids: (u32_at(96), u32_at(100)),
            series_gap: (u32_at(104), u32_at(108)),
            runs_end,
        };
        let replaced = super::decode_replaced(&bytes[checkpoints_end..])?;
        Ok((index, replaced, directory_bytes))
    }

    /// Chunks of [`ENTRIES_PER_CHECKPOINT`] entries.
    pub fn chunks(&self) -> usize {
        self.checkpoints.len()
    }

    /// The chunks that may hold entries of `series` (two when an id's two kinds straddle a
    /// checkpoint); empty when the id is outside the directory's range.
    pub fn chunks_of(&self, series: SeriesId) -> std::ops::Range<usize> {
        self.chunks_of_range(series, series)
    }

    /// The chunks that may hold entries of series `low..=high`; empty when the directory
    /// holds no id of that range.
    pub fn chunks_of_range(&self, low: SeriesId, high: SeriesId) -> std::ops::Range<usize> {
        if self.len == 0 || low > high || high.0 < self.series_ids.0 || low.0 > self.series_ids.1 {
            return 0..0;
        }
        let start = self.checkpoints.partition_point(|c| c.series < low).saturating_sub(1);
        let end = self.checkpoints.partition_point(|c| c.series <= high);
        start..end.max(start + 1)
    }

    /// File offset and length of the bytes of chunks `chunks`, which lie back to back.
    pub fn span(&self, chunks: std::ops::Range<usize>) -> (u64, usize) {
        assert!(chunks.start < chunks.end && chunks.end <= self.checkpoints.len(), "BUG: chunks {chunks:?} of {}", self.checkpoints.len());
        let start = self.checkpoints[chunks.start].at;
        let end = self.checkpoints.get(chunks.end).map_or(self.entries_end, |c| c.at);
        (start, (end - start) as usize)
    }

    /// The entries of chunks `chunks`, from `bytes` as read at [`DirectoryIndex::span`]: each
    /// chunk's checksum verified, then its entries decoded. An error names the file offset
    /// of the damaged chunk.
    pub fn decode_chunks(&self, chunks: std::ops::Range<usize>, bytes: &[u8]) -> Result<Vec<SeriesRun>, (u64, String)> {
        let (start, length) = self.span(chunks.clone());
        if bytes.len() != length {
            return Err((start, format!("directory chunks of {} bytes, expected {length}", bytes.len())));
        }
        let mut out = Vec::with_capacity(chunks.len() * ENTRIES_PER_CHECKPOINT);
        for chunk in chunks {
            let (at, length) = self.span(chunk..chunk + 1);
            let checkpoint = &self.checkpoints[chunk];
            let chunk_bytes = &bytes[(at - start) as usize..(at - start) as usize + length];
            if crc32c(chunk_bytes) != checkpoint.checksum {
                return Err((at, "series directory chunk fails its checksum".into()));
            }
            let entries = (self.len - chunk * ENTRIES_PER_CHECKPOINT).min(ENTRIES_PER_CHECKPOINT);
            let mut reader = EntryReader::new(chunk_bytes, checkpoint.run_offset, self.layout);
            for first in (0..entries).map(|i| i == 0) {
                let mut run = reader.next_entry().map_err(|e| (at, e))?;
                if first {
                    // Its id is relative to the entry before the chunk: the checkpoint has it.
                    run.series = checkpoint.series;
                    reader.series = checkpoint.series.0;
                }
                out.push(run);
            }
            if reader.position != chunk_bytes.len() {
                return Err((at, format!("{} bytes after a directory chunk", chunk_bytes.len() - reader.position)));
            }
        }
        Ok(out)
    }

    /// Bytes the index takes in memory.
    #[cfg(test)]
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.checkpoints) + std::mem::size_of::<DirectoryIndex>()
    }
}

/// Appends the run of `entries` (one series, file order).
fn encode_run(entries: &[IndexEntry], out: &mut Vec<u8>) {
    let (mut sequence, mut end, mut min_timestamp) = (0u64, 0u64, 0i64);
    for entry in entries {
        assert!(entry.sequence >= sequence && entry.offset >= end, "BUG: run entries out of file order");
        put_varint(out, u64::from(entry.count));
        put_varint(out, entry.sequence - sequence);
        put_varint(out, entry.offset - end);
        put_varint(out, u64::from(entry.length));
        put_varint(out, zigzag(entry.min_timestamp.wrapping_sub(min_timestamp)));
        put_varint(out, time_span(entry.min_timestamp, entry.max_timestamp));
        sequence = entry.sequence;
        end = entry.offset + u64::from(entry.length);
        min_timestamp = entry.min_timestamp;
    }
}

/// Parses the run `bytes` that `run` describes: its checksum, then its entries, which must
/// agree with the directory (count, points, bytes, time and sequence range) and fill `bytes`.
pub fn decode_run(run: &SeriesRun, bytes: &[u8]) -> Result<Vec<IndexEntry>, String> {
    let (entries, points) = decode_run_shaped(&run.shape(), bytes)?;
    let sequences = (entries.first().map(|e| e.sequence), entries.last().map(|e| e.sequence));
    if sequences != (Some(run.min_sequence), Some(run.max_sequence)) {
        return Err(format!("run's sequences differ from its directory entry's ({}..={})", run.min_sequence, run.max_sequence));
    }
    if points != run.points {
        return Err(format!("run holds {points} points, the directory says {}", run.points));
    }
    Ok(entries)
}

/// Parses a run against what the in-memory index remembers of it ([`RunShape`]); returns its
/// entries and their points.
pub fn decode_run_shaped(run: &RunShape, bytes: &[u8]) -> Result<(Vec<IndexEntry>, u64), String> {
    if run.length == 0 {
        // A compact directory's one-block entry: no run to read, the entry is the block's.
        if run.blocks != 1 || !bytes.is_empty() {
            return Err(format!("series {}: {} blocks without a run", run.series.0, run.blocks));
        }
        let count = u32::try_from(run.points).ok().filter(|&count| count > 0).ok_or("point count out of range")?;
        let length = u32::try_from(run.bytes).map_err(|_| "block length out of range")?;
        let entry = IndexEntry {
            series: run.series,
            kind: run.kind,
            count,
            length,
            offset: run.offset,
            min_timestamp: run.min_timestamp,
            max_timestamp: run.max_timestamp,
            sequence: run.sequence,
        };
        return Ok((vec![entry], run.points));
    }
    if bytes.len() != run.length as usize {
        return Err(format!("run of {} bytes, the directory says {}", bytes.len(), run.length));
    }
    if crc32c(bytes) != run.checksum {
        return Err(format!("run of series {} fails its checksum", run.series.0));
    }
    let mut position = 0usize;
    let varint = |position: &mut usize| get_varint(bytes, position).ok_or_else(|| format!("run truncated at byte {position}"));
    // Each entry takes at least 6 bytes.
    if u64::from(run.blocks) > (bytes.len() / 6) as u64 {
        return Err(format!("run of {} bytes cannot hold {} blocks", bytes.len(), run.blocks));
    }
    let mut entries = Vec::with_capacity(run.blocks as usize);
    let (mut sequence, mut end, mut min_timestamp) = (0u64, 0u64, 0i64);
    let (mut points, mut block_bytes) = (0u64, 0u64);
    for _ in 0..run.blocks {
        let count = u32::try_from(varint(&mut position)?).map_err(|_| "point count out of range")?;
        sequence = sequence.checked_add(varint(&mut position)?).ok_or("sequence overflow")?;
        let offset = end.checked_add(varint(&mut position)?).ok_or("offset overflow")?;
        let length = u32::try_from(varint(&mut position)?).map_err(|_| "block length out of range")?;
        min_timestamp = min_timestamp.wrapping_add(unzigzag(varint(&mut position)?));
        let max_timestamp = add_time_span(min_timestamp, varint(&mut position)?).ok_or("time span out of range")?;
        if count == 0 {
            return Err(format!("block of series {} has no points", run.series.0));
        }
        end = offset.checked_add(u64::from(length)).ok_or("offset overflow")?;
        if min_timestamp < run.min_timestamp || max_timestamp > run.max_timestamp {
            return Err(format!("block at offset {offset} lies outside its directory entry's time range"));
        }
        points += u64::from(count);
        block_bytes += u64::from(length);
        entries.push(IndexEntry { series: run.series, kind: run.kind, count, length, offset, min_timestamp, max_timestamp, sequence });
    }
    if position != bytes.len() {
        return Err(format!("{} bytes after the run", bytes.len() - position));
    }
    let (first, last) = (entries.iter().map(|e| e.min_timestamp).min(), entries.iter().map(|e| e.max_timestamp).max());
    if first != Some(run.min_timestamp) || last != Some(run.max_timestamp) {
        return Err(format!("run's time range differs from its directory entry's ({}..={})", run.min_timestamp, run.max_timestamp));
    }
    if block_bytes != run.bytes {
        return Err(format!("run's blocks take {block_bytes} bytes, the directory says {}", run.bytes));
    }
    Ok((entries, points))
}

#[cfg(test)]
#[path = "directory_tests.rs"]
mod tests;
