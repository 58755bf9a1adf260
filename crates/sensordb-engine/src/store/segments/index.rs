//! The segment store's index and the reads it makes of footer runs.
//!
//! Blocks of the segment taking groups, and of files of segment format version 1, are held one
//! by one ([`BlockIndex`], about 56 bytes a block). A sealed segment of version 2 is held as the
//! index of its series directory (a checkpoint every 32 series, see [`ExtentIndex`]): a read
//! finds a series' [`SeriesExtent`] in one chunk of the directory, kept in the store's
//! [`DirectoryCache`](crate::index::runs::DirectoryCache) (at most
//! [`SegmentStoreOptions::directory_cache_bytes`]), and its blocks in the series' run in the
//! footer, kept in the store's [`RunCache`](crate::index::runs::RunCache) (at most
//! [`SegmentStoreOptions::run_cache_bytes`]). Compaction and reclaim walk a directory a slice
//! at a time. The open segment moves from the one index to the other when it is sealed.

use super::{SegmentHandle, SegmentStore};
use crate::error::{Error, Result};
use crate::index::runs::{ExtentIndex, SegmentExtents, SeriesExtent};
use crate::index::{BlockIndex, BlockRef};
use crate::model::{SeriesId, Timestamp};
use crate::segment::{decode_run_at, read_run, DirectoryIndex, IndexEntry, RunSpan};
use crate::store::{BlockLife, BlockPin, BlockSource, ListedBlock, SegmentSummary};
use std::sync::Arc;

/// Both indexes, behind one lock so a segment moves from one to the other in one step.
#[derive(Default)]
pub(super) struct StoreIndex {
    pub(super) resident: BlockIndex,
    pub(super) sealed: ExtentIndex,
}

/// What the store keeps of one segment's blocks.
pub(super) enum SegmentBlocks {
    /// Every block's life: the segment taking groups, or a file of format version 1.
    Resident(Vec<BlockLife>),
    /// Its series directory, whose extents [`StoreIndex::sealed`] holds in directory order
    /// (the order in which their runs lie back to back).
    Runs,
}

impl SegmentBlocks {
    pub(super) fn resident(entries: &[IndexEntry]) -> SegmentBlocks {
        SegmentBlocks::Resident(entries.iter().map(BlockLife::of).collect())
    }

    /// Takes the segment out of `index`.
    pub(super) fn remove_from(&self, index: &mut StoreIndex, segment: u64) {
        match self {
            SegmentBlocks::Resident(lives) => index.resident.remove_blocks(segment, lives.iter().map(|l| l.series)),
            SegmentBlocks::Runs => index.sealed.remove(segment),
        }
    }
}

/// Series whose runs a listing of a whole segment reads with one pread.
pub(super) const RUNS_READ_AT_ONCE: usize = 16_384;

/// A listed block whose run could not be read: reading it reports why (file and offset), so
/// a damaged run fails the read that needs it instead of hiding its blocks.
struct UnreadableRun {
    path: std::path::PathBuf,
    offset: u64,
    detail: String,
}

impl BlockSource for UnreadableRun {
    fn read(&self, _entry: &IndexEntry) -> Result<crate::block::Block> {
        Err(Error::corruption(&self.path, self.offset, self.detail.clone()))
    }
}

impl UnreadableRun {
    /// A listed block standing for the blocks `error` kept from being listed (`entry` gives
    /// their series, kind, count and time span): reading it fails with the error's file and
    /// offset, or with `what` at `entry.offset` when the error names none.
    fn listed(error: Error, what: &str, handle: &SegmentHandle, segment: u64, mut entry: IndexEntry) -> ListedBlock {
        tracing::error!(error = %error, "{what}; the read fails");
        let (offset, detail) = match error {
            Error::Corruption { offset, detail, .. } => (offset, detail),
            other => (entry.offset, format!("{what}: {other}")),
        };
        entry.offset = offset;
        let source = UnreadableRun { path: handle.path.clone(), offset, detail };
        ListedBlock { block: BlockRef { segment, entry }, pin: BlockPin::new(Arc::new(source)) }
    }
}

/// Lives of the blocks `bytes` stand for, at most `u32::MAX` bytes each.
fn merged_lives(series: SeriesId, max_timestamp: Timestamp, mut bytes: u64, out: &mut Vec<BlockLife>) {
    loop {
        let part = bytes.min(u64::from(u32::MAX));
        out.push(BlockLife { series, max_timestamp, bytes: part as u32 });
        bytes -= part;
        if bytes == 0 {
            return;
        }
    }
}

impl SegmentStore {
    /// The entries of the run of `series` in the segment of `handle`, from the cache or read now.
    fn run_entries(&self, series: SeriesId, extent: &SeriesExtent, handle: &SegmentHandle) -> Result<Arc<[IndexEntry]>> {
        if extent.run_length == 0 {
            // A one-block entry of a compact directory is its block's index entry: nothing is
            // read, so nothing is cached (it would only push out runs that were read).
            return Ok(read_run(&handle.path, handle.file.as_ref(), &extent.shape(series))?.into());
        }
        if let Some(entries) = self.runs.lock().get(extent.segment, series) {
            return Ok(entries);
        }
        let entries: Arc<[IndexEntry]> = read_run(&handle.path, handle.file.as_ref(), &extent.shape(series))?.into();
        self.runs.lock().insert(extent.segment, series, entries.clone());
        Ok(entries)
    }

    /// The oldest point's time of the blocks of `series`, from the index alone: the blocks held
    /// one by one, and the extents of the sealed runs (no run is read). A directory chunk that
    /// cannot be read gives its segment's oldest time, still a time no later than the series'.
    pub(super) fn oldest_timestamp(&self, series: SeriesId) -> Option<Timestamp> {
        let (resident, sealed) = {
            let index = self.index.read();
            let sealed: Vec<Arc<SegmentExtents>> = index.sealed.holding(series, Timestamp::MIN, Timestamp::MAX).cloned().collect();
            (index.resident.oldest_timestamp(series), sealed)
        };
        let of_sealed = sealed.iter().filter_map(|segment| match segment.find(series, Timestamp::MIN, Timestamp::MAX, &self.directories) {
            Ok(found) => found.iter().map(|extent| extent.min_timestamp).min(),
            Err(_) => Some(segment.directory().min_timestamp),
        });
        resident.into_iter().chain(of_sealed).min()
    }

    /// Blocks of `series` that may hold points in `[from, to)`, by (min timestamp, sequence):
    /// those held one by one, and those of the runs of the extents overlapping the range.
    pub(super) fn list_blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock> {
        // Both locks, in the order writers take them, so no segment can vanish between
        // listing a block and pinning its file. Runs are read after, under the pins.
        let (mut listed, segments) = {
            let index = self.index.read();
            let files = self.files.read();
            let pin = |segment: u64| files.get(&segment).map(|f| f.handle.clone());
            let listed: Vec<ListedBlock> = index
                .resident
                .blocks_in(series, from, to)
                .into_iter()
                .filter_map(|block| Some(ListedBlock { block, pin: BlockPin::new(pin(block.segment)?) }))
                .collect();
            let segments: Vec<(Arc<SegmentExtents>, Arc<SegmentHandle>)> =
                index.sealed.holding(series, from, to).filter_map(|extents| Some((extents.clone(), pin(extents.segment())?))).collect();
            (listed, segments)
        };
        if segments.is_empty() {
            return listed;
        }
        let mut extents = Vec::with_capacity(segments.len());
        for (segment, handle) in segments {
            match segment.find(series, from, to, &self.directories) {
                Ok(found) => extents.extend(found.into_iter().map(|extent| (extent, handle.clone()))),
                // The directory chunk that would name the series' run is damaged: the read
                // fails with its file and offset instead of leaving the segment out.
                Err(e) => {
                    let directory = segment.directory();
                    let entry = IndexEntry {
                        series,
                        // Never decoded: reading the block fails first.
                        kind: crate::model::ValueKind::F64,
                        count: 1,
                        length: 0,
                        offset: 0,
                        min_timestamp: directory.min_timestamp.max(from),
                        max_timestamp: directory.max_timestamp.min(to.saturating_sub(1)),
                        sequence: 0,
                    };
                    listed.push(UnreadableRun::listed(e, "series directory unreadable", &handle, segment.segment(), entry));
                }
            }
        }
        let mut runs = Vec::with_capacity(extents.len());
        for (extent, handle) in extents {
            match self.run_entries(series, &extent, &handle) {
                Ok(entries) => runs.push((extent.segment, entries, handle)),
                Err(e) => {
                    let entry = IndexEntry {
                        series,
                        kind: extent.kind,
                        count: extent.blocks,
                        length: 0,
                        offset: extent.run_offset,
                        min_timestamp: extent.min_timestamp,
                        max_timestamp: extent.max_timestamp,
                        sequence: 0,
                    };
                    listed.push(UnreadableRun::listed(e, "series run unreadable", &handle, extent.segment, entry));
                }
            }
        }
        // Sized before it is filled: growing it block by block was a tenth of a cached read of
        // 8 blocks out of runs of 50.
        let wanted = |entry: &&IndexEntry| entry.min_timestamp < to && entry.max_timestamp >= from;
        listed.reserve(runs.iter().map(|(_, entries, _)| entries.iter().filter(wanted).count()).sum());
        for (segment, entries, handle) in runs {
            listed.extend(
                entries
                    .iter()
                    .filter(wanted)
                    .map(|entry| ListedBlock { block: BlockRef { segment, entry: *entry }, pin: BlockPin::new(handle.clone()) }),
            );
        }
        listed.sort_by_key(|b| (b.block.entry.min_timestamp, b.block.entry.sequence));
        listed
    }

    /// The series of segment `id`, their extents and its handle, if its blocks are in runs.
    fn extents_of(&self, id: u64) -> Option<(Arc<SegmentExtents>, Arc<SegmentHandle>)> {
        let index = self.index.read();
        let files = self.files.read();
        let file = files.get(&id)?;
        let super::SegmentBlocks::Runs = &file.blocks else { return None };
        Some((index.sealed.segment(id)?, file.handle.clone()))
    }

    /// The entries of the given runs of one segment, read with one pread (they lie back to
    /// back), each run checked: (series, its entries) in the order given.
    fn read_runs(handle: &SegmentHandle, extents: &[(SeriesId, SeriesExtent)]) -> Result<Vec<(SeriesId, Vec<IndexEntry>)>> {
        let path = &handle.path;
        let span = RunSpan::read(path, handle.file.as_ref(), extents.iter().map(|(_, e)| (e.run_offset, e.run_length)))?;
        extents
            .iter()
            .map(|(series, extent)| {
                let run_bytes = span.run(path, extent.run_offset, extent.run_length)?;
                Ok((*series, decode_run_at(path, &extent.shape(*series), run_bytes)?))
            })
            .collect()
    }

    /// Every block of the segments `ids`, grouped by series (series in id order), each series'
    /// blocks by ascending sequence. Fails when a run cannot be read, rather than leave its
    /// blocks out of a rewrite that then removes the segment.
    pub(super) fn blocks_of(&self, ids: &[u64]) -> Result<Vec<BlockRef>> {
        self.blocks_of_in(ids, SeriesId(0), SeriesId(u32::MAX))
    }

    /// [`SegmentStore::blocks_of`] for series `low..=high` only: of a segment whose blocks
    /// are in runs, only the directory chunks and runs of those series are read.
    pub(super) fn blocks_of_in(&self, ids: &[u64], low: SeriesId, high: SeriesId) -> Result<Vec<BlockRef>> {
        let mut blocks = self.index.read().resident.blocks_of_segments(ids);
        blocks.retain(|b| (low..=high).contains(&b.entry.series));
        for &id in ids {
            let Some((extents, handle)) = self.extents_of(id) else { continue };
            // A slice of the directory at a time: its entries, and its runs read, are bounded
            // whatever the segment's series.
            extents.for_each_slice_in(low, high, RUNS_READ_AT_ONCE, |runs| {
                let slice: Vec<(SeriesId, SeriesExtent)> = runs.iter().map(|run| (run.series, SeriesExtent::of(id, run))).collect();
                for (_, entries) in Self::read_runs(&handle, &slice)? {
                    blocks.extend(entries.into_iter().map(|entry| BlockRef { segment: id, entry }));
                }
                Ok(())
            })?;
        }
        blocks.sort_by_key(|b| (b.entry.series, b.entry.sequence, b.entry.min_timestamp));
        Ok(blocks)
    }

    /// Summaries of every segment, with the handle of those whose blocks are in runs (the
    /// lives of the others copied), taken under the lock and visited after it.
    fn segments_to_visit(&self) -> Vec<(SegmentSummary, Option<Vec<BlockLife>>)> {
        let files = self.files.read();
        files
            .values()
            .map(|file| match &file.blocks {
                super::SegmentBlocks::Resident(lives) => (file.summary, Some(lives.clone())),
                super::SegmentBlocks::Runs => (file.summary, None),
            })
            .collect()
    }

    /// Calls `visit` with each segment's block lives. For a segment whose blocks are in runs,
    /// `cutoff` (a block is dead when its newest point is older than its series' cutoff) lets a
    /// series whose blocks there are all dead or all live come as one merged life from its
    /// extent, and only the runs a cutoff falls inside are read. Without it every run is read.
    pub(super) fn visit_lives(&self, cutoff: Option<&dyn Fn(SeriesId) -> Timestamp>, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        for (summary, lives) in self.segments_to_visit() {
            if let Some(lives) = lives {
                visit(&summary, &lives);
                continue;
            }
            // Removed since the list was taken: nothing to visit.
            let Some((extents, handle)) = self.extents_of(summary.id) else { continue };
            let mut lives = Vec::with_capacity(extents.len());
            let walked = extents.for_each_slice(RUNS_READ_AT_ONCE, |runs| {
                self.add_lives(summary.id, &handle, runs, cutoff, &mut lives);
                Ok(())
            });
            if let Err(e) = walked {
                // Damage never makes data dead: what the directory could not tell counts as
                // live, the segment's whole block bytes (lives already found set aside).
                tracing::error!(error = %e, segment = summary.id, "series directory unreadable; the segment's blocks count as live");
                lives.clear();
                let series = SeriesId(extents.directory().series_ids.0);
                merged_lives(series, Timestamp::MAX, extents.directory().block_bytes, &mut lives);
            }
            visit(&summary, &lives);
        }
    }

    /// Appends the lives of the blocks of `runs` (directory entries of segment `id`): see
    /// [`SegmentStore::visit_lives`].
    fn add_lives(
        &self,
        id: u64,
        handle: &SegmentHandle,
        runs: &[crate::segment::SeriesRun],
        cutoff: Option<&dyn Fn(SeriesId) -> Timestamp>,
        lives: &mut Vec<BlockLife>,
    ) {
        let mut to_read = Vec::new();
        let merged_before = lives.len();
        for run in runs {
            let extent = SeriesExtent::of(id, run);
            match cutoff.map(|cutoff| cutoff(run.series)) {
                Some(cutoff) if extent.max_timestamp < cutoff || extent.min_timestamp >= cutoff => {
                    merged_lives(run.series, extent.max_timestamp, extent.bytes, lives)
                }
                _ => to_read.push((run.series, extent)),
            }
        }
        // Runs wanted from all over the footer are read one by one, the whole slice's once.
        let read = if to_read.len() * 4 < lives.len() - merged_before {
            to_read.iter().map(|(series, extent)| Ok((*series, self.run_entries(*series, extent, handle)?.to_vec()))).collect()
        } else {
            Self::read_runs(handle, &to_read)
        };
        match read {
            Ok(runs) => lives.extend(runs.iter().flat_map(|(_, entries)| entries.iter().map(BlockLife::of))),
            // Run by run, so only the damaged ones are taken for live: damage never makes
            // data dead.
            Err(_) => {
                for (series, extent) in &to_read {
                    match self.run_entries(*series, extent, handle) {
                        Ok(entries) => lives.extend(entries.iter().map(BlockLife::of)),
                        Err(e) => {
                            tracing::error!(error = %e, segment = id, "series run unreadable; its blocks count as live");
                            merged_lives(*series, Timestamp::MAX, extent.bytes, lives);
                        }
                    }
                }
            }
        }
    }

    /// Moves a segment just sealed (or installed) with `directory` from the blocks held one by
    /// one to the extent index, in one index update.
    pub(super) fn adopt_directory(&self, id: u64, directory: DirectoryIndex) {
        let mut index = self.index.write();
        let mut files = self.files.write();
        let Some(file) = files.get_mut(&id) else { return };
        file.blocks.remove_from(&mut index, id);
        file.summary.describe_series(&directory);
        index.sealed.insert(file.extents(directory));
        file.blocks = SegmentBlocks::Runs;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SegmentStore, SegmentStoreOptions};
    use crate::compaction::{compact_once, CompactionOptions, RateLimit};
    use crate::error::Error;
    use crate::fs::{FileSystem, RealFs};
    use crate::index::BlockRef;
    use crate::model::{SeriesId, Timestamp, ValueColumn};
    use crate::segment::{GroupBuilder, SegmentWriter};
    use crate::store::{BlockLife, BlockStore};
    use std::path::Path;
    use std::sync::Arc;

    const SERIES: u32 = 6;
    const GROUPS: u64 = 12;

    /// Group `g`: 20 points of every series, series `s` starting later the larger `s`.
    fn group(g: u64) -> GroupBuilder {
        let mut group = GroupBuilder::new();
        for series in 1..=SERIES {
            let start = g as i64 * 100 + i64::from(series);
            let timestamps: Vec<i64> = (start..start + 20).collect();
            group.add_block(SeriesId(series), &timestamps, &ValueColumn::I64(timestamps.iter().map(|t| t * 3).collect()));
        }
        group
    }

    fn options(run_cache_bytes: usize) -> SegmentStoreOptions {
        SegmentStoreOptions { segment_bytes_max: 1, sync: false, run_cache_bytes, ..SegmentStoreOptions::default() }
    }

    /// A store whose segments (one a group, `groups_per_segment` groups each) are written in
    /// format `version` as a build of that version wrote them, then opened.
    fn store_of_version(dir: &Path, version: u16, groups_per_segment: u64) -> SegmentStore {
        store_of_version_caching(dir, version, groups_per_segment, 1 << 20)
    }

    /// [`store_of_version`] with a run cache of `run_cache_bytes`.
    fn store_of_version_caching(dir: &Path, version: u16, groups_per_segment: u64, run_cache_bytes: usize) -> SegmentStore {
        let segments = dir.join("segments");
        std::fs::create_dir_all(&segments).expect("mkdir");
        for first in (0..GROUPS).step_by(groups_per_segment as usize) {
            let id = first / groups_per_segment + 1;
            let mut writer = SegmentWriter::create_with_version(&RealFs, &segments, id, false, version).expect("create");
            for g in first..first + groups_per_segment {
                writer.append_group(group(g), g + 1, g + 1).expect("append");
            }
            writer.seal().expect("seal");
        }
        SegmentStore::open(Arc::new(RealFs), &segments, options(run_cache_bytes)).expect("open").0
    }

    fn listed(store: &SegmentStore, series: u32, from: Timestamp, to: Timestamp) -> Vec<(BlockRef, Vec<i64>)> {
        store.blocks(SeriesId(series), from, to).iter().map(|b| (b.block, store.read_block(b).expect("read").timestamps)).collect()
    }

    fn lives(store: &SegmentStore, cutoff: Option<Timestamp>) -> Vec<(u64, u64, u64, Timestamp)> {
        // Per segment: all bytes, dead bytes, newest live point: what reclaim computes.
        let mut out = Vec::new();
        let mut visit = |summary: &crate::store::SegmentSummary, lives: &[BlockLife]| {
            let cut = cutoff.unwrap_or(Timestamp::MIN);
            let all = lives.iter().map(|l| u64::from(l.bytes)).sum();
            let dead = lives.iter().filter(|l| l.max_timestamp < cut).map(|l| u64::from(l.bytes)).sum();
            let newest = lives.iter().filter(|l| l.max_timestamp >= cut).map(|l| l.max_timestamp).max().unwrap_or(Timestamp::MIN);
            out.push((summary.id, all, dead, newest));
        };
        match cutoff {
            Some(cutoff) => store.visit_segments_against(&|_| cutoff, &mut visit),
            None => store.visit_segments(&mut visit),
        }
        out
    }

    fn catalog(dir: &Path) -> crate::catalog::Catalog {
        crate::catalog::Catalog::open(&RealFs, &dir.join("series.catalog"), false).expect("catalog").0
    }

    fn compaction_options() -> CompactionOptions {
        CompactionOptions {
            small_block_points: 1000,
            short_block_bytes_max: crate::compaction::SHORT_BLOCK_BYTES_MAX,
            run_bytes_max: 64 << 20,
            short_block_run_bytes_max: 64 << 20,
            run_blocks_max: 1 << 20,
            small_file_bytes: 0,
            block_points_max: 10_000,
            block_bytes_max: 1 << 20,
            points_per_group: 100_000,
            group_series_max: 65_536,
        }
    }

    /// The same blocks, written as version 1 (one flat footer list, every block held in memory)
    /// and as each later version (series runs read on demand; from version 4, a series with one
    /// block in a segment has no run): reads, maintenance listings, reclaim's lives and
    /// compaction see the same, and stores of the previous versions open and work.
    #[test]
    fn segments_of_every_version_read_reclaim_and_compact_alike() {
        for version in 2..=crate::segment::SEGMENT_FORMAT_VERSION {
            // Three groups a segment: runs of three blocks; one: a block a series and segment.
            for groups_per_segment in [3, 1] {
                version_one_and_a_later_version_alike(version, groups_per_segment);
            }
        }
    }

    fn version_one_and_a_later_version_alike(version: u16, groups_per_segment: u64) {
        let (old_dir, new_dir) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let old = store_of_version(old_dir.path(), 1, groups_per_segment);
        let new = store_of_version(new_dir.path(), version, groups_per_segment);
        assert_eq!(old.index.read().sealed.block_count(), 0, "version 1: every block held");
        assert_eq!(new.index.read().resident.block_count(), 0, "version {version}: no block held");
        assert_eq!(new.index.read().sealed.block_count(), (GROUPS * u64::from(SERIES)) as usize);
        for (series, from, to) in [(1, 0, 10_000), (3, 250, 420), (6, 1106, 1107), (2, 5000, 6000), (4, Timestamp::MIN, Timestamp::MAX)] {
            assert_eq!(listed(&new, series, from, to), listed(&old, series, from, to), "series {series} in [{from}, {to})");
        }
        assert!(!listed(&new, 3, 250, 420).is_empty());
        let all: Vec<u64> = old.segment_ids();
        assert_eq!(new.try_blocks_of_segments(&all[1..3]).expect("runs"), old.blocks_of_segments(&all[1..3]));
        assert_eq!(new.blocks_of_segments(&all).len(), (GROUPS * u64::from(SERIES)) as usize);
        let mut kinds = (old.series_kinds(), new.series_kinds());
        kinds.0.sort_by_key(|(s, k)| (s.0, *k as u8));
        kinds.1.sort_by_key(|(s, k)| (s.0, *k as u8));
        assert_eq!(kinds.0, kinds.1);
        let (old_stats, new_stats) = (old.stats(), new.stats());
        assert_eq!((old_stats.blocks, old_stats.points), (new_stats.blocks, new_stats.points));
        for cutoff in [None, Some(0), Some(450), Some(605), Some(1110), Some(Timestamp::MAX)] {
            assert_eq!(lives(&new, cutoff), lives(&old, cutoff), "lives against cutoff {cutoff:?}");
        }
        // Compaction merges the same blocks the same way.
        let (old_catalog, new_catalog) = (catalog(old_dir.path()), catalog(new_dir.path()));
        let room = |_: u64| Ok(());
        let options = compaction_options();
        let old_report = compact_once(&old, &old_catalog, &options, &room, &mut RateLimit::new(0)).expect("compact").expect("a run");
        let new_report = compact_once(&new, &new_catalog, &options, &room, &mut RateLimit::new(0)).expect("compact").expect("a run");
        assert_eq!((old_report.inputs, old_report.blocks_after), (new_report.inputs, new_report.blocks_after));
        for series in 1..=SERIES {
            let points = |store: &SegmentStore| listed(store, series, 0, 10_000).into_iter().flat_map(|(_, t)| t).collect::<Vec<_>>();
            assert_eq!(points(&new), points(&old), "series {series} after compaction");
            assert_eq!(points(&new).len(), GROUPS as usize * 20);
        }
        // The output is written in the current version, its blocks in runs.
        assert_eq!(new.index.read().resident.block_count(), 0);
        assert!(old.index.read().sealed.block_count() > 0, "the old store's output is version 2 too");
    }

    #[test]
    fn a_store_reopened_finds_the_same_blocks_through_its_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = dir.path().join("segments");
        let before = {
            let (store, _) = SegmentStore::open(Arc::new(RealFs), &segments, options(1 << 20)).expect("open");
            for g in 0..GROUPS {
                store.put_group(group(g), g + 1).expect("put");
            }
            assert_eq!(store.index.read().resident.block_count(), 0, "each segment left the resident index when sealed");
            (1..=SERIES).map(|s| listed(&store, s, 0, 10_000)).collect::<Vec<_>>()
        };
        let (store, recovery) = SegmentStore::open(Arc::new(RealFs), &segments, options(1 << 20)).expect("reopen");
        assert_eq!(recovery.max_sequence, GROUPS);
        assert_eq!(recovery.wal_checkpoint, GROUPS);
        assert_eq!((1..=SERIES).map(|s| listed(&store, s, 0, 10_000)).collect::<Vec<_>>(), before);
        assert_eq!(store.stats().points, GROUPS * u64::from(SERIES) * 20);
    }

    #[test]
    fn the_run_cache_stays_within_its_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let limit = 4096;
        // Two groups a segment: a run of two blocks a series and segment.
        let store = store_of_version_caching(dir.path(), crate::segment::SEGMENT_FORMAT_VERSION, 2, limit);
        for series in 1..=SERIES {
            assert_eq!(listed(&store, series, 0, 10_000).len(), GROUPS as usize);
            assert!(store.runs.lock().bytes() <= limit, "{} bytes cached", store.runs.lock().bytes());
        }
        assert!(store.runs.lock().len() > 4, "runs are kept up to the limit");
        // A store whose segments hold one block a series has no runs: nothing to cache.
        let single = tempfile::tempdir().expect("tempdir");
        let one_each = store_of_version(single.path(), crate::segment::SEGMENT_FORMAT_VERSION, 1);
        for series in 1..=SERIES {
            assert_eq!(listed(&one_each, series, 0, 10_000).len(), GROUPS as usize);
        }
        assert_eq!(one_each.runs.lock().len(), 0, "one-block entries are not cached as runs");
        let ids = store.segment_ids();
        store.remove_segments(&ids[..1]).expect("remove");
        assert!(store.runs.lock().bytes() <= limit);
        assert_eq!(listed(&store, 1, 0, 100).len(), 0, "the removed segment's blocks are gone");
    }

    /// A segment of more series than one read of runs takes is listed whole, each block once.
    #[test]
    fn a_segment_of_many_series_is_listed_whole_a_slice_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = dir.path().join("segments");
        std::fs::create_dir_all(&segments).expect("mkdir");
        let series = 2 * super::RUNS_READ_AT_ONCE as u32 + 5;
        let mut writer = SegmentWriter::create(&RealFs, &segments, 1, false).expect("create");
        for g in 0..2u64 {
            let mut group = GroupBuilder::new();
            for s in 1..=series {
                let t = g as i64 * 10 + i64::from(s % 7);
                group.add_block(SeriesId(s), &[t], &ValueColumn::I64(vec![t]));
            }
            writer.append_group(group, g + 1, g + 1).expect("append");
        }
        writer.seal().expect("seal");
        let store = SegmentStore::open(Arc::new(RealFs), &segments, options(1 << 20)).expect("open").0;
        let blocks = store.try_blocks_of_segments(&[1]).expect("listed");
        assert_eq!(blocks.len(), 2 * series as usize);
        let mut seen: Vec<(u32, u64)> = blocks.iter().map(|b| (b.entry.series.0, b.entry.sequence)).collect();
        seen.dedup();
        assert_eq!(seen.len(), 2 * series as usize, "each block once, in series order");
        assert!(seen.iter().all(|&(s, _)| (1..=series).contains(&s)));
    }

    #[test]
    fn a_damaged_run_fails_the_reads_and_rewrites_that_need_it_and_kills_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store_of_version(dir.path(), 2, 3);
        let id = store.segment_ids()[1];
        let extents = store.index.read().sealed.segment(id).expect("sealed");
        let extent = extents.find(SeriesId(2), Timestamp::MIN, Timestamp::MAX, &store.directories).expect("lookup")[0];
        let cutoff = 400;
        let dead_of_series: u64 = store
            .blocks(SeriesId(2), Timestamp::MIN, Timestamp::MAX)
            .iter()
            .filter(|b| b.block.segment == id && b.block.entry.max_timestamp < cutoff)
            .map(|b| u64::from(b.block.entry.length))
            .sum();
        assert!(dead_of_series > 0 && dead_of_series < extent.bytes, "the cutoff falls inside the damaged run");
        let dead_in = |store: &SegmentStore| lives(store, Some(cutoff)).iter().filter(|l| l.0 == id).map(|l| l.2).sum::<u64>();
        let dead_before = dead_in(&store);
        store.runs.lock().remove_segment(id);
        let path = store.handle_of(id).expect("handle").path.clone();
        let file = RealFs.open_rw(&path).expect("open");
        file.write_all_at(&[0xEE], extent.run_offset + 1).expect("damage");
        // Reads of other segments and series go on; the one needing the run fails with its
        // file and offset.
        assert_eq!(listed(&store, 3, 0, 10_000).len(), GROUPS as usize);
        let blocks = store.blocks(SeriesId(2), 0, 10_000);
        let failed: Vec<_> = blocks.iter().filter_map(|b| store.read_block(b).err()).collect();
        assert_eq!(failed.len(), 1);
        match &failed[0] {
            Error::Corruption { path: reported, offset, .. } => assert_eq!((reported, *offset), (&path, extent.run_offset)),
            other => panic!("expected corruption, got {other:?}"),
        }
        assert!(store.try_blocks_of_segments(&[id]).is_err(), "a rewrite never drops blocks it could not list");
        // Reclaim takes its blocks for live; the other series' runs still count.
        assert_eq!(dead_in(&store), dead_before - dead_of_series);
        // A cutoff past the whole run needs no run: the directory says all of it is dead.
        let all_dead: u64 = lives(&store, Some(Timestamp::MAX)).iter().filter(|l| l.0 == id).map(|l| l.2).sum();
        assert_eq!(Some(all_dead), lives(&store, None).iter().find(|l| l.0 == id).map(|l| l.1));
    }

    /// A series directory damaged after start-up (its chunks are read when needed): the read
    /// needing it fails with the file and the chunk's offset, a rewrite of the segment fails,
    /// and reclaim takes the whole segment for live.
    #[test]
    fn a_damaged_directory_chunk_fails_the_reads_that_need_it_and_kills_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store_of_version(dir.path(), 2, 3);
        let id = store.segment_ids()[1];
        let (chunk, _) = store.index.read().sealed.segment(id).expect("sealed").directory().span(0..1);
        store.directories.lock().remove_segment(id);
        let path = store.handle_of(id).expect("handle").path.clone();
        RealFs.open_rw(&path).expect("open").write_all_at(&[0xEE, 0xEE], chunk + 1).expect("damage");
        let failed: Vec<Error> = store.blocks(SeriesId(2), 0, 10_000).iter().filter_map(|b| store.read_block(b).err()).collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        match &failed[0] {
            Error::Corruption { path: reported, offset, .. } => assert_eq!((reported, *offset), (&path, chunk)),
            other => panic!("expected corruption, got {other:?}"),
        }
        // Every series of the chunk fails the same way in that segment, and reads on in others.
        for series in 1..=SERIES {
            let blocks = store.blocks(SeriesId(series), 0, 10_000);
            let read = blocks.iter().filter(|b| store.read_block(b).is_ok()).count();
            assert_eq!((read, blocks.len()), (GROUPS as usize - 3, GROUPS as usize - 2), "series {series}");
        }
        assert!(store.try_blocks_of_segments(&[id]).is_err(), "a rewrite never drops blocks it could not list");
        let of_segment = lives(&store, Some(Timestamp::MAX)).into_iter().find(|l| l.0 == id).expect("visited");
        assert_eq!(of_segment.2, 0, "nothing of the segment is dead");
        assert!(of_segment.1 > 0, "its bytes count as live");
    }

    /// A compaction told to stop (the engine is closing) gives up before listing its run and
    /// between series, leaving every input segment in place, its points readable, and no
    /// unfinished output; once the flag is down it compacts the same run.
    #[test]
    fn a_compaction_told_to_stop_leaves_its_inputs_and_no_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store_of_version(dir.path(), crate::segment::SEGMENT_FORMAT_VERSION, 1);
        let catalog = catalog(dir.path());
        let (room, options) = (|_: u64| Ok(()), compaction_options());
        let points = |store: &SegmentStore| {
            (1..=SERIES).map(|s| listed(store, s, 0, 10_000).into_iter().flat_map(|(_, t)| t).collect::<Vec<_>>()).collect::<Vec<_>>()
        };
        let (segments_before, points_before) = (store.segment_ids(), points(&store));
        let temporaries = || {
            std::fs::read_dir(dir.path().join("segments"))
                .expect("list")
                .filter(|e| crate::filenames::is_temporary_segment(&e.as_ref().expect("entry").path()))
                .count()
        };
        let stop = std::sync::atomic::AtomicBool::new(true);
        let outcome = compact_once(&store, &catalog, &options, &room, &mut RateLimit::new(0).stopping_when(&stop));
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
        // Stopped inside the rewrite, after its output file was begun.
        let run = store.segment_ids();
        let blocks = store.try_blocks_of_segments(&run).expect("blocks");
        let limit = &mut RateLimit::new(0).stopping_when(&stop);
        let outcome = crate::compaction::rewrite(&store, &catalog, &run, blocks, &options, limit, crate::compaction::BlockCopy::Reencode);
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
        assert_eq!(store.segment_ids(), segments_before, "no input removed");
        assert_eq!(temporaries(), 0, "the unfinished output is discarded");
        assert_eq!(points(&store), points_before);
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let report =
            compact_once(&store, &catalog, &options, &room, &mut RateLimit::new(0).stopping_when(&stop)).expect("compact").expect("a run");
        assert_eq!(report.inputs, segments_before);
        assert_ne!(store.segment_ids(), segments_before);
        assert_eq!(points(&store), points_before);
    }

    /// Start-up asks only for the series beyond the catalog's end: the same answer as listing
    /// every series and filtering, for series in runs of sealed segments and in the open one.
    #[test]
    fn series_kinds_above_an_id_are_every_series_listing_filtered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options =
            SegmentStoreOptions { segment_bytes_max: 64 << 20, sync: false, run_cache_bytes: 1 << 20, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(Arc::new(RealFs), &dir.path().join("segments"), options).expect("open");
        store.put_group(group(0), 1).expect("put");
        store.seal().expect("seal");
        let mut open = GroupBuilder::new();
        open.add_block(SeriesId(9), &[5], &ValueColumn::F64(vec![1.0]));
        store.put_group(open, 2).expect("put");
        for above in [0, 3, 6, 8, 9] {
            let mut all: Vec<_> = store.series_kinds().into_iter().filter(|(s, _)| s.0 > above).collect();
            all.sort_by_key(|(s, _)| s.0);
            assert_eq!(store.series_kinds_above(SeriesId(above)), all, "above {above}");
        }
        assert_eq!(store.series_kinds_above(SeriesId(6)), vec![(SeriesId(9), crate::model::ValueKind::F64)]);
    }
}
