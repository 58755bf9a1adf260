//! Compaction while serving (issue 14, item 1): a live engine seals its open segment by age and
//! its background compactor merges the short blocks of many small flushes into long ones, with
//! no restart and no explicit call; every point reads back exactly, also to reads running
//! while the compaction installs its output, and a power loss at any step of a background
//! compaction loses and duplicates nothing.

use sensordb_engine::test_support::fs::{CrashFs, CrashMode, FaultyFs};
use sensordb_engine::{
    DiskSpace, Durability, Engine, EngineOptions, RealFs, ReclaimOptions, SeriesId, SeriesKey, StoreStats, Value, ValueKind, WriteBatch,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SERIES: u8 = 6;
const FLUSHES: i64 = 40;
const POINTS_PER_FLUSH: i64 = 25;
/// Longest wait for the background threads (a loaded machine with two cores).
const PATIENCE: Duration = Duration::from_secs(60);

/// A live engine: background flush, seal by age and compaction, no reclaim (so nothing but
/// compaction rewrites segments).
fn live(seal_age: Duration) -> EngineOptions {
    EngineOptions {
        durability: Durability::Os,
        segment_seal_age: Some(seal_age),
        background_compaction: true,
        background_reclaim: false,
        reclaim: ReclaimOptions { file_system_usage: false, ..ReclaimOptions::default() },
        ..EngineOptions::default()
    }
}

/// The same store without sealing by age or background compaction: what the flushes leave.
fn frozen_in_time() -> EngineOptions {
    EngineOptions { segment_seal_age: None, background_compaction: false, ..live(Duration::from_secs(1)) }
}

/// Two rows of three fields; `FLUSHES` small flushes, some of which rewrite earlier points.
fn fill(engine: &Engine) -> (Vec<SeriesId>, BTreeMap<(u8, i64), i64>) {
    fill_with(engine, &|_| {})
}

/// [`fill`], calling `after_flush` after each flush.
fn fill_with(engine: &Engine, after_flush: &dyn Fn(&Engine)) -> (Vec<SeriesId>, BTreeMap<(u8, i64), i64>) {
    let ids: Vec<SeriesId> = (0..SERIES)
        .map(|s| {
            let key = SeriesKey::new("m", [("row", (s / 3).to_string())], format!("f{}", s % 3)).expect("key");
            engine.series_id(&key, ValueKind::I64).expect("id")
        })
        .collect();
    let mut model = BTreeMap::new();
    for flush in 0..FLUSHES {
        let mut batch = WriteBatch::new();
        for i in 0..POINTS_PER_FLUSH {
            let t = flush * POINTS_PER_FLUSH + i;
            for s in 0..SERIES {
                // Every seventh flush also rewrites points of an earlier flush: the last write wins.
                let t = if flush % 7 == 6 && i < 5 { t - 100 } else { t };
                let value = t * 10 + i64::from(s) + flush;
                batch.push(ids[s as usize], t, Value::I64(value)).expect("push");
                model.insert((s, t), value);
            }
        }
        engine.write(&batch).expect("write");
        engine.flush().expect("flush");
        after_flush(engine);
    }
    (ids, model)
}

/// Every point of `series` as (timestamp, value), in read order.
fn read_all(engine: &Engine, id: SeriesId) -> Vec<(i64, i64)> {
    engine
        .read(id, i64::MIN, i64::MAX)
        .points()
        .map(|p| {
            let p = p.expect("read");
            match p.value {
                Value::I64(v) => (p.timestamp, v),
                other => panic!("wrong kind {other:?}"),
            }
        })
        .collect()
}

fn expected(model: &BTreeMap<(u8, i64), i64>, s: u8) -> Vec<(i64, i64)> {
    model.range((s, i64::MIN)..=(s, i64::MAX)).map(|(&(_, t), &v)| (t, v)).collect()
}

fn check(engine: &Engine, ids: &[SeriesId], model: &BTreeMap<(u8, i64), i64>) {
    for s in 0..SERIES {
        assert_eq!(read_all(engine, ids[s as usize]), expected(model, s), "series {s}");
    }
}

fn bytes_per_value(stats: &StoreStats) -> f64 {
    stats.bytes as f64 / stats.points as f64
}

/// Waits (bounded) until the store holds at most `blocks` blocks in one segment.
fn wait_for_compaction(engine: &Engine, blocks: usize) -> StoreStats {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stats = engine.stats().store;
        if (stats.blocks <= blocks && stats.segments == 1) || Instant::now() > deadline {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_live_engine_seals_by_age_and_compacts_short_blocks_without_a_restart() {
    // What the flushes leave when nothing seals or compacts them.
    let control_dir = tempfile::tempdir().expect("tempdir");
    let control = Engine::open(control_dir.path(), frozen_in_time()).expect("open");
    fill(&control);
    let before = control.stats().store;
    assert!(before.blocks >= (FLUSHES as usize) * SERIES as usize, "{before:?}");
    control.close().expect("close");

    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), live(Duration::from_millis(300))).expect("open");
    let (ids, model) = fill(&engine);
    check(&engine, &ids, &model);
    // 1,000 points per series in one output: one block each.
    let after = wait_for_compaction(&engine, SERIES as usize);
    assert_eq!(after.segments, 1, "the open segment was sealed and compacted: {after:?}");
    assert_eq!(after.blocks, SERIES as usize, "one long block per series: {before:?} -> {after:?}");
    assert_eq!(after.points, model.len() as u64, "superseded points are gone, nothing else");
    assert!(
        bytes_per_value(&after) * 2.0 < bytes_per_value(&before),
        "bytes per value {:.2} -> {:.2}",
        bytes_per_value(&before),
        bytes_per_value(&after)
    );
    check(&engine, &ids, &model);
    assert_eq!(engine.stats().compaction_failures, 0);
    // Nothing more to do: the output is not rewritten again and again.
    let output_bytes = after.bytes;
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(engine.stats().store, after, "the store changed after compaction settled (bytes were {output_bytes})");
    engine.close().expect("close");
    let engine = Engine::open(dir.path(), frozen_in_time()).expect("reopen");
    assert!(engine.recovery().problems.is_empty(), "{:?}", engine.recovery().problems);
    check(&engine, &ids, &model);
}

#[test]
fn reads_during_a_background_compaction_see_every_point_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ids, model) = {
        let engine = Engine::open(dir.path(), frozen_in_time()).expect("open");
        let filled = fill(&engine);
        engine.close().expect("close");
        filled
    };
    // Reopened live: the sealed segment of short blocks waits for the compactor, paced to a
    // crawl so that many reads run while it works and installs its output.
    let mut options = live(Duration::from_millis(300));
    options.reclaim.merge_bytes_per_second = 16 << 10;
    let engine = Arc::new(Engine::open(dir.path(), options).expect("open"));
    let blocks_before = engine.stats().store.blocks;
    assert!(blocks_before >= (FLUSHES as usize) * SERIES as usize, "nothing compacted yet: {blocks_before}");
    let model = Arc::new(model);
    let done = Arc::new(AtomicBool::new(false));
    let reads_before_compaction = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (engine, ids, model, done, early) =
                (engine.clone(), ids.clone(), model.clone(), done.clone(), reads_before_compaction.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                // Bounded: the main thread sets `done` within PATIENCE.
                while !done.load(Ordering::SeqCst) {
                    let uncompacted = engine.stats().store.blocks == blocks_before;
                    for s in (r..SERIES).step_by(2) {
                        assert_eq!(read_all(&engine, ids[s as usize]), expected(&model, s), "series {s} during compaction");
                    }
                    reads += 1;
                    if uncompacted {
                        early.fetch_add(1, Ordering::SeqCst);
                    }
                }
                reads
            })
        })
        .collect();
    let after = wait_for_compaction(&engine, SERIES as usize);
    // A few more rounds of reads over the compacted store.
    std::thread::sleep(Duration::from_millis(100));
    done.store(true, Ordering::SeqCst);
    let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader saw every point once")).sum();
    assert_eq!(after.blocks, SERIES as usize, "compaction finished: {after:?}");
    assert!(reads_before_compaction.load(Ordering::SeqCst) > 0, "no read ran before the output was installed");
    assert!(reads > reads_before_compaction.load(Ordering::SeqCst), "no read ran after the output was installed");
    check(&engine, &ids, &model);
}

/// Segments sealed by age hold long blocks too when few series are fed slowly; without
/// merging, each would stay a file of its own (one every few minutes, thousands a year, each
/// an open descriptor). They merge like a binary counter instead.
#[test]
fn small_segment_files_are_merged_so_they_do_not_pile_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Blocks of 25 points count as long here: only the size of the files asks for a merge.
    let options = EngineOptions { compaction_small_block_points: 10, ..frozen_in_time() };
    let engine = Engine::open(dir.path(), options).expect("open");
    // Each flush sealed into a segment of its own (as by age), then whatever is worth merging.
    let (ids, model) = fill_with(&engine, &|engine| {
        engine.compact().expect("compact");
    });
    let stats = engine.stats().store;
    // 40 segments of one flush each: as 40 = 0b101000 in a binary counter, a few files are left.
    assert!(stats.segments <= 6, "{stats:?}");
    check(&engine, &ids, &model);
    engine.close().expect("close");
    let engine = Engine::open(dir.path(), frozen_in_time()).expect("reopen");
    assert_eq!(engine.stats().store.segments, stats.segments);
    check(&engine, &ids, &model);
}

/// A compaction needs room for its output beside its inputs: on a file system that would reach
/// `U_l` it backs off (counted as a failed attempt, nothing changed), and runs once there is room.
#[test]
fn a_background_compaction_without_room_on_the_disk_backs_off_until_there_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let (ids, model) = {
        let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(disk.clone()), ..frozen_in_time() }).expect("open");
        let filled = fill(&engine);
        engine.close().expect("close");
        filled
    };
    // 90 % used: any output would pass U_l (0.90).
    disk.set_reported_space(Some(DiskSpace { total_bytes: 1 << 30, available_bytes: (1 << 30) / 10 }));
    let mut options = live(Duration::from_secs(60));
    options.reclaim.file_system_usage = true;
    // Idle flusher rounds wake the compactor often: the backoff, not the wake-ups, sets the pace.
    options.flush_interval = Duration::from_millis(10);
    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(disk.clone()), ..options }).expect("open");
    let before = engine.stats().store;
    let deadline = Instant::now() + PATIENCE;
    while engine.stats().compaction_failures < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let postponed = engine.stats();
    assert!(postponed.compaction_failures >= 2, "{postponed:?}");
    assert_eq!(postponed.store, before, "nothing was rewritten without room");
    // 10 % used: room (the real disk's usage must not decide the test).
    disk.set_reported_space(Some(DiskSpace { total_bytes: 1 << 30, available_bytes: (1 << 30) / 10 * 9 }));
    let after = wait_for_compaction(&engine, SERIES as usize);
    assert_eq!(after.blocks, SERIES as usize, "compacted once there was room: {after:?}");
    check(&engine, &ids, &model);
}

/// A real directory for the lock file (which bypasses the file system under test).
fn data_dir(root: &Path) -> PathBuf {
    let data = root.join("data");
    std::fs::create_dir_all(&data).expect("real data directory for the lock file");
    data
}

fn on(fs: &CrashFs, options: EngineOptions) -> EngineOptions {
    EngineOptions { durability: Durability::Fsync, fs: Arc::new(fs.clone()), ..options }
}

/// Opens a live engine on `fs` and lets the background threads seal and compact until the
/// store is one segment or the file system has crashed; returns the operations it issued.
fn run_background_compaction(fs: &CrashFs, data: &Path) -> u64 {
    // The flusher's idle rounds (nothing to flush) wake the compactor every 10 ms, so it need
    // not wait out its period after the start.
    let options = EngineOptions { flush_interval: Duration::from_millis(10), ..live(Duration::from_millis(1)) };
    let engine = match Engine::open(data, on(fs, options)) {
        Ok(engine) => engine,
        Err(e) if fs.crashed() => {
            drop(e);
            return fs.operations();
        }
        Err(e) => panic!("open: {e}"),
    };
    let deadline = Instant::now() + PATIENCE;
    while !fs.crashed() && engine.stats().store.segments > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    engine.abandon();
    fs.operations()
}

#[test]
fn a_power_loss_during_a_background_compaction_loses_and_duplicates_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(root.path());
    let fs = CrashFs::new(root.path());
    // Many segments of short blocks, every point synced (segments sealed at every flush).
    let (ids, model) = {
        let engine = Engine::open(&data, on(&fs, EngineOptions { segment_bytes_max: 1, ..frozen_in_time() })).expect("open");
        let filled = fill(&engine);
        engine.close().expect("close");
        filled
    };
    let base = fs.crash_image(CrashMode::DropUnsynced, 0);
    // A run without a crash: how many operations the start and the compaction take.
    let full = base.crash_image(CrashMode::DropUnsynced, 0);
    let operations = run_background_compaction(&full, &data);
    {
        let engine = Engine::open(&data, on(&full, frozen_in_time())).expect("reopen");
        assert_eq!(engine.stats().store.segments, 1, "the run without a crash compacted");
        check(&engine, &ids, &model);
    }
    let crash_points = 24u64;
    // Recovered stores still holding the inputs, and those holding only the output.
    let (mut inputs_kept, mut output_installed) = (0, 0);
    for point in 0..crash_points {
        let crash_at = operations * point / crash_points + 1;
        let mode = CrashMode::ALL[point as usize % CrashMode::ALL.len()];
        let image = base.crash_image(CrashMode::DropUnsynced, 0);
        image.crash_at(Some(crash_at));
        run_background_compaction(&image, &data);
        let after = image.crash_image(mode, point);
        let engine = Engine::open(&data, on(&after, frozen_in_time()))
            .unwrap_or_else(|e| panic!("recovery after a crash at operation {crash_at} ({mode:?}) failed: {e}"));
        for s in 0..SERIES {
            assert_eq!(read_all(&engine, ids[s as usize]), expected(&model, s), "series {s}, crash at operation {crash_at} ({mode:?})");
        }
        match engine.stats().store.segments {
            1 => output_installed += 1,
            _ => inputs_kept += 1,
        }
        engine.close().expect("close");
    }
    // The crash points fell before and after the install, not all on one side of it.
    assert!(inputs_kept > 0 && output_installed > 0, "inputs kept {inputs_kept}, output installed {output_installed}");
}

/// The bug noticed before issue 14: with `block_points_max` below
/// `compaction_small_block_points` every output counted as short blocks again, and compaction
/// rewrote it over and over (10,000 rounds for one explicit call, forever in the background).
#[test]
fn compaction_ends_when_block_points_max_is_below_the_small_block_threshold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EngineOptions { block_points_max: 100, compaction_small_block_points: 2048, ..frozen_in_time() };
    let engine = Engine::open(dir.path(), options).expect("open");
    let (ids, model) = fill(&engine);
    let reports = engine.compact().expect("compact");
    assert_eq!(reports.len(), 1, "one rewrite of the sealed segment: {reports:?}");
    // 1,000 points per series in blocks of at most 100.
    assert_eq!(engine.stats().store.blocks, SERIES as usize * 10);
    assert_eq!(engine.compact().expect("compact again"), Vec::new(), "the output is not rewritten");
    check(&engine, &ids, &model);
}

/// A load that has ended is sealed once writes pause (`segment_seal_idle`), with no age set:
/// the memtable's last points go into the segment, and the compactor merges its short blocks
/// right after. Without the setting, the same store keeps them.
#[test]
fn a_pause_after_a_load_seals_the_open_segment_for_compaction() {
    const LOAD_SERIES: usize = 4;
    // 1,024 points a block: short (`compaction_small_block_points` is 2,048).
    const BATCHES: usize = 256;
    let per_batch = (sensordb_engine::SEAL_IDLE_POINTS_MIN as usize).div_ceil(LOAD_SERIES * BATCHES);
    let load = |engine: &Engine| -> u64 {
        let ids: Vec<SeriesId> = (0..LOAD_SERIES)
            .map(|s| engine.series_id(&SeriesKey::new("load", [("s", s.to_string())], "v").expect("key"), ValueKind::F64).expect("id"))
            .collect();
        let mut written = 0u64;
        for b in 0..BATCHES {
            let mut batch = WriteBatch::new();
            for id in &ids {
                for i in 0..per_batch {
                    let t = (b * per_batch + i) as i64;
                    batch.push(*id, t, Value::F64((t % 1000) as f64 * 0.5)).expect("push");
                    written += 1;
                }
            }
            engine.write(&batch).expect("write");
            // Every batch but the last is flushed: short blocks, and points left in memory.
            if b + 1 < BATCHES {
                engine.flush().expect("flush");
            }
        }
        written
    };
    let options =
        |idle: Option<Duration>| EngineOptions { segment_seal_age: None, segment_seal_idle: idle, ..live(Duration::from_secs(1)) };

    let control_dir = tempfile::tempdir().expect("tempdir");
    let control = Engine::open(control_dir.path(), options(None)).expect("open");
    load(&control);
    std::thread::sleep(Duration::from_millis(1_500));
    let kept = control.stats().store;
    assert!(kept.blocks >= LOAD_SERIES * (BATCHES - 1), "short blocks stay without the setting: {kept:?}");
    control.close().expect("close");

    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options(Some(Duration::from_millis(300)))).expect("open");
    let written = load(&engine);
    // Each series' points fit in a few long blocks.
    let long_blocks = LOAD_SERIES * (BATCHES * per_batch).div_ceil(EngineOptions::default().block_points_max);
    let deadline = Instant::now() + PATIENCE;
    let after = loop {
        let stats = engine.stats().store;
        if (stats.points == written && stats.blocks <= long_blocks && stats.segments == 1) || Instant::now() > deadline {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(after.points, written, "the memtable's points were flushed before the seal: {after:?}");
    assert_eq!(after.segments, 1, "sealed and compacted: {after:?}");
    assert!(after.blocks <= long_blocks, "{kept:?} -> {after:?}");
    engine.close().expect("close");
}
