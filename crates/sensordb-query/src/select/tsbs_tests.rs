//! SELECT semantics the TSBS IoT queries depend on, each checked against what InfluxDB 1.8
//! answers (found by scripts/tsbs-queries), over a small store worked out by hand.

use super::*;
use crate::memory::MemoryStorage;
use crate::value::FieldValue::{self, Float as F, Integer as I, String as Str};
use sensordb_influxql::{parse, Statement};

const S: i64 = 1_000_000_000;

/// Two trucks' readings: truck_a (driver x) at 0, 10 s, 20 s; truck_b (driver y) at 0, 10 s.
fn store() -> MemoryStorage {
    let mut m = MemoryStorage::default();
    let a = [("driver", "x"), ("fleet", "f"), ("name", "truck_a")];
    let b = [("driver", "y"), ("fleet", "f"), ("name", "truck_b")];
    m.insert("iot", "readings", &a, "velocity", vec![(0, F(0.0)), (10 * S, F(20.0)), (20 * S, F(30.0))]);
    m.insert("iot", "readings", &b, "velocity", vec![(0, F(5.0)), (10 * S, F(0.0))]);
    m
}

fn query(text: &str) -> Vec<ResultSeries> {
    query_on(&store(), text)
}

fn query_on(storage: &MemoryStorage, text: &str) -> Vec<ResultSeries> {
    let parsed = parse(text).expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let context = Context { storage, database: "iot", now: 1_000 * S, limits: Limits::default() };
    select(&context, statement).expect("runs")
}

type Rows = Vec<(i64, Vec<FieldValue>)>;

/// Each series as (tag values, rows of (time, values)).
fn rows(text: &str) -> Vec<(Vec<String>, Rows)> {
    query(text)
        .into_iter()
        .map(|s| (s.tags.iter().map(|t| t.1.clone()).collect(), s.rows.into_iter().map(|r| (r.time, r.values)).collect()))
        .collect()
}

fn text(s: &str) -> FieldValue {
    Str(s.into())
}

/// (time, values) of each row of each series.
fn values(series: Vec<ResultSeries>) -> Vec<Rows> {
    series.into_iter().map(|s| s.rows.into_iter().map(|r| (r.time, r.values)).collect()).collect()
}

#[test]
fn descending_order_walks_series_backwards_too() {
    let out = rows("SELECT velocity FROM readings GROUP BY \"name\" ORDER BY time DESC LIMIT 1");
    assert_eq!(
        out,
        vec![(vec!["truck_b".to_string()], vec![(10 * S, vec![F(0.0)])]), (vec!["truck_a".to_string()], vec![(20 * S, vec![F(30.0)])]),]
    );
    let ascending = rows("SELECT velocity FROM readings GROUP BY \"name\" LIMIT 1");
    assert_eq!(ascending[0].0, vec!["truck_a".to_string()]);
    // SLIMIT counts in the walking order.
    let limited = rows("SELECT velocity FROM readings GROUP BY \"name\" ORDER BY time DESC SLIMIT 1");
    assert_eq!(limited[0].0, vec!["truck_b".to_string()]);
}

#[test]
fn dividing_by_zero_gives_zero() {
    // floor(mean / 10) is 0 for truck_b's buckets (means 5 and 0), so x / x is 0 / 0.
    let out = rows(
        "SELECT floor(mean(velocity) / 10) / floor(mean(velocity) / 10) AS mv FROM readings \
         WHERE time >= 0 AND time < 30s GROUP BY time(10s), \"name\" fill(0)",
    );
    assert_eq!(out[0].1, vec![(0, vec![F(0.0)]), (10 * S, vec![F(1.0)]), (20 * S, vec![F(1.0)])]);
    // truck_b has no point at 20 s: fill(0) fills the mean, and 0 / 0 is 0 again.
    assert_eq!(out[1].1, vec![(0, vec![F(0.0)]), (10 * S, vec![F(0.0)]), (20 * S, vec![F(0.0)])]);
    // Raw rows too, integers and floats alike.
    assert_eq!(rows("SELECT velocity / velocity FROM readings WHERE \"name\" = 'truck_b'")[0].1[1], (10 * S, vec![F(0.0)]));
    assert_eq!(crate::eval::apply(sensordb_influxql::BinaryOp::Div, &I(3), &I(0)), F(0.0));
    assert_eq!(crate::eval::apply(sensordb_influxql::BinaryOp::Mod, &I(3), &I(0)), I(0));
}

#[test]
fn fill_fills_the_aggregate_before_the_math_over_it() {
    // truck_b has no point in [20 s, 30 s): its mean is filled with 5, then doubled plus one.
    let q = |fill: &str| {
        rows(&format!(
            "SELECT mean(velocity) * 2 + 1 FROM readings WHERE \"name\" = 'truck_b' AND time >= 0 AND time < 30s GROUP BY time(10s) {fill}"
        ))
        .remove(0)
        .1
    };
    assert_eq!(q("fill(5)"), vec![(0, vec![F(11.0)]), (10 * S, vec![F(1.0)]), (20 * S, vec![F(11.0)])]);
    assert_eq!(q("fill(previous)"), vec![(0, vec![F(11.0)]), (10 * S, vec![F(1.0)]), (20 * S, vec![F(1.0)])]);
    assert_eq!(q("fill(none)"), vec![(0, vec![F(11.0)]), (10 * S, vec![F(1.0)])]);
    // A transformation over filled math: difference of 11, 1, 11.
    let out = rows(
        "SELECT difference(mean(velocity) * 2 + 1) FROM readings WHERE \"name\" = 'truck_b' AND time >= 0 AND time < 30s GROUP BY time(10s) fill(5)",
    );
    assert_eq!(out[0].1, vec![(10 * S, vec![F(-10.0)]), (20 * S, vec![F(10.0)])]);
}

#[test]
fn subquery_buckets_starting_before_the_outer_range_are_kept() {
    // The inner buckets of 20 s from 5 s on start at 0 s and 20 s; the one at 0 s holds the
    // point at 10 s and stays, though 0 s is before the outer range (InfluxDB counts it).
    let inner = "SELECT mean(velocity) AS mv FROM readings WHERE \"name\" = 'truck_a' GROUP BY time(20s)";
    let out = rows(&format!("SELECT mv FROM ({inner}) WHERE time > 5s AND time < 30s"));
    assert_eq!(out[0].1, vec![(0, vec![F(20.0)]), (20 * S, vec![F(30.0)])]);
    let counted = rows(&format!("SELECT count(mv) FROM ({inner}) WHERE time > 5s AND time < 30s GROUP BY time(1m)"));
    assert_eq!(counted[0].1, vec![(0, vec![I(2)])]);
}

#[test]
fn an_inner_raw_limit_counts_per_stored_series_when_the_outer_grouping_differs() {
    // truck_a's driver x is stored under two tag sets (with and without a model tag).
    let mut storage = store();
    let with_model = [("driver", "x"), ("fleet", "f"), ("model", "m1"), ("name", "truck_a")];
    storage.insert("iot", "readings", &with_model, "velocity", vec![(5 * S, F(7.0)), (15 * S, F(8.0))]);
    let inner = "SELECT velocity FROM readings GROUP BY \"name\", driver ORDER BY time DESC LIMIT 1";
    // Alone, the group (truck_a, x) has one last row (second: DESC walks series backwards).
    assert_eq!(values(query_on(&storage, inner))[1], vec![(20 * S, vec![F(30.0)])]);
    // Under an outer query grouped by name only, each stored series keeps its last row (20 s
    // and 15 s), and the merged rows of truck_a are limited again per run of one driver: 15 s
    // follows 20 s of the same driver and goes.
    let outer = format!("SELECT \"name\", driver, velocity FROM ({inner}) GROUP BY \"name\" ORDER BY time DESC");
    let out = values(query_on(&storage, &outer));
    assert_eq!(out[1], vec![(20 * S, vec![text("truck_a"), text("x"), F(30.0)])]);
    assert_eq!(out[0], vec![(10 * S, vec![text("truck_b"), text("y"), F(0.0)])]);
    // A series of truck_a without a driver whose last row falls between them starts the count
    // over, and 15 s stays (InfluxDB's answer to TSBS high-load has such rows).
    storage.insert("iot", "readings", &[("fleet", "f"), ("name", "truck_a")], "velocity", vec![(17 * S, F(9.0))]);
    let out = values(query_on(&storage, &outer));
    assert_eq!(
        out[1],
        vec![
            (20 * S, vec![text("truck_a"), text("x"), F(30.0)]),
            (17 * S, vec![text("truck_a"), text(""), F(9.0)]),
            (15 * S, vec![text("truck_a"), text("x"), F(8.0)]),
        ]
    );
    // Each stored series gives one row more than the limit before the merge (two here): the
    // driverless series' 12 s follows x and stays, as does x's 10 s after it; x's 5 s follows
    // x and goes.
    storage.insert("iot", "readings", &[("fleet", "f"), ("name", "truck_a")], "velocity", vec![(12 * S, F(6.0)), (17 * S, F(9.0))]);
    let out = values(query_on(&storage, &outer));
    assert_eq!(
        out[1],
        vec![
            (20 * S, vec![text("truck_a"), text("x"), F(30.0)]),
            (17 * S, vec![text("truck_a"), text(""), F(9.0)]),
            (15 * S, vec![text("truck_a"), text("x"), F(8.0)]),
            (12 * S, vec![text("truck_a"), text(""), F(6.0)]),
            (10 * S, vec![text("truck_a"), text("x"), F(20.0)]),
        ]
    );
    // Grouped by both tags outside too, the limit is per group again.
    let same = format!("SELECT velocity FROM ({inner}) GROUP BY \"name\", driver ORDER BY time DESC");
    assert_eq!(values(query_on(&storage, &same))[1], vec![(20 * S, vec![F(30.0)])]);
}

#[test]
fn each_stored_series_gives_the_merge_its_limit_and_one_row_more_whatever_the_read_gives() {
    // truck_a: driver x at 0, 10 s, 20 s (the store's), and a driverless series at 7 s, 12 s,
    // 17 s interleaved with them.
    let mut storage = store();
    storage.insert(
        "iot",
        "readings",
        &[("fleet", "f"), ("name", "truck_a")],
        "velocity",
        vec![(7 * S, F(1.0)), (12 * S, F(6.0)), (17 * S, F(9.0))],
    );
    let expected = vec![(20 * S, vec![text("x"), F(30.0)]), (17 * S, vec![text(""), F(9.0)]), (10 * S, vec![text("x"), F(20.0)])];
    // Each series' first two rows, newest first: 20 s, 10 s of x and 17 s, 12 s of the other;
    // merged, 12 s follows 17 s of its own driver and goes. Older rows never reach the merge,
    // where they would start runs again (7 s after 10 s, 0 after 7 s). The field condition
    // keeps the limit from reaching the read: the cut is the merge's own.
    for condition in ["", "WHERE velocity >= 0"] {
        let inner = format!("SELECT velocity FROM readings {condition} GROUP BY \"name\", driver ORDER BY time DESC LIMIT 1");
        let outer = format!("SELECT driver, velocity FROM ({inner}) WHERE \"name\" = 'truck_a' GROUP BY \"name\" ORDER BY time DESC");
        assert_eq!(values(query_on(&storage, &outer)), vec![expected.clone()], "{condition}");
    }
    // Oldest first: 0, 10 s of x and 7 s, 12 s of the other, each a run of its own; 17 s
    // and 20 s never reach the merge (20 s would start a run again).
    let inner = "SELECT velocity FROM readings WHERE velocity >= 0 GROUP BY \"name\", driver LIMIT 1";
    let outer = format!("SELECT driver, velocity FROM ({inner}) WHERE \"name\" = 'truck_a' GROUP BY \"name\"");
    assert_eq!(
        values(query_on(&storage, &outer)),
        vec![vec![
            (0, vec![text("x"), F(0.0)]),
            (7 * S, vec![text(""), F(1.0)]),
            (10 * S, vec![text("x"), F(20.0)]),
            (12 * S, vec![text(""), F(6.0)])
        ]]
    );
}

#[test]
fn an_inner_query_takes_the_outer_order_and_drops_empty_buckets() {
    // ORDER BY time DESC inside an ascending outer query still takes the first point.
    let out = rows("SELECT velocity FROM (SELECT velocity FROM readings WHERE \"name\" = 'truck_a' ORDER BY time DESC LIMIT 1)");
    assert_eq!(out[0].1, vec![(0, vec![F(0.0)])]);
    // truck_b's bucket at 20 s is empty: alone it is a null row, inside it is no row, so LIMIT
    // counts only buckets with points.
    let inner = "SELECT mean(velocity) AS m FROM readings WHERE \"name\" = 'truck_b' AND time >= 0 AND time < 30s GROUP BY time(10s)";
    assert_eq!(rows(inner)[0].1.len(), 3);
    assert_eq!(rows(&format!("SELECT count(m) FROM ({inner})"))[0].1, vec![(0, vec![I(2)])]);
}

#[test]
fn the_outer_group_by_tags_group_the_inner_query() {
    // The inner query selects the driver tag as a column and does not group; the outer groups
    // by driver and finds it as a tag.
    let out = rows("SELECT count(v) FROM (SELECT driver, velocity / 1 AS v FROM readings) GROUP BY driver");
    assert_eq!(out, vec![(vec!["x".to_string()], vec![(0, vec![I(3)])]), (vec!["y".to_string()], vec![(0, vec![I(2)])])]);
    // An inner aggregate is computed per outer group: the maximum per name of a per-name mean.
    let out = rows("SELECT max(m) FROM (SELECT mean(velocity) AS m FROM readings) GROUP BY \"name\"");
    assert_eq!(out[0].1, vec![(0, vec![F(50.0 / 3.0)])]);
    assert_eq!(out[1].1, vec![(0, vec![F(2.5)])]);
}
