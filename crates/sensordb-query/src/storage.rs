//! What query execution needs from a store: the series of a database and the points of one
//! series over a time range. The engine implements it in the server; tests implement it over
//! plain vectors, so every query is checked without a disk.

use crate::series_list::SeriesList;
use crate::value::{ColumnSlice, FieldValue};
use std::ops::ControlFlow;
use std::sync::Arc;

/// The type of a field's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    Float,
    Integer,
    Unsigned,
    Boolean,
    String,
}

impl FieldKind {
    /// The name `SHOW FIELD KEYS` gives the type.
    pub fn influx_name(self) -> &'static str {
        match self {
            FieldKind::Float => "float",
            FieldKind::Integer => "integer",
            FieldKind::Unsigned => "unsigned",
            FieldKind::Boolean => "boolean",
            FieldKind::String => "string",
        }
    }
}

/// One stored series: one field of a measurement under one tag set.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSeries {
    /// The store's own handle, passed back to [`Storage::read`].
    pub handle: u64,
    pub measurement: Arc<str>,
    /// Sorted by key, keys distinct.
    pub tags: Arc<[(String, String)]>,
    pub field: Arc<str>,
    pub kind: FieldKind,
}

/// A store could not deliver points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StorageError(pub String);

/// The order in which [`Storage::scan`] hands out a series' points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOrder {
    OldestFirst,
    /// Runs come newest first; the points within a run still ascend.
    NewestFirst,
}

/// The store a query reads from.
pub trait Storage: Send + Sync {
    /// Names of the databases, sorted.
    fn databases(&self) -> Vec<String>;
    /// The series of `database`, of one measurement when `measurement` is given, sorted by
    /// measurement, tag set and field. Shared: a store may keep the list between queries.
    fn series(&self, database: &str, measurement: Option<&str>) -> Arc<SeriesList>;
    /// The series of `measurement` whose tag `key` is `value`, when the store lists them more
    /// cheaply than the whole measurement ([`Storage::series`]), made with
    /// [`SeriesList::part_of_measurement`]: its field names and tag keys are the whole
    /// measurement's. `None` (the default): the caller takes the whole list.
    fn series_with_tag(&self, _database: &str, _measurement: &str, _key: &str, _value: &str) -> Option<Arc<SeriesList>> {
        None
    }
    /// Hands the points of `series` in `[from, to]` (both inclusive) to `sink` in runs of any
    /// length, in `order`. When `sink` answers [`ControlFlow::Break`] the read stops there: a
    /// query that needs only the first or newest points reads no further.
    fn scan(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError>;

    /// [`Storage::scan`] for a `sink` that takes at most `limit` points: a store may then leave
    /// out what lies beyond them (the first `limit` points in `order` are the full scan's).
    fn scan_at_most(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        limit: usize,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        let _ = limit;
        self.scan(series, from, to, order, sink)
    }

    /// Hands every point of `series` in `[from, to]` to `sink` in ascending time order, in runs
    /// of any length.
    fn read(&self, series: &StoredSeries, from: i64, to: i64, sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>)) -> Result<(), StorageError> {
        self.scan(series, from, to, ScanOrder::OldestFirst, &mut |times, values| {
            sink(times, values);
            ControlFlow::Continue(())
        })
    }

    /// For each of `series`, a time no later than its oldest point (`None`: it has none): a
    /// query that wants only the oldest rows of many series reads those that can hold them.
    /// Stores that index their data's time extents answer without reading points (the engine
    /// does); this default knows nothing, so every series is read.
    fn oldest_bounds(&self, series: &[&StoredSeries]) -> Result<Vec<Option<i64>>, StorageError> {
        Ok(vec![Some(i64::MIN); series.len()])
    }

    /// Damage a store stepped over while reading (each a message naming the file and offset),
    /// taken once: a query's answer then says what it is missing instead of failing.
    fn take_damage(&self) -> Vec<String> {
        Vec::new()
    }

    /// The newest point of each of `series`. Stores that keep it (the engine does) answer
    /// without reading history; this default reads everything.
    fn last(&self, series: &[&StoredSeries]) -> Result<Vec<Option<(i64, FieldValue)>>, StorageError> {
        series
            .iter()
            .map(|s| {
                let mut last = None;
                self.read(s, i64::MIN, i64::MAX, &mut |times: &[i64], values: ColumnSlice<'_>| {
                    if let Some(&t) = times.last() {
                        last = Some((t, values.get(times.len() - 1)));
                    }
                })?;
                Ok(last)
            })
            .collect()
    }
}
