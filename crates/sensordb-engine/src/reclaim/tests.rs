//! Reclaim through a real engine with an injected clock: expiry, capacity, deletion and merge,
//! eviction when full, and the throttle.

use super::policy::{DatabasePolicy, PeriodOverride};
use super::throttle::Admission;
use super::ReclaimOptions;
use crate::batch::WriteBatch;
use crate::engine::{Engine, EngineOptions};
use crate::model::{SeriesId, SeriesKey, Value, ValueKind};
use crate::wal::Durability;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECOND: i64 = 1_000_000_000;

struct Harness {
    engine: Engine,
    now: Arc<AtomicI64>,
    _dir: tempfile::TempDir,
}

fn harness(reclaim: ReclaimOptions) -> Harness {
    reopen_with(tempfile::tempdir().expect("tempdir"), Arc::new(AtomicI64::new(0)), reclaim)
}

/// Options that measure usage only by sensordb's bytes against `capacity` (the test disk's
/// real usage must not matter).
fn own_capacity(capacity: u64) -> ReclaimOptions {
    ReclaimOptions { capacity_bytes: Some(capacity), merge_bytes_per_second: 0, file_system_usage: false, ..ReclaimOptions::default() }
}

fn series(engine: &Engine, database: &str, measurement: &str, sensor: u32) -> SeriesId {
    let key = SeriesKey::new(measurement, [("sensor", sensor.to_string())], "value").and_then(|k| k.in_database(database)).expect("key");
    engine.series_id(&key, ValueKind::I64).expect("series")
}

/// Writes `seconds` seconds of 1 Hz points from `start` (in seconds) to each series and flushes
/// them into one segment. Values are pseudo-random so blocks have a realistic size.
fn write_hour(engine: &Engine, ids: &[SeriesId], start: i64, seconds: i64) {
    let mut batch = WriteBatch::new();
    for (n, &id) in ids.iter().enumerate() {
        for t in start..start + seconds {
            // splitmix64: values that do not compress, so blocks dwarf the page overhead.
            let mut z = (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n as u64;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let value = ((z ^ (z >> 31)) >> 24) as i64;
            batch.push(id, t * SECOND, Value::I64(value)).expect("push");
        }
    }
    engine.write(&batch).expect("write");
    engine.flush().expect("flush");
}

fn timestamps(engine: &Engine, id: SeriesId) -> Vec<i64> {
    engine.read(id, i64::MIN, i64::MAX).collect_all().expect("read").map_or_else(Vec::new, |c| c.timestamps)
}

fn segment_files(engine: &Engine) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(crate::filenames::segment_dir(engine.data_dir()))
        .expect("segments dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
}

#[test]
fn expired_segments_are_removed_whole_without_being_read() {
    let h = harness(own_capacity(1 << 40));
    let ids: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "plant", "temp", s)).collect();
    h.engine
        .set_database_policy("plant", DatabasePolicy { period: Some(Duration::from_secs(3 * 3600)), ..DatabasePolicy::default() })
        .expect("policy");
    for hour in 0..6 {
        write_hour(&h.engine, &ids, hour * 3600, 3600);
    }
    assert_eq!(segment_files(&h.engine).len(), 6);
    // Damage the oldest segment's blocks: reclaim must not read them to remove it.
    let oldest = segment_files(&h.engine)[0].clone();
    let mut bytes = std::fs::read(&oldest).expect("read");
    for b in &mut bytes[4096..8192] {
        *b ^= 0x5A;
    }
    std::fs::write(&oldest, &bytes).expect("write");

    h.now.store(6 * 3600 * SECOND, Ordering::SeqCst);
    h.engine.reclaim().expect("reclaim");
    let stats = h.engine.reclaim_stats();
    assert_eq!(stats.segments_removed, 3, "hours 0, 1 and 2 are older than 3 hours: {stats:?}");
    assert_eq!(stats.segments_merged, 0, "expiry in time order needs no merge");
    assert!(!oldest.exists());
    assert_eq!(segment_files(&h.engine).len(), 3);
    let kept = timestamps(&h.engine, ids[0]);
    assert_eq!(kept.first(), Some(&(3 * 3600 * SECOND)), "reads start at the cutoff");
    assert_eq!(kept.len(), 3 * 3600);
}

#[test]
fn a_database_over_capacity_loses_its_oldest_data_in_order_and_others_are_untouched() {
    let h = harness(own_capacity(1 << 40));
    let small: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "small", "temp", s)).collect();
    let other = series(&h.engine, "other", "temp", 0);
    // Size of one hour of the small database's data, measured, so the capacity is 3 hours.
    write_hour(&h.engine, &small, 0, 3600);
    let hour_bytes = h.engine.stats().store.bytes;
    h.engine
        .set_database_policy("small", DatabasePolicy { capacity_bytes: Some(3 * hour_bytes), ..DatabasePolicy::default() })
        .expect("policy");
    for hour in 1..30 {
        write_hour(&h.engine, &small, hour * 3600, 3600);
        write_hour(&h.engine, &[other], hour * 3600, 3600);
        h.engine.reclaim().expect("reclaim");
        let kept = timestamps(&h.engine, small[0]);
        let newest = (hour + 1) * 3600 - 1;
        assert_eq!(kept.last(), Some(&(newest * SECOND)), "the newest data is always readable");
        let first = kept[0] / SECOND;
        assert!(first >= (hour - 3) * 3600, "hour {hour}: data from second {first} is kept beyond capacity");
        assert!(kept.windows(2).all(|w| w[1] - w[0] == SECOND), "no hole: the oldest goes first");
    }
    assert_eq!(timestamps(&h.engine, other).len(), 29 * 3600, "a database without a policy keeps everything");
    assert!(h.engine.reclaim_stats().bytes_removed > 0);
}

#[test]
fn deleted_series_and_overrides_leave_partly_dead_segments_that_are_merged_when_hungry() {
    let h = harness(own_capacity(1 << 40));
    let keep: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "plant", "temp", s)).collect();
    let debug: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "plant", "debug", s)).collect();
    let doomed: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "plant", "doomed", s)).collect();
    let all: Vec<SeriesId> = keep.iter().chain(&debug).chain(&doomed).copied().collect();
    for hour in 0..4 {
        write_hour(&h.engine, &all, hour * 3600, 3600);
    }
    let policy = DatabasePolicy {
        period: None,
        capacity_bytes: None,
        overrides: vec![PeriodOverride { measurement: Some("debug".into()), tags: vec![], period: Duration::from_secs(600) }],
    };
    h.engine.set_database_policy("plant", policy).expect("policy");
    assert_eq!(h.engine.delete_series("plant", Some("doomed"), &[]).expect("delete"), 4);
    h.now.store(4 * 3600 * SECOND, Ordering::SeqCst);

    // Not hungry: partly dead segments are left alone (they only get deader with time).
    h.engine.reclaim().expect("reclaim");
    assert_eq!(h.engine.reclaim_stats().segments_merged, 0);
    assert!(h.engine.reclaim_stats().dead_bytes > 0);
    let recent = timestamps(&h.engine, debug[0]);
    assert_eq!(recent.first(), Some(&((4 * 3600 - 600) * SECOND)), "expired by the override: invisible at once");

    // Hungry: usage far over the target, even once every dead byte is gone, makes the
    // Fisherman take every segment with dead data (eviction off, so only dead data goes).
    let used = h.engine.reclaim_stats().usage.own_bytes;
    drop(h.engine);
    let options = ReclaimOptions { evict_oldest_when_full: false, ..own_capacity(used * 2 / 5) };
    let h2 = reopen_with(h._dir, h.now, options);
    h2.engine.reclaim().expect("reclaim");
    let stats = h2.engine.reclaim_stats();
    assert_eq!(stats.segments_merged, 4, "{stats:?}");
    assert_eq!(stats.dead_bytes, 0, "{stats:?}");
    assert!(stats.merge_bytes_read < stats.usage.own_bytes, "only live blocks were read: {stats:?}");
    assert!(
        stats.usage.own_bytes < used * 6 / 10,
        "over half of the data was dead: {used} → {} {stats:?} {:?}",
        stats.usage.own_bytes,
        h2.engine.stats()
    );
    assert_eq!(timestamps(&h2.engine, debug[0]).len(), 600, "the live end of an overridden series survives");
    for &id in &keep {
        assert_eq!(timestamps(&h2.engine, id).len(), 4 * 3600, "live series survive the merge intact");
    }
    let key = SeriesKey::new("doomed", [("sensor", "0")], "value").and_then(|k| k.in_database("plant")).expect("key");
    assert_eq!(h2.engine.find_series(&key), None);
}

/// An engine in `dir` on the clock `now`, with explicit flushes and reclaim cycles only.
fn reopen_with(dir: tempfile::TempDir, now: Arc<AtomicI64>, reclaim: ReclaimOptions) -> Harness {
    // Every flush seals its own segment.
    reopen_with_segment_bytes(dir, now, reclaim, 1)
}

#[test]
fn a_full_disk_of_live_data_evicts_the_oldest_and_keeps_usage_under_the_high_threshold() {
    let ids_count = 4;
    // Capacity of about 40 hours of data, no retention policy at all; each hour is 2.5% of
    // the capacity, well under the 5% between U_l and U_h (what `sensordb plan` checks).
    let probe = harness(own_capacity(1 << 40));
    let ids: Vec<SeriesId> = (0..ids_count).map(|s| series(&probe.engine, "default", "temp", s)).collect();
    write_hour(&probe.engine, &ids, 0, 3600);
    let hour_bytes = probe.engine.stats().store.bytes + probe.engine.stats().catalog_bytes;
    drop(probe);

    let options = own_capacity(40 * hour_bytes);
    let (low, high) = (options.throttle_low, options.throttle_high);
    let h = harness(options);
    let ids: Vec<SeriesId> = (0..ids_count).map(|s| series(&h.engine, "default", "temp", s)).collect();
    let mut previous_first = 0;
    for hour in 0..200 {
        write_hour(&h.engine, &ids, hour * 3600, 3600);
        h.engine.reclaim().expect("reclaim");
        let usage = h.engine.reclaim_stats().usage.share;
        assert!(usage <= high, "hour {hour}: usage {usage:.3} over U_h: {:?}", h.engine.reclaim_stats());
        let kept = timestamps(&h.engine, ids[0]);
        assert_eq!(kept.last(), Some(&((hour + 1) * 3600 * SECOND - SECOND)), "newest data readable");
        assert!(kept[0] >= previous_first, "eviction goes oldest first");
        previous_first = kept[0];
    }
    let stats = h.engine.reclaim_stats();
    assert!(stats.bytes_evicted > 0 && stats.segments_removed > 150, "{stats:?}");
    assert!(matches!(h.engine.admission(), Admission::Now | Admission::After(_)), "writers never stopped");
    let _ = low;
}

/// At `U_h` the admission every writer goes through says to wait until the writer has waited
/// `full_wait_max`, then refuses with `NoSpace`, and holds no acknowledgement; `Engine::write`
/// with `throttle_writes` goes through the same admission: it waits, fails the same way and
/// stores nothing.
#[test]
fn at_the_high_threshold_admission_waits_then_refuses_and_throttled_writes_obey_it() {
    let probe = harness(own_capacity(1 << 40));
    let ids: Vec<SeriesId> = (0..4).map(|s| series(&probe.engine, "default", "temp", s)).collect();
    write_hour(&probe.engine, &ids, 0, 3600);
    probe.engine.reclaim().expect("reclaim");
    let used = probe.engine.reclaim_stats().usage.own_bytes as f64;
    drop(probe);
    let wait_max = Duration::from_millis(300);
    let options = ReclaimOptions { evict_oldest_when_full: false, full_wait_max: wait_max, ..own_capacity((used / 0.97) as u64) };
    let h = harness(options.clone());
    let ids: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "default", "temp", s)).collect();
    write_hour(&h.engine, &ids, 0, 3600);
    h.engine.reclaim().expect("reclaim");
    assert_eq!(h.engine.admit(Instant::now()).expect("still within the wait"), Admission::WaitForSpace, "{:?}", h.engine.reclaim_stats());
    assert_eq!(h.engine.acknowledgement_delay(), None, "at U_h a writer waits before its write, not after");
    let long_ago = Instant::now().checked_sub(wait_max).expect("an instant 300 ms ago");
    let refused = h.engine.admit(long_ago).expect_err("waited full_wait_max");
    assert!(refused.is_no_space(), "{refused}");

    let Harness { engine, now, _dir: dir } = h;
    engine.close().expect("close");
    let clock = now.clone();
    let options = EngineOptions {
        durability: Durability::None,
        background_compaction: false,
        background_reclaim: false,
        throttle_writes: true,
        reclaim: options,
        clock: Arc::new(move || clock.load(Ordering::SeqCst)),
        ..EngineOptions::default()
    };
    let engine = Engine::open(dir.path(), options).expect("reopen");
    let mut batch = WriteBatch::new();
    batch.push(ids[0], 7200 * SECOND, Value::I64(1)).expect("push");
    let started = Instant::now();
    let refused = engine.write(&batch).expect_err("no space");
    assert!(refused.is_no_space(), "{refused}");
    assert!(started.elapsed() >= wait_max, "the write waited for space first");
    assert_eq!(timestamps(&engine, ids[0]).last(), Some(&(3599 * SECOND)), "nothing of the refused write is stored");
}

#[test]
fn admission_follows_the_throttle_formula_at_the_measured_usage() {
    let probe = harness(own_capacity(1 << 40));
    let ids: Vec<SeriesId> = (0..4).map(|s| series(&probe.engine, "default", "temp", s)).collect();
    write_hour(&probe.engine, &ids, 0, 3600);
    probe.engine.reclaim().expect("reclaim");
    let used = probe.engine.reclaim_stats().usage.own_bytes as f64;
    drop(probe);
    for (usage, expected) in [(0.5, None), (0.925, Some(0.5)), (0.97, Some(f64::INFINITY))] {
        let options = ReclaimOptions { evict_oldest_when_full: false, ..own_capacity((used / usage) as u64) };
        let h = harness(options);
        let ids: Vec<SeriesId> = (0..4).map(|s| series(&h.engine, "default", "temp", s)).collect();
        write_hour(&h.engine, &ids, 0, 3600);
        h.engine.reclaim().expect("reclaim");
        let measured = h.engine.reclaim_stats();
        match (h.engine.admission(), expected) {
            (Admission::Now, None) => {}
            (Admission::After(delay), Some(seconds)) => {
                let want = (measured.usage.share - 0.90) / 0.05;
                assert!((delay.as_secs_f64() - want).abs() < 1e-6 && (want - seconds).abs() < 0.05, "{delay:?} at {measured:?}");
            }
            (Admission::WaitForSpace, Some(seconds)) if seconds.is_infinite() => {}
            (got, _) => panic!("usage {usage}: got {got:?}, stats {measured:?}"),
        }
    }
}

/// Reclaim merges copy live blocks byte for byte, shared timestamp records with them, and merge
/// only a series whose blocks overlap (superseded points), the last write winning.
#[test]
fn merges_copy_live_blocks_as_they_are_and_resolve_superseded_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let now = Arc::new(AtomicI64::new(0));
    // One segment of two flushes: segments seal only when the engine closes.
    let h = reopen_with_segment_bytes(dir, now, own_capacity(1 << 40), 1 << 30);
    let field = |measurement: &str, field: &str| {
        let key = SeriesKey::new(measurement, [("sensor", "0")], field).and_then(|k| k.in_database("plant")).expect("key");
        h.engine.series_id(&key, ValueKind::I64).expect("series")
    };
    let (temp, humidity) = (field("env", "temp"), field("env", "humidity"));
    let overwritten = field("over", "value");
    let doomed = field("doomed", "value");
    let value = |series: SeriesId, t: i64, generation: i64| (t * 7919 + i64::from(series.0) * 104_729 + generation * 1_000_003) % 1_000_000;
    let write = |from: i64, to: i64, generation: i64, series: &[SeriesId]| {
        let mut batch = WriteBatch::new();
        for &id in series {
            for t in from..to {
                batch.push(id, t * SECOND, Value::I64(value(id, t, generation))).expect("push");
            }
        }
        h.engine.write(&batch).expect("write");
        h.engine.flush().expect("flush");
    };
    write(0, 3600, 0, &[temp, humidity, overwritten, doomed]);
    write(3600, 7200, 0, &[temp, humidity, doomed]);
    write(1800, 5400, 1, &[overwritten]);
    let Harness { engine, now, _dir: dir } = h;
    engine.close().expect("close");
    let probe = reopen_with_segment_bytes(dir, now, own_capacity(1 << 40), 1 << 30);
    assert_eq!(segment_files(&probe.engine).len(), 1, "one sealed segment");
    assert_eq!(probe.engine.delete_series("plant", Some("doomed"), &[]).expect("delete"), 1);
    probe.engine.reclaim().expect("reclaim");
    let used = probe.engine.reclaim_stats().usage.own_bytes;
    let blocks_before = probe.engine.stats().store.blocks;
    let Harness { engine, now, _dir: dir } = probe;
    engine.close().expect("close");

    // Hungry: a capacity the live data alone overfills.
    let h = reopen_with_segment_bytes(dir, now, ReclaimOptions { evict_oldest_when_full: false, ..own_capacity(used / 2) }, 1 << 30);
    h.engine.reclaim().expect("reclaim");
    let stats = h.engine.reclaim_stats();
    assert_eq!(stats.segments_merged, 1, "{stats:?}");
    // temp and humidity keep their two blocks each; the overwritten series' two become one.
    assert_eq!(blocks_before, 2 + 2 + 2 + 2);
    assert_eq!(h.engine.stats().store.blocks, 2 + 2 + 1, "{:?}", h.engine.stats());
    for id in [temp, humidity] {
        let read = h.engine.read(id, i64::MIN, i64::MAX).collect_all().expect("read").expect("points");
        assert_eq!(read.timestamps, (0..7200).map(|t| t * SECOND).collect::<Vec<_>>());
        let expected: Vec<i64> = (0..7200).map(|t| value(id, t, 0)).collect();
        assert_eq!(read.values, crate::model::ValueColumn::I64(expected));
    }
    let read = h.engine.read(overwritten, i64::MIN, i64::MAX).collect_all().expect("read").expect("points");
    assert_eq!(read.timestamps, (0..5400).map(|t| t * SECOND).collect::<Vec<_>>());
    let expected: Vec<i64> = (0..5400).map(|t| value(overwritten, t, i64::from(t >= 1800))).collect();
    assert_eq!(read.values, crate::model::ValueColumn::I64(expected), "the newer write wins");

    // The copies kept their shared timestamp records, re-pointed.
    let files = segment_files(&h.engine);
    assert_eq!(files.len(), 1);
    let scan = crate::segment::scan_segment(&crate::fs::RealFs, &files[0]).expect("scan");
    let mut records = std::collections::HashMap::new();
    let shared = scan
        .entries
        .iter()
        .map(|entry| crate::segment::read_raw_block(&files[0], scan.file.as_ref(), entry, &mut records).expect("raw block"))
        .filter(|raw| raw.shared.is_some())
        .count();
    assert_eq!(shared, 4, "temp and humidity share their timestamps in both groups");
}

fn reopen_with_segment_bytes(dir: tempfile::TempDir, now: Arc<AtomicI64>, reclaim: ReclaimOptions, segment_bytes_max: u64) -> Harness {
    let clock = now.clone();
    let options = EngineOptions {
        durability: Durability::None,
        segment_bytes_max,
        background_compaction: false,
        background_reclaim: false,
        throttle_writes: false,
        reclaim,
        clock: Arc::new(move || clock.load(Ordering::SeqCst)),
        ..EngineOptions::default()
    };
    let engine = Engine::open(dir.path(), options).expect("reopen");
    Harness { engine, now, _dir: dir }
}

/// Thinly spread dead data (one series in ten deleted, in every segment): between `U_m` and
/// `U_l` the Fisherman lets such segments go (`D` ≈ 0.1 < `D_m`), but from `U_l` on writers are
/// being slowed and he takes them, until usage is back under `U_l`.
#[test]
fn thin_dead_data_is_merged_only_once_writers_would_be_slowed() {
    let setup = |usage: f64| {
        let probe = harness(own_capacity(1 << 40));
        let ids: Vec<SeriesId> = (0..10).map(|s| series(&probe.engine, "plant", "temp", s)).collect();
        for hour in 0..4 {
            write_hour(&probe.engine, &ids, hour * 3600, 3600);
        }
        probe.engine.reclaim().expect("reclaim");
        let used = probe.engine.reclaim_stats().usage.own_bytes as f64;
        let Harness { engine, now, _dir: dir } = probe;
        engine.close().expect("close");
        let options = ReclaimOptions { evict_oldest_when_full: false, ..own_capacity((used / usage) as u64) };
        let h = reopen_with(dir, now, options);
        let deleted = h.engine.delete_series("plant", Some("temp"), &[("sensor", "3")]).expect("delete");
        assert_eq!(deleted, 1);
        h.engine.reclaim().expect("reclaim");
        h
    };
    let calm = setup(0.85);
    let stats = calm.engine.reclaim_stats();
    assert!(stats.usage.share > 0.8 && stats.usage.share < 0.9, "{stats:?}");
    assert_eq!(stats.segments_merged, 0, "D ≈ 0.1 is under D_m = min(1 − H, ewma) at U = 0.85: {stats:?}");
    assert!(stats.dead_bytes > 0);

    let pressed = setup(0.93);
    let stats = pressed.engine.reclaim_stats();
    assert!(stats.segments_merged >= 1, "{stats:?}");
    assert!(stats.usage.share < 0.9, "merged until usage is under U_l: {stats:?}");
    assert_eq!(pressed.engine.admission(), Admission::Now);
    let kept = series(&pressed.engine, "plant", "temp", 0);
    assert_eq!(timestamps(&pressed.engine, kept).len(), 4 * 3600, "live data intact");
}

#[test]
fn the_newest_point_of_a_series_older_than_its_period_is_gone() {
    let h = harness(own_capacity(1 << 40));
    let ids: Vec<SeriesId> = (0..2).map(|s| series(&h.engine, "plant", "temp", s)).collect();
    h.engine
        .set_database_policy("plant", DatabasePolicy { period: Some(Duration::from_secs(3600)), ..DatabasePolicy::default() })
        .expect("policy");
    // Sensor 0 stopped after hour 0; sensor 1 goes on to hour 3, its last hour still buffered.
    write_hour(&h.engine, &ids, 0, 3600);
    for hour in 1..3 {
        write_hour(&h.engine, &ids[1..], hour * 3600, 3600);
    }
    let mut batch = WriteBatch::new();
    batch.push(ids[1], 3 * 3600 * SECOND, Value::I64(7)).expect("push");
    h.engine.write(&batch).expect("write");
    let before = h.engine.last_points(&ids).expect("newest");
    assert_eq!(before[0].as_ref().map(|p| p.0), Some((3600 - 1) * SECOND));
    assert_eq!(before[1], Some((3 * 3600 * SECOND, Value::I64(7))));

    h.now.store(3 * 3600 * SECOND, Ordering::SeqCst);
    h.engine.reclaim().expect("reclaim");
    let after = h.engine.last_points(&ids).expect("newest");
    assert_eq!(after[0], None, "every point of sensor 0 is older than the period");
    assert_eq!(after[1], Some((3 * 3600 * SECOND, Value::I64(7))));
}

/// Found by the small-disk test on a loaded machine: admission reuses a measurement up to 10 ms
/// old, and a writer of 64 KiB payloads into a 32 MiB file system ran 0.8% past `U_h` in that
/// time. Bytes written since the measurement count in admission until the next one.
#[test]
fn bytes_written_since_the_last_measurement_count_in_admission() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reclaimer = super::Reclaimer::open(&crate::fs::RealFs, dir.path(), own_capacity(1_000_000)).expect("open");
    reclaimer.measure(&crate::fs::RealFs, dir.path(), 500_000);
    assert_eq!(reclaimer.admission(), Admission::Now, "0.5 of the capacity");
    reclaimer.note_written(460_000);
    assert_eq!(reclaimer.admission(), Admission::WaitForSpace, "0.5 measured + 0.46 written is past U_h 0.95 at once");
    reclaimer.measure(&crate::fs::RealFs, dir.path(), 500_000);
    assert_eq!(reclaimer.admission(), Admission::Now, "a new measurement replaces the estimate");
    reclaimer.note_written(410_000);
    assert!(matches!(reclaimer.admission(), Admission::After(_)), "0.91: between the thresholds");
}

/// With no retention, deletion or eviction (every cutoff at the start of time), a cycle takes
/// the segments' dead shares and the store's dead bytes from the summaries instead of visiting
/// every block: the answers are the ones the visit gives, for sealed segments (resident and
/// in runs) and the open one.
#[test]
fn a_store_where_nothing_can_be_dead_is_evaluated_from_summaries_as_by_visiting_its_blocks() {
    use crate::store::{BlockStore, SegmentStore, SegmentStoreOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let options = SegmentStoreOptions { segment_bytes_max: 1 << 20, sync: false, ..SegmentStoreOptions::default() };
    let (store, _) = SegmentStore::open(Arc::new(crate::fs::RealFs), dir.path(), options).expect("store");
    for g in 0..4u64 {
        let mut group = crate::segment::GroupBuilder::new();
        for series in 1..=50u32 {
            let start = g as i64 * 1000 + i64::from(series);
            let timestamps: Vec<i64> = (start..start + 30).collect();
            group.add_block(SeriesId(series), &timestamps, &crate::model::ValueColumn::I64(timestamps.clone()));
        }
        store.put_group(group, g + 1).expect("put");
        if g < 3 {
            store.seal().expect("seal");
        }
    }
    assert!(store.summaries().iter().any(|s| !s.sealed), "the last group stays in an open segment");
    for (class_of, cutoffs) in [(vec![], vec![]), (vec![0; 50], vec![i64::MIN]), (vec![0, 1, 0, 1], vec![i64::MIN, i64::MIN])] {
        let quick = super::evaluate_segments(&store, &class_of, &cutoffs);
        let visited = super::evaluate_segments_block_by_block(&store, &class_of, &cutoffs);
        assert_eq!(quick, visited);
        assert_eq!(quick.len(), 3, "the sealed segments");
        assert_eq!(super::dead_bytes(&store, &class_of, &cutoffs), super::dead_bytes_block_by_block(&store, &class_of, &cutoffs));
    }
    // A cutoff inside the data: the visit decides, and finds dead blocks.
    let (class_of, cutoffs) = (vec![0; 50], vec![1500]);
    assert!(super::dead_bytes(&store, &class_of, &cutoffs).0 > 0);
    assert!(super::evaluate_segments(&store, &class_of, &cutoffs).iter().any(|c| c.dead_share == 1.0));
}
