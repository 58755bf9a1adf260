//! The neutral row form every workload source produces (the TSBS-like generator, the payload
//! generator, the line-protocol reader), and the mapping from rows to engine series.
//!
//! A [`Row`] is one line-protocol line: measurement, tag set, fields, timestamp. Rows are cheap to
//! make: the measurement and field names are shared `Arc<str>`s and the tag set is a shared
//! [`TagSet`], so no tag string is allocated per row. Every distinct tag set a source hands out has
//! a dense [`TagSet::id`], which [`SeriesMap`] uses to cache whatever the consumer wants per series
//! (a [`SeriesKey`], or later an engine series id) without hashing tag strings per value.

use sensordb_engine::{SeriesKey, SeriesKeyError, Timestamp, Value};
use std::sync::Arc;

/// A tag set shared by many rows. `tags` are in source order (not sorted, and possibly with
/// empty values, which [`SeriesKey::new`] drops).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TagSet {
    /// Dense id, unique among the tag sets of one source (generator or reader), from 0.
    pub id: u32,
    pub tags: Vec<(String, String)>,
}

impl TagSet {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// One line of data: several fields of one measurement and tag set at one timestamp.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub measurement: Arc<str>,
    pub tags: Arc<TagSet>,
    pub fields: Vec<(Arc<str>, Value)>,
    /// Nanoseconds since the Unix epoch.
    pub timestamp: Timestamp,
}

impl Row {
    /// The series key of one field of this row (allocates; see [`SeriesMap`] for the cached way).
    pub fn series_key(&self, field: &str) -> Result<SeriesKey, SeriesKeyError> {
        SeriesKey::new(&*self.measurement, self.tags.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), field)
    }

    /// Flattens the row into `(series, timestamp, value)` triples, building each key afresh.
    pub fn flatten(&self) -> Result<Vec<(SeriesKey, Timestamp, Value)>, SeriesKeyError> {
        self.fields.iter().map(|(field, value)| Ok((self.series_key(field)?, self.timestamp, value.clone()))).collect()
    }
}

/// (measurement, field, cached value) of one series.
type SeriesEntry<T> = (Arc<str>, Arc<str>, T);

/// A per-series cache keyed by (tag set id, measurement, field), filled once per series.
///
/// Lookups index a vector by tag set id and scan that tag set's few (measurement, field)
/// entries, comparing `Arc` pointers first, so the hot path hashes nothing.
#[derive(Debug)]
pub struct SeriesMap<T> {
    by_tag_set: Vec<Vec<SeriesEntry<T>>>,
    len: usize,
}

impl<T> Default for SeriesMap<T> {
    fn default() -> Self {
        SeriesMap { by_tag_set: Vec::new(), len: 0 }
    }
}

fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

impl<T> SeriesMap<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of series held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cached value of a series, if present.
    pub fn get(&self, tags: &TagSet, measurement: &Arc<str>, field: &Arc<str>) -> Option<&T> {
        self.by_tag_set.get(tags.id as usize)?.iter().find(|(m, f, _)| same(m, measurement) && same(f, field)).map(|(_, _, value)| value)
    }

    /// The cached value of a series, computed by `make` from its key on the first call.
    pub fn get_or_insert_with<E>(
        &mut self,
        tags: &TagSet,
        measurement: &Arc<str>,
        field: &Arc<str>,
        make: impl FnOnce(SeriesKey) -> Result<T, E>,
    ) -> Result<&T, E>
    where
        E: From<SeriesKeyError>,
    {
        let index = tags.id as usize;
        if self.by_tag_set.len() <= index {
            self.by_tag_set.resize_with(index + 1, Vec::new);
        }
        let entries = &mut self.by_tag_set[index];
        let position = match entries.iter().position(|(m, f, _)| same(m, measurement) && same(f, field)) {
            Some(position) => position,
            None => {
                let key = SeriesKey::new(&**measurement, tags.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), &**field)?;
                entries.push((measurement.clone(), field.clone(), make(key)?));
                self.len += 1;
                entries.len() - 1
            }
        };
        Ok(&entries[position].2)
    }

    /// Appends the row's `(series value, timestamp, value)` triples to `out`, filling the cache
    /// with `make` for series not seen before.
    pub fn flatten_into<E>(
        &mut self,
        row: &Row,
        out: &mut Vec<(T, Timestamp, Value)>,
        mut make: impl FnMut(SeriesKey) -> Result<T, E>,
    ) -> Result<(), E>
    where
        T: Clone,
        E: From<SeriesKeyError>,
    {
        for (field, value) in &row.fields {
            let series = self.get_or_insert_with(&row.tags, &row.measurement, field, &mut make)?;
            out.push((series.clone(), row.timestamp, value.clone()));
        }
        Ok(())
    }
}

impl SeriesMap<Arc<SeriesKey>> {
    /// Appends the row's `(series key, timestamp, value)` triples, keys shared from the cache.
    pub fn flatten_keys_into(&mut self, row: &Row, out: &mut Vec<(Arc<SeriesKey>, Timestamp, Value)>) -> Result<(), SeriesKeyError> {
        self.flatten_into(row, out, |key| Ok::<_, SeriesKeyError>(Arc::new(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u32, truck: &str) -> Row {
        Row {
            measurement: Arc::from("readings"),
            tags: Arc::new(TagSet { id, tags: vec![("name".into(), truck.into()), ("fleet".into(), "East".into())] }),
            fields: vec![(Arc::from("velocity"), Value::F64(3.0)), (Arc::from("status"), Value::I64(1))],
            timestamp: 7,
        }
    }

    #[test]
    fn flatten_builds_sorted_series_keys() {
        let triples = row(0, "truck_1").flatten().expect("valid");
        assert_eq!(triples.len(), 2);
        assert_eq!(triples[0].0.canonical(), "readings,fleet=East,name=truck_1 velocity");
        assert_eq!(triples[1].1, 7);
        assert_eq!(triples[1].2, Value::I64(1));
    }

    #[test]
    fn series_map_caches_per_tag_set_measurement_and_field() {
        let mut map = SeriesMap::<Arc<SeriesKey>>::new();
        let mut out = Vec::new();
        let a = row(0, "truck_1");
        map.flatten_keys_into(&a, &mut out).expect("valid");
        map.flatten_keys_into(&a, &mut out).expect("valid");
        assert_eq!(map.len(), 2);
        assert!(Arc::ptr_eq(&out[0].0, &out[2].0));
        map.flatten_keys_into(&row(3, "truck_2"), &mut out).expect("valid");
        assert_eq!(map.len(), 4);
        assert_eq!(out[4].0.tag("name"), Some("truck_2"));
        let found = map.get(&a.tags, &Arc::from("readings"), &Arc::from("status"));
        assert_eq!(found.map(|k| k.field()), Some("status"));
    }
}
