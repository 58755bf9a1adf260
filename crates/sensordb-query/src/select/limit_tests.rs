//! Raw queries with a LIMIT read only the rows they return (`table::read_limited`): their answers
//! must equal the answers of the same query read whole and then cut per series, for any data,
//! any way the store splits its reads into runs, either order, and any OFFSET.

use super::*;
use crate::memory::MemoryStorage;
use crate::value::FieldValue::{self, Float as F, Integer as I};
use proptest::prelude::*;
use sensordb_influxql::{parse, Statement};

/// Two trucks with two fields each; `a` and `b` have points at different times (each point is
/// kept or dropped by the strategy), so rows join with nulls.
fn store(points: &[(u8, i64, Option<f64>, Option<i64>)], run_points: usize) -> MemoryStorage {
    let mut m = MemoryStorage::default();
    m.set_run_points(run_points);
    for truck in 0..3u8 {
        let name = format!("truck_{truck}");
        let tags = [("name", name.as_str()), ("fleet", if truck == 0 { "North" } else { "South" })];
        let mine = points.iter().filter(|p| p.0 == truck);
        let a: Vec<(i64, FieldValue)> = mine.clone().filter_map(|p| p.2.map(|v| (p.1, F(v)))).collect();
        let b: Vec<(i64, FieldValue)> = mine.filter_map(|p| p.3.map(|v| (p.1, I(v)))).collect();
        if !a.is_empty() {
            m.insert("db", "m", &tags, "a", a);
        }
        if !b.is_empty() {
            m.insert("db", "m", &tags, "b", b);
        }
    }
    m
}

fn run(storage: &MemoryStorage, text: &str) -> Vec<ResultSeries> {
    let parsed = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let context = Context { storage, database: "db", now: 0, limits: Limits::default() };
    select(&context, statement).unwrap_or_else(|e| panic!("{text}: {e}"))
}

const SHAPES: &[&str] = &[
    "SELECT a FROM m{where} GROUP BY \"name\"",
    "SELECT a, b FROM m{where}",
    "SELECT * FROM m{where} GROUP BY \"fleet\"",
    "SELECT \"name\", b FROM m{where} GROUP BY *",
    "SELECT a FROM m WHERE b > 3{and}",
    "SELECT b, a FROM m WHERE a <= 0.5{and} GROUP BY \"name\"",
    "SELECT \"name\" FROM m{where}",
];

fn points() -> impl Strategy<Value = Vec<(u8, i64, Option<f64>, Option<i64>)>> {
    proptest::collection::vec((0..3u8, 0..100i64, proptest::option::of(0.0..1.0f64), proptest::option::of(0..8i64)), 0..200).prop_map(
        |mut points| {
            // One point per truck and time.
            points.sort_by_key(|p| (p.0, p.1));
            points.dedup_by_key(|p| (p.0, p.1));
            points
        },
    )
}

/// A time window as the WHERE clause of a shape (`{where}`) and as a condition added to one
/// (`{and}`); two empty strings without a window.
fn window_clauses(window: Option<(i64, i64)>) -> (String, String) {
    match window {
        Some((from, length)) => {
            let range = format!("time >= {from} AND time <= {}", from + length);
            (format!(" WHERE {range}"), format!(" AND {range}"))
        }
        None => (String::new(), String::new()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_limited_read_answers_as_the_whole_read_cut_per_series(
        points in points(),
        run_points in prop_oneof![Just(1usize), Just(2), Just(5), Just(1000)],
        shape in 0..SHAPES.len(),
        descending in any::<bool>(),
        // Beyond the first round's points (16, or 1,024 under a WHERE clause, or a few when the
        // test sets it), so later rounds run too.
        limit in 1..30u64,
        offset in 0..20u64,
        window in proptest::option::of((0..100i64, 0..100i64)),
        first_round in proptest::option::of(1usize..8),
    ) {
        super::FIRST_ROUND.with(|f| f.set(first_round));
        let (where_, and) = window_clauses(window);
        let base = SHAPES[shape].replace("{where}", &where_).replace("{and}", &and);
        let order = if descending { " ORDER BY time DESC" } else { "" };
        let storage = store(&points, run_points);
        let limited = run(&storage, &format!("{base}{order} LIMIT {limit} OFFSET {offset}"));
        let mut expected = run(&storage, &format!("{base}{order}"));
        for series in &mut expected {
            series.rows.drain(..(offset as usize).min(series.rows.len()));
            series.rows.truncate(limit as usize);
        }
        expected.retain(|s| !s.rows.is_empty());
        super::FIRST_ROUND.with(|f| f.set(None));
        prop_assert_eq!(limited, expected, "{}", base);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `ORDER BY time DESC LIMIT 1` answers from the store's newest points where the condition
    /// leaves the rows alone (`table::newest_row`), and by reading where it does not settle it:
    /// either way the row the whole read gives first.
    #[test]
    fn the_newest_row_is_the_whole_reads_first(
        points in points(),
        shape in 0..SHAPES.len() + 2,
        window in proptest::option::of((0..100i64, 0..100i64)),
    ) {
        let (where_, and) = window_clauses(window);
        // Beside the shared shapes: a projection that is null where one field is missing, and
        // a condition on a tag only.
        let extra = ["SELECT a + b FROM m{where} GROUP BY \"name\"", "SELECT b, a FROM m WHERE fleet = 'South'{and} GROUP BY \"name\""];
        let base = SHAPES.get(shape).copied().unwrap_or_else(|| extra[shape - SHAPES.len()]);
        let base = base.replace("{where}", &where_).replace("{and}", &and);
        let storage = store(&points, 5);
        let newest = run(&storage, &format!("{base} ORDER BY time DESC LIMIT 1"));
        let mut expected = run(&storage, &format!("{base} ORDER BY time DESC"));
        for series in &mut expected {
            series.rows.truncate(1);
        }
        prop_assert_eq!(newest, expected, "{}", base);
    }
}

/// The newest row of a truck's two fields comes from their newest points: no run is read.
#[test]
fn the_newest_row_reads_no_history() {
    let points: Vec<(u8, i64, Option<f64>, Option<i64>)> =
        (0..3u8).flat_map(|t| (0..10_000i64).map(move |i| (t, i, Some(0.5), (i < 9_990).then_some(i)))).collect();
    let storage = store(&points, 100);
    let parsed = parse("SELECT a, b FROM m GROUP BY \"name\" ORDER BY time DESC LIMIT 1").expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    // Three trucks, two newest points each.
    let limits = Limits { max_points_scanned: 6, ..Limits::default() };
    let context = Context { storage: &storage, database: "db", now: 0, limits };
    let out = select(&context, statement).expect("within 6 points scanned");
    assert_eq!(out.len(), 3);
    for series in &out {
        assert_eq!(series.rows.len(), 1, "{series:?}");
        // b's newest point is older: the newest row has none of it.
        assert_eq!((series.rows[0].time, &series.rows[0].values), (9_999, &vec![F(0.5), FieldValue::Null]), "{series:?}");
    }
}

/// The newest row of each truck over a long history reads a few runs, not the history.
#[test]
fn the_newest_row_reads_only_the_newest_runs() {
    let points: Vec<(u8, i64, Option<f64>, Option<i64>)> =
        (0..3u8).flat_map(|t| (0..10_000i64).map(move |i| (t, i, Some(0.5), None))).collect();
    let storage = store(&points, 100);
    let parsed = parse("SELECT a FROM m GROUP BY \"name\" ORDER BY time DESC LIMIT 1").expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    // Three trucks at 100 points a run: one run each is enough.
    let limits = Limits { max_points_scanned: 300, ..Limits::default() };
    let context = Context { storage: &storage, database: "db", now: 0, limits };
    let out = select(&context, statement).expect("within 300 points scanned");
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|s| s.rows.len() == 1 && s.rows[0].time == 9_999), "{out:?}");
    // The same query read oldest first must stop just as early.
    let parsed = parse("SELECT a FROM m GROUP BY \"name\" LIMIT 1").expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let out = select(&context, statement).expect("within 300 points scanned");
    assert!(out.iter().all(|s| s.rows.len() == 1 && s.rows[0].time == 0), "{out:?}");
}

/// Points a LIMIT does not take are not counted as scanned: of a run of 100 points, a
/// `LIMIT 2` takes its first round of 16, and only those count against the query's limit
/// (its rest is neither copied nor looked at).
#[test]
fn a_limit_counts_the_points_it_takes_not_the_runs_they_lie_in() {
    let points: Vec<(u8, i64, Option<f64>, Option<i64>)> =
        (0..3u8).flat_map(|t| (0..10_000i64).map(move |i| (t, i, Some(0.5), None))).collect();
    let storage = store(&points, 100);
    let parsed = parse("SELECT a FROM m GROUP BY \"name\" LIMIT 2").expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let limits = Limits { max_points_scanned: 60, ..Limits::default() };
    let context = Context { storage: &storage, database: "db", now: 0, limits };
    let out = select(&context, statement).expect("three trucks' 16 points within 60 scanned");
    assert!(out.iter().all(|s| s.rows.iter().map(|r| r.time).eq([0, 1])), "{out:?}");
    assert_eq!(out.len(), 3);
}

/// A LIMIT over one group (no GROUP BY tags) reads only the tag sets that can hold its rows:
/// those whose points lie beyond the rows found are not read (TSBS single-last-loc's truck
/// lies in five tag sets, the oldest row in one). Oldest first from the stores' bounds of each
/// series' oldest point, newest first from their newest points.
#[test]
fn a_limit_over_one_group_reads_only_the_tag_sets_that_hold_its_rows() {
    // Truck 0 reports over the whole span; trucks 1 and 2 start later and stop earlier.
    let points: Vec<(u8, i64, Option<f64>, Option<i64>)> = (0..3u8)
        .flat_map(|t| {
            let span = i64::from(t) * 1_000..10_000 - i64::from(t) * 1_000;
            span.map(move |i| (t, i, Some(0.5), Some(i)))
        })
        .collect();
    let storage = store(&points, 100);
    let query = |text: &str, max_points_scanned: u64| {
        let parsed = parse(text).expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let limits = Limits { max_points_scanned, ..Limits::default() };
        let context = Context { storage: &storage, database: "db", now: 0, limits };
        select(&context, statement).unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    // Truck 0's first round of 16 points of each of two columns; three trucks' would be 96.
    let oldest = query("SELECT a, b FROM m LIMIT 2", 32);
    assert_eq!(oldest[0].rows.iter().map(|r| r.time).collect::<Vec<_>>(), [0, 1], "{oldest:?}");
    // Truck 0's newest point of each column; three trucks' would be 6.
    let newest = query("SELECT a, b FROM m ORDER BY time DESC LIMIT 1", 2);
    assert_eq!(newest[0].rows.iter().map(|r| r.time).collect::<Vec<_>>(), [9_999], "{newest:?}");
    // Grouped by truck, each truck's rows are read.
    let grouped = query("SELECT a, b FROM m GROUP BY \"name\" LIMIT 2", 96);
    assert_eq!(grouped.iter().map(|s| s.rows[0].time).collect::<Vec<_>>(), [0, 1_000, 2_000], "{grouped:?}");
}
