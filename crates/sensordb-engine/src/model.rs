//! The data model: series keys, compact series ids, values and value columns.
//!
//! A series is measurement + sorted tag set + field name, the InfluxDB line-protocol model.
//! Every series has one [`ValueKind`], fixed when the series is first written; a later write
//! of another kind is rejected, so every block of a series holds one kind of value.
//! Timestamps are i64 nanoseconds since the Unix epoch.

use bytes::Bytes;
use std::fmt;

/// Nanoseconds since the Unix epoch.
pub type Timestamp = i64;

/// Compact id of a series, assigned densely from 1 by the series catalog (0 is never used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesId(pub u32);

/// The kind of value a series holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    F64 = 1,
    I64 = 2,
    U64 = 3,
    Bool = 4,
    /// Opaque bytes: strings, waveform chunks, binary telemetry frames.
    Bytes = 5,
}

impl TryFrom<u8> for ValueKind {
    type Error = u8;
    fn try_from(tag: u8) -> Result<Self, u8> {
        Ok(match tag {
            1 => ValueKind::F64,
            2 => ValueKind::I64,
            3 => ValueKind::U64,
            4 => ValueKind::Bool,
            5 => ValueKind::Bytes,
            other => return Err(other),
        })
    }
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueKind::F64 => "float",
            ValueKind::I64 => "integer",
            ValueKind::U64 => "unsigned",
            ValueKind::Bool => "boolean",
            ValueKind::Bytes => "bytes",
        })
    }
}

/// One value. Equality of floats is bitwise (NaN == NaN of the same bits, -0.0 != 0.0), because
/// storage must give back every f64 bit for bit.
#[derive(Clone, Debug)]
pub enum Value {
    F64(f64),
    I64(i64),
    U64(u64),
    Bool(bool),
    Bytes(Bytes),
}

impl Value {
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::F64(_) => ValueKind::F64,
            Value::I64(_) => ValueKind::I64,
            Value::U64(_) => ValueKind::U64,
            Value::Bool(_) => ValueKind::Bool,
            Value::Bytes(_) => ValueKind::Bytes,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::F64(a), Value::F64(b)) => a.to_bits() == b.to_bits(),
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::U64(a), Value::U64(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Value {}

/// One stored point of a series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub timestamp: Timestamp,
    pub value: Value,
}

/// Values of one kind, column-wise: the unit the codecs compress. Equality of floats is bitwise,
/// as for [`Value`].
#[derive(Clone, Debug)]
pub enum ValueColumn {
    F64(Vec<f64>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Bytes(Vec<Bytes>),
}

impl PartialEq for ValueColumn {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ValueColumn::F64(a), ValueColumn::F64(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            (ValueColumn::I64(a), ValueColumn::I64(b)) => a == b,
            (ValueColumn::U64(a), ValueColumn::U64(b)) => a == b,
            (ValueColumn::Bool(a), ValueColumn::Bool(b)) => a == b,
            (ValueColumn::Bytes(a), ValueColumn::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl ValueColumn {
    pub fn new(kind: ValueKind) -> Self {
        match kind {
            ValueKind::F64 => ValueColumn::F64(Vec::new()),
            ValueKind::I64 => ValueColumn::I64(Vec::new()),
            ValueKind::U64 => ValueColumn::U64(Vec::new()),
            ValueKind::Bool => ValueColumn::Bool(Vec::new()),
            ValueKind::Bytes => ValueColumn::Bytes(Vec::new()),
        }
    }

    pub fn kind(&self) -> ValueKind {
        match self {
            ValueColumn::F64(_) => ValueKind::F64,
            ValueColumn::I64(_) => ValueKind::I64,
            ValueColumn::U64(_) => ValueKind::U64,
            ValueColumn::Bool(_) => ValueKind::Bool,
            ValueColumn::Bytes(_) => ValueKind::Bytes,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ValueColumn::F64(v) => v.len(),
            ValueColumn::I64(v) => v.len(),
            ValueColumn::U64(v) => v.len(),
            ValueColumn::Bool(v) => v.len(),
            ValueColumn::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `index`. Panics when out of bounds, like slice indexing.
    pub fn get(&self, index: usize) -> Value {
        match self {
            ValueColumn::F64(v) => Value::F64(v[index]),
            ValueColumn::I64(v) => Value::I64(v[index]),
            ValueColumn::U64(v) => Value::U64(v[index]),
            ValueColumn::Bool(v) => Value::Bool(v[index]),
            ValueColumn::Bytes(v) => Value::Bytes(v[index].clone()),
        }
    }

    /// The values at `indices`, in that order.
    pub fn gather(&self, indices: &[usize]) -> ValueColumn {
        match self {
            ValueColumn::F64(v) => ValueColumn::F64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::I64(v) => ValueColumn::I64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::U64(v) => ValueColumn::U64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::Bool(v) => ValueColumn::Bool(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::Bytes(v) => ValueColumn::Bytes(indices.iter().map(|&i| v[i].clone()).collect()),
        }
    }

    /// The values in `range`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> ValueColumn {
        match self {
            ValueColumn::F64(v) => ValueColumn::F64(v[range].to_vec()),
            ValueColumn::I64(v) => ValueColumn::I64(v[range].to_vec()),
            ValueColumn::U64(v) => ValueColumn::U64(v[range].to_vec()),
            ValueColumn::Bool(v) => ValueColumn::Bool(v[range].to_vec()),
            ValueColumn::Bytes(v) => ValueColumn::Bytes(v[range].to_vec()),
        }
    }

    /// Removes every value, keeping the allocation.
    pub fn clear(&mut self) {
        match self {
            ValueColumn::F64(v) => v.clear(),
            ValueColumn::I64(v) => v.clear(),
            ValueColumn::U64(v) => v.clear(),
            ValueColumn::Bool(v) => v.clear(),
            ValueColumn::Bytes(v) => v.clear(),
        }
    }

    /// Appends all of `other`; returns false (appending nothing) when the kinds differ.
    pub fn extend_from(&mut self, other: &ValueColumn) -> bool {
        self.extend_from_range(other, 0..other.len())
    }

    /// Appends `other[range]`; returns false (appending nothing) when the kinds differ.
    pub fn extend_from_range(&mut self, other: &ValueColumn, range: std::ops::Range<usize>) -> bool {
        match (self, other) {
            (ValueColumn::F64(a), ValueColumn::F64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::I64(a), ValueColumn::I64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::U64(a), ValueColumn::U64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::Bool(a), ValueColumn::Bool(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::Bytes(a), ValueColumn::Bytes(b)) => a.extend_from_slice(&b[range]),
            _ => return false,
        }
        true
    }

    /// Approximate heap bytes held, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes_from(0)
    }

    /// [`ValueColumn::heap_bytes`] of the values from index `start` on.
    pub fn heap_bytes_from(&self, start: usize) -> usize {
        let count = self.len().saturating_sub(start);
        match self {
            ValueColumn::F64(_) | ValueColumn::I64(_) | ValueColumn::U64(_) => count * 8,
            ValueColumn::Bool(_) => count,
            ValueColumn::Bytes(v) => v[start.min(v.len())..].iter().map(|b| b.len() + 32).sum(),
        }
    }

    /// Keeps the first `len` values.
    pub fn truncate(&mut self, len: usize) {
        match self {
            ValueColumn::F64(v) => v.truncate(len),
            ValueColumn::I64(v) => v.truncate(len),
            ValueColumn::U64(v) => v.truncate(len),
            ValueColumn::Bool(v) => v.truncate(len),
            ValueColumn::Bytes(v) => v.truncate(len),
        }
    }

    /// Appends `value`; returns it back when its kind differs from the column's.
    pub fn push(&mut self, value: Value) -> Result<(), Value> {
        match (self, value) {
            (ValueColumn::F64(v), Value::F64(x)) => v.push(x),
            (ValueColumn::I64(v), Value::I64(x)) => v.push(x),
            (ValueColumn::U64(v), Value::U64(x)) => v.push(x),
            (ValueColumn::Bool(v), Value::Bool(x)) => v.push(x),
            (ValueColumn::Bytes(v), Value::Bytes(x)) => v.push(x),
            (_, value) => return Err(value),
        }
        Ok(())
    }
}

/// `min + span` where `span` is `max - min` computed in u64 (it may exceed i64::MAX, e.g. from a
/// negative min to i64::MAX); `None` when no i64 lies that far above `min`.
pub fn add_time_span(min: Timestamp, span: u64) -> Option<Timestamp> {
    let max = min.wrapping_add(span as i64);
    // Wrapping is exact modulo 2^64; the true result lies in range exactly when the distance
    // from `min` to it, taken in u64, is `span`.
    (max >= min && max.wrapping_sub(min) as u64 == span).then_some(max)
}

/// `max - min` as u64, for `max >= min`: never overflows.
pub fn time_span(min: Timestamp, max: Timestamp) -> u64 {
    debug_assert!(max >= min, "BUG: time range reversed");
    max.wrapping_sub(min) as u64
}

/// Indices of `indices` (positions into `timestamps`, in write order) sorted by timestamp, one
/// per timestamp: a repeated timestamp keeps the index written last. The one place that decides
/// what "the last write wins" means, for memtables, direct writes and merged reads alike.
pub fn last_write_wins(timestamps: &[Timestamp], mut indices: Vec<usize>) -> Vec<usize> {
    // Stable: among equal timestamps the write order stays, so the last one is the newest.
    // (Sorting (timestamp, position) pairs unstably was measured slower: the stable sort
    // merges the sorted runs that writers' batches leave; `benches/engine.rs`, memtable.)
    indices.sort_by_key(|&i| timestamps[i]);
    let mut kept: Vec<usize> = Vec::with_capacity(indices.len());
    for i in indices {
        match kept.last_mut() {
            Some(last) if timestamps[*last] == timestamps[i] => *last = i,
            _ => kept.push(i),
        }
    }
    kept
}

/// The database a series belongs to unless told otherwise.
pub const DEFAULT_DATABASE: &str = "default";

/// The identity of a series: database, measurement, tag set sorted by tag key, field name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    database: String,
    measurement: String,
    tags: Vec<(String, String)>,
    field: String,
}

/// Why a series key is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeriesKeyError {
    #[error("empty measurement name")]
    EmptyMeasurement,
    #[error("empty field name")]
    EmptyField,
    #[error("empty database name")]
    EmptyDatabase,
    #[error("empty tag key")]
    EmptyTagKey,
    #[error("tag key {0:?} appears twice")]
    DuplicateTag(String),
    #[error("malformed series key {0:?}")]
    Malformed(String),
}

impl SeriesKey {
    /// Builds a key; tags are sorted by key. Empty tag values are dropped (as InfluxDB does).
    pub fn new(
        measurement: impl Into<String>,
        tags: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
        field: impl Into<String>,
    ) -> Result<Self, SeriesKeyError> {
        let measurement = measurement.into();
        let field = field.into();
        if measurement.is_empty() {
            return Err(SeriesKeyError::EmptyMeasurement);
        }
        if field.is_empty() {
            return Err(SeriesKeyError::EmptyField);
        }
        let mut tags: Vec<(String, String)> = tags.into_iter().map(|(k, v)| (k.into(), v.into())).filter(|(_, v)| !v.is_empty()).collect();
        tags.sort();
        for pair in tags.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(SeriesKeyError::DuplicateTag(pair[0].0.clone()));
            }
        }
        if tags.iter().any(|(k, _)| k.is_empty()) {
            return Err(SeriesKeyError::EmptyTagKey);
        }
        Ok(SeriesKey { database: DEFAULT_DATABASE.to_string(), measurement, tags, field })
    }

    /// The same series in database `database` (databases are separate namespaces).
    pub fn in_database(mut self, database: impl Into<String>) -> Result<Self, SeriesKeyError> {
        let database = database.into();
        if database.is_empty() {
            return Err(SeriesKeyError::EmptyDatabase);
        }
        self.database = database;
        Ok(self)
    }

    pub fn database(&self) -> &str {
        &self.database
    }
    pub fn measurement(&self) -> &str {
        &self.measurement
    }
    pub fn tags(&self) -> &[(String, String)] {
        &self.tags
    }
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The canonical text form, line-protocol style: `measurement,tag=value,... field`,
    /// preceded by `database ` unless the series is in [`DEFAULT_DATABASE`]. Commas, spaces,
    /// equals signs and backslashes inside names are escaped with a backslash.
    pub fn canonical(&self) -> String {
        let mut out = String::with_capacity(64);
        if self.database != DEFAULT_DATABASE {
            escape_into(&self.database, &mut out);
            out.push(' ');
        }
        escape_into(&self.measurement, &mut out);
        for (k, v) in &self.tags {
            out.push(',');
            escape_into(k, &mut out);
            out.push('=');
            escape_into(v, &mut out);
        }
        out.push(' ');
        escape_into(&self.field, &mut out);
        out
    }

    /// The canonical form without the database: `measurement,tag=value,... field`.
    pub fn series_text(&self) -> String {
        let mut out = self.canonical();
        if self.database != DEFAULT_DATABASE {
            // The database part is everything up to the first unescaped space.
            let cut = split_unescaped(&out, ' ')[0].len() + 1;
            out.drain(..cut);
        }
        out
    }

    /// Parses the form written by [`SeriesKey::canonical`].
    pub fn parse(text: &str) -> Result<Self, SeriesKeyError> {
        let malformed = || SeriesKeyError::Malformed(text.to_string());
        let mut parts = split_unescaped(text, ' ');
        let database = match parts.len() {
            2 => None,
            3 => Some(unescape(parts.remove(0))),
            _ => return Err(malformed()),
        };
        let field = unescape(parts[1]);
        let series = split_unescaped(parts[0], ',');
        let measurement = unescape(series[0]);
        let mut tags = Vec::with_capacity(series.len() - 1);
        for tag in &series[1..] {
            let kv = split_unescaped(tag, '=');
            if kv.len() != 2 || kv[1].is_empty() {
                return Err(malformed());
            }
            tags.push((unescape(kv[0]), unescape(kv[1])));
        }
        let key = SeriesKey::new(measurement, tags, field)?;
        match database {
            Some(database) => key.in_database(database),
            None => Ok(key),
        }
    }
}

impl fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        if matches!(c, ',' | ' ' | '=' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
}

fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == separator {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut escaped = false;
    for c in text.chars() {
        if !escaped && c == '\\' {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tags_are_sorted_and_canonical_form_is_stable() {
        let key = SeriesKey::new("readings", [("name", "truck_1"), ("fleet", "South")], "velocity").expect("valid key");
        assert_eq!(key.canonical(), "readings,fleet=South,name=truck_1 velocity");
        assert_eq!(key.tag("name"), Some("truck_1"));
    }

    #[test]
    fn databases_are_namespaces_and_the_default_is_left_out_of_the_text() {
        let plain = SeriesKey::new("m", [("a", "1")], "f").expect("valid key");
        assert_eq!(plain.database(), DEFAULT_DATABASE);
        let other = plain.clone().in_database("plant 7").expect("valid database");
        assert_ne!(plain, other, "the same key in two databases is two series");
        assert_eq!(other.canonical(), "plant\\ 7 m,a=1 f");
        assert_eq!(other.series_text(), "m,a=1 f");
        assert_eq!(plain.series_text(), "m,a=1 f");
        assert_eq!(SeriesKey::parse("plant\\ 7 m,a=1 f"), Ok(other));
        assert_eq!(SeriesKey::parse("default m,a=1 f"), Ok(plain.clone()));
        assert_eq!(plain.clone().in_database(""), Err(SeriesKeyError::EmptyDatabase));
        assert!(SeriesKey::parse("a b c d").is_err());
    }

    #[test]
    fn duplicate_and_empty_parts_are_rejected() {
        assert_eq!(SeriesKey::new("m", [("a", "1"), ("a", "2")], "f"), Err(SeriesKeyError::DuplicateTag("a".into())));
        assert_eq!(SeriesKey::new("", [("a", "1")], "f"), Err(SeriesKeyError::EmptyMeasurement));
        assert_eq!(SeriesKey::new("m", [("a", "1")], ""), Err(SeriesKeyError::EmptyField));
    }

    #[test]
    fn time_spans_wider_than_i64_round_trip() {
        for (min, max) in [(i64::MIN, i64::MAX), (-4_774_451_407_313_060_419, i64::MAX), (5, 5), (i64::MIN, i64::MIN)] {
            assert_eq!(add_time_span(min, time_span(min, max)), Some(max));
        }
        assert_eq!(add_time_span(1, u64::MAX), None, "no i64 lies that far above 1");
        assert_eq!(add_time_span(i64::MAX, 1), None);
    }

    #[test]
    fn float_values_compare_bitwise() {
        assert_eq!(Value::F64(f64::NAN), Value::F64(f64::NAN));
        assert_ne!(Value::F64(0.0), Value::F64(-0.0));
        assert_ne!(Value::F64(1.0), Value::I64(1));
    }

    #[test]
    fn the_last_write_of_a_timestamp_wins_even_when_indices_are_not_ascending() {
        let timestamps = [5, 1, 5, 3, 1];
        assert_eq!(last_write_wins(&timestamps, vec![0, 1, 2, 3, 4]), vec![4, 3, 2]);
        // Write order is the order of `indices`, not of the index values.
        assert_eq!(last_write_wins(&timestamps, vec![4, 2, 0, 1]), vec![1, 0]);
        assert_eq!(last_write_wins(&timestamps, vec![1, 3, 0]), vec![1, 3, 0], "already sorted");
        assert!(last_write_wins(&timestamps, Vec::new()).is_empty());
    }

    proptest! {
        #[test]
        fn canonical_form_round_trips(
            measurement in "[a-z ,=\\\\]{1,8}",
            tags in proptest::collection::btree_map("[a-z ,=\\\\]{1,6}", "[A-Z0-9 ,=\\\\]{1,6}", 0..4),
            field in "[a-z ,=\\\\]{1,8}",
            database in proptest::option::of("[a-z ,=\\\\]{1,8}"),
        ) {
            let mut key = SeriesKey::new(measurement, tags, field).expect("valid key");
            if let Some(database) = database {
                key = key.in_database(database).expect("valid database");
            }
            prop_assert_eq!(SeriesKey::parse(&key.canonical()).expect("parses"), key);
        }
    }
}
