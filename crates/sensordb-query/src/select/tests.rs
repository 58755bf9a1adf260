//! SELECT over a small store whose answers are worked out by hand.

use super::*;
use crate::memory::MemoryStorage;
use crate::value::FieldValue::{self, Float as F, Integer as I, Null as N};
use sensordb_influxql::{parse, Statement};

const S: i64 = 1_000_000_000;

fn store() -> MemoryStorage {
    let mut m = MemoryStorage::default();
    let eu_a = [("host", "a"), ("region", "eu")];
    let eu_b = [("host", "b"), ("region", "eu")];
    m.insert("iot", "cpu", &eu_a, "usage", vec![(0, F(1.0)), (10 * S, F(2.0)), (20 * S, F(4.0)), (30 * S, F(8.0))]);
    m.insert("iot", "cpu", &eu_a, "count", vec![(0, I(1)), (10 * S, I(2))]);
    m.insert("iot", "cpu", &eu_b, "usage", vec![(0, F(10.0)), (20 * S, F(30.0))]);
    m.insert("iot", "mem", &[("host", "a")], "free", vec![(5 * S, I(100))]);
    m
}

fn query(text: &str) -> Result<Vec<ResultSeries>, QueryError> {
    let storage = store();
    let parsed = parse(text).expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let context = Context { storage: &storage, database: "iot", now: 1_000 * S, limits: Limits::default() };
    select(&context, statement)
}

type Rows = Vec<(i64, Vec<FieldValue>)>;

/// Each series as (tags, rows of (time, values)).
fn rows(text: &str) -> Vec<(Vec<(String, String)>, Rows)> {
    query(text).expect("runs").into_iter().map(|s| (s.tags.to_vec(), s.rows.into_iter().map(|r| (r.time, r.values)).collect())).collect()
}

fn only(text: &str) -> Rows {
    let mut all = rows(text);
    assert_eq!(all.len(), 1, "one series for {text}");
    all.remove(0).1
}

fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn raw_rows_of_one_series_and_of_all_series_merged_by_time() {
    assert_eq!(only("SELECT usage FROM cpu WHERE host = 'b'"), vec![(0, vec![F(10.0)]), (20 * S, vec![F(30.0)])]);
    let merged = only("SELECT usage FROM cpu");
    let times: Vec<i64> = merged.iter().map(|r| r.0).collect();
    assert_eq!(times, vec![0, 0, 10 * S, 20 * S, 20 * S, 30 * S]);
    assert_eq!(merged[0].1, vec![F(1.0)]);
    assert_eq!(merged[1].1, vec![F(10.0)]);
}

#[test]
fn a_wildcard_selects_fields_and_tags_sorted_by_name() {
    let series = query("SELECT * FROM cpu WHERE host = 'a'").expect("runs");
    assert_eq!(series[0].columns[..], ["time", "count", "host", "region", "usage"]);
    assert_eq!(series[0].rows[0].values, vec![I(1), FieldValue::String("a".into()), FieldValue::String("eu".into()), F(1.0)]);
    assert_eq!(series[0].rows[2].values[0], N);
    assert_eq!(series[0].rows.len(), 4);
}

#[test]
fn means_per_bucket_and_host() {
    let out = rows("SELECT mean(usage) FROM cpu WHERE time >= 0 AND time < 40s GROUP BY time(20s), host");
    assert_eq!(
        out,
        vec![
            (tags(&[("host", "a")]), vec![(0, vec![F(1.5)]), (20 * S, vec![F(6.0)])]),
            (tags(&[("host", "b")]), vec![(0, vec![F(10.0)]), (20 * S, vec![F(30.0)])]),
        ]
    );
}

#[test]
fn empty_buckets_are_filled_as_asked() {
    let q =
        |fill: &str| only(&format!("SELECT mean(usage) FROM cpu WHERE host = 'b' AND time >= 0 AND time < 40s GROUP BY time(10s) {fill}"));
    assert_eq!(q(""), vec![(0, vec![F(10.0)]), (10 * S, vec![N]), (20 * S, vec![F(30.0)]), (30 * S, vec![N])]);
    assert_eq!(q("fill(none)"), vec![(0, vec![F(10.0)]), (20 * S, vec![F(30.0)])]);
    assert_eq!(q("fill(previous)"), vec![(0, vec![F(10.0)]), (10 * S, vec![F(10.0)]), (20 * S, vec![F(30.0)]), (30 * S, vec![F(30.0)])]);
    assert_eq!(q("fill(linear)"), vec![(0, vec![F(10.0)]), (10 * S, vec![F(20.0)]), (20 * S, vec![F(30.0)]), (30 * S, vec![N])]);
    assert_eq!(q("fill(-1)"), vec![(0, vec![F(10.0)]), (10 * S, vec![F(-1.0)]), (20 * S, vec![F(30.0)]), (30 * S, vec![F(-1.0)])]);
    // (The fill value takes the aggregate's type: a mean is a float, so fill(-1) shows the float -1, as in InfluxDB.)
    // count reports 0 for an empty bucket; fill(none) drops it.
    let counts = only("SELECT count(usage) FROM cpu WHERE host = 'b' AND time >= 0 AND time < 40s GROUP BY time(10s)");
    assert_eq!(counts.iter().map(|r| r.1[0].clone()).collect::<Vec<_>>(), vec![I(1), I(0), I(1), I(0)]);
}

#[test]
fn a_lone_selector_keeps_its_points_time_and_several_take_the_range_start() {
    assert_eq!(only("SELECT max(usage) FROM cpu"), vec![(20 * S, vec![F(30.0)])]);
    assert_eq!(only("SELECT max(usage), min(usage) FROM cpu"), vec![(0, vec![F(30.0), F(1.0)])]);
    assert_eq!(only("SELECT mean(usage) FROM cpu WHERE time >= 5s"), vec![(5 * S, vec![F(44.0 / 4.0)])]);
}

#[test]
fn subqueries_feed_their_series_to_the_outer_query() {
    let inner = "SELECT mean(usage) AS m FROM cpu WHERE time >= 0 AND time < 40s GROUP BY time(20s), host";
    assert_eq!(only(&format!("SELECT max(m) FROM ({inner})")), vec![(20 * S, vec![F(30.0)])]);
    let series = query(&format!("SELECT count(*) FROM ({inner})")).expect("runs");
    assert_eq!(series[0].columns[..], ["time", "count_m"]);
    assert_eq!(series[0].rows[0].values, vec![I(4)]);
    // A condition on the subquery's field, selecting its group tag.
    let out = only("SELECT host FROM (SELECT mean(usage) AS m FROM cpu WHERE time >= 0 AND time < 40s GROUP BY host) WHERE m < 5");
    assert_eq!(out, vec![(0, vec![FieldValue::String("a".into())])]);
}

#[test]
fn derivative_of_bucket_means() {
    let out = only("SELECT derivative(mean(usage), 10s) FROM cpu WHERE host = 'a' AND time >= 0 AND time < 40s GROUP BY time(10s)");
    assert_eq!(out, vec![(10 * S, vec![F(1.0)]), (20 * S, vec![F(2.0)]), (30 * S, vec![F(4.0)])]);
    let raw = only("SELECT difference(usage) FROM cpu WHERE host = 'a'");
    assert_eq!(raw, vec![(10 * S, vec![F(1.0)]), (20 * S, vec![F(2.0)]), (30 * S, vec![F(4.0)])]);
}

#[test]
fn order_limit_offset_and_series_limits() {
    assert_eq!(only("SELECT usage FROM cpu WHERE host = 'a' ORDER BY time DESC LIMIT 1"), vec![(30 * S, vec![F(8.0)])]);
    assert_eq!(only("SELECT usage FROM cpu WHERE host = 'a' LIMIT 2 OFFSET 1"), vec![(10 * S, vec![F(2.0)]), (20 * S, vec![F(4.0)])]);
    let out = rows("SELECT usage FROM cpu GROUP BY host SLIMIT 1 SOFFSET 1");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, tags(&[("host", "b")]));
    let all = rows("SELECT last(usage) FROM cpu GROUP BY *");
    assert_eq!(all[0].0, tags(&[("host", "a"), ("region", "eu")]));
}

#[test]
fn arithmetic_over_aggregates_and_fields() {
    assert_eq!(only("SELECT sum(usage) / count(usage) AS avg FROM cpu WHERE host = 'b'"), vec![(0, vec![F(20.0)])]);
    assert_eq!(only("SELECT usage * 2 FROM cpu WHERE host = 'b' AND usage > 20"), vec![(20 * S, vec![F(60.0)])]);
    assert_eq!(only("SELECT floor(usage / 3) FROM cpu WHERE host = 'b'"), vec![(0, vec![F(3.0)]), (20 * S, vec![F(10.0)])]);
    assert_eq!(only("SELECT floor(mean(usage) / 3) FROM cpu WHERE host = 'b'"), vec![(0, vec![F(6.0)])]);
    let names = query("SELECT mean(usage), mean(usage) FROM cpu").expect("runs");
    assert_eq!(names[0].columns[..], ["time", "mean", "mean_1"]);
}

#[test]
fn measurements_by_regex_are_separate_series() {
    let series = query("SELECT last(*) FROM /^(cpu|mem)$/").expect("runs");
    let names: Vec<&str> = series.iter().map(|s| &*s.name).collect();
    assert_eq!(names, vec!["cpu", "mem"]);
    assert_eq!(series[1].columns[..], ["time", "last_free"]);
}

#[test]
fn mistakes_get_errors_not_answers() {
    assert!(matches!(query("SELECT usage FROM cpu GROUP BY time(10s)"), Err(QueryError::Invalid(_))));
    assert!(matches!(query("SELECT mean(usage), usage FROM cpu"), Err(QueryError::Invalid(_))));
    assert!(matches!(query("SELECT nosuch(usage) FROM cpu"), Err(QueryError::Invalid(_))));
    assert!(matches!(query("SELECT mean(usage) FROM cpu WHERE time >= 0 GROUP BY time(1ns)"), Err(QueryError::Limit(_))));
}

#[test]
fn group_by_wildcard_names_every_tag_key_of_the_measurement() {
    let mut storage = store();
    storage.insert("iot", "cpu", &[("host", "c")], "usage", vec![(0, F(7.0))]);
    let context = |text: &str| {
        let parsed = parse(text).expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage: &storage, database: "iot", now: 1_000 * S, limits: Limits::default() };
        select(&context, statement).expect("runs").into_iter().map(|s| s.tags.to_vec()).collect::<Vec<_>>()
    };
    let expected =
        vec![tags(&[("host", "a"), ("region", "eu")]), tags(&[("host", "b"), ("region", "eu")]), tags(&[("host", "c"), ("region", "")])];
    // The raw path, the streaming aggregate path and the newest-point path alike.
    assert_eq!(context("SELECT usage FROM cpu GROUP BY *"), expected);
    assert_eq!(context("SELECT mean(usage) FROM cpu GROUP BY *"), expected);
    assert_eq!(context("SELECT last(usage) FROM cpu GROUP BY *"), expected);
    assert_eq!(context("SELECT usage FROM cpu GROUP BY /reg/"), vec![tags(&[("region", "")]), tags(&[("region", "eu")])]);
}

#[test]
fn tz_lays_days_at_local_midnight_and_reads_times_without_offset_locally() {
    // Hourly points over 26-27 March 2016 (UTC); Berlin's 27 March has 23 hours.
    let hour = 3_600 * S;
    let start = 1_458_950_400 * S; // 2016-03-26T00:00:00Z
    let mut storage = MemoryStorage::default();
    storage.insert("iot", "m", &[("host", "a")], "v", (0..49).map(|i| (start + i * hour, F(1.0))).collect());
    let q =
        "SELECT count(v) FROM m WHERE time >= '2016-03-26 00:00:00' AND time < '2016-03-28 00:00:00' GROUP BY time(1d) tz('Europe/Berlin')";
    for fast in [true, false] {
        let parsed = parse(q).expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage: &storage, database: "iot", now: 0, limits: Limits::default() };
        super::fast::DISABLED.with(|d| d.set(!fast));
        let out = select(&context, statement).expect("runs");
        super::fast::DISABLED.with(|d| d.set(false));
        let rows: Vec<(i64, Vec<FieldValue>)> = out[0].rows.iter().map(|r| (r.time, r.values.clone())).collect();
        // Berlin's midnights: 25 March 23:00 UTC and 26 March 23:00 UTC; 23 points each.
        assert_eq!(rows, vec![(start - hour, vec![I(23)]), (start + 23 * hour, vec![I(23)])], "fast path: {fast}");
    }
    assert!(
        matches!(query("SELECT count(usage) FROM cpu GROUP BY time(1h) tz('Mars/Olympus')"), Err(QueryError::Invalid(e)) if e.contains("unable to find time zone"))
    );
}

mod streaming_path {
    use super::*;
    use proptest::prelude::*;

    fn run(storage: &MemoryStorage, text: &str, fast: bool) -> Result<Vec<ResultSeries>, QueryError> {
        let parsed = parse(text).expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage, database: "db", now: 1_000 * S, limits: Limits::default() };
        super::super::fast::DISABLED.with(|d| d.set(!fast));
        let out = select(&context, statement);
        super::super::fast::DISABLED.with(|d| d.set(false));
        out
    }

    fn close(a: &FieldValue, b: &FieldValue) -> bool {
        match (a, b) {
            (FieldValue::Float(x), FieldValue::Float(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            _ => a == b,
        }
    }

    /// Runs `text` on the streaming path (which must take it) and on the general path, and
    /// checks the answers agree (floats within 1e-9 relative).
    fn streaming_equals_general(storage: &MemoryStorage, text: &str) -> Result<(), TestCaseError> {
        let taken = super::super::fast::TAKEN.with(|t| t.get());
        let fast = run(storage, text, true).expect("fast runs");
        prop_assert_eq!(super::super::fast::TAKEN.with(|t| t.get()), taken + 1, "the streaming path ran: {}", text);
        let general = run(storage, text, false).expect("general runs");
        prop_assert_eq!(fast.len(), general.len(), "{}", text);
        for (f, g) in fast.iter().zip(&general) {
            prop_assert_eq!(&f.tags, &g.tags);
            prop_assert_eq!(&f.columns, &g.columns);
            prop_assert_eq!(f.rows.len(), g.rows.len(), "{}", text);
            for (rf, rg) in f.rows.iter().zip(&g.rows) {
                prop_assert_eq!(rf.time, rg.time, "{}", text);
                for (vf, vg) in rf.values.iter().zip(&rg.values) {
                    prop_assert!(close(vf, vg), "{}: {:?} vs {:?}", text, vf, vg);
                }
            }
        }
        Ok(())
    }

    proptest! {
        /// The search from the front finds what a binary search finds.
        #[test]
        fn points_before_an_edge_are_counted_as_a_binary_search_counts_them(
            mut times in proptest::collection::vec(-50i64..5_000, 0..3_000),
            edge in -100i64..5_100,
        ) {
            times.sort();
            times.dedup();
            prop_assert_eq!(crate::runs::points_before(&times, edge), times.partition_point(|&t| t < edge));
        }

        /// Steady rates with gaps and jitter (where the guess lands near, not on, the answer),
        /// and times at the ends of the i64 range (where a span overflows 64 bits).
        #[test]
        fn points_before_an_edge_are_counted_from_a_guess(
            steps in proptest::collection::vec((1i64..3, 0usize..40), 1..60),
            start in prop_oneof![Just(i64::MIN), Just(0i64), Just(i64::MAX - 10_000)],
            far_end in any::<bool>(),
            edge_at in 0usize..4_000,
            edge_shift in -2i64..3,
        ) {
            let mut times = vec![start];
            for &(step, repeat) in &steps {
                for _ in 0..repeat {
                    let next = times[times.len() - 1].saturating_add(step * 10);
                    if next > times[times.len() - 1] {
                        times.push(next);
                    }
                }
            }
            if far_end && times[times.len() - 1] < i64::MAX {
                times.push(i64::MAX);
            }
            let edge = times[edge_at % times.len()].saturating_add(edge_shift);
            prop_assert_eq!(crate::runs::points_before(&times, edge), times.partition_point(|&t| t < edge));
        }
    }

    proptest! {
        /// The streaming path answers exactly what the general path answers.
        #[test]
        fn equals_the_general_path(
            points in proptest::collection::vec((0usize..4, 0i64..600, -1000i64..1000), 1..300),
            reducers in proptest::collection::vec(0usize..8, 1..4),
            interval in 1i64..200,
            fill in 0usize..5,
            group_by_host in any::<bool>(),
            host_filter in any::<bool>(),
            newest_group in 0usize..4,
            d_without_dc in any::<bool>(),
            few_values in any::<bool>(),
        ) {
            let mut storage = MemoryStorage::default();
            let hosts = ["a", "b", "c", "d"];
            for (h, host) in hosts.iter().enumerate() {
                // Few distinct values: equal extremes, whose earliest must win, are common.
                let value = |v: i64| if few_values { (v % 5) as f64 / 8.0 } else { v as f64 / 8.0 };
                let mut series: Vec<(i64, FieldValue)> = points.iter().filter(|p| p.0 == h).map(|p| (p.1 * S, F(value(p.2)))).collect();
                series.sort_by_key(|p| p.0);
                series.dedup_by_key(|p| p.0);
                if series.is_empty() {
                    continue;
                }
                // A tag set without a key the others have (GROUP BY * names it with "").
                if *host == "d" && d_without_dc {
                    storage.insert("db", "m", &[("host", host)], "v", series);
                } else {
                    storage.insert("db", "m", &[("host", host), ("dc", if h % 2 == 0 { "x" } else { "y" })], "v", series);
                }
            }
            let names = ["count", "sum", "mean", "min", "max", "first", "last", "spread"];
            let fields: Vec<String> = reducers.iter().map(|&r| format!("{}(v)", names[r])).collect();
            let fills = ["", "fill(none)", "fill(previous)", "fill(linear)", "fill(-1)"];
            let filter = if host_filter { "dc = 'x' AND " } else { "" };
            let group = if group_by_host { ", host" } else { "" };
            let text = format!("SELECT {} FROM m WHERE {filter}time >= 0 AND time < 600s GROUP BY time({interval}s){group} {}", fields.join(", "), fills[fill]);
            streaming_equals_general(&storage, &text)?;
            // The newest points, as the store keeps them, are the general path's last().
            // Grouped by nothing, by one tag, by a tag shared by several tag sets, by all tags.
            let group = ["", " GROUP BY host", " GROUP BY dc", " GROUP BY *"][newest_group];
            let text = format!("SELECT last(v) FROM m WHERE {filter}time <= 300s{group}");
            let taken = super::super::fast::TAKEN.with(|t| t.get());
            let fast = run(&storage, &text, true).expect("fast runs");
            prop_assert_eq!(super::super::fast::TAKEN.with(|t| t.get()), taken + 1, "the newest-point path ran: {}", text);
            let general = run(&storage, &text, false).expect("general runs");
            prop_assert_eq!(&fast, &general, "{}", text);
            // Without GROUP BY time, a lone selector keeps its point's time on both paths.
            let text = format!("SELECT {}(v) FROM m WHERE {filter}time >= 0 AND time < 600s{}", names[reducers[0]], if group_by_host { " GROUP BY host" } else { "" });
            let fast = run(&storage, &text, true).expect("fast runs");
            let general = run(&storage, &text, false).expect("general runs");
            prop_assert_eq!(fast.len(), general.len());
            for (f, g) in fast.iter().zip(&general) {
                prop_assert_eq!(f.rows.len(), g.rows.len());
                for (rf, rg) in f.rows.iter().zip(&g.rows) {
                    prop_assert_eq!(rf.time, rg.time, "{}", text);
                    prop_assert!(close(&rf.values[0], &rg.values[0]));
                }
            }
        }
    }

    proptest! {
        /// With a condition on fields (rows decided one by one) and aggregates of an integer
        /// field, the streaming path still answers what the general path answers.
        #[test]
        fn equals_the_general_path_with_field_conditions(
            points in proptest::collection::vec((0usize..3, 0i64..600, -1000i64..1000, proptest::option::of(-5i64..5), any::<bool>()), 1..300),
            reducers in proptest::collection::vec(0usize..8, 1..4),
            on_integer in any::<bool>(),
            interval in proptest::option::of(1i64..200),
            group_by_host in any::<bool>(),
            condition in 0usize..7,
            expression in proptest::option::of(0usize..5),
        ) {
            let mut storage = MemoryStorage::default();
            for (h, host) in ["a", "b", "c"].iter().enumerate() {
                let mut mine: Vec<_> = points.iter().filter(|p| p.0 == h).collect();
                mine.sort_by_key(|p| p.1);
                mine.dedup_by_key(|p| p.1);
                // A point is v and w, v alone, or w alone.
                let v: Vec<(i64, FieldValue)> = mine.iter().filter(|p| !(p.4 && p.3.is_some())).map(|p| (p.1 * S, F(p.2 as f64 / 8.0))).collect();
                let w: Vec<(i64, FieldValue)> = mine.iter().filter_map(|p| p.3.map(|w| (p.1 * S, I(w)))).collect();
                let tags = [("host", *host), ("dc", if h % 2 == 0 { "x" } else { "y" })];
                if !v.is_empty() {
                    storage.insert("db", "m", &tags, "v", v);
                }
                if !w.is_empty() {
                    storage.insert("db", "m", &tags, "w", w);
                }
                // A float field written with v (hosts a and b) or at other times (host c).
                let u: Vec<(i64, FieldValue)> = mine
                    .iter()
                    .filter(|p| if h < 2 { !(p.4 && p.3.is_some()) } else { p.1 % 2 == 0 })
                    .map(|p| (p.1 * S, F((p.2 % 7) as f64)))
                    .collect();
                if !u.is_empty() {
                    storage.insert("db", "m", &tags, "u", u);
                }
            }
            let names = ["count", "sum", "mean", "min", "max", "first", "last", "spread"];
            let mut fields: Vec<String> = if on_integer {
                reducers.iter().map(|&r| format!("{}(w)", if r % 2 == 0 { "mean" } else { "count" })).collect()
            } else {
                reducers.iter().map(|&r| format!("{}(v)", names[r])).collect()
            };
            // Math over aggregates (TSBS's floor(mean(x)/10)/floor(mean(x)/10) among them), and
            // transformations of time buckets.
            let expressions = ["mean(v) * 2 + 1", "floor(max(v) / 10) / floor(max(v) / 10)", "spread(v) - count(v)", "difference(mean(v))", "cumulative_sum(count(v))"];
            if let Some(e) = expression.filter(|&e| interval.is_some() || e < 3) {
                fields.push(expressions[e].to_string());
            }
            let conditions = ["", "w > 0 AND ", "(v < 20 OR w = 3) AND ", "v >= 0 AND dc = 'x' AND ", "u > 1 AND ", "(2 >= u OR v > 50) AND host != 'b' AND ", "v + u > 3 AND "];
            let group = match (interval, group_by_host) {
                (Some(i), true) => format!(" GROUP BY time({i}s), host"),
                (Some(i), false) => format!(" GROUP BY time({i}s)"),
                (None, true) => " GROUP BY host".to_string(),
                (None, false) => String::new(),
            };
            let text = format!("SELECT {} FROM m WHERE {}time >= 0 AND time < 600s{group}", fields.join(", "), conditions[condition]);
            streaming_equals_general(&storage, &text)?;
        }
    }
}

proptest::proptest! {
    /// The sorted-vector sets answer as a `BTreeSet` of the same names does.
    #[test]
    fn distinct_names_are_the_sorted_set_of_the_names(names in proptest::collection::vec("[a-d]{0,3}", 0..60)) {
        let expected: Vec<&str> = names.iter().map(String::as_str).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        proptest::prop_assert_eq!(distinct_sorted(names.iter().map(String::as_str)), expected.clone());
        // A tag set each, in the list's order: field names repeat across tag sets.
        let series: Vec<crate::storage::StoredSeries> = names
            .iter()
            .enumerate()
            .map(|(i, n)| crate::storage::StoredSeries {
                handle: 0,
                measurement: "m".into(),
                tags: std::sync::Arc::from(vec![("i".to_string(), format!("{i:03}"))]),
                field: n.as_str().into(),
                kind: crate::storage::FieldKind::Float,
            })
            .collect();
        let series = crate::SeriesList::new(series);
        let fields = FieldNames::of(&series);
        proptest::prop_assert_eq!(fields.iter().map(|f| &**f).collect::<Vec<_>>(), expected.clone());
        for probe in ["", "a", "ab", "dd", "e", "abc"] {
            proptest::prop_assert_eq!(fields.contains(probe), expected.contains(&probe));
        }
    }
}

#[test]
fn a_field_of_mixed_types_is_typed_per_bucket() {
    let mut storage = MemoryStorage::default();
    storage.insert("iot", "m", &[("host", "a")], "v", vec![(0, I(1)), (10 * S, I(2))]);
    storage.insert("iot", "m", &[("host", "b")], "v", vec![(20 * S, F(2.5)), (21 * S, F(0.5))]);
    let parsed = parse("SELECT sum(v), count(v) FROM m WHERE time >= 0 AND time < 30s GROUP BY time(10s)").expect("parses");
    let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
    let context = Context { storage: &storage, database: "iot", now: 1_000 * S, limits: Limits::default() };
    let series = select(&context, statement).expect("runs");
    let rows: Rows = series[0].rows.iter().map(|r| (r.time, r.values.clone())).collect();
    assert_eq!(rows, vec![(0, vec![I(1), I(1)]), (10 * S, vec![I(2), I(1)]), (20 * S, vec![F(3.0), I(2)])]);
}

mod group_key_order {
    use super::super::GroupKey;
    use proptest::prelude::*;

    /// Short strings over a few letters and the bytes the encoding escapes, so that prefixes,
    /// equal strings and escaped bytes all come up.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(prop_oneof![Just('\0'), Just('\u{1}'), Just('\u{2}'), Just('a'), Just('b'), Just('é')], 0..4)
            .prop_map(|chars| chars.into_iter().collect())
    }

    fn key() -> impl Strategy<Value = (String, Vec<(String, String)>)> {
        (text(), proptest::collection::vec((text(), text()), 0..3))
    }

    proptest! {
        /// Keys compare by their bytes exactly as their (name, tags) tuples compare.
        #[test]
        fn group_keys_sort_as_their_names_and_tags(a in key(), b in key()) {
            let (x, y) = (GroupKey::new(a.0.clone(), a.1.clone()), GroupKey::new(b.0.clone(), b.1.clone()));
            prop_assert_eq!(x.cmp(&y), a.cmp(&b), "{:?} {:?}", a, b);
            prop_assert_eq!(x == y, a == b);
        }
    }
}
