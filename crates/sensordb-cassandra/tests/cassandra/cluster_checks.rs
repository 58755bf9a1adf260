//! Two sensordb nodes on one keyspace (issue 15 items 3-4): each writes through its own engine
//! and data directory, and reads the other's flushed points after the visibility delay, plus
//! its own unflushed ones; database definitions made on one reach the other.

use crate::node::store_options;
use sensordb_cassandra::{CassandraOptions, CassandraStore, DatabaseSync, DatabasesMerged};
use sensordb_engine::store::BlockStore;
use sensordb_engine::{DatabasePolicy, Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind, WriteBatch};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const VISIBILITY: Duration = Duration::from_millis(200);
const REMOVAL_GRACE: Duration = Duration::from_secs(2);

fn open_node(dir: &Path, options: &CassandraOptions, node: u16) -> (Engine, Arc<CassandraStore>) {
    let options = CassandraOptions { node_id: Some(node), visibility: VISIBILITY, removal_grace: REMOVAL_GRACE, ..options.clone() };
    let store = Arc::new(CassandraStore::open(options).expect("open store"));
    CassandraStore::watch_other_nodes(&store).expect("watcher");
    let engine_options = EngineOptions {
        durability: Durability::Os,
        background_compaction: false,
        background_reclaim: false,
        throttle_writes: false,
        ..EngineOptions::default()
    };
    let engine = Engine::open_with_store(dir, engine_options, store.clone() as Arc<dyn BlockStore>).expect("open engine");
    (engine, store)
}

fn key(sensor: &str) -> SeriesKey {
    SeriesKey::new("temperature", [("sensor", sensor)], "value").and_then(|k| k.in_database("plant")).expect("key")
}

fn write(engine: &Engine, sensor: &str, timestamps: std::ops::Range<i64>) {
    for t in timestamps {
        write_value(engine, sensor, t, t * 10);
    }
}

fn write_value(engine: &Engine, sensor: &str, timestamp: i64, value: i64) {
    let id = engine.series_id(&key(sensor), ValueKind::I64).expect("id");
    let mut batch = WriteBatch::new();
    batch.push(id, timestamp, Value::I64(value)).expect("push");
    engine.write(&batch).expect("write");
}

/// The value `engine` reads of `sensor` at `timestamp`.
fn value_at(engine: &Engine, sensor: &str, timestamp: i64) -> Option<Value> {
    let id = engine.find_series(&key(sensor))?;
    let mut points = engine.read(id, timestamp, timestamp + 1).points();
    points.next().map(|p| p.expect("read").value)
}

/// The timestamps `engine` reads of `sensor` (empty when it does not know the series).
fn try_timestamps(engine: &Engine, sensor: &str) -> sensordb_engine::Result<Vec<i64>> {
    let Some(id) = engine.find_series(&key(sensor)) else { return Ok(Vec::new()) };
    engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.map(|p| p.timestamp)).collect()
}

fn timestamps(engine: &Engine, sensor: &str) -> Vec<i64> {
    try_timestamps(engine, sensor).expect("read")
}

/// Waits (at most 20 s) until `engine` reads `expected` of `sensor`; returns how long it took.
/// A read that fails is retried: one racing the other node's removal of a segment it still
/// lists fails until the next poll (no removal grace yet, see docs/CASSANDRA.md); reported.
fn wait_for(engine: &Engine, sensor: &str, expected: &[i64]) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        match try_timestamps(engine, sensor) {
            Ok(found) if found == expected => return Some(started.elapsed()),
            Ok(_) => {}
            Err(error) => eprintln!("read failed, retried: {error}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn two_nodes_read_each_others_flushed_points_after_the_visibility_delay() {
    let Some(options) = store_options("two_nodes") else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (a, store_a) = open_node(dir_a.path(), &options, 1);
    let (b, store_b) = open_node(dir_b.path(), &options, 2);

    // Different series on each node, and one series (north) written on both: its key gets id 1
    // on A and id 2 on B, and each node reads the other's blocks under its own id.
    write(&a, "north", 0..100);
    write(&b, "south", 0..50);
    write(&b, "north", 1_000..1_010);
    a.flush().expect("flush");
    b.flush().expect("flush");
    // Most likely before the first poll: fills A's cache of newest points with its own.
    let north_on_a = a.find_series(&key("north")).expect("id");
    let newest_before = a.last_points(&[north_on_a]).expect("last")[0].clone().map(|p| p.0);
    assert!(newest_before == Some(99) || newest_before == Some(1_009), "{newest_before:?}");
    let north: Vec<i64> = (0..100).chain(1_000..1_010).collect();
    let south: Vec<i64> = (0..50).collect();
    let seen_on_b = wait_for(&b, "north", &north).expect("B reads A's flushed points");
    let seen_on_a = wait_for(&a, "south", &south).expect("A reads B's flushed points");
    assert_eq!(timestamps(&a, "north"), north, "A reads its own blocks and B's of the same key");
    let newest = a.last_points(&[north_on_a]).expect("last")[0].clone().map(|p| p.0);
    assert_eq!(newest, Some(1_009), "the newest point cache learns of B's blocks");
    eprintln!("visible on the other node {seen_on_b:?} and {seen_on_a:?} after the flush (visibility {VISIBILITY:?})");
    assert_ne!(a.find_series(&key("north")), b.find_series(&key("north")), "ids are each node's own");
    assert!(store_b.stats().blocks as u64 > store_b.summaries().iter().map(|s| s.blocks).sum::<u64>(), "B indexes A's blocks");
    assert!(store_a.summaries().iter().all(|s| s.id >> 48 == 1), "A's segments carry its node id");

    // Unflushed points are readable on their node only, until the flush.
    write(&a, "north", 2_000..2_001);
    let mut with_unflushed = north.clone();
    with_unflushed.push(2_000);
    assert_eq!(timestamps(&a, "north"), with_unflushed);
    std::thread::sleep(VISIBILITY * 3);
    assert_eq!(timestamps(&b, "north"), north, "A's memtable is not visible on B");
    a.flush().expect("flush");
    wait_for(&b, "north", &with_unflushed).expect("visible once flushed");

    // A's compaction replaces its segments: B drops the old ones and reads the new one.
    write(&a, "north", 3_000..3_001);
    with_unflushed.push(3_000);
    assert!(!a.compact().expect("compact").is_empty(), "three short blocks of north are worth rewriting");
    assert!(store_a.segments_awaiting_deletion() > 0, "the replaced segments' rows outlive the removal by the grace");
    wait_for(&b, "north", &with_unflushed).expect("the same points through A's rewritten segment");
    let started = Instant::now();
    while store_a.segments_awaiting_deletion() > 0 && started.elapsed() < REMOVAL_GRACE * 5 {
        std::thread::sleep(VISIBILITY);
    }
    assert_eq!(store_a.segments_awaiting_deletion(), 0, "deleted by the watcher once the grace is over");
    wait_for(&b, "north", &with_unflushed).expect("B no longer lists the deleted rows");

    // The same timestamp written on both nodes: the later flush wins on both.
    write_value(&a, "east", 7, 1);
    a.flush().expect("flush");
    write_value(&b, "east", 7, 2);
    b.flush().expect("flush");
    let started = Instant::now();
    while value_at(&a, "east", 7) != Some(Value::I64(2)) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(VISIBILITY);
    }
    assert_eq!(value_at(&a, "east", 7), Some(Value::I64(2)), "B's later flush wins on A");
    assert_eq!(value_at(&b, "east", 7), Some(Value::I64(2)), "and on B");
    a.close().expect("close");
    b.close().expect("close");
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn database_definitions_are_shared_both_ways_and_the_keyspace_wins_at_start() {
    let Some(options) = store_options("shared_databases") else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (a, store_a) = open_node(dir_a.path(), &options, 1);
    let (b, store_b) = open_node(dir_b.path(), &options, 2);
    let days = |n: u64| Some(Duration::from_secs(n * 86_400));
    a.set_database_policy("plant", DatabasePolicy { period: days(30), ..Default::default() }).expect("policy");
    // B starts with a stale definition of its own.
    b.set_database_policy("plant", DatabasePolicy { period: days(1), ..Default::default() }).expect("policy");
    let (mut sync_a, mut sync_b) = (DatabaseSync::default(), DatabaseSync::default());

    let merged = store_a.merge_databases(&a, &mut sync_a).expect("merge");
    assert_eq!((merged.published, merged.applied), (vec!["plant".to_string()], vec![]));
    let merged = store_b.merge_databases(&b, &mut sync_b).expect("merge");
    assert_eq!((merged.published, merged.applied), (vec![], vec!["plant".to_string()]), "the keyspace's definition wins at start");
    assert_eq!(b.databases().policies["plant"].period, days(30));

    // Later changes on B reach A.
    let plant = DatabasePolicy { period: days(30), capacity_bytes: Some(1 << 30), ..Default::default() };
    b.set_database_policy("plant", plant.clone()).expect("policy");
    b.create_database("north").expect("create");
    let merged = store_b.merge_databases(&b, &mut sync_b).expect("merge");
    assert_eq!(merged.published, vec!["north".to_string(), "plant".to_string()]);
    let merged = store_a.merge_databases(&a, &mut sync_a).expect("merge");
    assert_eq!(merged.applied, vec!["north".to_string(), "plant".to_string()]);
    assert_eq!(a.databases(), b.databases(), "both nodes apply the same definitions");
    assert_eq!(a.databases().policies["plant"], plant);
    let merged = store_a.merge_databases(&a, &mut sync_a).expect("merge");
    assert_eq!(merged, DatabasesMerged::default(), "nothing to do once merged");
}
