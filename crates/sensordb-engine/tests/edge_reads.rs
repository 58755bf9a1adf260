//! Reads whose consumer takes at most `limit` points (`Engine::read_edge`, a query's `LIMIT`)
//! copy only that many points of each memtable: their first `limit` points, oldest or newest
//! first, are the full read's, whatever the memtables override in the segments.

use proptest::prelude::*;
use sensordb_engine::{Durability, Engine, EngineOptions, RangeRead, SeriesKey, Value, ValueKind, WriteBatch};

/// Up to `limit` points of `read` from its oldest (`newest` false) or newest end, in that order.
fn take(mut read: RangeRead, newest: bool, limit: usize) -> Vec<(i64, Value)> {
    let mut taken = Vec::new();
    while taken.len() < limit {
        let view = if newest { read.next_view_back() } else { read.next_view() };
        let Some(view) = view else { break };
        let view = view.expect("view");
        let (values, window) = view.values();
        let mut points: Vec<(i64, Value)> = view.timestamps().iter().zip(window).map(|(&t, i)| (t, values.get(i))).collect();
        if newest {
            points.reverse();
        }
        taken.extend(points.into_iter().take(limit - taken.len()));
    }
    taken
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_limited_read_begins_as_the_full_read_does(
        flushed in proptest::collection::vec((0i64..200, -50i64..50), 0..120),
        buffered in proptest::collection::vec((0i64..200, -50i64..50), 0..120),
        later in proptest::collection::vec((0i64..200, -50i64..50), 0..40),
        from in -10i64..200,
        length in 0i64..220,
        limit in 1usize..30,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("open");
        let id = engine.series_id(&SeriesKey::new("m", [("sensor", "s")], "v").expect("key"), ValueKind::I64).expect("id");
        let write = |points: &[(i64, i64)]| {
            let mut batch = WriteBatch::new();
            for &(t, v) in points {
                batch.push(id, t, Value::I64(v)).expect("push");
            }
            engine.write(&batch).expect("write");
        };
        // Points in a segment, then points in the memtable (out of order, repeating and
        // overriding the segment's), then more after them.
        write(&flushed);
        engine.flush().expect("flush");
        write(&buffered);
        write(&later);
        let to = from + length;
        let full: Vec<(i64, Value)> = engine.read(id, from, to).points().map(|p| p.map(|p| (p.timestamp, p.value)).expect("point")).collect();
        let oldest: Vec<(i64, Value)> = full.iter().take(limit).cloned().collect();
        let newest: Vec<(i64, Value)> = full.iter().rev().take(limit).cloned().collect();
        prop_assert_eq!(take(engine.read_edge(id, from, to, false, limit), false, limit), oldest);
        prop_assert_eq!(take(engine.read_edge(id, from, to, true, limit), true, limit), newest);
    }
}
