//! An aggregate over a raw subquery reads the subquery's rows as one table a stored series
//! (`raw::run_members`) instead of one merged table a group: its answers must equal the merged
//! table's for any data, with the ties of a shared clock, selectors that pick one row among
//! equal times, the outer query's own grouping and conditions, and either order.

use super::*;
use crate::memory::MemoryStorage;
use crate::value::FieldValue::{self, Float as F};
use proptest::prelude::*;
use sensordb_influxql::{parse, Statement};

/// Four series of one field over two models, on a coarse clock so that times repeat across
/// series (`None`: no point there).
fn store(points: &[(u8, i64, f64)]) -> MemoryStorage {
    let mut m = MemoryStorage::default();
    m.set_run_points(7);
    for truck in 0..4u8 {
        let name = format!("truck_{truck}");
        let tags = [("model", if truck % 2 == 0 { "F-150" } else { "G-2000" }), ("name", name.as_str())];
        let mine: Vec<(i64, FieldValue)> = points.iter().filter(|p| p.0 == truck).map(|p| (p.1 * 10, F(p.2))).collect();
        if !mine.is_empty() {
            m.insert("db", "diag", &tags, "status", mine);
        }
    }
    m
}

fn run(storage: &MemoryStorage, text: &str, merged: bool) -> Vec<ResultSeries> {
    let parsed = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let context = Context { storage, database: "db", now: 0, limits: Limits::default() };
    MERGED_SUBQUERIES.with(|m| m.set(merged));
    let out = select(&context, statement).unwrap_or_else(|e| panic!("{text}: {e}"));
    MERGED_SUBQUERIES.with(|m| m.set(false));
    out
}

const SHAPES: &[&str] = &[
    // TSBS breakdown-frequency's middle query.
    "SELECT floor(2*(sum(nzs)/count(nzs)))/floor(2*(sum(nzs)/count(nzs))) AS b FROM (SELECT model, status/status AS nzs FROM diag) GROUP BY time(50ns),model",
    "SELECT first(status), last(status), count(status), sum(status), max(status) FROM (SELECT status, \"name\" FROM diag) GROUP BY time(30ns)",
    "SELECT first(status), last(status) FROM (SELECT status FROM diag WHERE status > 0.3) GROUP BY model",
    "SELECT count(status), min(status) FROM (SELECT * FROM diag) WHERE status < 0.8 GROUP BY time(40ns), *",
    "SELECT mean(status), spread(status) FROM (SELECT status FROM diag GROUP BY \"name\") GROUP BY time(20ns) fill(none)",
    "SELECT last(status), first(status) FROM (SELECT status FROM diag) GROUP BY time(30ns) ORDER BY time DESC",
    "SELECT count(s) FROM (SELECT difference(m) AS s FROM (SELECT mean(status) AS m FROM diag GROUP BY time(30ns), model) GROUP BY model) GROUP BY model",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn aggregates_over_members_answer_as_over_the_merged_table(
        points in proptest::collection::vec((0..4u8, 0..30i64, prop_oneof![Just(0.0), Just(0.5), Just(1.0), 0.0..1.0f64]), 0..120),
    ) {
        let storage = store(&points);
        for shape in SHAPES {
            prop_assert_eq!(run(&storage, shape, false), run(&storage, shape, true), "{}", shape);
        }
    }
}

/// Rows of one time in several series: a selector answers as over the merged table (InfluxDB's
/// `first` takes the greatest value among equal times).
#[test]
fn a_selector_among_equal_times_answers_as_over_the_merged_table() {
    let storage = store(&[(0, 1, 0.25), (1, 1, 0.75), (2, 1, 0.5), (3, 2, 0.9)]);
    let shape = "SELECT first(status), last(status) FROM (SELECT status FROM diag) GROUP BY time(100ns)";
    let members = run(&storage, shape, false);
    assert_eq!(members, run(&storage, shape, true));
    assert_eq!(members[0].rows[0].values, [F(0.75), F(0.9)]);
}
