//! A [`Storage`] over vectors in memory: the executor's tests run every query against it, and
//! tools can answer queries over data they hold.

use crate::series_list::SeriesList;
use crate::storage::{FieldKind, ScanOrder, Storage, StorageError, StoredSeries};
use crate::value::{Column, ColumnSlice};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};

/// A series list's database and measurement (`None`: every measurement).
type ListKey = (String, Option<String>);

/// Series and their points, kept sorted by time.
#[derive(Default)]
pub struct MemoryStorage {
    series: Vec<(String, StoredSeries, Vec<i64>, Column)>,
    /// Points per run handed to a reader (`None`: a range in one run), so tests see reads
    /// split as a store's blocks split them.
    run_points: Option<usize>,
    /// The lists [`Storage::series`] built, by database and measurement, until the next
    /// insert: a server keeps its lists too, and a query should not pay for building them.
    lists: Mutex<HashMap<ListKey, Arc<SeriesList>>>,
}

impl MemoryStorage {
    /// Hands reads out in runs of at most `points` points.
    pub fn set_run_points(&mut self, points: usize) {
        self.run_points = Some(points);
    }

    /// Adds points of `measurement,tags field` in `database` (replacing the points of that
    /// series if it exists); `points` need not be sorted.
    pub fn insert(&mut self, database: &str, measurement: &str, tags: &[(&str, &str)], field: &str, points: Vec<(i64, crate::FieldValue)>) {
        let mut tags: Vec<(String, String)> = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        tags.sort();
        let mut points = points;
        points.sort_by_key(|p| p.0);
        let kind = match points.first().map(|p| &p.1) {
            Some(crate::FieldValue::Integer(_)) => FieldKind::Integer,
            Some(crate::FieldValue::Unsigned(_)) => FieldKind::Unsigned,
            Some(crate::FieldValue::Boolean(_)) => FieldKind::Boolean,
            Some(crate::FieldValue::String(_)) => FieldKind::String,
            _ => FieldKind::Float,
        };
        let times = points.iter().map(|p| p.0).collect();
        let column = match kind {
            FieldKind::Float => Column::Float(points.iter().map(|p| p.1.as_f64().unwrap_or(f64::NAN)).collect()),
            FieldKind::Integer => Column::Integer(points.iter().map(|p| p.1.as_f64().unwrap_or(0.0) as i64).collect()),
            FieldKind::Unsigned => Column::Unsigned(points.iter().map(|p| p.1.as_f64().unwrap_or(0.0) as u64).collect()),
            FieldKind::Boolean => Column::Boolean(points.iter().map(|p| p.1 == crate::FieldValue::Boolean(true)).collect()),
            FieldKind::String => Column::String(points.iter().map(|p| p.1.to_string()).collect()),
        };
        self.lists.get_mut().unwrap_or_else(PoisonError::into_inner).clear();
        // One series per key, as in a store: inserting a key again replaces its points.
        let same_key = |(db, s, _, _): &(String, StoredSeries, Vec<i64>, Column)| {
            db == database && &*s.measurement == measurement && *s.tags == *tags && &*s.field == field
        };
        if let Some(existing) = self.series.iter_mut().find(|entry| same_key(entry)) {
            existing.1.kind = kind;
            (existing.2, existing.3) = (times, column);
            return;
        }
        let stored = StoredSeries {
            handle: self.series.len() as u64,
            measurement: Arc::from(measurement),
            tags: Arc::from(tags),
            field: Arc::from(field),
            kind,
        };
        self.series.push((database.to_string(), stored, times, column));
    }

    fn build_list(&self, database: &str, measurement: Option<&str>) -> Arc<SeriesList> {
        let mut list: Vec<StoredSeries> = self
            .series
            .iter()
            .filter(|(db, s, _, _)| db == database && measurement.is_none_or(|m| &*s.measurement == m))
            .map(|(_, s, _, _)| s.clone())
            .collect();
        list.sort_by(|a, b| a.measurement.cmp(&b.measurement).then_with(|| a.tags.cmp(&b.tags)).then_with(|| a.field.cmp(&b.field)));
        Arc::new(SeriesList::new(list))
    }
}

impl Storage for MemoryStorage {
    fn databases(&self) -> Vec<String> {
        let mut names: Vec<String> = self.series.iter().map(|s| s.0.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    fn series(&self, database: &str, measurement: Option<&str>) -> Arc<SeriesList> {
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (database.to_string(), measurement.map(str::to_string));
        lists.entry(key).or_insert_with(|| self.build_list(database, measurement)).clone()
    }

    /// The series of the tag value, as a store with an index of its tags answers: queries over
    /// this storage take the part-of-a-measurement path wherever a condition names a tag value.
    fn series_with_tag(&self, database: &str, measurement: &str, key: &str, value: &str) -> Option<Arc<SeriesList>> {
        let all = self.series(database, Some(measurement));
        let part = all.iter().filter(|s| s.tags.iter().any(|(k, v)| k == key && v == value)).cloned().collect();
        Some(Arc::new(SeriesList::part_of_measurement(part, all.field_names().to_vec(), all.tag_keys().to_vec())))
    }

    fn oldest_bounds(&self, series: &[&StoredSeries]) -> Result<Vec<Option<i64>>, StorageError> {
        series
            .iter()
            .map(|s| {
                let (_, _, times, _) = self.series.get(s.handle as usize).ok_or_else(|| StorageError(format!("no series {}", s.handle)))?;
                Ok(times.first().copied())
            })
            .collect()
    }

    fn last(&self, series: &[&StoredSeries]) -> Result<Vec<Option<(i64, crate::FieldValue)>>, StorageError> {
        series
            .iter()
            .map(|s| {
                let (_, _, times, column) =
                    self.series.get(s.handle as usize).ok_or_else(|| StorageError(format!("no series {}", s.handle)))?;
                Ok(times.len().checked_sub(1).map(|i| (times[i], column.slice(i..i + 1).get(0))))
            })
            .collect()
    }

    fn scan(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        let (_, _, times, column) =
            self.series.get(series.handle as usize).ok_or_else(|| StorageError(format!("no series {}", series.handle)))?;
        let lo = times.partition_point(|&t| t < from);
        let hi = times.partition_point(|&t| t <= to);
        let run = self.run_points.unwrap_or(usize::MAX).max(1);
        let runs: Vec<(usize, usize)> = (lo..hi).step_by(run).map(|start| (start, start.saturating_add(run).min(hi))).collect();
        let mut hand = |&(start, end): &(usize, usize)| sink(&times[start..end], column.slice(start..end));
        let _stopped = match order {
            ScanOrder::OldestFirst => runs.iter().try_for_each(&mut hand),
            ScanOrder::NewestFirst => runs.iter().rev().try_for_each(&mut hand),
        };
        Ok(())
    }
}
