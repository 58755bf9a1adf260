//! Retention without deletes (issue 15 item 2): block rows carry a TTL from their series'
//! storage period, Cassandra drops them by itself, and removing a segment of expired rows
//! writes no tombstone.

use crate::node::{group, store_options};
use sensordb_cassandra::{CassandraOptions, CassandraStore};
use sensordb_engine::store::{BlockStore, SeriesDirectory};
use sensordb_engine::{
    DatabasePolicy, Durability, Engine, EngineOptions, ReclaimOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch,
};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Series 1 lives `period`; others have none.
struct FirstSeriesPeriod(Duration);

impl SeriesDirectory for FirstSeriesPeriod {
    fn period(&self, series: SeriesId) -> Option<Duration> {
        (series == SeriesId(1)).then_some(self.0)
    }

    fn series(&self, _: SeriesId) -> Option<(Arc<SeriesKey>, ValueKind)> {
        None
    }

    fn register(&self, _: &SeriesKey, _: ValueKind) -> sensordb_engine::Result<SeriesId> {
        Err(sensordb_engine::Error::Closed)
    }

    fn blocks_changed(&self, _: &[SeriesId]) {}
}

fn now_ns() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos()).expect("ns")
}

/// `(series, TTL(block))` of every block row, read straight from Cassandra.
fn block_ttls(options: &CassandraOptions) -> Vec<(i64, Option<i32>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let session =
            scylla::client::session_builder::SessionBuilder::new().known_nodes(&options.contact_points).build().await.expect("session");
        let cql = format!("SELECT series, TTL(block) FROM {}.blocks", options.keyspace);
        let result = session.query_unpaged(cql, ()).await.expect("select");
        let rows = result.into_rows_result().expect("rows");
        let mut ttls = rows.rows::<(i64, Option<i32>)>().expect("typed rows").collect::<Result<Vec<_>, _>>().expect("rows");
        ttls.sort();
        ttls
    })
}

/// Waits (at most `limit`) until no row of `series` is left; returns whether none is.
fn wait_until_gone(options: &CassandraOptions, series: i64, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if block_ttls(options).iter().all(|(s, _)| *s != series) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn a_row_expires_by_its_ttl_and_removing_its_segment_deletes_nothing() {
    let Some(options) = store_options("ttl_store") else { return };
    let options = CassandraOptions { ttl_slack: Duration::ZERO, ..options };
    let store = CassandraStore::open(options.clone()).expect("open");
    store.set_series_directory(Arc::new(FirstSeriesPeriod(Duration::from_secs(3))));
    let start = now_ns();
    store.put_group(group(1, start, 10), 1).expect("put");
    store.put_group(group(2, start, 10), 1).expect("put");
    let ttls = block_ttls(&options);
    assert_eq!(ttls.len(), 2, "{ttls:?}");
    assert_eq!(ttls[1], (2, None), "a series without a period gets no TTL");
    let ttl = ttls[0].1.expect("series 1 has a TTL");
    assert!((1..=4).contains(&ttl), "3 s past the newest point, rounded up: {ttl}");
    assert_eq!(store.blocks(SeriesId(1), i64::MIN, i64::MAX).len(), 1);

    assert!(wait_until_gone(&options, 1, Duration::from_secs(20)), "Cassandra dropped the row by itself");
    assert!(store.blocks(SeriesId(1), i64::MIN, i64::MAX).is_empty(), "an expired block is no longer listed");
    assert_eq!(store.blocks(SeriesId(2), i64::MIN, i64::MAX).len(), 1);
    assert!(store.blocks_of_segments(&[store.summaries()[0].id]).iter().all(|b| b.entry.series == SeriesId(2)), "nor rewritten");

    store.seal().expect("seal");
    let ids: Vec<u64> = store.summaries().iter().map(|s| s.id).collect();
    assert!(store.remove_segments(&ids).expect("remove") > 0);
    assert_eq!(store.block_rows_left_to_expire(), 1, "the expired row was left alone");
    assert_eq!(store.block_rows_deleted(), 1, "only the row without a TTL was deleted");
    assert!(block_ttls(&options).is_empty());
    drop(store);
    let reopened = CassandraStore::open(options).expect("reopen");
    assert!(reopened.summaries().is_empty(), "the removal held");
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn the_engine_writes_rows_with_its_databases_periods_and_reclaims_expired_ones_without_deletes() {
    let Some(options) = store_options("ttl_engine") else { return };
    let options = CassandraOptions { ttl_slack: Duration::ZERO, ..options };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(CassandraStore::open(options.clone()).expect("open store"));
    let engine_options = EngineOptions {
        durability: Durability::Os,
        background_compaction: false,
        background_reclaim: false,
        throttle_writes: false,
        reclaim: ReclaimOptions { file_system_usage: false, ..ReclaimOptions::default() },
        ..EngineOptions::default()
    };
    let engine = Engine::open_with_store(dir.path(), engine_options, store.clone() as Arc<dyn BlockStore>).expect("engine");
    engine.set_database_policy("plant", DatabasePolicy { period: Some(Duration::from_secs(2)), ..Default::default() }).expect("policy");
    let key =
        |database: &str| SeriesKey::new("temperature", [("sensor", "1")], "value").and_then(|k| k.in_database(database)).expect("key");
    let (short, kept) =
        (engine.series_id(&key("plant"), ValueKind::I64).expect("id"), engine.series_id(&key("archive"), ValueKind::I64).expect("id"));

    // The short-lived series alone in the first segment, so that reclaim finds it whole dead.
    let start = now_ns();
    let mut batch = WriteBatch::new();
    for i in 0..10 {
        batch.push(short, start + i, Value::I64(i)).expect("push");
    }
    engine.write(&batch).expect("write");
    engine.flush().expect("flush");
    store.seal().expect("seal");
    let mut batch = WriteBatch::new();
    batch.push(kept, start, Value::I64(1)).expect("push");
    engine.write(&batch).expect("write");
    engine.flush().expect("flush");

    let ttls = block_ttls(&options);
    let series = |id: SeriesId| i64::from(id.0);
    assert_eq!(ttls.iter().find(|(s, _)| *s == series(kept)), Some(&(series(kept), None)), "no period, no TTL: {ttls:?}");
    let ttl = ttls.iter().find(|(s, _)| *s == series(short)).and_then(|(_, ttl)| *ttl).expect("the database's period as TTL");
    assert!((1..=3).contains(&ttl), "{ttl}");

    assert!(wait_until_gone(&options, series(short), Duration::from_secs(20)), "expired without a delete");
    engine.reclaim().expect("reclaim");
    assert!(engine.reclaim_stats().segments_removed >= 1, "{:?}", engine.reclaim_stats());
    assert_eq!(store.block_rows_deleted(), 0, "no tombstone for expired rows");
    assert_eq!(store.block_rows_left_to_expire(), 1);
    assert_eq!(engine.read(short, i64::MIN, i64::MAX).points().count(), 0);
    assert_eq!(engine.read(kept, i64::MIN, i64::MAX).points().count(), 1);
    engine.close().expect("close");
}
