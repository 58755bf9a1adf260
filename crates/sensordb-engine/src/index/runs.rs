//! The coarse index of sealed segments whose footer has a series directory (segment format
//! version 2). The directories stay in the files: the index holds, per segment, a
//! [`DirectoryIndex`] (a checkpoint every 32 series, under a byte a series) and finds the
//! [`SeriesExtent`] of a series by reading one chunk of the directory, kept in the bounded
//! [`DirectoryCache`]. A read then gets the blocks from the series' run in the footer, through
//! the bounded [`RunCache`]. Memory thus grows with the segments, not with the series in each:
//! a copy of every directory (52 bytes a series and segment) was most of the memory at 2 M
//! series (issue 14), and grew with every segment a series had points in.

use crate::error::Result;
use crate::fs::StorageFile;
use crate::model::{SeriesId, Timestamp, ValueKind};
use crate::segment::{read_directory_chunks, DirectoryIndex, IndexEntry, RunShape, SeriesRun};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::Arc;

/// One series' blocks in one sealed segment: what its directory entry says, less the sequences
/// and the point count, which a read does not need before it has the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesExtent {
    pub segment: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    /// Sum of the blocks' lengths.
    pub bytes: u64,
    /// Points and smallest sequence: what a one-block entry without a run (`run_length` 0,
    /// `run_offset` the block's) needs to stand for its block.
    pub points: u64,
    pub min_sequence: u64,
    pub run_offset: u64,
    pub blocks: u32,
    pub run_length: u32,
    pub run_checksum: u32,
    pub kind: ValueKind,
}

impl SeriesExtent {
    pub fn of(segment: u64, run: &SeriesRun) -> SeriesExtent {
        SeriesExtent {
            segment,
            min_timestamp: run.min_timestamp,
            max_timestamp: run.max_timestamp,
            bytes: run.bytes,
            points: run.points,
            min_sequence: run.min_sequence,
            run_offset: run.run_offset,
            blocks: run.blocks,
            run_length: run.run_length,
            run_checksum: run.run_checksum,
            kind: run.kind,
        }
    }

    /// What reading and checking the run of `series` needs.
    pub fn shape(&self, series: SeriesId) -> RunShape {
        RunShape {
            series,
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

    pub fn overlaps(&self, from: Timestamp, to: Timestamp) -> bool {
        overlaps((self.min_timestamp, self.max_timestamp), from, to)
    }
}

/// Whether points from `span.0` to `span.1` (both included) may fall in `[from, to)`.
fn overlaps(span: (Timestamp, Timestamp), from: Timestamp, to: Timestamp) -> bool {
    span.0 < to && span.1 >= from
}

/// Sealed segments → their directories' indexes, by segment id.
#[derive(Default)]
pub struct ExtentIndex {
    /// Shared with readers, which look a series up after the index lock is released.
    segments: BTreeMap<u64, Arc<SegmentExtents>>,
    /// The segments with entries by time, made when first needed after a segment came or
    /// went: a read looks only at those whose time can overlap its range instead of at every
    /// segment (a store kept for years holds thousands; a read overlaps a few).
    by_time: std::sync::OnceLock<TimeOrder<Arc<SegmentExtents>>>,
    blocks: usize,
}

/// Items with a span of time (both ends included), ordered by the span's start, each with the
/// latest end of it and of those before it: the items overlapping a range lie between the
/// first whose latest end reaches the range and the first that starts after it.
struct TimeOrder<T> {
    /// (start, end, latest end so far, item), by start.
    slots: Vec<(Timestamp, Timestamp, Timestamp, T)>,
}

impl<T> TimeOrder<T> {
    fn new(items: impl Iterator<Item = (Timestamp, Timestamp, T)>) -> TimeOrder<T> {
        let mut slots: Vec<(Timestamp, Timestamp, Timestamp, T)> = items.map(|(start, end, item)| (start, end, end, item)).collect();
        slots.sort_by_key(|slot| slot.0);
        let mut latest = Timestamp::MIN;
        for slot in &mut slots {
            latest = latest.max(slot.1);
            slot.2 = latest;
        }
        TimeOrder { slots }
    }

    /// The items whose span overlaps `[from, to)`, by start.
    fn overlapping(&self, from: Timestamp, to: Timestamp) -> impl Iterator<Item = &T> + '_ {
        let end = self.slots.partition_point(|slot| slot.0 < to);
        let start = self.slots[..end].partition_point(|slot| slot.2 < from);
        self.slots[start..end].iter().filter(move |slot| overlaps((slot.0, slot.1), from, to)).map(|slot| &slot.3)
    }
}

/// One sealed segment's part of the [`ExtentIndex`]: its directory's index and the file the
/// directory is read from.
pub struct SegmentExtents {
    segment: u64,
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    directory: DirectoryIndex,
}

impl SegmentExtents {
    pub fn new(segment: u64, path: PathBuf, file: Arc<dyn StorageFile>, directory: DirectoryIndex) -> SegmentExtents {
        SegmentExtents { segment, path, file, directory }
    }

    pub fn segment(&self) -> u64 {
        self.segment
    }

    pub fn directory(&self) -> &DirectoryIndex {
        &self.directory
    }

    /// Series in the segment (an id holding two kinds counts twice).
    pub fn len(&self) -> usize {
        self.directory.len
    }

    fn overlaps(&self, from: Timestamp, to: Timestamp) -> bool {
        self.directory.len > 0 && overlaps((self.directory.min_timestamp, self.directory.max_timestamp), from, to)
    }

    /// The directory entries of `chunks`, read from the file with one pread and checked.
    fn read_chunks(&self, chunks: std::ops::Range<usize>) -> Result<Vec<SeriesRun>> {
        read_directory_chunks(&self.path, self.file.as_ref(), &self.directory, chunks)
    }

    /// Extents of `series` in this segment that may hold points in `[from, to)`: one chunk of
    /// the directory (two when the id's two kinds straddle a checkpoint), from `cache` or read.
    pub fn find(&self, series: SeriesId, from: Timestamp, to: Timestamp, cache: &Mutex<DirectoryCache>) -> Result<Vec<SeriesExtent>> {
        let mut found = Vec::new();
        if !self.overlaps(from, to) {
            return Ok(found);
        }
        for chunk in self.directory.chunks_of(series) {
            let key = u32::try_from(chunk).expect("BUG: over 4 G directory chunks");
            let cached = cache.lock().get(self.segment, key);
            let runs = match cached {
                Some(runs) => runs,
                None => {
                    let runs: Arc<[SeriesRun]> = self.read_chunks(chunk..chunk + 1)?.into();
                    cache.lock().insert(self.segment, key, runs.clone());
                    runs
                }
            };
            let start = runs.partition_point(|run| run.series < series);
            let extents = runs[start..].iter().take_while(|run| run.series == series).map(|run| SeriesExtent::of(self.segment, run));
            found.extend(extents.filter(|extent| extent.overlaps(from, to)));
        }
        Ok(found)
    }

    /// [`SegmentExtents::for_each_slice`] for the entries of series `low..=high` only: the
    /// chunks that hold them are read, no others.
    pub fn for_each_slice_in(
        &self,
        low: SeriesId,
        high: SeriesId,
        at_once: usize,
        mut visit: impl FnMut(&[SeriesRun]) -> Result<()>,
    ) -> Result<()> {
        let chunks = self.directory.chunks_of_range(low, high);
        let step = at_once.div_ceil(crate::segment::ENTRIES_PER_CHECKPOINT).max(1);
        for start in chunks.clone().step_by(step) {
            let runs = self.read_chunks(start..(start + step).min(chunks.end))?;
            let first = runs.partition_point(|run| run.series < low);
            let end = runs.partition_point(|run| run.series <= high);
            if first < end {
                visit(&runs[first..end])?;
            }
        }
        Ok(())
    }

    /// Calls `visit` with the directory's entries in order, at most about `at_once` at a time
    /// (whole chunks), each slice read from the file with one pread.
    pub fn for_each_slice(&self, at_once: usize, visit: impl FnMut(&[SeriesRun]) -> Result<()>) -> Result<()> {
        self.for_each_slice_in(SeriesId(0), SeriesId(u32::MAX), at_once, visit)
    }
}

impl ExtentIndex {
    /// Adds a segment (replacing what the index held of it).
    pub fn insert(&mut self, extents: SegmentExtents) {
        let blocks = extents.directory.blocks as usize;
        self.blocks += blocks;
        if let Some(old) = self.segments.insert(extents.segment, Arc::new(extents)) {
            self.blocks -= old.directory.blocks as usize;
        }
        self.by_time = std::sync::OnceLock::new();
    }

    /// Forgets `segment`.
    pub fn remove(&mut self, segment: u64) {
        if let Some(old) = self.segments.remove(&segment) {
            self.blocks -= old.directory.blocks as usize;
        }
        self.by_time = std::sync::OnceLock::new();
    }

    /// The segments that may hold points of `series` in `[from, to)` (by their time and id
    /// ranges), by segment id: [`SegmentExtents::find`] then looks in each.
    pub fn holding(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> impl Iterator<Item = &Arc<SegmentExtents>> + '_ {
        let by_time = self.by_time.get_or_init(|| {
            let with_entries = self.segments.values().filter(|extents| extents.directory.len > 0);
            TimeOrder::new(with_entries.map(|extents| (extents.directory.min_timestamp, extents.directory.max_timestamp, extents.clone())))
        });
        let mut found: Vec<&Arc<SegmentExtents>> = by_time
            .overlapping(from, to)
            .filter(|extents| {
                let (low, high) = extents.directory.series_ids;
                (low..=high).contains(&series.0)
            })
            .collect();
        found.sort_unstable_by_key(|extents| extents.segment);
        found.into_iter()
    }

    /// Extents of `series` that may hold points in `[from, to)`, by segment id.
    #[cfg(test)]
    pub fn extents_in(&self, series: SeriesId, from: Timestamp, to: Timestamp, cache: &Mutex<DirectoryCache>) -> Result<Vec<SeriesExtent>> {
        let mut found = Vec::new();
        for extents in self.holding(series, from, to) {
            found.extend(extents.find(series, from, to, cache)?);
        }
        Ok(found)
    }

    /// The segment's directory index and file; `None` if the segment is not indexed here.
    pub fn segment(&self, segment: u64) -> Option<Arc<SegmentExtents>> {
        self.segments.get(&segment).cloned()
    }

    /// Every segment indexed here, by id.
    pub fn segments(&self) -> impl Iterator<Item = &Arc<SegmentExtents>> + '_ {
        self.segments.values()
    }

    pub fn block_count(&self) -> usize {
        self.blocks
    }
}

/// Decoded parts of segment footers kept after a read, by (segment, key), at most `limit`
/// bytes (least recently used go first). Segment ids are never reused, so an entry cannot go
/// stale; a removed segment's entries are dropped all the same, to give the room back.
pub struct RecentCache<K, T> {
    limit: usize,
    used: usize,
    clock: u64,
    /// (segment, key) → the decoded items and the clock of their last use. Hashed with
    /// foldhash, not SipHash: a query reading the newest point of each of a thousand series
    /// looks up two entries a series, and keys are ids, not attacker-chosen text.
    entries: HashMap<(u64, K), Cached<T>, foldhash::fast::RandomState>,
}

/// Decoded items and the clock of their last use.
type Cached<T> = (Arc<[T]>, u64);

/// Decoded runs of recent reads, by (segment, series).
pub type RunCache = RecentCache<SeriesId, IndexEntry>;

/// Decoded chunks of series directories of recent reads, by (segment, chunk).
pub type DirectoryCache = RecentCache<u32, SeriesRun>;

/// Bytes one cached entry takes: its items and the map slot.
fn cost<T>(items: &[T]) -> usize {
    std::mem::size_of_val(items) + 64
}

impl<K: Copy + Eq + Hash + Ord, T> RecentCache<K, T> {
    pub fn new(limit: usize) -> Self {
        RecentCache { limit, used: 0, clock: 0, entries: HashMap::default() }
    }

    pub fn get(&mut self, segment: u64, key: K) -> Option<Arc<[T]>> {
        self.clock += 1;
        let now = self.clock;
        let (value, used) = self.entries.get_mut(&(segment, key))?;
        *used = now;
        Some(value.clone())
    }

    /// Keeps `value`, evicting the least recently used entries beyond the limit; a value
    /// larger than an eighth of the limit is not kept.
    pub fn insert(&mut self, segment: u64, key: K, value: Arc<[T]>) {
        let size = cost(&value);
        if size > self.limit / 8 {
            return;
        }
        self.clock += 1;
        if let Some((old, _)) = self.entries.insert((segment, key), (value, self.clock)) {
            self.used -= cost(&old);
        }
        self.used += size;
        if self.used > self.limit {
            // Down to three quarters at once, so the sort is paid once per many inserts.
            let mut by_age: Vec<(u64, (u64, K))> = self.entries.iter().map(|(key, (_, used))| (*used, *key)).collect();
            by_age.sort_unstable();
            for (_, key) in by_age {
                if self.used <= self.limit / 4 * 3 {
                    break;
                }
                if let Some((old, _)) = self.entries.remove(&key) {
                    self.used -= cost(&old);
                }
            }
        }
    }

    /// Drops every entry of `segment`.
    pub fn remove_segment(&mut self, segment: u64) {
        let mut freed = 0;
        self.entries.retain(|(id, _), (value, _)| {
            let keep = *id != segment;
            if !keep {
                freed += cost(value);
            }
            keep
        });
        self.used -= freed;
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.used
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::fs::{FileSystem, RealFs};
    use crate::segment::{encode_footer_listed, EntryLayout, ENTRIES_PER_CHECKPOINT};
    use std::path::Path;

    const FOOTER_OFFSET: u64 = 4096;

    /// `blocks` blocks of `series`, each spanning `[min, max]`, at file offsets from `offset`.
    fn blocks(series: u32, kind: ValueKind, min: i64, max: i64, blocks: u32, offset: &mut u64) -> Vec<IndexEntry> {
        (0..blocks)
            .map(|b| {
                *offset += 100;
                IndexEntry {
                    series: SeriesId(series),
                    kind,
                    count: 2,
                    length: 100,
                    offset: *offset,
                    min_timestamp: min,
                    max_timestamp: max,
                    sequence: u64::from(b) + 1,
                }
            })
            .collect()
    }

    /// A file holding the directory of `entries` at [`FOOTER_OFFSET`], indexed as segment
    /// `segment`, with the directory it holds.
    fn sealed(dir: &Path, segment: u64, entries: &[IndexEntry]) -> (SegmentExtents, Vec<SeriesRun>) {
        let (directory_bytes, _, directory) = encode_footer_listed(entries, &[], FOOTER_OFFSET, EntryLayout::Compact);
        let path = dir.join(format!("{segment}.seg"));
        let mut file_bytes = vec![0u8; FOOTER_OFFSET as usize];
        file_bytes.extend_from_slice(&directory_bytes);
        std::fs::write(&path, &file_bytes).expect("write");
        let file = RealFs.open_rw(&path).expect("open");
        let (index, _) = DirectoryIndex::of(&directory_bytes, FOOTER_OFFSET, EntryLayout::Compact).expect("index");
        (SegmentExtents::new(segment, path, file, index), directory)
    }

    /// One block a series, each of `series` over `[min, max]`.
    fn one_block_each(series: impl IntoIterator<Item = u32>, min: i64, max: i64) -> Vec<IndexEntry> {
        let mut offset = 4096;
        series.into_iter().flat_map(|s| blocks(s, ValueKind::F64, min, max, 1, &mut offset)).collect()
    }

    fn entries(n: usize) -> Arc<[IndexEntry]> {
        let entry = IndexEntry {
            series: SeriesId(1),
            kind: ValueKind::F64,
            count: 1,
            length: 1,
            offset: 4096,
            min_timestamp: 0,
            max_timestamp: 0,
            sequence: 1,
        };
        vec![entry; n].into()
    }

    fn cache() -> Mutex<DirectoryCache> {
        Mutex::new(DirectoryCache::new(1 << 20))
    }

    proptest::proptest! {
        #[test]
        fn time_order_finds_exactly_the_overlapping_spans(
            spans in proptest::collection::vec((-50i64..50, 0i64..40), 0..40),
            from in -60i64..60,
            length in 0i64..50,
        ) {
            let to = from + length;
            let order = TimeOrder::new(spans.iter().enumerate().map(|(i, &(start, width))| (start, start + width, i)));
            let mut found: Vec<usize> = order.overlapping(from, to).copied().collect();
            found.sort_unstable();
            let wanted: Vec<usize> =
                spans.iter().enumerate().filter(|(_, &(start, width))| overlaps((start, start + width), from, to)).map(|(i, _)| i).collect();
            proptest::prop_assert_eq!(found, wanted);
        }
    }

    #[test]
    fn extents_overlapping_a_range_are_found_and_removed_segments_forgotten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut index, cache) = (ExtentIndex::default(), cache());
        let mut offset = 4096;
        let mut three = blocks(1, ValueKind::F64, 100, 199, 5, &mut offset);
        three.extend(blocks(2, ValueKind::F64, 100, 150, 1, &mut offset));
        index.insert(sealed(dir.path(), 3, &three).0);
        index.insert(sealed(dir.path(), 1, &blocks(1, ValueKind::F64, 0, 99, 4, &mut offset)).0);
        index.insert(sealed(dir.path(), 2, &blocks(1, ValueKind::F64, 50, 120, 2, &mut offset)).0);
        let segments = |index: &ExtentIndex, from, to| {
            index.extents_in(SeriesId(1), from, to, &cache).expect("lookup").iter().map(|e| e.segment).collect::<Vec<_>>()
        };
        assert_eq!(segments(&index, 0, 50), vec![1]);
        assert_eq!(segments(&index, 0, 51), vec![1, 2]);
        assert_eq!(segments(&index, 120, 121), vec![2, 3]);
        assert_eq!(segments(&index, 200, 300), Vec::<u64>::new());
        assert_eq!(index.block_count(), 12);
        let in_two = index.extents_in(SeriesId(2), 0, 1000, &cache).expect("lookup");
        assert_eq!(in_two.iter().map(|e| (e.segment, e.blocks)).collect::<Vec<_>>(), [(3, 1)]);
        index.remove(3);
        assert_eq!(segments(&index, 0, 1000), vec![1, 2]);
        assert_eq!(index.block_count(), 6);
        assert!(index.extents_in(SeriesId(2), 0, 1000, &cache).expect("lookup").is_empty(), "series 2 had blocks in segment 3 only");
        assert_eq!(index.holding(SeriesId(2), 0, 1000).count(), 0, "no segment's id range holds series 2");
    }

    /// An id may hold two kinds in one segment (its entries sit side by side in the
    /// directory): both extents are found, also when they straddle a checkpoint.
    #[test]
    fn an_id_with_two_kinds_in_a_segment_is_found_twice_across_a_checkpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache();
        let mut offset = 4096;
        let last_of_first_chunk = ENTRIES_PER_CHECKPOINT as u32;
        let mut entries: Vec<IndexEntry> =
            (1..=last_of_first_chunk).flat_map(|s| blocks(s, ValueKind::F64, 0, 9, 1, &mut offset)).collect();
        entries.extend(blocks(last_of_first_chunk, ValueKind::I64, 50, 60, 2, &mut offset));
        entries.extend((100..140).flat_map(|s| blocks(s, ValueKind::F64, 0, 9, 1, &mut offset)));
        let (extents, directory) = sealed(dir.path(), 1, &entries);
        assert_eq!(directory[ENTRIES_PER_CHECKPOINT - 1].series, directory[ENTRIES_PER_CHECKPOINT].series, "the two kinds straddle");
        assert_eq!(extents.directory().chunks(), 3);
        let kinds: Vec<ValueKind> =
            extents.find(SeriesId(last_of_first_chunk), 0, 100, &cache).expect("lookup").iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [ValueKind::F64, ValueKind::I64]);
        assert_eq!(
            extents.find(SeriesId(last_of_first_chunk), 50, 51, &cache).expect("lookup").len(),
            1,
            "each extent is checked against the range"
        );
        for series in [1, 2, 31, 100, 101, 139] {
            assert_eq!(extents.find(SeriesId(series), 0, 10, &cache).expect("lookup").len(), 1, "series {series}");
        }
        for series in [0, 33, 99, 140, u32::MAX] {
            assert!(extents.find(SeriesId(series), 0, 10, &cache).expect("lookup").is_empty(), "series {series}");
        }
    }

    /// A directory chunk damaged after the segment was opened fails the lookups that need it,
    /// naming the file and the chunk's offset; lookups in other chunks still work.
    #[test]
    fn a_damaged_directory_chunk_is_reported_with_file_and_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache();
        let (extents, _) = sealed(dir.path(), 1, &one_block_each(1..=100, 0, 9));
        let (second_chunk, _) = extents.directory().span(1..2);
        let mut bytes = std::fs::read(&extents.path).expect("read");
        bytes[second_chunk as usize + 3] ^= 0x40;
        std::fs::write(&extents.path, &bytes).expect("write");
        match extents.find(SeriesId(40), 0, 10, &cache) {
            Err(Error::Corruption { path, offset, .. }) => assert_eq!((path, offset), (extents.path.clone(), second_chunk)),
            other => panic!("expected corruption at {second_chunk}, got {other:?}"),
        }
        assert_eq!(extents.find(SeriesId(5), 0, 10, &cache).expect("first chunk intact").len(), 1);
        assert_eq!(extents.find(SeriesId(90), 0, 10, &cache).expect("third chunk intact").len(), 1);
        assert!(extents.for_each_slice(1000, |_| Ok(())).is_err(), "a walk of the whole directory fails too");
    }

    proptest::proptest! {
        /// Against a plain list of (segment, run): every lookup agrees after any sequence of
        /// inserts (a segment inserted again replaces its extents) and removals, whatever the
        /// cache holds, and a walk of a segment gives its whole directory in order.
        #[test]
        fn lookups_agree_with_a_list_of_every_run(
            steps in proptest::collection::vec(
                (0u64..6, proptest::option::of(proptest::collection::btree_map(1u32..300, (0i64..100, 0i64..50, 1u32..4), 0..120))),
                1..12,
            ),
            queries in proptest::collection::vec((1u32..302, 0i64..160, 1i64..80), 1..30),
            cache_bytes in proptest::sample::select(vec![0usize, 4096, 1 << 20]),
            slice in 1usize..100,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let cache = Mutex::new(DirectoryCache::new(cache_bytes));
            let mut index = ExtentIndex::default();
            let mut model: BTreeMap<u64, Vec<SeriesRun>> = BTreeMap::new();
            for (step, (segment, directory)) in steps.into_iter().enumerate() {
                match directory {
                    Some(runs) => {
                        let mut offset = 4096;
                        let entries: Vec<IndexEntry> = runs
                            .iter()
                            .flat_map(|(&s, &(min, span, count))| blocks(s, ValueKind::F64, min, min + span, count, &mut offset))
                            .collect();
                        // A segment id is never reused with other contents: a fresh file.
                        let (extents, directory) = sealed(dir.path(), segment * 100 + step as u64, &entries);
                        let extents = SegmentExtents { segment, ..extents };
                        index.insert(extents);
                        cache.lock().remove_segment(segment);
                        model.insert(segment, directory);
                    }
                    None => {
                        index.remove(segment);
                        model.remove(&segment);
                    }
                }
                let blocks: usize = model.values().flatten().map(|r| r.blocks as usize).sum();
                proptest::prop_assert_eq!(index.block_count(), blocks);
            }
            for (series, from, length) in queries {
                let (series, to) = (SeriesId(series), from + length);
                let expected: Vec<SeriesExtent> = model
                    .iter()
                    .flat_map(|(&segment, runs)| runs.iter().filter(|r| r.series == series).map(move |r| SeriesExtent::of(segment, r)))
                    .filter(|e| e.overlaps(from, to))
                    .collect();
                proptest::prop_assert_eq!(index.extents_in(series, from, to, &cache).expect("lookup"), expected);
            }
            for (&segment, runs) in &model {
                let mut walked = Vec::new();
                index.segment(segment).expect("indexed").for_each_slice(slice, |part| {
                    assert!(part.len() < slice + ENTRIES_PER_CHECKPOINT, "a slice of {} entries for {slice}", part.len());
                    walked.extend_from_slice(part);
                    Ok(())
                }).expect("walk");
                proptest::prop_assert_eq!(&walked, runs);
            }
            proptest::prop_assert!(cache.lock().bytes() <= cache_bytes);
        }
    }

    #[test]
    fn the_run_cache_stays_within_its_limit_and_keeps_the_recently_used() {
        let one = cost(&entries(10));
        let mut cache = RunCache::new(one * 16);
        cache.insert(1, SeriesId(1), entries(10));
        for series in 2..=100 {
            assert!(cache.get(1, SeriesId(1)).is_some(), "the run read every time stays");
            cache.insert(1, SeriesId(series), entries(10));
            assert!(cache.bytes() <= one * 16, "{} bytes held after {series} runs", cache.bytes());
        }
        assert!(cache.len() >= 8, "eviction keeps most of the limit: {} runs", cache.len());
        assert!(cache.get(1, SeriesId(2)).is_none(), "the oldest runs went");
        // Over an eighth of the limit, under the whole of it.
        assert!(cost(&entries(30)) > one * 2 && cost(&entries(30)) < one * 16);
        cache.insert(1, SeriesId(1000), entries(30));
        assert!(cache.get(1, SeriesId(1000)).is_none(), "a run over an eighth of the limit is not kept");
        cache.insert(2, SeriesId(5), entries(10));
        cache.remove_segment(1);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.bytes(), one);
    }
}
