//! Tests of the TSBS-like generators: seeding, defects, clamps and decimals, series keys and payload portions.

use super::iot::cut;
use super::*;
use crate::stats::WorkloadStats;

fn small(seed: u64) -> TsbsConfig {
    TsbsConfig { scale: 20, seed, ..TsbsConfig::default() }.with_duration(2 * 3600 * NANOS_PER_SECOND)
}

#[test]
fn same_seed_gives_same_rows_and_other_seed_other_rows() {
    let a: Vec<Row> = TsbsGenerator::new(small(1)).collect();
    let b: Vec<Row> = TsbsGenerator::new(small(1)).collect();
    let c: Vec<Row> = TsbsGenerator::new(small(2)).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(!a.is_empty());
}

#[test]
fn without_disorder_every_entry_is_complete_and_in_order() {
    let config = TsbsConfig { disorder: Disorder::none(), ..small(5) };
    let rows: Vec<Row> = TsbsGenerator::new(config.clone()).collect();
    assert_eq!(rows.len() as u64, config.base_entries());
    assert_eq!(config.epochs(), 720);
    for pair in rows.windows(2) {
        assert!(pair[0].timestamp <= pair[1].timestamp);
    }
    for (i, row) in rows.iter().enumerate() {
        let truck = i % 20;
        let readings = (i / 20) % 2 == 0;
        assert_eq!(row.tags.id as usize, truck);
        assert_eq!(row.tags.get("name"), Some(format!("truck_{truck}").as_str()));
        assert_eq!(&*row.measurement, if readings { "readings" } else { "diagnostics" });
        assert_eq!(row.fields.len(), if readings { 10 } else { 6 });
        assert_eq!(row.timestamp, config.start + (i / 40) as i64 * config.interval);
    }
    let tags: Vec<&str> = rows[0].tags.tags.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(tags, STRING_TAGS);
}

#[test]
fn capacities_can_be_tags() {
    let config = TsbsConfig { capacities: CapacityEncoding::Tags, disorder: Disorder::none(), ..small(5) };
    let row = TsbsGenerator::new(config).next().expect("a row");
    assert_eq!(row.tags.tags.len(), 8);
    assert_eq!(row.fields.len(), 7);
    let model = row.tags.get("model").expect("model");
    let capacity = row.tags.get("load_capacity").expect("capacity");
    let expected = MODELS.iter().find(|m| m.0 == model).map(|m| format!("{}", m.1));
    assert_eq!(Some(capacity.to_string()), expected);
}

fn decimals_of(value: f64) -> usize {
    value.to_string().split_once('.').map_or(0, |(_, f)| f.len())
}

#[test]
fn values_stay_within_tsbs_clamps_and_decimals() {
    for row in TsbsGenerator::new(small(9)) {
        let (names, clamps, decimals): (&[&str], &[(f64, f64)], &[usize]) = if &*row.measurement == "readings" {
            (&READINGS_FIELDS, &READINGS_CLAMPS, &READINGS_DECIMALS)
        } else {
            (&DIAGNOSTICS_FIELDS, &DIAGNOSTICS_CLAMPS, &DIAGNOSTICS_DECIMALS)
        };
        for (name, value) in &row.fields {
            if let Some(i) = names.iter().position(|n| *n == &**name) {
                let (min, max) = clamps[i];
                let x = match value {
                    Value::F64(x) => *x,
                    Value::I64(x) => {
                        assert_eq!(&**name, "status");
                        *x as f64
                    }
                    other => panic!("unexpected {other:?}"),
                };
                assert!((min..=max).contains(&x), "{name} = {x}");
                assert!(decimals_of(x) <= decimals[i], "{name} = {x}");
            } else {
                let i = CAPACITY_FIELDS.iter().position(|n| *n == &**name).expect("known field");
                let allowed: Vec<f64> = MODELS.iter().map(|m| [m.1, m.2, m.3][i]).collect();
                assert!(matches!(value, Value::F64(x) if allowed.contains(x)), "{name} = {value:?}");
            }
        }
    }
}

#[test]
fn defect_shares_match_tsbs() {
    let config = TsbsConfig { scale: 50, ..TsbsConfig::default() }.with_duration(6 * 3600 * NANOS_PER_SECOND);
    let rows: Vec<Row> = TsbsGenerator::new(config.clone()).collect();
    let stats = WorkloadStats::from_rows(&rows);
    // Lost entries: 1 % of batches plus 10 % of entries; real TSBS files lose 10.0 %.
    let lost = 1.0 - rows.len() as f64 / config.base_entries() as f64;
    assert!((0.08..0.12).contains(&lost), "lost {lost}");
    // Real TSBS (scale 100, 1 day): 1.17 % of values missing, 1.6 % rows late, 0.1 % no name.
    // The late share grows as the scale shrinks (a batch is a larger part of an epoch).
    assert!((0.008..0.016).contains(&stats.missing_field_share()), "{stats}");
    assert!((0.005..0.05).contains(&stats.late_share()), "{stats}");
    assert!(stats.rows_without_name > 0 && stats.rows_without_name < rows.len() as u64 / 200, "{stats}");
    // Lateness is bounded: held-back entries come back within a few batches.
    assert!(stats.max_lateness <= 3 * config.interval, "{stats}");
    assert_eq!(stats.names.len(), 50);
    assert!(rows.iter().all(|r| r.timestamp >= config.start && r.timestamp < config.end));
}

#[test]
fn series_keys_are_precomputed_per_truck() {
    let config = small(3);
    let generator = TsbsGenerator::new(config.clone());
    let mut keys = generator.fleet().series_keys(config.capacities).expect("valid keys");
    assert_eq!(keys.len(), 20 * (10 + 6));
    let mut out = Vec::new();
    let mut rows = 0;
    for row in generator.take(2000) {
        keys.flatten_keys_into(&row, &mut out).expect("valid");
        rows += 1;
    }
    assert!(out.len() > rows * 7);
    let (key, _, _) = &out[0];
    assert_eq!(key.measurement(), "readings");
    assert_eq!(key.field(), "load_capacity");
    assert_eq!(key.tag("name"), Some("truck_0"));
    // Only rows with a dropped tag add series beyond the precomputed ones.
    assert!(keys.len() < 20 * 16 + 200);
}

#[test]
fn payload_portions_are_seeded_and_sized() {
    let config = PayloadConfig { sensors: 3, portion_bytes: 1001, portions: 4, ..PayloadConfig::default() };
    let a: Vec<Row> = PayloadGenerator::new(config.clone()).collect();
    let b: Vec<Row> = PayloadGenerator::new(config.clone()).collect();
    let c: Vec<Row> = PayloadGenerator::new(PayloadConfig { seed: 9, ..config.clone() }).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 12);
    assert_eq!(a[4].tags.get("sensor"), Some("sensor_1"));
    assert_eq!(a[4].timestamp, config.start + config.interval);
    match &a[0].fields[0].1 {
        Value::Bytes(bytes) => {
            assert_eq!(bytes.len(), 1000);
            // Smooth: neighbouring samples are close compared with the amplitude.
            let samples: Vec<i32> = bytes.chunks(2).map(|c| i32::from(i16::from_le_bytes([c[0], c[1]]))).collect();
            let spread = samples.iter().max().copied().unwrap_or(0) - samples.iter().min().copied().unwrap_or(0);
            let step = samples.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<i32>() / (samples.len() as i32 - 1);
            assert!(spread > 1000 && step < spread / 4, "spread {spread} step {step}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn truncation_matches_go() {
    assert_eq!(cut(-12.3456789, 5), -12.34567);
    assert_eq!(cut(99.99, 0), 99.0);
    assert_eq!(cut(0.96, 1), 0.9);
}
