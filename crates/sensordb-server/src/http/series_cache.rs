//! Series ids by raw line-protocol text, so the write path does not build a `SeriesKey` per line.
//!
//! Two levels: the raw (escaped) measurement + tag text of a line maps to a [`CachedSeries`]
//! (the unescaped measurement and tags, validated once), and inside it the unescaped field name
//! maps to the engine's series id and value kind. The outer map is split into shards, each
//! behind its own read-write lock, so concurrent requests meet on a lock only when they hash to
//! the same shard, and then only as readers once the series is known. A kind never changes
//! once a series exists, so cached kinds stay true; the engine remains the judge for new series.
//!
//! Entries are never evicted: the cache holds no more series than the engine's catalog, which
//! keeps every series in memory too.

use parking_lot::RwLock;
use sensordb_engine::{Engine, SeriesId, SeriesKey, ValueKind};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

const SHARDS: usize = 64;

/// One measurement + tag set, with the ids of its fields.
#[derive(Debug)]
pub struct CachedSeries {
    pub measurement: String,
    pub tags: Vec<(String, String)>,
    fields: RwLock<HashMap<Box<str>, (SeriesId, ValueKind)>>,
}

/// Why a field cannot be written.
#[derive(Debug)]
pub enum FieldError {
    /// The series exists with another kind of value.
    Conflict { existing: ValueKind, attempted: ValueKind },
    /// Any other engine refusal (bad key, disk full, ...).
    Engine(sensordb_engine::Error),
}

impl CachedSeries {
    /// The series id of `field` written with a value of `kind`, registering it when new.
    pub fn field_id(&self, engine: &Engine, field: &str, kind: ValueKind) -> Result<SeriesId, FieldError> {
        if let Some(&(id, existing)) = self.fields.read().get(field) {
            return if existing == kind { Ok(id) } else { Err(FieldError::Conflict { existing, attempted: kind }) };
        }
        let key = SeriesKey::new(self.measurement.as_str(), self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), field)
            .map_err(|e| FieldError::Engine(e.into()))?;
        match engine.series_id(&key, kind) {
            Ok(id) => {
                self.fields.write().insert(field.into(), (id, kind));
                Ok(id)
            }
            Err(sensordb_engine::Error::KindMismatch { existing, attempted, .. }) => {
                if let Some(id) = engine.find_series(&key) {
                    self.fields.write().insert(field.into(), (id, existing));
                }
                Err(FieldError::Conflict { existing, attempted })
            }
            Err(e) => Err(FieldError::Engine(e)),
        }
    }
}

/// The sharded map from raw series text to [`CachedSeries`].
pub struct SeriesCache {
    hasher: RandomState,
    shards: Vec<RwLock<HashMap<Box<str>, Arc<CachedSeries>>>>,
}

impl Default for SeriesCache {
    fn default() -> Self {
        SeriesCache { hasher: RandomState::new(), shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect() }
    }
}

impl SeriesCache {
    /// The entry of `series_text`, made by `make` (which unescapes and validates) when new.
    pub fn get_or_insert<E>(
        &self,
        series_text: &str,
        make: impl FnOnce() -> Result<(String, Vec<(String, String)>), E>,
    ) -> Result<Arc<CachedSeries>, E> {
        let shard = &self.shards[(self.hasher.hash_one(series_text) as usize) % SHARDS];
        if let Some(found) = shard.read().get(series_text) {
            return Ok(found.clone());
        }
        let (measurement, tags) = make()?;
        let entry = Arc::new(CachedSeries { measurement, tags, fields: RwLock::new(HashMap::new()) });
        Ok(shard.write().entry(series_text.into()).or_insert(entry).clone())
    }

    /// Number of measurement + tag sets cached.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
