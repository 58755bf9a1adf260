//! The engine as a query's [`Storage`]: series from the catalog, points from range reads (oldest
//! or newest first, stopping where the query has enough), the newest points from
//! `Engine::last_points` (no history read), and the query's deadline checked before each series
//! is read.

use sensordb_engine::{Engine, SeriesId, Value, ValueColumn, ValueKind};
use sensordb_query::{ColumnSlice, FieldKind, FieldValue, ScanOrder, Storage, StorageError, StoredSeries};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

pub struct EngineStorage<'a> {
    pub engine: &'a Engine,
    /// Reads after this instant fail: the query has run out of time.
    pub deadline: Instant,
    pub series: &'a SeriesLists,
}

/// Lists of series a query asked for, by database and measurement, kept while the engine's
/// series do not change: a dashboard's lookups would otherwise spend most of their time
/// listing and sorting the catalog. Each tag set is one shared allocation for all its fields,
/// and a list is sorted by tag set, then field.
#[derive(Default)]
pub struct SeriesLists {
    lists: parking_lot::Mutex<SeriesListMap>,
}

/// One tag set, shared by the series of its fields.
type Tags = Arc<[(String, String)]>;

type SeriesListMap = HashMap<(String, Option<String>), (u64, Arc<Vec<StoredSeries>>)>;

/// Lists kept at most; beyond it the cache starts over (queries over many measurements at once
/// are rare, and each list is rebuilt in one catalog pass).
const SERIES_LISTS_MAX: usize = 256;

impl SeriesLists {
    fn get(&self, engine: &Engine, database: &str, measurement: Option<&str>) -> Arc<Vec<StoredSeries>> {
        let generation = engine.series_generation();
        let key = (database.to_string(), measurement.map(str::to_string));
        if let Some((seen, list)) = self.lists.lock().get(&key) {
            if *seen == generation {
                return list.clone();
            }
        }
        let mut tag_sets: HashMap<Vec<(String, String)>, Tags> = HashMap::new();
        let mut measurements: HashMap<String, Arc<str>> = HashMap::new();
        let mut list: Vec<StoredSeries> = engine
            .select_series(Some(database), measurement, &[])
            .into_iter()
            .map(|entry| {
                let tags = entry.key.tags().to_vec();
                let tags = tag_sets.entry(tags).or_insert_with_key(|t| Arc::from(t.clone())).clone();
                let name = entry.key.measurement();
                let measurement = measurements.entry(name.to_string()).or_insert_with(|| Arc::from(name)).clone();
                StoredSeries {
                    handle: u64::from(entry.id.0),
                    measurement,
                    tags,
                    field: Arc::from(entry.key.field()),
                    kind: kind(entry.kind),
                }
            })
            .collect();
        list.sort_by(|a, b| a.measurement.cmp(&b.measurement).then_with(|| a.tags.cmp(&b.tags)).then_with(|| a.field.cmp(&b.field)));
        let list = Arc::new(list);
        let mut lists = self.lists.lock();
        if lists.len() >= SERIES_LISTS_MAX {
            lists.clear();
        }
        lists.insert(key, (generation, list.clone()));
        list
    }
}

fn kind(kind: ValueKind) -> FieldKind {
    match kind {
        ValueKind::F64 => FieldKind::Float,
        ValueKind::I64 => FieldKind::Integer,
        ValueKind::U64 => FieldKind::Unsigned,
        ValueKind::Bool => FieldKind::Boolean,
        ValueKind::Bytes => FieldKind::String,
    }
}

impl Storage for EngineStorage<'_> {
    fn databases(&self) -> Vec<String> {
        self.engine.databases().policies.keys().cloned().collect()
    }

    fn series(&self, database: &str, measurement: Option<&str>) -> Vec<StoredSeries> {
        self.series.get(self.engine, database, measurement).as_ref().clone()
    }

    fn last(&self, series: &[StoredSeries]) -> Result<Vec<Option<(i64, FieldValue)>>, StorageError> {
        let ids: Vec<SeriesId> = series.iter().map(|s| SeriesId(s.handle as u32)).collect();
        let points = self.engine.last_points(&ids).map_err(|e| StorageError(format!("newest points: {e}")))?;
        Ok(points
            .into_iter()
            .map(|p| {
                p.map(|(t, v)| {
                    let value = match v {
                        Value::F64(x) => FieldValue::Float(x),
                        Value::I64(x) => FieldValue::Integer(x),
                        Value::U64(x) => FieldValue::Unsigned(x),
                        Value::Bool(x) => FieldValue::Boolean(x),
                        Value::Bytes(b) => FieldValue::String(String::from_utf8_lossy(&b).into_owned()),
                    };
                    (t, value)
                })
            })
            .collect())
    }

    fn scan(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        if Instant::now() > self.deadline {
            return Err(StorageError("query timeout: the query ran longer than query_timeout_ms".into()));
        }
        let id = u32::try_from(series.handle).map_err(|_| StorageError(format!("bad series handle {}", series.handle)))?;
        // The engine reads [from, to); a point at i64::MAX itself is beyond every query.
        let mut read = self.engine.read(SeriesId(id), from, to.saturating_add(1));
        let mut strings = Vec::new();
        loop {
            let chunk = match order {
                ScanOrder::OldestFirst => read.next_chunk(),
                ScanOrder::NewestFirst => read.next_chunk_back(),
            };
            let Some(chunk) = chunk else { break };
            let chunk = chunk.map_err(|e| StorageError(format!("reading {}: {e}", series.measurement)))?;
            if with_slice(&chunk.values, &mut strings, |values| sink(&chunk.timestamps, values)).is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// Hands `values` to `f` as a query column; byte values become strings (lossily, in `strings`,
/// reused between calls).
pub fn with_slice<T>(values: &ValueColumn, strings: &mut Vec<String>, f: impl FnOnce(ColumnSlice<'_>) -> T) -> T {
    match values {
        ValueColumn::F64(v) => f(ColumnSlice::Float(v)),
        ValueColumn::I64(v) => f(ColumnSlice::Integer(v)),
        ValueColumn::U64(v) => f(ColumnSlice::Unsigned(v)),
        ValueColumn::Bool(v) => f(ColumnSlice::Boolean(v)),
        ValueColumn::Bytes(v) => {
            strings.clear();
            strings.extend(v.iter().map(|b| String::from_utf8_lossy(b).into_owned()));
            f(ColumnSlice::String(strings))
        }
    }
}
