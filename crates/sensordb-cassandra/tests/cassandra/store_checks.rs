//! The `BlockStore` contract over Cassandra: groups written and listed by series and range,
//! shared timestamps, sequences, rewrites, removal with pins, and reopening the keyspace.

use crate::node::{group, store_options};
use sensordb_cassandra::CassandraStore;
use sensordb_engine::store::{BlockStore, GroupBuilder};
use sensordb_engine::{SeriesId, ValueColumn, ValueKind};
use std::collections::HashMap;

/// Two fields (series 1 and 2) of one row sharing a timestamp record, as flushes write them.
fn row_group(start: i64, points: i64) -> GroupBuilder {
    let mut group = GroupBuilder::new();
    let timestamps: Vec<i64> = (start..start + points).collect();
    let shared = group.add_shared_timestamps(&timestamps);
    for series in [1, 2] {
        let values = ValueColumn::I64(timestamps.iter().map(|t| t * series).collect());
        group.add_block_sharing(SeriesId(series as u32), &timestamps, &values, shared, &[]);
    }
    group
}

fn timestamps(store: &CassandraStore, series: u32, from: i64, to: i64) -> Vec<i64> {
    store.blocks(SeriesId(series), from, to).iter().flat_map(|b| store.read_block(b).expect("read").timestamps).collect()
}

fn values(store: &CassandraStore, series: u32) -> Vec<i64> {
    store
        .blocks(SeriesId(series), i64::MIN, i64::MAX)
        .iter()
        .flat_map(|b| match store.read_block(b).expect("read").values {
            ValueColumn::I64(values) => values,
            other => panic!("kind {other:?}"),
        })
        .collect()
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn groups_are_listed_and_read_by_series_and_range() {
    let Some(options) = store_options("groups") else { return };
    let store = CassandraStore::open(options).expect("open");
    assert_eq!(store.put_group(group(1, 0, 10), 3).expect("put"), 1);
    assert_eq!(store.put_group(row_group(10, 5), 4).expect("put"), 2);
    // Another series, and a time far away (another partition bucket, before 1970).
    assert_eq!(store.put_group(group(3, -5 * 86_400_000_000_000, 4), 5).expect("put"), 3);
    assert_eq!(timestamps(&store, 1, i64::MIN, i64::MAX), (0..15).collect::<Vec<_>>());
    assert_eq!(timestamps(&store, 1, 12, 13), (10..15).collect::<Vec<_>>(), "only the block overlapping [12, 13)");
    assert!(store.blocks(SeriesId(1), 100, 200).is_empty());
    assert_eq!(values(&store, 2), (10..15).map(|t| t * 2).collect::<Vec<_>>(), "shared timestamps read back");
    assert_eq!(timestamps(&store, 3, i64::MIN, 0).len(), 4);
    assert_eq!(store.wal_checkpoint(), 5);
    let stats = store.stats();
    assert_eq!((stats.blocks, stats.points), (4, 24));
    let mut kinds = store.series_kinds();
    kinds.sort_by_key(|(id, _)| *id);
    assert_eq!(kinds, vec![(SeriesId(1), ValueKind::I64), (SeriesId(2), ValueKind::I64), (SeriesId(3), ValueKind::I64)]);
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn a_later_group_has_a_larger_sequence_and_lists_after_the_earlier_one() {
    let Some(options) = store_options("sequences") else { return };
    let store = CassandraStore::open(options).expect("open");
    let first = store.put_group(group(1, 0, 10), 1).expect("put");
    let second = store.put_group(group(1, 0, 10), 1).expect("put");
    assert!(second > first);
    let listed = store.blocks(SeriesId(1), 0, 10);
    let sequences: Vec<u64> = listed.iter().map(|b| b.block.entry.sequence).collect();
    assert_eq!(sequences, vec![first, second], "same start: ordered by sequence, both kept");
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn segments_fill_and_seal_and_the_open_one_is_never_removed() {
    let Some(options) = store_options("sealing") else { return };
    let store = CassandraStore::open(options).expect("open");
    store.put_group(group(1, 0, 10), 0).expect("put");
    let open = store.summaries()[0];
    assert!(!open.sealed);
    assert_eq!(store.remove_segments(&[open.id]).expect("remove"), 0);
    assert_eq!(timestamps(&store, 1, i64::MIN, i64::MAX).len(), 10);
    // 4096-byte segments: enough groups seal the first one and open another.
    for i in 1..100 {
        store.put_group(group(1, i * 1000, 200), 0).expect("put");
    }
    let summaries = store.summaries();
    assert!(summaries.len() > 1 && summaries[0].sealed, "{summaries:?}");
    store.seal().expect("seal");
    assert!(store.summaries().iter().all(|s| s.sealed));
}

/// Groups commit concurrently: each lands in the index when its rows are in, segments fill and
/// seal while others' groups are in flight, and a reopen finds every group.
#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn concurrent_groups_all_land_and_segments_seal_only_whole() {
    let Some(options) = store_options("concurrent") else { return };
    let store = CassandraStore::open(options.clone()).expect("open");
    let (writers, groups) = (8u32, 30i64);
    std::thread::scope(|scope| {
        for w in 1..=writers {
            let store = &store;
            scope.spawn(move || {
                for g in 0..groups {
                    store.put_group(group(w, g * 100, 50), 0).expect("put");
                    // What a writer was told is stored is listed at once.
                    assert_eq!(timestamps(store, w, g * 100, g * 100 + 49).len(), 50);
                }
            });
        }
    });
    let expected: Vec<i64> = (0..groups).flat_map(|g| g * 100..g * 100 + 50).collect();
    let summaries = store.summaries();
    assert!(summaries.iter().filter(|s| s.sealed).count() > 2, "4096-byte segments filled: {summaries:?}");
    assert!(summaries.iter().filter(|s| !s.sealed).count() <= 1);
    let blocks: u64 = summaries.iter().map(|s| s.blocks).sum();
    assert_eq!(blocks, u64::from(writers) * groups as u64);
    // Rows of commits waiting together went in shared requests.
    let (rows, requests) = store.group_rows_written();
    assert_eq!(rows, u64::from(writers) * groups as u64, "one group row a group");
    assert!(requests < rows, "{rows} group rows in {requests} requests: none shared one");
    for w in 1..=writers {
        assert_eq!(timestamps(&store, w, i64::MIN, i64::MAX), expected, "writer {w}");
    }
    drop(store);
    let reopened = CassandraStore::open(options).expect("reopen");
    let mut again: Vec<_> = reopened.summaries().iter().map(|s| (s.id, s.blocks, s.points, s.bytes)).collect();
    let mut before: Vec<_> = summaries.iter().map(|s| (s.id, s.blocks, s.points, s.bytes)).collect();
    again.sort_unstable();
    before.sort_unstable();
    assert_eq!(again, before, "the groups of every segment, as their rows say");
    for w in 1..=writers {
        assert_eq!(timestamps(&reopened, w, i64::MIN, i64::MAX), expected, "writer {w} after reopening");
    }
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn a_removed_segment_stays_readable_while_listed_and_its_rows_go_after() {
    let Some(options) = store_options("removal") else { return };
    let store = CassandraStore::open(options.clone()).expect("open");
    store.put_group(group(1, 0, 1000), 0).expect("put");
    store.seal().expect("seal");
    store.put_group(group(1, 1000, 1000), 0).expect("put");
    let listed = store.blocks(SeriesId(1), 0, 1000);
    let first = store.summaries()[0].id;
    assert!(store.remove_segments(&[first]).expect("remove") > 0);
    assert!(store.blocks(SeriesId(1), 0, 1000).is_empty(), "the index forgot the removed blocks");
    assert!(store.read_indexed_block(&listed[0].block).is_err(), "maintenance reads see the removal");
    assert_eq!(store.segments_awaiting_deletion(), 1, "pinned by the listing");
    assert_eq!(store.read_block(&listed[0]).expect("pinned").timestamps.len(), 1000);
    drop(listed);
    store.seal().expect("seal sweeps");
    assert_eq!(store.segments_awaiting_deletion(), 0);
    drop(store);
    let reopened = CassandraStore::open(options).expect("reopen");
    assert_eq!(reopened.summaries().len(), 1, "the removal held");
    assert_eq!(timestamps(&reopened, 1, i64::MIN, i64::MAX), (1000..2000).collect::<Vec<_>>());
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn a_rewrite_is_invisible_until_installed_and_then_replaces_its_inputs() {
    let Some(options) = store_options("rewrite") else { return };
    let store = CassandraStore::open(options.clone()).expect("open");
    store.put_group(row_group(0, 10), 1).expect("put");
    store.seal().expect("seal");
    store.put_group(row_group(10, 10), 2).expect("put");
    store.seal().expect("seal");
    let run: Vec<u64> = store.summaries().iter().map(|s| s.id).collect();
    assert_eq!(run.len(), 2);
    let blocks = store.blocks_of_segments(&run);
    assert_eq!(blocks.len(), 4);
    let mut rewrite = store.begin_rewrite(&run, 2, 2).expect("begin");
    // Raw copies bring their shared record along, once per source record.
    let mut copied = GroupBuilder::new();
    let mut copies = HashMap::new();
    for block in &blocks {
        let mut records = HashMap::new();
        copied.add_raw_block(block.segment, store.read_raw_block(block, &mut records).expect("raw"), &mut copies);
    }
    assert!(rewrite.append(vec![copied]).expect("append") > 0);
    assert_eq!(store.summaries().len(), 2, "not installed yet");
    assert_eq!(store.stats().blocks, 4);
    let installed = rewrite.install().expect("install").remove(0);
    assert_eq!((installed.blocks, installed.max_sequence), (4, 2));
    assert_eq!(store.summaries(), vec![installed]);
    assert_eq!(timestamps(&store, 1, i64::MIN, i64::MAX), (0..20).collect::<Vec<_>>());
    assert_eq!(values(&store, 2), (0..20).map(|t| t * 2).collect::<Vec<_>>());
    assert_eq!(store.segments_awaiting_deletion(), 0, "nothing pinned the replaced segments");
    drop(store);
    let reopened = CassandraStore::open(options).expect("reopen");
    assert_eq!(reopened.summaries().len(), 1);
    assert_eq!(values(&reopened, 2), (0..20).map(|t| t * 2).collect::<Vec<_>>());
}

#[test]
#[ignore = "starts a Cassandra node: cargo test -p sensordb-cassandra -- --include-ignored"]
fn reopening_recovers_blocks_checkpoint_and_sequence_and_drops_an_unfinished_rewrite() {
    let Some(options) = store_options("reopen") else { return };
    let store = CassandraStore::open(options.clone()).expect("open");
    store.put_group(row_group(0, 100), 7).expect("put");
    let last = store.put_group(group(3, 50, 100), 9).expect("put");
    store.seal().expect("seal");
    let summaries = store.summaries();
    // A rewrite the process never installed nor dropped: what a crash leaves.
    let ids: Vec<u64> = summaries.iter().map(|s| s.id).collect();
    let mut abandoned = store.begin_rewrite(&ids, last, 9).expect("begin");
    abandoned.append(vec![group(1, 0, 5)]).expect("append");
    std::mem::forget(abandoned);
    drop(store);

    let reopened = CassandraStore::open(options).expect("reopen");
    assert_eq!(reopened.summaries(), summaries, "same segments, sealed, from the groups table alone");
    assert_eq!(reopened.wal_checkpoint(), 9);
    assert_eq!(values(&reopened, 2), (0..100).map(|t| t * 2).collect::<Vec<_>>());
    assert_eq!(timestamps(&reopened, 3, 0, 60), (50..150).collect::<Vec<_>>());
    assert_eq!(reopened.segments_awaiting_deletion(), 0, "the unfinished rewrite was deleted at open");
    assert!(reopened.put_group(group(1, 500, 1), 10).expect("put") > last, "sequences continue after the stored ones");
}
