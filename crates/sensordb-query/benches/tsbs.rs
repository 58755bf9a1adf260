//! The executor on the shapes of TSBS' IoT queries, over a store in memory laid out as TSBS'
//! data is: 100 trucks in 5 fleets, a day of readings every 10 s for each truck, and beside
//! each truck's series a few short ones whose points lack a tag (TSBS leaves tags out at
//! random). Storage is a [`MemoryStorage`] handing out runs of 1,000 points, so what is timed is
//! the executor's own work (tag sets, bound conditions, rounds of limited reads, grouping),
//! which at scale 100 is most of a query's time. The allocator is the server's (mimalloc):
//! glibc's malloc would time page faults of its own.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sensordb_influxql::{parse, Statement};
use sensordb_query::memory::MemoryStorage;
use sensordb_query::select::select;
use sensordb_query::{Context, FieldValue, Limits};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const S: i64 = 1_000_000_000;
const T0: i64 = 1_451_606_400 * S; // 2016-01-01T00:00:00Z, TSBS' default start
const POINTS: i64 = 8_640; // a day every 10 s
const FLEETS: [&str; 5] = ["East", "West", "North", "South", "Central"];

/// A deterministic stream of numbers in [0, 1).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A number in [0, 1) for point `i` of `truck`, the same every run.
fn noise(i: usize, truck: usize) -> f64 {
    let mut x = (i as u64) << 8 ^ truck as u64;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) as f64 / u64::MAX as f64
}

fn store() -> MemoryStorage {
    let mut storage = MemoryStorage::default();
    storage.set_run_points(1_000);
    let mut random = Lcg(7);
    for truck in 0..100 {
        let name = format!("truck_{truck}");
        let driver = ["Albert", "Derek", "Rodney", "Seth", "Trish"][truck % 5];
        let model = ["F-150", "G-2000", "H-2"][truck % 3];
        let tags = [("driver", driver), ("fleet", FLEETS[truck % 5]), ("model", model), ("name", name.as_str())];
        // About one point in seven missing, as in TSBS' data.
        let times: Vec<i64> = (0..POINTS).filter(|_| random.next() > 0.15).map(|i| T0 + i * 10 * S).collect();
        let phase = random.next();
        // Fuel falls from full to empty every 3,000 points; below 0.1 for the last tenth.
        let fuel = |i: usize| FieldValue::Float(1.0 - ((i as f64 / 3_000.0) + phase).fract());
        let column = |f: &dyn Fn(usize) -> FieldValue| times.iter().enumerate().map(|(i, &t)| (t, f(i))).collect::<Vec<_>>();
        storage.insert("iot", "diagnostics", &tags, "fuel_state", column(&fuel));
        storage.insert("iot", "diagnostics", &tags, "current_load", column(&|i| FieldValue::Float(((i + truck * 97) % 1_600) as f64)));
        storage.insert("iot", "diagnostics", &tags, "load_capacity", column(&|_| FieldValue::Float(1_500.0)));
        // Non-zero (broken down) more often than not for an hour, then less often: a model's
        // share in a 10-minute bucket crosses one half now and then.
        let status = |i: usize| {
            let share = 0.5 + 0.3 * (i as f64 * std::f64::consts::TAU / 720.0).sin();
            FieldValue::Integer(i64::from(noise(i, truck) < share))
        };
        storage.insert("iot", "diagnostics", &tags, "status", column(&status));
        storage.insert("iot", "readings", &tags, "latitude", column(&|i| FieldValue::Float(i as f64 / 100.0)));
        storage.insert("iot", "readings", &tags, "longitude", column(&|i| FieldValue::Float(-(i as f64) / 100.0)));
        // Four short series a truck, each without one of its tags.
        for left_out in 0..4 {
            let partial: Vec<(&str, &str)> = tags.iter().enumerate().filter(|(k, _)| *k != left_out).map(|(_, t)| *t).collect();
            let short: Vec<(i64, FieldValue)> =
                (0..8).map(|i| (T0 + (i * 997 + left_out as i64) * S, FieldValue::Float(0.05 * i as f64))).collect();
            storage.insert("iot", "diagnostics", &partial, "fuel_state", short.clone());
            storage.insert("iot", "diagnostics", &partial, "current_load", short.clone());
            storage.insert("iot", "readings", &partial, "latitude", short.clone());
            storage.insert("iot", "readings", &partial, "longitude", short);
        }
    }
    storage
}

const QUERIES: [(&str, &str); 5] = [
    (
        "low-fuel",
        r#"SELECT "name", "driver", "fuel_state" FROM "diagnostics" WHERE "fuel_state" <= 0.1 AND "fleet" = 'South' GROUP BY "name" ORDER BY "time" DESC LIMIT 1"#,
    ),
    (
        "high-load",
        r#"SELECT "name", "driver", "current_load", "load_capacity" FROM (SELECT "current_load", "load_capacity" FROM "diagnostics" WHERE fleet = 'South' GROUP BY "name","driver" ORDER BY "time" DESC LIMIT 1) WHERE "current_load" >= 0.9 * "load_capacity" GROUP BY "name" ORDER BY "time" DESC"#,
    ),
    (
        "last-loc",
        r#"SELECT "latitude", "longitude" FROM "readings" WHERE "fleet"='South' GROUP BY "name","driver" ORDER BY "time" LIMIT 1"#,
    ),
    (
        "single-last-loc",
        r#"SELECT "name", "driver", "latitude", "longitude" FROM "readings" WHERE ("name" = 'truck_35') ORDER BY "time" LIMIT 1"#,
    ),
    (
        "breakdown-frequency",
        r#"SELECT count("state_changed") FROM (SELECT difference("broken_down") AS "state_changed" FROM (SELECT floor(2*(sum("nzs")/count("nzs")))/floor(2*(sum("nzs")/count("nzs"))) AS "broken_down" FROM (SELECT "model", "status"/"status" AS nzs FROM "diagnostics" WHERE time >= '2016-01-01T00:00:00Z' AND time < '2016-01-02T00:00:00Z') WHERE time >= '2016-01-01T00:00:00Z' AND time < '2016-01-02T00:00:00Z' GROUP BY time(10m),"model") GROUP BY "model") WHERE "state_changed" = 1 GROUP BY "model""#,
    ),
];

fn tsbs_queries(c: &mut Criterion) {
    let storage = store();
    let mut group = c.benchmark_group("tsbs");
    group.sample_size(20);
    for (label, text) in QUERIES {
        let parsed = parse(text).expect("a TSBS query parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage: &storage, database: "iot", now: T0 + 2 * 86_400 * S, limits: Limits::default() };
        let answer = select(&context, statement).expect("runs");
        assert!(!answer.is_empty(), "{label} answers nothing");
        group.bench_function(label, |b| b.iter(|| black_box(select(&context, black_box(statement)).expect("runs"))));
    }
    group.finish();
}

criterion_group!(benches, tsbs_queries);
criterion_main!(benches);
