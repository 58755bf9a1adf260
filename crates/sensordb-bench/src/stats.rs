//! Summary statistics of a row stream, used to compare the generator with real TSBS files.
//!
//! Counts rows and values per measurement, fields missing relative to the widest row of each
//! measurement, rows without a `name` tag, disorder (globally: a timestamp below the largest seen
//! so far; per series: a timestamp not above the previous one of the same measurement + name),
//! lateness, and per field the value range and the most decimals printed (shortest round-trip
//! form, as Go's `strconv.FormatFloat(v, 'f', -1, 64)` and Rust's `Display` both print).

use crate::row::Row;
use sensordb_engine::{Timestamp, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// Per-field figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldStats {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    /// Most digits after the decimal point of any value.
    pub max_decimals: usize,
}

/// Per-measurement figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeasurementStats {
    pub rows: u64,
    pub values: u64,
    /// Most fields seen in one row.
    pub max_fields: usize,
    pub fields: BTreeMap<String, FieldStats>,
}

/// Figures of a whole row stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadStats {
    pub rows: u64,
    pub values: u64,
    pub rows_without_name: u64,
    pub names: BTreeSet<String>,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    /// Rows whose timestamp is below the largest timestamp seen before them.
    pub late_rows: u64,
    /// Largest (largest timestamp so far − row timestamp).
    pub max_lateness: i64,
    /// Rows whose timestamp is not above the previous row of the same measurement and name.
    pub series_disordered_rows: u64,
    pub measurements: BTreeMap<String, MeasurementStats>,
}

fn decimals(value: f64) -> usize {
    let text = value.to_string();
    text.split_once('.').map_or(0, |(_, fraction)| fraction.len())
}

impl WorkloadStats {
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Self {
        let mut collector = StatsCollector::default();
        for row in rows {
            collector.add(row);
        }
        collector.finish()
    }

    /// Share of values missing, relative to every row of a measurement having `max_fields`.
    pub fn missing_field_share(&self) -> f64 {
        let full: u64 = self.measurements.values().map(|m| m.rows * m.max_fields as u64).sum();
        if full == 0 {
            return 0.0;
        }
        1.0 - self.values as f64 / full as f64
    }

    pub fn late_share(&self) -> f64 {
        ratio(self.late_rows, self.rows)
    }

    pub fn series_disorder_share(&self) -> f64 {
        ratio(self.series_disordered_rows, self.rows)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Incremental form of [`WorkloadStats::from_rows`], for streams too big to hold.
#[derive(Default)]
pub struct StatsCollector {
    stats: WorkloadStats,
    last_by_series: HashMap<(String, String), Timestamp>,
    started: bool,
}

impl StatsCollector {
    pub fn add(&mut self, row: &Row) {
        let s = &mut self.stats;
        if !self.started {
            self.started = true;
            s.min_timestamp = row.timestamp;
            s.max_timestamp = row.timestamp;
        } else if row.timestamp < s.max_timestamp {
            s.late_rows += 1;
            s.max_lateness = s.max_lateness.max(s.max_timestamp - row.timestamp);
        }
        s.min_timestamp = s.min_timestamp.min(row.timestamp);
        s.max_timestamp = s.max_timestamp.max(row.timestamp);
        s.rows += 1;
        s.values += row.fields.len() as u64;
        match row.tags.get("name") {
            Some(name) => {
                if !s.names.contains(name) {
                    s.names.insert(name.to_string());
                }
                let key = (row.measurement.to_string(), name.to_string());
                if let Some(previous) = self.last_by_series.insert(key, row.timestamp) {
                    if row.timestamp <= previous {
                        s.series_disordered_rows += 1;
                    }
                }
            }
            None => s.rows_without_name += 1,
        }
        let m = s.measurements.entry(row.measurement.to_string()).or_default();
        m.rows += 1;
        m.values += row.fields.len() as u64;
        m.max_fields = m.max_fields.max(row.fields.len());
        for (name, value) in &row.fields {
            let x = match value {
                Value::F64(x) => *x,
                Value::I64(x) => *x as f64,
                Value::U64(x) => *x as f64,
                Value::Bool(x) => f64::from(u8::from(*x)),
                Value::Bytes(b) => b.len() as f64,
            };
            let f = match m.fields.get_mut(&**name) {
                Some(f) => f,
                None => m.fields.entry(name.to_string()).or_insert(FieldStats {
                    min: f64::INFINITY,
                    max: f64::NEG_INFINITY,
                    ..FieldStats::default()
                }),
            };
            f.count += 1;
            f.min = f.min.min(x);
            f.max = f.max.max(x);
            f.sum += x;
            if let Value::F64(v) = value {
                f.max_decimals = f.max_decimals.max(decimals(*v));
            }
        }
    }

    pub fn finish(self) -> WorkloadStats {
        self.stats
    }
}

impl fmt::Display for WorkloadStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "rows {}  values {}  trucks(names) {}", self.rows, self.values, self.names.len())?;
        writeln!(
            f,
            "missing-field share {:.4}  rows without name {:.5}  late rows {:.4} (max lateness {} ns)  per-series disorder {:.6}",
            self.missing_field_share(),
            ratio(self.rows_without_name, self.rows),
            self.late_share(),
            self.max_lateness,
            self.series_disorder_share()
        )?;
        writeln!(f, "time {} .. {}", self.min_timestamp, self.max_timestamp)?;
        for (name, m) in &self.measurements {
            writeln!(f, "  {name}: rows {} values/row {:.4} (max {})", m.rows, ratio(m.values, m.rows), m.max_fields)?;
            for (field, s) in &m.fields {
                writeln!(
                    f,
                    "    {field:<26} n {:>9} min {:>11} max {:>11} mean {:>12.4} decimals {}",
                    s.count,
                    s.min,
                    s.max,
                    s.sum / s.count.max(1) as f64,
                    s.max_decimals
                )?;
            }
        }
        Ok(())
    }
}
