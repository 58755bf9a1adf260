//! Compaction: rewriting runs of sealed segments whose blocks are small into one segment with
//! one long block per series and window.
//!
//! A store fed in real time flushes every few minutes (the flush interval bounds the WAL), so
//! each flush writes a short block per series: on TSBS IoT data, flushing every 5 minutes costs
//! 5.2 bytes per value against 0.59 for day-long blocks. Compaction restores the long blocks.
//!
//! The decision is a pure function ([`candidate_runs`]) of segment summaries; [`compact_once`]
//! carries it out. The engine runs it after start-up and while serving, in its background
//! compaction thread (nice 19, I/O paced to `merge_bytes_per_second`), on segments sealed by
//! size or by age (`segment_seal_age`), so a running server's short blocks become long ones
//! without a restart. Invariants that make it safe:
//! - Every output block takes the run's largest sequence. That keeps every "newer write wins"
//!   decision with segments outside the run unchanged: a run is contiguous in group sequence
//!   except for segments it passes over, which hold none of the series of the run's older
//!   segments (and whose points the run's newer segments beat before and after), see
//!   [`short_block_runs`]. Inside the run, points are merged in sequence order (the last write
//!   wins) before they are re-encoded.
//! - The output is invisible until the store installs it in place of the run in one step
//!   ([`crate::store::SegmentRewrite`]). In the segment store it is written under a temporary
//!   name, sealed with the list of segments it replaces, and only then renamed into place: a
//!   crash before the rename leaves the inputs untouched (the temporary file is removed at
//!   start-up); a crash after it leaves inputs that start-up removes because the output's footer
//!   names them.
//!
//! Everything here goes through the [`BlockStore`] trait, so any backend compacts the same way.

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::flush::encode_series;
use crate::index::BlockRef;
use crate::memtable::ResolvedSeries;
use crate::model::{last_write_wins, SeriesId, Timestamp, ValueColumn};
use crate::segment::{GroupBuilder, SharedTimestamps};
use crate::store::{BlockStore, SegmentSummary};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The engine's [`CompactionOptions::short_block_bytes_max`]: numeric blocks under
/// `small_block_points` points stay below it (2,048 points of 8-byte values take 16 KiB raw,
/// about 2 KiB encoded), payload portions of 8 KiB and more do not.
pub const SHORT_BLOCK_BYTES_MAX: u64 = 8 << 10;

/// Knobs of compaction.
#[derive(Clone, Copy, Debug)]
pub struct CompactionOptions {
    /// A segment is worth compacting when its blocks hold fewer points than this on average.
    pub small_block_points: u64,
    /// ... and fewer bytes than this on average: a block this large is mostly its values (its
    /// header and index entry are about 100 bytes), so joining such blocks gains under 2 % and
    /// costs reading and writing them all again. Payload portions (waveform chunks, binary
    /// frames) are one point each in blocks of kilobytes to megabytes: they counted as short,
    /// and compaction copied every 64 KiB portion a second time (over Cassandra, half of what
    /// its nodes did per MiB ingested, issue 15).
    pub short_block_bytes_max: u64,
    /// Most input bytes in one run of small files (see [`candidate_runs`]).
    pub run_bytes_max: u64,
    /// Most input bytes in one run of short blocks: more than `run_bytes_max`, as merging short
    /// blocks gives an output a fraction of its inputs (one-point blocks of a fleet's sensors
    /// cost 118 bytes a point on disk, merged 2-10), and a segment sealed at its block limit
    /// holds 35 MB of them: with runs of at most one segment's bytes, no two were ever joined.
    pub short_block_run_bytes_max: u64,
    /// Most blocks listed in memory at once (about 100 bytes each with the runs read for
    /// them; 64 MiB of one-point blocks were 2 M of them, 220 MB of the peak at 2 M series,
    /// issue 14): a run whose segments all have directories is listed a range of series at a
    /// time ([`series_windows`]), about this many blocks a range; any other run holds at most
    /// this many blocks. A single segment over it is still a run.
    pub run_blocks_max: u64,
    /// A sealed segment smaller than this is a small file, merged with its neighbours whatever
    /// its blocks ([`candidate_runs`]): half the segment size limit, so segments sealed by size
    /// are never merged for their size. 0 merges none.
    pub small_file_bytes: u64,
    pub block_points_max: usize,
    pub block_bytes_max: usize,
    /// Decoded points held in memory at once while rewriting; the output gets one flush group
    /// per this many points.
    pub points_per_group: usize,
    /// ... or per this many series: each series merged costs its own buffers besides its points
    /// (about 100 bytes), and a run of one-point blocks of a million series held them all at
    /// once, 250 MB (issue 14).
    pub group_series_max: usize,
}

/// The runs worth rewriting: first runs of short blocks, oldest first ([`short_block_runs`]),
/// then runs of small files ([`small_file_runs`]). A run of one segment holding a single group
/// (one sequence: one flush, or the output of an earlier rewrite) is never offered: rewriting it
/// alone would give back the same blocks, and offering it again and again is how compaction
/// looped when `block_points_max` was below `small_block_points` (each output's blocks were
/// "small" again). So every rewrite either joins several segments into one or turns a segment
/// of several groups into one of a single group, and a store that takes no new groups runs out
/// of runs. A run of one segment is still rewritten only when its series have several blocks
/// each (`blocks > 2 × distinct series`, checked by [`compact_once`], which needs the blocks).
pub fn candidate_runs(summaries: &[SegmentSummary], options: &CompactionOptions) -> Vec<Vec<u64>> {
    let mut segments: Vec<&SegmentSummary> = summaries.iter().filter(|s| s.blocks > 0).collect();
    segments.sort_by_key(|s| s.min_sequence);
    let (mut runs, last_resort) = short_block_runs(&segments, options);
    runs.extend(small_file_runs(&segments, options));
    runs.extend(last_resort);
    runs
}

/// Runs of sealed segments whose blocks are small, each grown from its oldest segment (the
/// oldest not yet in a run) by the newer small segments that may hold its series, in sequence
/// order, up to `short_block_run_bytes_max` bytes and `run_blocks_max` blocks (or two blocks
/// for each series id the run spans, when every member has a directory). Segments whose
/// series ids lie outside the run's range are passed over: a fleet of a million sensors fills
/// a memtable with a share of its sensors at a time, so a segment holds a slice of the id space
/// and the next slice is in the next segment; the same slice comes back a round later, and it
/// is those that merge into longer blocks. A run left contiguous (all it could hold, between
/// slices of other series) gained nothing. A run stops at a segment over its range that it
/// cannot take (not small, the open one, over the limits, or in an earlier run).
///
/// A run in which one segment holds more than [`LOPSIDED`] times the points of the others
/// together comes last, after every other run (returned apart, the second list): a run is
/// rewritten whole, and the output of an earlier run joined each time with the next few
/// flushes' short segments was rewritten again and again (a fleet of 400,000 series: the same
/// 12 M points decoded and encoded every 10 s to add 0.8 M, quadratic in the rounds). So while
/// balanced runs remain, a point is rewritten only into an output at least 1.5 times the points
/// of the segment it was in: a bounded number of times, as in a binary counter. Its segments
/// stay free for later seeds (the newer short segments join among themselves until they weigh
/// enough). Lopsided runs are still offered last: short segments holding other slices of a
/// fleet's sensors cannot join among themselves, and a store that stops taking data would keep
/// them short for good.
///
/// Why passing over is safe: a segment passed over holds none of the series of the run's
/// segments older than it (their id range, which it misses, bounds them), so no point of
/// theirs supersedes one of it or is superseded by it; the run's segments newer than it win
/// over it before the rewrite and still do after, as the output's sequence is larger still.
/// That needs every group of a newer member to be newer than every group passed over: segments
/// hold disjoint sequence ranges (a flush's segment takes the next groups, an output takes a
/// sequence of its run's), and a run stops at a segment that would break this.
fn short_block_runs(segments: &[&SegmentSummary], options: &CompactionOptions) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    let small = |s: &SegmentSummary| {
        s.sealed
            && s.points < options.small_block_points.saturating_mul(s.blocks)
            && s.block_bytes < options.short_block_bytes_max.saturating_mul(s.blocks)
    };
    let mut taken = vec![false; segments.len()];
    let (mut runs, mut last_resort) = (Vec::new(), Vec::new());
    for seed in 0..segments.len() {
        if taken[seed] || !small(segments[seed]) {
            continue;
        }
        let mut run = vec![segments[seed]];
        let mut members = vec![seed];
        let mut ids = SeriesRange::of(segments[seed]);
        let (mut bytes, mut blocks) = (segments[seed].bytes, segments[seed].blocks);
        // The newest sequence of a segment passed over.
        let mut passed_over = 0;
        for (next, segment) in segments.iter().enumerate().skip(seed + 1) {
            let range = SeriesRange::of(segment);
            if !ids.overlaps(&range) {
                passed_over = passed_over.max(segment.max_sequence);
                continue;
            }
            // A run listed whole (a member without a directory) holds at most `run_blocks_max`
            // blocks, as they are all in memory at once. Others are listed a range of series
            // at a time, and may hold two blocks for each id they span: enough to reach the
            // same sensors' next round when a round of a fleet's one-point blocks is more
            // than `run_blocks_max` (2 M sensors: 8 segments a round, and runs of 4 joined no
            // sensor twice). Not unbounded: a run growing over every later round left the
            // slices it passed over to join among themselves, never with its output.
            let listed_whole = run.iter().any(|s| s.series == 0) || segment.series == 0;
            let blocks_max = match listed_whole {
                true => options.run_blocks_max,
                false => options.run_blocks_max.max(2 * ids.clone().join(range.clone()).width()),
            };
            let over = bytes + segment.bytes > options.short_block_run_bytes_max || blocks + segment.blocks > blocks_max;
            if taken[next] || !small(segment) || over || segment.min_sequence <= passed_over {
                break;
            }
            members.push(next);
            run.push(segment);
            ids = ids.join(range);
            bytes += segment.bytes;
            blocks += segment.blocks;
        }
        let single_group = one_rewrite(&run);
        // As `compact_once` would find after listing its blocks, known here from its directory:
        // listing it again every few seconds to find it out kept a core a third busy.
        let too_few_alone = run.len() == 1 && run[0].series > 0 && run[0].blocks <= 2 * run[0].series;
        let points: u64 = run.iter().map(|s| s.points).sum();
        let heaviest = run.iter().map(|s| s.points).max().unwrap_or(0);
        let lopsided = run.len() > 1 && heaviest > LOPSIDED * (points - heaviest);
        if !single_group && !too_few_alone && !series_apart(&run) {
            if lopsided {
                last_resort.push(run.iter().map(|s| s.id).collect());
                continue;
            }
            for member in members {
                taken[member] = true;
            }
            runs.push(run.iter().map(|s| s.id).collect());
        }
    }
    (runs, last_resort)
}

/// Whether a run holds one group and nothing else: a segment of one sequence (one flush, or an
/// earlier rewrite's output), or the segments a rewrite's output was cut into (they share its
/// sequence). A rewrite's outputs hold disjoint series, written in series order and cut
/// between groups, so joining them gives back the same blocks; offered, they were rewritten
/// into two segments again and again (a store of 2 M series left two such outputs of 262,144
/// one-point blocks each, rewritten every second, forever).
fn one_rewrite(run: &[&SegmentSummary]) -> bool {
    run.iter().all(|s| s.min_sequence == s.max_sequence && s.min_sequence == run[0].min_sequence)
}

/// A run is lopsided when one segment holds more than this many times the points of the
/// others together (see [`short_block_runs`]).
const LOPSIDED: u64 = 2;

/// The series ids a segment (or a run) may hold, as its directory bounds them: its smallest to
/// its largest, less the widest gap between (a flush wrapping around from a fleet's last
/// sensors to its first holds both ends of the id space, not its middle); `All` when no
/// directory says (a segment taking groups, or one written before directories).
#[derive(Clone, Debug, PartialEq, Eq)]
enum SeriesRange {
    All,
    /// Sorted, disjoint, inclusive.
    Ids(Vec<(u32, u32)>),
}

impl SeriesRange {
    fn of(segment: &SegmentSummary) -> SeriesRange {
        let ((low, high), (gap_low, gap_high)) = (segment.series_ids, segment.series_gap);
        match segment.series {
            0 => SeriesRange::All,
            _ if gap_high > gap_low + 1 => SeriesRange::Ids(vec![(low, gap_low), (gap_high, high)]),
            _ => SeriesRange::Ids(vec![(low, high)]),
        }
    }

    /// How many ids it spans (every id for `All`).
    fn width(&self) -> u64 {
        match self {
            SeriesRange::All => u64::from(u32::MAX) + 1,
            SeriesRange::Ids(ranges) => ranges.iter().map(|&(low, high)| u64::from(high - low) + 1).sum(),
        }
    }

    fn overlaps(&self, other: &SeriesRange) -> bool {
        match (self, other) {
            (SeriesRange::Ids(ours), SeriesRange::Ids(theirs)) => {
                ours.iter().any(|&(low, high)| theirs.iter().any(|&(other_low, other_high)| low <= other_high && other_low <= high))
            }
            _ => true,
        }
    }

    fn join(self, other: SeriesRange) -> SeriesRange {
        let (SeriesRange::Ids(mut ours), SeriesRange::Ids(theirs)) = (self, other) else {
            return SeriesRange::All;
        };
        ours.extend(theirs);
        ours.sort_unstable();
        let mut joined: Vec<(u32, u32)> = Vec::with_capacity(ours.len());
        for (low, high) in ours {
            match joined.last_mut() {
                Some(last) if low <= last.1.saturating_add(1) => last.1 = last.1.max(high),
                _ => joined.push((low, high)),
            }
        }
        SeriesRange::Ids(joined)
    }
}

/// Whether the directories of a run of several segments show that too few series can be in
/// two of them for merging to gain: at most as many as the overlaps of their series id ranges
/// (each pair's overlap, or the smaller segment's series), and under an eighth of the run's
/// blocks. A fleet's flushes each hold another share of its sensors, their id ranges meeting
/// only where two writers' shares interleave (400 ids of 270,000): such runs were rewritten
/// whole for nothing (540,000 blocks in, 540,000 out).
fn series_apart(run: &[&SegmentSummary]) -> bool {
    if run.len() < 2 || run.iter().any(|s| s.series == 0) {
        return false;
    }
    let mut shared = 0u64;
    for (i, a) in run.iter().enumerate() {
        for b in &run[i + 1..] {
            let (low, high) = (a.series_ids.0.max(b.series_ids.0), a.series_ids.1.min(b.series_ids.1));
            if low <= high {
                shared += u64::from(high - low + 1).min(a.series).min(b.series);
            }
        }
    }
    let blocks: u64 = run.iter().map(|s| s.blocks).sum();
    shared * 8 < blocks
}

/// Runs of small sealed segment files (under `small_file_bytes`), whatever their blocks, oldest
/// first: segments sealed by age rather than size (a slowly fed store seals one every few
/// minutes) would otherwise pile up, each an open file, thousands a year. A run is at most
/// `run_bytes_max` bytes and `run_blocks_max` blocks, and no
/// segment in it is larger than the rest together, so a byte is rewritten only into an output
/// at least twice the size of the segment it was in: at most log2(`run_bytes_max` / smallest
/// segment) times in all (about 13 for 64 MiB out of 8 KiB), as in a binary counter, and the
/// files left between full ones are about that many. `segments` are sorted by sequence.
fn small_file_runs(segments: &[&SegmentSummary], options: &CompactionOptions) -> Vec<Vec<u64>> {
    let mut runs = Vec::new();
    // Stretches of small sealed segments (larger ones are left alone).
    for stretch in segments.split(|s| !s.sealed || s.bytes >= options.small_file_bytes) {
        let mut start = 0;
        while start < stretch.len() {
            // The longest run from `start` in which no segment outweighs the others.
            let (mut total, mut blocks, mut largest, mut end) = (0u64, 0u64, 0u64, start);
            for (i, segment) in stretch.iter().enumerate().skip(start) {
                total += segment.bytes;
                blocks += segment.blocks;
                if total > options.run_bytes_max || blocks > options.run_blocks_max {
                    break;
                }
                largest = largest.max(segment.bytes);
                if i > start && largest <= total - largest {
                    end = i + 1;
                }
            }
            if end > start {
                // Pieces of one output, each cut at the block limit: joined, they are cut the
                // same way again.
                if !one_rewrite(&stretch[start..end]) {
                    runs.push(stretch[start..end].iter().map(|s| s.id).collect());
                }
                start = end;
            } else {
                start += 1;
            }
        }
    }
    runs
}

/// What one compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub inputs: Vec<u64>,
    /// The segments written in their place (several when the output passed a segment's size).
    pub outputs: Vec<u64>,
    pub blocks_before: u64,
    pub blocks_after: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Block bytes read from the inputs (only the blocks kept).
    pub bytes_read: u64,
}

/// Compacts the oldest run worth it; `Ok(None)` when there is nothing worth doing. Before a
/// run is rewritten, `room` is asked whether the disk can take an output as large as the
/// run's `bytes` beside its inputs (an error, `NoSpace` say, leaves everything in place);
/// `limit` paces the rewrite's I/O.
pub fn compact_once(
    store: &dyn BlockStore,
    catalog: &Catalog,
    options: &CompactionOptions,
    room: &dyn Fn(u64) -> Result<()>,
    limit: &mut RateLimit,
) -> Result<Option<CompactionReport>> {
    let summaries = store.summaries();
    for run in candidate_runs(&summaries, options) {
        limit.check_stop()?;
        let members: Vec<&SegmentSummary> = summaries.iter().filter(|s| run.contains(&s.id)).collect();
        if members.iter().all(|s| s.series > 0) {
            // Directories bound every member's series: listed a range of series at a time (a
            // lone segment with too few blocks per series was never offered, see
            // `short_block_runs`).
            room(members.iter().map(|s| s.bytes).sum())?;
            store.will_read_segments(&run);
            let windows = series_windows(&members, options.run_blocks_max);
            let report = rewrite_by_series(store, catalog, &run, &members, &windows, options, limit)?;
            tracing::info!(?report, windows = windows.len(), "compacted segments");
            return Ok(Some(report));
        }
        let blocks = store.try_blocks_of_segments(&run)?;
        limit.check_stop()?;
        let mut series_count = 0usize;
        let mut previous = None;
        for block in &blocks {
            if previous != Some(block.entry.series) {
                series_count += 1;
                previous = Some(block.entry.series);
            }
        }
        if blocks.len() <= 2 * series_count && run.len() == 1 {
            // Too few blocks per series to gain: wait until the run can grow.
            continue;
        }
        room(summaries.iter().filter(|s| run.contains(&s.id)).map(|s| s.bytes).sum())?;
        // Series by series, the blocks are read from every segment of the run and from every
        // group of each: interleaved streams that readahead does not follow. Written with
        // O_DIRECT, the segments are not cached: a compaction of a million one-point blocks
        // waited 50 s on 4 KiB reads, its CPU 7 % busy.
        store.will_read_segments(&run);
        let report = rewrite(store, catalog, &run, blocks, options, limit, BlockCopy::Reencode)?;
        tracing::info!(?report, "compacted segments");
        return Ok(Some(report));
    }
    Ok(None)
}

/// How [`rewrite`] moves the blocks it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockCopy {
    /// Decode every kept block and encode the points again, merged per series into long
    /// blocks: what compaction is for.
    Reencode,
    /// Copy kept blocks byte for byte (checksums verified, nothing decoded), with their shared
    /// timestamp records; a series whose kept blocks overlap in time (superseded points) is
    /// merged and re-encoded instead. What reclaim merges use: the blocks are already as long
    /// as their flushes made them, and copying costs a fraction of the CPU.
    Raw,
}

/// Rewrites the segments `run` (contiguous in sequence, see the module comment) into one new
/// segment holding only `blocks` (some or all of the run's blocks, as
/// [`BlockStore::blocks_of_segments`] orders them), then removes the run. Only the listed
/// blocks are read, by their index entries: dead blocks are never touched. With no block to
/// keep, the run is simply removed.
pub fn rewrite(
    store: &dyn BlockStore,
    catalog: &Catalog,
    run: &[u64],
    blocks: Vec<BlockRef>,
    options: &CompactionOptions,
    limit: &mut RateLimit,
    copy: BlockCopy,
) -> Result<CompactionReport> {
    let summaries = store.summaries();
    let before = RunBefore::of(&summaries.iter().filter(|s| run.contains(&s.id)).collect::<Vec<_>>());
    if blocks.is_empty() {
        store.remove_segments(run)?;
        return Ok(before.removed(run));
    }
    let mut rewriter = Rewriter::begin(store, catalog, run, &before, options, copy)?;
    rewriter.add_blocks(&blocks, limit)?;
    rewriter.finish(run, &before, limit)
}

/// [`rewrite`] of every block of `run` (whose summaries are `members`), listed a range of series ids at a time
/// ([`series_windows`]), so the blocks listed in memory at once are about `run_blocks_max`
/// whatever the run holds. A fleet of 2 M sensors flushes a slice of its sensors at a time in
/// one-point blocks, and a slice's sensors come back only a round of 8 segments later: a run
/// listed whole at 100 bytes a block could hold 4 segments, never two of the same slice, and
/// the store stayed at 80 bytes a point (issue 14).
fn rewrite_by_series(
    store: &dyn BlockStore,
    catalog: &Catalog,
    run: &[u64],
    members: &[&SegmentSummary],
    windows: &[(SeriesId, SeriesId)],
    options: &CompactionOptions,
    limit: &mut RateLimit,
) -> Result<CompactionReport> {
    let before = RunBefore::of(members);
    let mut rewriter = Rewriter::begin(store, catalog, run, &before, options, BlockCopy::Reencode)?;
    for &(low, high) in windows {
        limit.check_stop()?;
        let blocks = store.try_blocks_of_segments_in(run, low, high)?;
        rewriter.add_blocks(&blocks, limit)?;
        // Shared timestamp records are cached per window: a window's series are its rows.
        rewriter.source_records.clear();
    }
    if rewriter.series_added == 0 {
        drop(rewriter);
        store.remove_segments(run)?;
        return Ok(before.removed(run));
    }
    rewriter.finish(run, &before, limit)
}

/// Ranges of series ids (inclusive, ascending, disjoint) that together cover every series of
/// `run` and each hold about `blocks_per_window` of its blocks at most; one range of every id
/// when a segment's directory does not bound its series. The estimate takes each segment's
/// blocks as spread evenly over its id range, and every segment as overlapping each window.
pub fn series_windows(run: &[&SegmentSummary], blocks_per_window: u64) -> Vec<(SeriesId, SeriesId)> {
    let everything = vec![(SeriesId(0), SeriesId(u32::MAX))];
    if run.is_empty() || run.iter().any(|s| s.series == 0) {
        return everything;
    }
    let low = run.iter().map(|s| s.series_ids.0).min().unwrap_or(0);
    let high = run.iter().map(|s| s.series_ids.1).max().unwrap_or(u32::MAX);
    // Blocks per id where every segment overlaps.
    let density: f64 = run
        .iter()
        .map(|s| {
            let (gap_low, gap_high) = s.series_gap;
            let gap = u64::from(gap_high.saturating_sub(gap_low).saturating_sub(1));
            let width = (u64::from(s.series_ids.1 - s.series_ids.0) + 1).saturating_sub(gap).max(1);
            s.blocks as f64 / width as f64
        })
        .sum();
    let width = ((blocks_per_window.max(1) as f64 / density).floor() as u64).clamp(1, u64::from(u32::MAX));
    let mut windows = Vec::new();
    let mut start = u64::from(low);
    while start <= u64::from(high) {
        let end = (start + width - 1).min(u64::from(high));
        windows.push((SeriesId(start as u32), SeriesId(end as u32)));
        start = end + 1;
    }
    windows
}

/// What a run held before its rewrite.
struct RunBefore {
    bytes: u64,
    blocks: u64,
    max_sequence: u64,
    wal_checkpoint: u64,
}

impl RunBefore {
    fn of(before: &[&SegmentSummary]) -> RunBefore {
        RunBefore {
            bytes: before.iter().map(|s| s.bytes).sum(),
            blocks: before.iter().map(|s| s.blocks).sum(),
            max_sequence: before.iter().map(|s| s.max_sequence).max().unwrap_or(0),
            wal_checkpoint: before.iter().map(|s| s.wal_checkpoint).max().unwrap_or(0),
        }
    }

    /// The report of a run removed for having nothing to keep.
    fn removed(&self, run: &[u64]) -> CompactionReport {
        CompactionReport {
            inputs: run.to_vec(),
            outputs: Vec::new(),
            blocks_before: self.blocks,
            blocks_after: 0,
            bytes_before: self.bytes,
            bytes_after: 0,
            bytes_read: 0,
        }
    }
}

/// A rewrite in progress: series by series (in id order) into groups of the output.
struct Rewriter<'a> {
    store: &'a dyn BlockStore,
    catalog: &'a Catalog,
    options: &'a CompactionOptions,
    copy: BlockCopy,
    output: Box<dyn crate::store::SegmentRewrite + 'a>,
    /// Series merged and re-encoded, and blocks copied as they are, for the group being built.
    pending: Vec<ResolvedSeries>,
    copied: GroupBuilder,
    copied_records: HashMap<(u64, u64), SharedTimestamps>,
    /// Shared timestamp records read so far, per source segment.
    source_records: HashMap<u64, HashMap<u64, Arc<[u8]>>>,
    pending_points: usize,
    pending_series: usize,
    series_added: u64,
    bytes_read: u64,
}

impl<'a> Rewriter<'a> {
    fn begin(
        store: &'a dyn BlockStore,
        catalog: &'a Catalog,
        run: &[u64],
        before: &RunBefore,
        options: &'a CompactionOptions,
        copy: BlockCopy,
    ) -> Result<Rewriter<'a>> {
        let output = store.begin_rewrite(run, before.max_sequence, before.wal_checkpoint)?;
        Ok(Rewriter {
            store,
            catalog,
            options,
            copy,
            output,
            pending: Vec::new(),
            copied: GroupBuilder::new(),
            copied_records: HashMap::new(),
            source_records: HashMap::new(),
            pending_points: 0,
            pending_series: 0,
            series_added: 0,
            bytes_read: 0,
        })
    }

    /// Adds `blocks` (grouped by series in ascending id order, after every series added
    /// before; each series' blocks by ascending sequence).
    fn add_blocks(&mut self, blocks: &[BlockRef], limit: &mut RateLimit) -> Result<()> {
        let mut start = 0;
        while start < blocks.len() {
            limit.check_stop()?;
            let series = blocks[start].entry.series;
            let end = start + blocks[start..].iter().take_while(|b| b.entry.series == series).count();
            self.add_series(&blocks[start..end], limit)?;
            start = end;
        }
        Ok(())
    }

    fn add_series(&mut self, series_blocks: &[BlockRef], limit: &mut RateLimit) -> Result<()> {
        let read: u64 = series_blocks.iter().map(|b| u64::from(b.entry.length)).sum();
        limit.take(read);
        self.bytes_read += read;
        if self.copy == BlockCopy::Raw && disjoint_in_time(series_blocks) {
            for block in series_blocks {
                let records = self.source_records.entry(block.segment).or_default();
                let raw = self.store.read_raw_block(block, records)?;
                self.pending_points += raw.entry.count as usize;
                self.copied.add_raw_block(block.segment, raw, &mut self.copied_records);
            }
        } else {
            let merged = merge_blocks(self.store, series_blocks)?;
            self.pending_points += merged.timestamps.len();
            self.pending.push(merged);
        }
        self.pending_series += 1;
        self.series_added += 1;
        if self.pending_points >= self.options.points_per_group || self.pending_series >= self.options.group_series_max.max(1) {
            self.append_group(limit)?;
        }
        Ok(())
    }

    /// Writes what is pending as one group of the output.
    fn append_group(&mut self, limit: &mut RateLimit) -> Result<()> {
        if self.pending_series == 0 {
            return Ok(());
        }
        let encoded = encode_series(&self.pending, self.catalog, self.options.block_points_max, self.options.block_bytes_max);
        let parts: Vec<GroupBuilder> = [std::mem::take(&mut self.copied), encoded].into_iter().filter(|g| !g.is_empty()).collect();
        limit.take(self.output.append(parts)?);
        self.pending.clear();
        self.copied_records.clear();
        (self.pending_points, self.pending_series) = (0, 0);
        Ok(())
    }

    /// Writes the last group and puts the output in place of the run.
    fn finish(mut self, run: &[u64], before: &RunBefore, limit: &mut RateLimit) -> Result<CompactionReport> {
        self.append_group(limit)?;
        let installed = self.output.install()?;
        Ok(CompactionReport {
            inputs: run.to_vec(),
            outputs: installed.iter().map(|s| s.id).collect(),
            blocks_before: before.blocks,
            blocks_after: installed.iter().map(|s| s.blocks).sum(),
            bytes_before: before.bytes,
            bytes_after: installed.iter().map(|s| s.bytes).sum(),
            bytes_read: self.bytes_read,
        })
    }
}

/// Whether no two of a series' blocks share an instant, so no point supersedes another and
/// the blocks can be kept as they are.
fn disjoint_in_time(blocks: &[BlockRef]) -> bool {
    let mut ranges: Vec<(Timestamp, Timestamp)> = blocks.iter().map(|b| (b.entry.min_timestamp, b.entry.max_timestamp)).collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Paces maintenance I/O to a byte rate so it leaves the disk to ingestion, and stops a
/// rewrite when asked ([`RateLimit::stopping_when`]).
pub struct RateLimit<'a> {
    bytes_per_second: u64,
    started: std::time::Instant,
    taken: u64,
    /// Set when the rewrite should give up (the engine is closing).
    stop: Option<&'a AtomicBool>,
    /// The pace holds only while this says so (see [`RateLimit::paced_only_while`]).
    pace_while: Option<&'a dyn Fn() -> bool>,
}

impl std::fmt::Debug for RateLimit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("bytes_per_second", &self.bytes_per_second)
            .field("taken", &self.taken)
            .field("stops", &self.stop.is_some())
            .field("paced_only_while", &self.pace_while.is_some())
            .finish()
    }
}

impl<'a> RateLimit<'a> {
    /// `bytes_per_second` of 0 means no limit.
    pub fn new(bytes_per_second: u64) -> RateLimit<'a> {
        RateLimit { bytes_per_second, started: std::time::Instant::now(), taken: 0, stop: None, pace_while: None }
    }

    /// The same limit, paced only while `pace` returns true (writers are busy); otherwise
    /// unpaced, and the pace starts afresh when it holds again.
    pub fn paced_only_while(self, pace: &'a dyn Fn() -> bool) -> RateLimit<'a> {
        RateLimit { pace_while: Some(pace), ..self }
    }

    pub fn unlimited() -> RateLimit<'a> {
        RateLimit::new(0)
    }

    /// The same limit, and a rewrite under it fails with [`Error::Closed`] at its next series
    /// once `stop` is set, leaving its inputs in place (the unfinished output is discarded). A
    /// background compaction of a store of millions of series takes minutes at low priority;
    /// a clean stop must not wait for it.
    pub fn stopping_when(self, stop: &'a AtomicBool) -> RateLimit<'a> {
        RateLimit { stop: Some(stop), ..self }
    }

    /// [`Error::Closed`] once the flag given to [`RateLimit::stopping_when`] is set.
    pub fn check_stop(&self) -> Result<()> {
        match self.stop {
            Some(stop) if stop.load(Ordering::Relaxed) => Err(Error::Closed),
            _ => Ok(()),
        }
    }

    /// Accounts for `bytes` of I/O, sleeping first when the rate is ahead of the limit.
    pub fn take(&mut self, bytes: u64) {
        if self.bytes_per_second == 0 {
            return;
        }
        if self.pace_while.is_some_and(|pace| !pace()) {
            (self.started, self.taken) = (std::time::Instant::now(), 0);
            return;
        }
        let due = std::time::Duration::from_secs_f64(self.taken as f64 / self.bytes_per_second as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        self.taken += bytes;
    }
}

/// All points of one series' blocks (given by ascending sequence), the last write winning.
fn merge_blocks(store: &dyn BlockStore, blocks: &[BlockRef]) -> Result<ResolvedSeries> {
    let series = blocks[0].entry.series;
    let mut timestamps = Vec::with_capacity(blocks.iter().map(|b| b.entry.count as usize).sum());
    let mut values = ValueColumn::new(blocks[0].entry.kind);
    let mut sorted = true;
    for block in blocks {
        let decoded = store.read_indexed_block(block)?;
        if let (Some(&last), Some(&first)) = (timestamps.last(), decoded.timestamps.first()) {
            sorted &= last < first;
        }
        timestamps.extend_from_slice(&decoded.timestamps);
        assert!(values.extend_from(&decoded.values), "BUG: value kind changed within a series");
    }
    if sorted {
        return Ok(ResolvedSeries { series, timestamps, values });
    }
    let kept = last_write_wins(&timestamps, (0..timestamps.len()).collect());
    Ok(ResolvedSeries { series, timestamps: kept.iter().map(|&i| timestamps[i]).collect(), values: values.gather(&kept) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: u64, sequences: (u64, u64), blocks: u64, points: u64, bytes: u64) -> SegmentSummary {
        SegmentSummary {
            id,
            sealed: true,
            bytes,
            // The tests' blocks are as long as their segments are (no headers or padding).
            block_bytes: bytes,
            blocks,
            points,
            series: 0,
            series_ids: (0, 0),
            series_gap: (0, 0),
            min_sequence: sequences.0,
            max_sequence: sequences.1,
            wal_checkpoint: 0,
        }
    }

    /// The first run [`candidate_runs`] offers.
    fn choose_run(summaries: &[SegmentSummary], options: &CompactionOptions) -> Option<Vec<u64>> {
        candidate_runs(summaries, options).into_iter().next()
    }

    fn options() -> CompactionOptions {
        CompactionOptions {
            small_block_points: 1000,
            short_block_bytes_max: SHORT_BLOCK_BYTES_MAX,
            run_bytes_max: 100,
            short_block_run_bytes_max: 100,
            run_blocks_max: 1_000_000,
            small_file_bytes: 50,
            block_points_max: 16_384,
            block_bytes_max: 1 << 20,
            points_per_group: 1 << 20,
            group_series_max: 65_536,
        }
    }

    #[test]
    fn the_oldest_run_of_small_block_segments_is_chosen_up_to_the_byte_limit() {
        let segments = [
            summary(4, (10, 12), 10, 100_000, 40), // large blocks: left alone
            summary(5, (13, 20), 100, 1_000, 40),
            summary(6, (21, 30), 100, 1_000, 40),
            summary(7, (31, 40), 100, 1_000, 40), // would pass the byte limit
        ];
        assert_eq!(choose_run(&segments, &options()), Some(vec![5, 6]));
    }

    #[test]
    fn a_run_in_which_one_segment_outweighs_the_others_is_offered_last() {
        let options = CompactionOptions { short_block_run_bytes_max: u64::MAX, run_bytes_max: u64::MAX, small_file_bytes: 0, ..options() };
        // An earlier output of 300 points a block (still short) and three flushes of one point.
        let merged = summary(5, (1, 10), 1_000, 300_000, 40_000);
        let flushes = [
            summary(6, (11, 11), 1_000, 1_000, 40_000),
            summary(7, (12, 12), 1_000, 1_000, 40_000),
            summary(8, (13, 13), 1_000, 1_000, 40_000),
        ];
        let mut segments = vec![merged];
        segments.extend(flushes);
        // The flushes join among themselves first; the heavy segment's run comes last.
        assert_eq!(candidate_runs(&segments, &options), vec![vec![6, 7, 8], vec![5, 6, 7, 8]]);
        // Once the others weigh as much, it joins them.
        let joined = summary(9, (11, 13), 1_000, 300_000, 40_000);
        assert_eq!(candidate_runs(&[merged, joined], &options), vec![vec![5, 9]]);
        // Alone, a flush of several groups is still rewritten.
        assert_eq!(candidate_runs(&[merged], &options), vec![vec![5]]);
    }

    #[test]
    fn segments_of_payload_portions_are_not_short_blocks_however_few_their_points() {
        // One point a block, as payload portions are: 64 KiB blocks and 4 KiB blocks.
        let large = [summary(5, (1, 10), 1_000, 1_000, 1_000 * 65_536), summary(6, (11, 20), 1_000, 1_000, 1_000 * 65_536)];
        let options = CompactionOptions { short_block_run_bytes_max: u64::MAX, run_bytes_max: u64::MAX, small_file_bytes: 0, ..options() };
        assert_eq!(choose_run(&large, &options), None);
        let small = [summary(5, (1, 10), 1_000, 1_000, 1_000 * 4_096), summary(6, (11, 20), 1_000, 1_000, 1_000 * 4_096)];
        assert_eq!(choose_run(&small, &options), Some(vec![5, 6]));
    }

    #[test]
    fn runs_follow_sequence_order_not_ids_and_skip_the_open_segment() {
        let mut open = summary(9, (50, 60), 100, 100, 10);
        open.sealed = false;
        let segments = [summary(12, (1, 9), 100, 100, 10), open, summary(3, (10, 20), 100, 100, 10)];
        assert_eq!(choose_run(&segments, &options()), Some(vec![12, 3]));
        assert_eq!(choose_run(&[open], &options()), None);
    }

    #[test]
    fn the_rate_limit_paces_io_to_the_byte_rate() {
        let mut limit = RateLimit::new(1_000_000);
        let started = std::time::Instant::now();
        for _ in 0..3 {
            limit.take(50_000);
        }
        // The third take waits until 100 kB are due at 1 MB/s: at least 100 ms.
        assert!(started.elapsed() >= std::time::Duration::from_millis(100), "{:?}", started.elapsed());
        // Unlimited never waits, however much is taken (it would sleep for ages otherwise).
        let mut free = RateLimit::unlimited();
        free.take(u64::MAX / 2);
        free.take(u64::MAX / 2);
        assert_eq!(free.taken, 0);
    }

    /// Paced only while writers are busy: without them, taking never waits; once they are
    /// back, the pace counts from then on.
    #[test]
    fn the_rate_limit_paces_only_while_asked() {
        let busy = AtomicBool::new(false);
        let pace = || busy.load(Ordering::SeqCst);
        let mut limit = RateLimit::new(1_000).paced_only_while(&pace);
        // Ten seconds' worth at 1 kB/s, each take at once: it would sleep for seconds if paced.
        let started = std::time::Instant::now();
        for _ in 0..10 {
            limit.take(1_000);
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert_eq!(limit.taken, 0);
        busy.store(true, Ordering::SeqCst);
        limit.take(100);
        limit.take(100);
        assert_eq!(limit.taken, 200, "paced again, from the first take while busy");
        assert!(started.elapsed() >= std::time::Duration::from_millis(100), "the second take waited for the first's 100 bytes");
    }

    #[test]
    fn a_single_group_segment_alone_is_never_chosen_so_compaction_cannot_loop() {
        // One group (a flush, or an earlier output whose blocks stay below the threshold
        // because block_points_max is smaller): nothing to gain alone.
        let output = summary(5, (20, 20), 100, 1_000, 40);
        assert_eq!(choose_run(&[output], &options()), None);
        // Joined with newer small segments it is rewritten again, merging their points in.
        let newer = summary(6, (21, 21), 100, 1_000, 40);
        assert_eq!(choose_run(&[output, newer], &options()), Some(vec![5, 6]));
        // A segment of several groups alone is offered (compact_once checks the gain).
        assert_eq!(choose_run(&[summary(7, (1, 9), 100, 1_000, 40)], &options()), Some(vec![7]));
    }

    #[test]
    fn a_stretch_longer_than_the_byte_limit_gives_several_runs_in_order() {
        let segments = [
            summary(5, (13, 20), 100, 1_000, 40),
            summary(6, (21, 30), 100, 1_000, 40),
            summary(7, (31, 40), 100, 1_000, 40),
            summary(8, (41, 41), 100, 1_000, 40),  // one group: alone, not a run
            summary(9, (42, 50), 10, 100_000, 40), // long blocks
            summary(10, (51, 60), 100, 1_000, 40),
        ];
        let runs = candidate_runs(&segments, &options());
        assert_eq!(runs[..3], [vec![5, 6], vec![7, 8], vec![10]], "runs of short blocks first");
        // Then the small files, whatever their blocks (each 40 of at most 100 bytes).
        assert_eq!(runs[3..], [vec![5, 6], vec![7, 8], vec![9, 10]]);
    }

    #[test]
    fn small_files_with_long_blocks_merge_like_a_binary_counter() {
        // Long blocks (100 points each), sizes halving: every segment outweighs the newer ones.
        let sizes = [32u64, 16, 8, 4, 2, 1];
        let mut sequence = 0;
        let mut segments: Vec<SegmentSummary> = sizes
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                sequence += 2;
                summary(i as u64 + 1, (sequence - 1, sequence), 10, 1_000_000, bytes)
            })
            .collect();
        let options = CompactionOptions { run_bytes_max: 1_000, small_file_bytes: 500, ..options() };
        assert_eq!(candidate_runs(&segments, &options), Vec::<Vec<u64>>::new());
        // One more of the smallest size carries all the way up: 32 = 16 + 8 + 4 + 2 + 1 + 1.
        segments.push(summary(7, (sequence + 1, sequence + 1), 10, 1_000_000, 1));
        assert_eq!(candidate_runs(&segments, &options), vec![vec![1, 2, 3, 4, 5, 6, 7]]);
        // Not past the run limit, nor over a segment that is not small or the open one.
        let tight = CompactionOptions { run_bytes_max: 8, small_file_bytes: 5, ..options };
        assert_eq!(candidate_runs(&segments, &tight), vec![vec![4, 5, 6, 7]]);
        segments[5].sealed = false;
        assert_eq!(candidate_runs(&segments, &options), Vec::<Vec<u64>>::new());
    }

    /// A run lists every block of its segments in memory: it stops at the block limit as at
    /// the byte limit, both for short blocks and for small files, but a segment over the limit
    /// alone is still a run.
    #[test]
    fn runs_stop_at_the_block_limit() {
        let options = CompactionOptions {
            run_bytes_max: 1_000,
            short_block_run_bytes_max: 1_000,
            small_file_bytes: 500,
            run_blocks_max: 250,
            ..options()
        };
        let segments = [
            summary(1, (1, 2), 100, 1_000, 40),
            summary(2, (3, 4), 100, 1_000, 40),
            summary(3, (5, 6), 100, 1_000, 40),
            summary(4, (7, 8), 300, 3_000, 40),
        ];
        let runs = candidate_runs(&segments, &options);
        assert_eq!(runs[..3], [vec![1, 2], vec![3], vec![4]], "short blocks");
        assert_eq!(runs[3..], [vec![1, 2]], "small files: 3 and 4 together are over the limit");
        let roomy = CompactionOptions { run_blocks_max: 1_000, ..options };
        assert_eq!(candidate_runs(&segments, &roomy)[0], vec![1, 2, 3, 4]);
    }

    /// A segment alone whose directory shows too few blocks per series to gain is never
    /// offered (it was listed every few seconds to find that out); segments of one-point blocks
    /// larger than a small file join up to the short-block byte limit.
    #[test]
    fn short_block_runs_skip_hopeless_single_segments_and_join_past_the_file_limit() {
        let with_series = |mut summary: SegmentSummary, series: u64| {
            summary.series = series;
            summary.series_ids = (1, series as u32);
            summary
        };
        let options = CompactionOptions { run_bytes_max: 60, short_block_run_bytes_max: 200, small_file_bytes: 30, ..options() };
        let alone = [with_series(summary(1, (1, 5), 150, 150, 40), 100)];
        assert_eq!(candidate_runs(&alone, &options), Vec::<Vec<u64>>::new(), "1.5 blocks a series: nothing to gain");
        let worth = [with_series(summary(1, (1, 5), 250, 250, 40), 100)];
        assert_eq!(candidate_runs(&worth, &options), vec![vec![1]], "2.5 blocks a series");
        let unknown = [summary(1, (1, 5), 150, 150, 40)];
        assert_eq!(candidate_runs(&unknown, &options), vec![vec![1]], "compact_once lists it to find out");
        let three = [
            with_series(summary(1, (1, 5), 150, 150, 90), 100),
            with_series(summary(2, (6, 9), 150, 150, 90), 100),
            with_series(summary(3, (10, 12), 150, 150, 90), 100),
        ];
        assert_eq!(candidate_runs(&three, &options), vec![vec![1, 2]], "180 bytes together, over the file limit; 3 alone gains nothing");
    }

    /// Segments whose directories hold (nearly) disjoint series (a fleet's flushes, each
    /// another share of its sensors) are not offered together.
    #[test]
    fn short_block_runs_of_segments_holding_other_series_are_not_offered() {
        let with_ids = |mut summary: SegmentSummary, ids: (u32, u32)| {
            summary.series = u64::from(ids.1 - ids.0 + 1);
            summary.series_ids = ids;
            summary
        };
        let options = CompactionOptions { run_bytes_max: 60, short_block_run_bytes_max: 1_000, small_file_bytes: 30, ..options() };
        let apart = [with_ids(summary(1, (1, 2), 100, 100, 40), (1, 100)), with_ids(summary(2, (3, 4), 100, 100, 40), (101, 200))];
        assert_eq!(candidate_runs(&apart, &options), Vec::<Vec<u64>>::new());
        let touching = [with_ids(summary(1, (1, 2), 100, 100, 40), (1, 100)), with_ids(summary(2, (3, 4), 100, 100, 40), (98, 197))];
        assert_eq!(candidate_runs(&touching, &options), Vec::<Vec<u64>>::new(), "at most 3 series shared of 200 blocks");
        let meeting = [with_ids(summary(1, (1, 2), 100, 100, 40), (1, 100)), with_ids(summary(2, (3, 4), 100, 100, 40), (76, 175))];
        assert_eq!(candidate_runs(&meeting, &options), vec![vec![1, 2]], "up to 25 series shared: an eighth of the blocks");
        let unknown = [with_ids(summary(1, (1, 2), 100, 100, 40), (1, 100)), summary(2, (3, 4), 100, 100, 40)];
        assert_eq!(candidate_runs(&unknown, &options), vec![vec![1, 2]], "compact_once lists them to find out");
    }

    /// A fleet's flushes each hold a slice of its sensors' ids: a run joins the slices of the
    /// same sensors from later rounds, passing over the other slices between them, and stops
    /// at a segment over its series that it cannot take.
    #[test]
    fn short_block_runs_join_the_same_series_across_rounds_passing_over_other_slices() {
        let slice = |id: u64, ids: (u32, u32)| {
            let mut slice = summary(id, (id, id), 100, 100, 10);
            slice.series = u64::from(ids.1 - ids.0 + 1);
            slice.series_ids = ids;
            slice
        };
        let options = CompactionOptions { short_block_run_bytes_max: 1_000, small_file_bytes: 0, ..options() };
        let (low, high) = ((1, 100), (101, 200));
        let rounds = [slice(1, low), slice(2, high), slice(3, low), slice(4, high), slice(5, low)];
        assert_eq!(candidate_runs(&rounds, &options), vec![vec![1, 3, 5], vec![2, 4]]);
        // Slices cut elsewhere in the next round: the run's range grows with what it takes.
        let shifted = [slice(1, low), slice(2, high), slice(3, (1, 50)), slice(4, (51, 150)), slice(5, (151, 200))];
        assert_eq!(candidate_runs(&shifted, &options), vec![vec![1, 3, 4]], "2 stops at 4, taken: 2 alone is one group");
        // Over the limits, or at long blocks of its series, a run stops. Its members'
        // directories let it be listed a range of series at a time, so it may hold two blocks
        // for each id it spans even where `run_blocks_max` is fewer: enough for a round more.
        let tight = CompactionOptions { short_block_run_bytes_max: 20, ..options };
        assert_eq!(candidate_runs(&rounds, &tight), vec![vec![1, 3], vec![2, 4]]);
        let few_blocks = CompactionOptions { run_blocks_max: 100, ..options };
        assert_eq!(candidate_runs(&rounds, &few_blocks), vec![vec![1, 3], vec![2, 4]], "two blocks for each of 100 ids");
        let mut undirected = rounds;
        undirected[2].series = 0;
        assert_eq!(candidate_runs(&undirected, &few_blocks), Vec::<Vec<u64>>::new(), "a member listed whole: 100 blocks bound the run");
        let mut long = rounds;
        long[2].points = 1_000_000;
        assert_eq!(candidate_runs(&long, &options), vec![vec![2, 4]], "1 alone is one group; 5 alone too");
        // A segment taking groups is no member, and ends a run over its series.
        let mut open = rounds;
        open[4].sealed = false;
        assert_eq!(candidate_runs(&open, &options), vec![vec![1, 3], vec![2, 4]]);
        // A flush wrapping around from the last sensors to the first holds both ends of the
        // id space, not its middle.
        let mut wrap = slice(2, (1, 200));
        wrap.series_gap = (50, 151);
        let middle = [slice(1, (60, 140)), wrap, slice(3, (60, 140))];
        assert_eq!(candidate_runs(&middle, &options)[0], vec![1, 3]);
        // A run passes over no segment whose groups are not all older than the next member's.
        let mut interleaved = [slice(1, low), slice(2, high), slice(3, low)];
        interleaved[1].max_sequence = 5;
        interleaved[2].min_sequence = 4;
        assert_eq!(candidate_runs(&interleaved, &options), Vec::<Vec<u64>>::new());
    }

    /// However few points its series have, a rewrite builds a group of at most
    /// `group_series_max` series at a time, and every point comes through.
    #[test]
    fn a_rewrite_holds_at_most_group_series_max_series_in_a_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(&crate::fs::RealFs, &dir.path().join("series.catalog"), false).expect("catalog").0;
        let store = crate::store::MemoryStore::new(1);
        for series in 1..=10u32 {
            for round in 0..2i64 {
                store.put_group(crate::store::test_groups::group(series, round * 10, 1), 0).expect("put");
            }
        }
        let mut ids: Vec<u64> = store.summaries().iter().map(|s| s.id).collect();
        ids.sort_unstable();
        let blocks = store.try_blocks_of_segments(&ids).expect("listed");
        assert_eq!(blocks.len(), 20);
        let options = CompactionOptions { group_series_max: 3, ..options() };
        let report = rewrite(&store, &catalog, &ids, blocks, &options, &mut RateLimit::unlimited(), BlockCopy::Reencode).expect("rewrite");
        assert_eq!(store.group_count(report.outputs[0]), 4, "10 series, 3 a group");
        assert_eq!(report.blocks_after, 10);
        for series in 1..=10u32 {
            let points: u32 = store.blocks(crate::model::SeriesId(series), 0, 100).iter().map(|b| b.block.entry.count).sum();
            assert_eq!(points, 2, "series {series}");
        }
    }

    /// Windows cover the run's ids in order, without gaps or overlaps, each expected to hold
    /// at most the blocks asked for; without directories, one window of every id.
    #[test]
    fn series_windows_cover_the_run_within_the_block_bound() {
        let slice = |id: u64, ids: (u32, u32), blocks: u64| {
            let mut slice = summary(id, (id, id), blocks, blocks, 10);
            slice.series = u64::from(ids.1 - ids.0 + 1);
            slice.series_ids = ids;
            slice
        };
        let run = [slice(1, (1_000, 1_999), 1_000), slice(2, (1_500, 2_999), 3_000)];
        let members: Vec<&SegmentSummary> = run.iter().collect();
        // 1 + 2 blocks per id where both overlap: windows of 333 ids for 1,000 blocks.
        let windows = series_windows(&members, 1_000);
        assert_eq!(windows.first(), Some(&(SeriesId(1_000), SeriesId(1_332))));
        assert_eq!(windows.last().map(|w| w.1), Some(SeriesId(2_999)));
        assert!(windows.windows(2).all(|w| w[1].0 .0 == w[0].1 .0 + 1), "contiguous: {windows:?}");
        assert_eq!(windows.len(), 7, "2,000 ids in windows of 333");
        assert_eq!(series_windows(&members, 1_000_000), vec![(SeriesId(1_000), SeriesId(2_999))]);
        assert_eq!(series_windows(&members, 0).len(), 2_000, "never narrower than one id");
        let mut undirected = run;
        undirected[1].series = 0;
        let members: Vec<&SegmentSummary> = undirected.iter().collect();
        assert_eq!(series_windows(&members, 1_000), vec![(SeriesId(0), SeriesId(u32::MAX))]);
    }

    /// A rewrite listed a window of series at a time keeps every point of every series, the
    /// newest write winning, as one listed whole does.
    #[test]
    fn a_rewrite_by_series_windows_keeps_every_point() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(&crate::fs::RealFs, &dir.path().join("series.catalog"), false).expect("catalog").0;
        let store = crate::store::MemoryStore::new(1);
        // Points valued `series * 1000 + timestamp + offset`.
        let put = |series: u32, start: i64, points: i64, offset: i64| {
            let timestamps: Vec<i64> = (start..start + points).collect();
            let values = timestamps.iter().map(|t| i64::from(series) * 1000 + t + offset).collect();
            let mut group = GroupBuilder::new();
            group.add_block(SeriesId(series), &timestamps, &ValueColumn::I64(values));
            store.put_group(group, 0).expect("put");
        };
        for round in 0..3i64 {
            for series in 1..=10u32 {
                put(series, round * 10, 2, 0);
            }
        }
        // Written again later at the second round's first instant: that point wins.
        for series in 1..=10u32 {
            put(series, 10, 1, 500);
        }
        let mut ids: Vec<u64> = store.summaries().iter().map(|s| s.id).collect();
        ids.sort_unstable();
        let windows =
            [(SeriesId(0), SeriesId(2)), (SeriesId(3), SeriesId(3)), (SeriesId(4), SeriesId(8)), (SeriesId(9), SeriesId(u32::MAX))];
        let summaries = store.summaries();
        let members: Vec<&SegmentSummary> = summaries.iter().collect();
        let report =
            rewrite_by_series(&store, &catalog, &ids, &members, &windows, &options(), &mut RateLimit::unlimited()).expect("rewrite");
        assert_eq!(report.inputs, ids);
        assert_eq!(report.blocks_after, 10, "one block a series");
        assert!(store.summaries().iter().all(|s| report.outputs.contains(&s.id)), "the inputs are gone");
        for series in 1..=10u32 {
            let base = i64::from(series) * 1000;
            let expected = vec![(0, base), (1, base + 1), (10, base + 510), (11, base + 11), (20, base + 20), (21, base + 21)];
            let listed = store.blocks(SeriesId(series), i64::MIN, i64::MAX);
            assert_eq!(listed.len(), 1, "series {series}");
            let block = store.read_indexed_block(&listed[0].block).expect("read");
            let crate::model::ValueColumn::I64(values) = &block.values else { panic!("integers") };
            let points: Vec<(i64, i64)> = block.timestamps.iter().copied().zip(values.iter().copied()).collect();
            assert_eq!(points, expected, "series {series}");
        }
    }

    /// The pieces of one rewrite's output (one sequence, cut at the block limit) are never
    /// offered together, as short blocks or as small files: joined, they would be cut the same
    /// way again, forever. With a segment of another sequence they are.
    #[test]
    fn the_pieces_of_one_output_are_not_offered_together() {
        let piece = |id: u64, sequence: u64, ids: (u32, u32)| {
            let mut piece = summary(id, (sequence, sequence), 100, 100, 10);
            piece.series = 50;
            piece.series_ids = ids;
            piece
        };
        let options = CompactionOptions { short_block_run_bytes_max: 1_000, run_bytes_max: 1_000, small_file_bytes: 100, ..options() };
        // Interleaved ids: by their ranges the pieces could share every series.
        let pieces = [piece(1, 7, (1, 100)), piece(2, 7, (2, 99))];
        assert_eq!(candidate_runs(&pieces, &options), Vec::<Vec<u64>>::new());
        let with_newer = [piece(1, 7, (1, 100)), piece(2, 7, (2, 99)), piece(3, 8, (1, 100))];
        assert_eq!(candidate_runs(&with_newer, &options)[0], vec![1, 2, 3]);
    }

    #[test]
    fn nothing_is_chosen_when_blocks_are_already_long() {
        assert_eq!(choose_run(&[summary(1, (1, 2), 10, 1_000_000, 10)], &options()), None);
        assert_eq!(choose_run(&[], &options()), None);
    }
}
