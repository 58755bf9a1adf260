//! The local block store: segment files in one directory plus the in-memory block index
//! ([`index`]: blocks of the open segment one by one, sealed segments one extent per series,
//! their blocks read from footer runs when needed).
//!
//! One segment is open for appends at a time; it is sealed once it reaches
//! `segment_bytes_max`, or when the engine asks because it has been open too long
//! ([`BlockStore::seal_if_older_than`]). Segments left unsealed by a crash are repaired and
//! sealed at open. The pipelined group commit of new groups is in [`commit`], the rewrite
//! protocol (compaction and merge outputs) in [`rewrite`].

mod commit;
mod index;
mod manifest;
mod rewrite;

use commit::{GroupCommit, OpenSegment};
use index::{SegmentBlocks, StoreIndex};

use super::{BlockLife, BlockSource, BlockStore, ListedBlock, SegmentRewrite, SegmentSummary, StoreStats};
use crate::block::Block;
use crate::error::{Error, Result};
use crate::filenames::{parse_numbered_file, SEGMENT_EXTENSION};
use crate::fs::{create_dir_all_durably, FileSystem, StorageFile};
use crate::index::runs::{DirectoryCache, RunCache, SegmentExtents};
use crate::index::BlockRef;
use crate::model::{SeriesId, Timestamp, ValueKind};
use crate::segment::{read_block, read_raw_block, scan_segment_directory, GroupBuilder, RawBlock, SegmentWriter};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct SegmentStoreOptions {
    /// A segment is sealed once it holds at least this many bytes.
    pub segment_bytes_max: u64,
    /// ... or at least this many blocks ([`SEGMENT_BLOCKS_MAX`] by default).
    pub segment_blocks_max: usize,
    /// fdatasync every flush group and seal.
    pub sync: bool,
    /// Bytes of decoded footer runs kept for reads ([`RUN_CACHE_BYTES`] by default).
    pub run_cache_bytes: usize,
    /// Bytes of decoded series directory chunks kept for reads ([`DIRECTORY_CACHE_BYTES`] by
    /// default).
    pub directory_cache_bytes: usize,
}

/// The default block limit of a segment: 262,144 blocks. The segment taking groups holds
/// each of its blocks in memory about three times (its writer's entry, the block index, the
/// block's life: 120 bytes), and sealing it builds its footer beside them; at 64 MiB of the
/// one-point blocks a fleet of a million sensors flushes, that was 2.2 M blocks and 400 MB of
/// the peak at 2 M series (issue 14). Sealed, a segment's series directory stays in the file
/// ([`crate::index::runs::ExtentIndex`]), and compaction merges the small files this makes.
/// Blocks of ordinary size (hundreds of points) fill 64 MiB long before this many.
pub const SEGMENT_BLOCKS_MAX: usize = 1 << 18;

/// The default limit of the run cache: 32 MiB, about 700,000 block entries (the runs of
/// recent reads; a run read once for a rewrite or a reclaim decision is kept too).
pub const RUN_CACHE_BYTES: usize = 32 << 20;

/// The default limit of the directory cache: 16 MiB, the directory entries of about 200,000
/// series and segments (2.6 KB a chunk of 32), read back from the footers by reads.
pub const DIRECTORY_CACHE_BYTES: usize = 16 << 20;

impl Default for SegmentStoreOptions {
    fn default() -> Self {
        SegmentStoreOptions {
            segment_bytes_max: 64 << 20,
            segment_blocks_max: SEGMENT_BLOCKS_MAX,
            sync: true,
            run_cache_bytes: RUN_CACHE_BYTES,
            directory_cache_bytes: DIRECTORY_CACHE_BYTES,
        }
    }
}

/// What opening the store found.
#[derive(Clone, Debug, Default)]
pub struct StoreRecovery {
    /// Highest flush-group sequence found (0 for an empty store).
    pub max_sequence: u64,
    /// Every WAL file with a smaller id is fully contained in the segments.
    pub wal_checkpoint: u64,
    /// Damage found and worked around: (file, offset, what).
    pub problems: Vec<(PathBuf, u64, String)>,
    /// Segment files left out because their file header is damaged: (file, offset, what). They
    /// are still in the directory, not indexed; the engine moves them into its quarantine.
    pub unreadable: Vec<(PathBuf, u64, String)>,
    pub segments: usize,
}

/// An open segment file. The store holds one reference; each read in progress holds another
/// (through [`ListedBlock::pin`], as its [`BlockSource`]), so a removed segment's descriptor
/// closes, and its space is freed, as soon as the last read that listed its blocks is done,
/// never later.
pub struct SegmentHandle {
    pub id: u64,
    pub path: PathBuf,
    pub file: Arc<dyn StorageFile>,
}

impl BlockSource for SegmentHandle {
    fn read(&self, entry: &crate::segment::IndexEntry) -> Result<Block> {
        read_block(&self.path, self.file.as_ref(), entry)
    }
}

struct SegmentFile {
    handle: Arc<SegmentHandle>,
    bytes: u64,
    summary: SegmentSummary,
    /// Its blocks' lives, or the series whose runs hold them (see [`index`]).
    blocks: SegmentBlocks,
}

impl SegmentFile {
    fn new(handle: SegmentHandle, bytes: u64, summary: SegmentSummary, entries: &[crate::segment::IndexEntry]) -> Self {
        SegmentFile { handle: Arc::new(handle), bytes, summary, blocks: SegmentBlocks::resident(entries) }
    }

    /// A sealed segment indexed by its series `directory` (whose length its summary takes).
    fn with_runs(handle: SegmentHandle, bytes: u64, mut summary: SegmentSummary, directory: &crate::segment::DirectoryIndex) -> Self {
        summary.describe_series(directory);
        SegmentFile { handle: Arc::new(handle), bytes, summary, blocks: SegmentBlocks::Runs }
    }

    /// The extent index's part for this sealed file, whose series `directory` stays in it.
    fn extents(&self, directory: crate::segment::DirectoryIndex) -> SegmentExtents {
        SegmentExtents::new(self.handle.id, self.handle.path.clone(), self.handle.file.clone(), directory)
    }
}

pub struct SegmentStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    options: SegmentStoreOptions,
    index: RwLock<StoreIndex>,
    files: RwLock<BTreeMap<u64, SegmentFile>>,
    /// Decoded runs of recent reads (see [`index`]).
    runs: Mutex<RunCache>,
    /// Decoded chunks of sealed segments' series directories of recent reads (see [`index`]).
    directories: Mutex<DirectoryCache>,
    open: Mutex<OpenSegment>,
    /// When the open segment took its first group (`None`: nothing open). Kept beside `open`,
    /// whose lock a group commit holds through its staging write, so the flusher's check of
    /// the age never waits for one.
    open_since: Mutex<Option<Instant>>,
    commit: Mutex<GroupCommit>,
    committed: Condvar,
}

impl SegmentStore {
    pub fn open(fs: Arc<dyn FileSystem>, dir: &Path, options: SegmentStoreOptions) -> Result<(SegmentStore, StoreRecovery)> {
        // Synced into its parent when new: the segments synced in it must not vanish with it.
        create_dir_all_durably(fs.as_ref(), dir, options.sync).map_err(|e| Error::io(dir, e))?;
        let mut recovery = StoreRecovery::default();
        let mut index = StoreIndex::default();
        let mut files = BTreeMap::new();
        let mut next_id = 1;
        let mut scans = Vec::new();
        rewrite::finish_interrupted_rewrites(fs.as_ref(), dir, options.sync, &mut recovery.problems)?;
        for path in fs.list(dir).map_err(|e| Error::io(dir, e))? {
            if crate::filenames::is_temporary_segment(&path) {
                // A compaction that did not finish: its inputs are all still in place.
                fs.remove(&path).map_err(|e| Error::io(&path, e))?;
                recovery.problems.push((path, 0, "removed an unfinished compaction output".into()));
                continue;
            }
            let Some(id) = parse_numbered_file(&path, SEGMENT_EXTENSION) else { continue };
            next_id = next_id.max(id + 1);
            match scan_segment_directory(fs.as_ref(), &path) {
                Ok(scan) => scans.push(scan),
                // A damaged file header: the file is left out (its owner sets it aside) and
                // every other segment serves. A newer build's file or an I/O error still fails.
                Err(Error::Corruption { path, offset, detail }) => {
                    tracing::error!(file = %path.display(), offset, problem = %detail, "segment left out: damaged file header");
                    recovery.unreadable.push((path, offset, detail));
                }
                Err(e) => return Err(e),
            }
        }
        // Inputs of a completed compaction that a crash left behind hold nothing the output
        // does not: remove them before they are indexed.
        let replaced: std::collections::BTreeSet<u64> = scans.iter().flat_map(|s| s.replaced.iter().copied()).collect();
        for mut scan in scans {
            let path = scan.path.clone();
            let id = scan.id;
            if replaced.contains(&id) {
                drop(scan);
                fs.remove(&path).map_err(|e| Error::io(&path, e))?;
                recovery.problems.push((path, 0, "removed a segment that a compaction had replaced".into()));
                continue;
            }
            for (offset, what) in &scan.problems {
                tracing::warn!(file = %path.display(), offset, problem = %what, "segment repaired at open");
                recovery.problems.push((path.clone(), *offset, what.clone()));
            }
            if let Some(directory) = scan.directory.take().filter(|_| scan.sealed) {
                // Sealed, version 2: indexed by its series directory, runs read when needed.
                let bytes = scan.file.len().map_err(|e| Error::io(&path, e))?;
                recovery.max_sequence = recovery.max_sequence.max(directory.max_sequence);
                recovery.wal_checkpoint = recovery.wal_checkpoint.max(scan.wal_checkpoint);
                let summary = SegmentSummary::of_directory(id, bytes, &directory, scan.wal_checkpoint);
                let handle = SegmentHandle { id, path, file: scan.file.clone() };
                let file = SegmentFile::with_runs(handle, bytes, summary, &directory);
                index.sealed.insert(file.extents(directory));
                files.insert(id, file);
                recovery.segments += 1;
                continue;
            }
            if scan.entries.is_empty() {
                // Nothing acknowledged can live in a segment without a complete group.
                drop(scan);
                fs.remove(&path).map_err(|e| Error::io(&path, e))?;
                continue;
            }
            let mut sealed = true;
            let mut directory = None;
            if !scan.sealed {
                match SegmentWriter::resume(&scan, options.sync).seal() {
                    Ok(written) => directory = written,
                    // A full disk must not keep the store from opening and serving reads: the
                    // segment is complete without its footer (the seal is cut back), only slower
                    // to open; a later start seals it. Reclaim and compaction leave it alone.
                    Err(e) if e.is_no_space() => {
                        tracing::warn!(error = %e, file = %path.display(), "disk full: segment left unsealed until the next start");
                        sealed = false;
                    }
                    Err(e) => return Err(e),
                }
            }
            let bytes = scan.file.len().map_err(|e| Error::io(&path, e))?;
            recovery.max_sequence = recovery.max_sequence.max(scan.entries.iter().map(|e| e.sequence).max().unwrap_or(0));
            recovery.wal_checkpoint = recovery.wal_checkpoint.max(scan.wal_checkpoint);
            let summary = SegmentSummary::of(id, sealed, bytes, &scan.entries, scan.wal_checkpoint);
            let handle = SegmentHandle { id, path, file: scan.file.clone() };
            if let Some(directory) = directory {
                let file = SegmentFile::with_runs(handle, bytes, summary, &directory);
                index.sealed.insert(file.extents(directory));
                files.insert(id, file);
            } else {
                index.resident.insert(id, &scan.entries);
                files.insert(id, SegmentFile::new(handle, bytes, summary, &scan.entries));
            }
            recovery.segments += 1;
        }
        let (run_cache_bytes, directory_cache_bytes) = (options.run_cache_bytes, options.directory_cache_bytes);
        let store = SegmentStore {
            fs,
            dir: dir.to_path_buf(),
            options,
            index: RwLock::new(index),
            files: RwLock::new(files),
            runs: Mutex::new(RunCache::new(run_cache_bytes)),
            directories: Mutex::new(DirectoryCache::new(directory_cache_bytes)),
            open: Mutex::new(OpenSegment::new(next_id, recovery.max_sequence)),
            open_since: Mutex::new(None),
            commit: Mutex::new(GroupCommit::default()),
            committed: Condvar::new(),
        };
        Ok((store, recovery))
    }

    /// Calls `found` with the series and kind of every directory entry of the sealed segments
    /// whose id range reaches `lowest` or above (an id may come once per segment). A directory
    /// that cannot be read is reported and left out.
    fn sealed_series_kinds(&self, lowest: u32, mut found: impl FnMut(SeriesId, ValueKind)) {
        let segments: Vec<Arc<SegmentExtents>> =
            self.index.read().sealed.segments().filter(|extents| extents.directory().series_ids.1 >= lowest).cloned().collect();
        for extents in segments {
            let walked = extents.for_each_slice(index::RUNS_READ_AT_ONCE, |runs| {
                runs.iter().for_each(|run| found(run.series, run.kind));
                Ok(())
            });
            if let Err(e) = walked {
                tracing::error!(error = %e, segment = extents.segment(), "series directory unreadable; its series are not listed");
            }
        }
    }

    /// Unlinks files already taken out of the index. The store's handle is dropped here; a read
    /// still under way holds its own until it is done.
    fn remove_files(&self, removed: Vec<SegmentFile>) -> Result<()> {
        let mut outcome = Ok(());
        for old in removed {
            self.runs.lock().remove_segment(old.handle.id);
            self.directories.lock().remove_segment(old.handle.id);
            let path = old.handle.path.clone();
            drop(old);
            if let Err(e) = self.fs.remove(&path) {
                // A compaction output's footer names its inputs, so start-up removes them; a
                // fully dead segment left behind is found dead again after start-up.
                outcome = Err(Error::io(&path, e));
            }
        }
        if self.options.sync {
            self.fs.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        outcome
    }

    /// The open handle of segment `id`, for maintenance reads.
    fn handle_of(&self, id: u64) -> Result<Arc<SegmentHandle>> {
        self.files
            .read()
            .get(&id)
            .map(|f| f.handle.clone())
            .ok_or_else(|| Error::corruption(self.dir.clone(), 0, format!("segment {id} is gone")))
    }

    /// Ids of all segments, oldest first.
    #[cfg(test)]
    pub fn segment_ids(&self) -> Vec<u64> {
        self.files.read().keys().copied().collect()
    }
}

impl BlockStore for SegmentStore {
    fn put_group(&self, group: GroupBuilder, wal_checkpoint: u64) -> Result<u64> {
        self.commit_group(group, wal_checkpoint)
    }

    fn blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock> {
        self.list_blocks(series, from, to)
    }

    fn oldest_timestamp(&self, series: SeriesId) -> Option<Timestamp> {
        SegmentStore::oldest_timestamp(self, series)
    }

    fn stats(&self) -> StoreStats {
        let index = self.index.read();
        let files = self.files.read();
        StoreStats {
            segments: files.len(),
            blocks: index.resident.block_count() + index.sealed.block_count(),
            points: files.values().map(|f| f.summary.points).sum(),
            bytes: files.values().map(|f| f.bytes).sum(),
        }
    }

    fn seal(&self) -> Result<()> {
        self.with_no_group_in_flight(|open| self.seal_open(open))
    }

    fn open_segment_age(&self) -> Option<Duration> {
        self.open_since.lock().map(|since| since.elapsed())
    }

    fn seal_if_older_than(&self, age: Duration) -> Result<bool> {
        let due = || self.open_since.lock().is_some_and(|since| since.elapsed() >= age);
        // Checked first without waiting for the groups in flight, as the flusher asks often.
        if !due() {
            return Ok(false);
        }
        self.with_no_group_in_flight(|open| {
            let due = open.writer.is_some() && due();
            if due {
                self.seal_open(open)?;
            }
            Ok(due)
        })
    }

    fn series_kinds(&self) -> Vec<(SeriesId, ValueKind)> {
        let mut kinds: HashMap<SeriesId, ValueKind> = HashMap::new();
        self.sealed_series_kinds(0, |series, kind| {
            kinds.insert(series, kind);
        });
        kinds.extend(self.index.read().resident.series_kinds());
        kinds.into_iter().collect()
    }

    fn series_kinds_above(&self, id: SeriesId) -> Vec<(SeriesId, ValueKind)> {
        // No map of every series: beyond the catalog's end there are none, or a few, and only
        // the directories whose id range reaches past it are read.
        let mut kinds: BTreeMap<SeriesId, ValueKind> = BTreeMap::new();
        self.sealed_series_kinds(id.0.saturating_add(1), |series, kind| {
            if series > id {
                kinds.insert(series, kind);
            }
        });
        kinds.extend(self.index.read().resident.series_kinds().into_iter().filter(|(series, _)| *series > id));
        kinds.into_iter().collect()
    }

    fn wal_checkpoint(&self) -> u64 {
        self.files.read().values().map(|f| f.summary.wal_checkpoint).max().unwrap_or(0)
    }

    fn summaries(&self) -> Vec<SegmentSummary> {
        self.files.read().values().map(|f| f.summary).collect()
    }

    fn visit_segments(&self, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        self.visit_lives(None, visit);
    }

    fn visit_segments_against(&self, cutoff: &dyn Fn(SeriesId) -> Timestamp, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        self.visit_lives(Some(cutoff), visit);
    }

    /// Lists what it can: a segment whose runs cannot be read is left out, and logged (the
    /// engine's maintenance calls [`BlockStore::try_blocks_of_segments`] instead).
    fn blocks_of_segments(&self, ids: &[u64]) -> Vec<BlockRef> {
        self.blocks_of(ids).unwrap_or_else(|e| {
            tracing::error!(error = %e, "series runs unreadable; their blocks are not listed");
            Vec::new()
        })
    }

    fn try_blocks_of_segments(&self, ids: &[u64]) -> Result<Vec<BlockRef>> {
        self.blocks_of(ids)
    }

    fn try_blocks_of_segments_in(&self, ids: &[u64], low: SeriesId, high: SeriesId) -> Result<Vec<BlockRef>> {
        self.blocks_of_in(ids, low, high)
    }

    fn will_read_segments(&self, ids: &[u64]) {
        let files = self.files.read();
        for file in ids.iter().filter_map(|id| files.get(id)) {
            file.handle.file.will_need();
        }
    }

    fn read_indexed_block(&self, block: &BlockRef) -> Result<Block> {
        self.handle_of(block.segment)?.read(&block.entry)
    }

    fn read_raw_block(&self, block: &BlockRef, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock> {
        let handle = self.handle_of(block.segment)?;
        read_raw_block(&handle.path, handle.file.as_ref(), &block.entry, records)
    }

    /// Removes the segments from the index in one update, then their files. The open segment
    /// is never removed.
    fn remove_segments(&self, ids: &[u64]) -> Result<u64> {
        let open = self.open.lock();
        let removed: Vec<SegmentFile> = {
            let mut index = self.index.write();
            let mut files = self.files.write();
            let removed: Vec<SegmentFile> = ids.iter().filter(|id| !open.is_open(**id)).filter_map(|id| files.remove(id)).collect();
            for old in &removed {
                old.blocks.remove_from(&mut index, old.handle.id);
            }
            removed
        };
        drop(open);
        let bytes = removed.iter().map(|f| f.bytes).sum();
        self.remove_files(removed)?;
        Ok(bytes)
    }

    fn begin_rewrite(&self, replaced: &[u64], sequence: u64, wal_checkpoint: u64) -> Result<Box<dyn SegmentRewrite + '_>> {
        let writer = self.create_rewrite_output()?;
        Ok(Box::new(rewrite::SegmentRewriter::new(self, writer, replaced.to_vec(), sequence, wal_checkpoint)))
    }
}

impl SegmentStore {
    /// Records that segment `id` was sealed and its final size.
    fn refresh_size(&self, id: u64) {
        if let Some(file) = self.files.write().get_mut(&id) {
            if let Ok(len) = file.handle.file.len() {
                file.bytes = len;
                file.summary.bytes = len;
            }
            file.summary.sealed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use crate::store::test_groups::group;

    /// Descriptors this process holds on files that were unlinked under `dir`.
    fn deleted_descriptors(dir: &Path) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return 0 };
        entries
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir) && target.to_string_lossy().ends_with("(deleted)"))
            .count()
    }

    /// A segment of many small blocks is sealed at the block limit long before its byte limit,
    /// so the blocks held one by one in memory stay bounded; every block stays readable.
    #[test]
    fn a_segment_is_sealed_at_its_block_limit_whatever_its_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options =
            SegmentStoreOptions { segment_bytes_max: 64 << 20, segment_blocks_max: 3, sync: false, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(Arc::new(RealFs), dir.path(), options).expect("open");
        for series in 1..=7u32 {
            store.put_group(group(series, 0, 2), 0).expect("committed");
        }
        let mut summaries = store.summaries();
        summaries.sort_by_key(|s| s.id);
        let shape: Vec<(bool, u64, u64)> = summaries.iter().map(|s| (s.sealed, s.blocks, s.series)).collect();
        assert_eq!(shape, [(true, 3, 3), (true, 3, 3), (false, 1, 0)], "(sealed, blocks, series its directory lists)");
        let ids: Vec<(u32, u32)> = summaries.iter().map(|s| s.series_ids).collect();
        assert_eq!(ids, [(1, 3), (4, 6), (0, 0)], "series id ranges of the directories");
        assert_eq!(store.index.read().resident.block_count(), 1, "only the open segment's block is held one by one");
        for series in 1..=7u32 {
            assert_eq!(store.list_blocks(SeriesId(series), 0, 10).len(), 1, "series {series}");
        }
    }

    #[test]
    fn every_writer_of_a_group_commit_gets_its_outcome_and_none_is_kept_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = SegmentStoreOptions { segment_bytes_max: 64 << 20, sync: false, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(Arc::new(RealFs), dir.path(), options).expect("open");
        let store = Arc::new(store);
        // Eight writers, 40 groups each: far more commits than any fixed window of outcomes.
        let writers: Vec<_> = (0..8u32)
            .map(|w| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..40i64).map(|i| store.put_group(group(w + 1, i * 10, 10), 0).expect("committed")).collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut sequences: Vec<u64> = writers.into_iter().flat_map(|w| w.join().expect("writer")).collect();
        assert_eq!(sequences.len(), 320);
        sequences.sort_unstable();
        assert!(sequences[0] > 0);
        assert!(store.commit.lock().outcomes.is_empty(), "every outcome read and dropped");
        for w in 1..=8 {
            assert_eq!(store.blocks(SeriesId(w), 0, 400).len(), 40, "series {w}");
        }
    }

    /// Found by the background compaction test: a run in sequence order can list an earlier
    /// output (a new id over old sequences) before a segment of a smaller id; the footer's
    /// replaced list must still be written (ascending) instead of failing an assertion.
    #[test]
    fn a_run_whose_ids_are_not_ascending_is_installed_and_replaced_at_start_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = SegmentStoreOptions { segment_bytes_max: 64 << 20, sync: false, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(Arc::new(RealFs), dir.path(), options.clone()).expect("open");
        store.put_group(group(1, 0, 10), 0).expect("group 1");
        store.seal().expect("seal");
        store.put_group(group(1, 10, 10), 0).expect("group 2");
        store.seal().expect("seal");
        assert_eq!(store.segment_ids(), vec![1, 2]);
        // Segment 1 rewritten alone: output 3 holds sequence 1, older than segment 2's.
        let mut output = store.begin_rewrite(&[1], 1, 0).expect("begin");
        output.append(vec![group(1, 0, 10)]).expect("append");
        output.install().expect("install");
        assert_eq!(store.segment_ids(), vec![2, 3]);
        // The run in sequence order is [3, 2].
        let mut output = store.begin_rewrite(&[3, 2], 2, 0).expect("begin");
        output.append(vec![group(1, 0, 20)]).expect("append");
        output.install().expect("install");
        assert_eq!(store.segment_ids(), vec![4]);
        drop(store);
        let (store, recovery) = SegmentStore::open(Arc::new(RealFs), dir.path(), options).expect("reopen");
        assert!(recovery.problems.is_empty(), "{:?}", recovery.problems);
        assert_eq!(store.segment_ids(), vec![4]);
        assert_eq!(store.stats().points, 20);
    }

    #[test]
    fn a_removed_segment_stays_readable_to_a_read_in_progress_and_closes_when_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = SegmentStoreOptions { segment_bytes_max: 1, sync: false, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(Arc::new(RealFs), dir.path(), options).expect("open");
        store.put_group(group(1, 0, 100), 0).expect("first segment");
        store.put_group(group(1, 100, 100), 0).expect("second segment");
        let ids = store.segment_ids();
        assert_eq!(ids.len(), 2, "each group sealed its own segment");
        let listed = store.blocks(SeriesId(1), 0, 100);
        assert_eq!(listed.len(), 1);

        assert!(store.remove_segments(&ids[..1]).expect("remove") > 0);
        let files: Vec<_> = std::fs::read_dir(dir.path()).expect("list").filter_map(|e| e.ok()).collect();
        assert_eq!(files.len(), 1, "the removed segment's file is unlinked");
        assert_eq!(store.segment_ids(), ids[1..].to_vec());
        assert!(store.blocks(SeriesId(1), 0, 100).is_empty(), "the index forgot the removed blocks");
        // The read that listed the block before the removal still gets it...
        let block = store.read_block(&listed[0]).expect("pinned block is readable");
        assert_eq!(block.timestamps.len(), 100);
        if std::path::Path::new("/proc/self/fd").exists() {
            assert!(deleted_descriptors(dir.path()) >= 1, "the pin holds the unlinked file open");
            // ...and once it is done, nothing holds the unlinked file open.
            drop(listed);
            assert_eq!(deleted_descriptors(dir.path()), 0, "a removed segment's descriptor outlived its last read");
        }
        assert_eq!(store.stats().blocks, 1);
    }
}
