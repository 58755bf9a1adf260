//! Series ids by raw line-protocol text, so the write path does not build a `SeriesKey` per line.
//!
//! Two levels: the raw (escaped) measurement + tag text of a line maps to a [`CachedSeries`]
//! (its canonical key text without a field, validated once), and inside it the unescaped field name
//! maps to the engine's series id and value kind (a short list searched at the field's position
//! in the line first: lines of one series nearly always list their fields in the same order). The outer map is split into shards, each
//! behind its own read-write lock, so concurrent requests meet on a lock only when they hash to
//! the same shard, and then only as readers once the series is known. A kind never changes
//! once a series exists, so cached kinds stay true; the engine remains the judge for new series.
//!
//! Entries are never evicted: the cache holds no more series than the engine's catalog, which
//! keeps every series in memory too. An entry is kept small (a million devices make a million
//! entries): the key prefix is one string, parsed again only when a field new to the process
//! arrives, and the field list is allocated to its length.
//!
//! Each writer keeps a [`BodySeries`] per series text it has met (the write path's
//! `SeriesMemo`, kept between bodies): it holds what the shared cache gave for that series, so
//! later lines resolve with no lock, hash of the shared maps or reference count, and concurrent
//! writers of the same series do not bounce the shared entries' cache lines between cores.

use super::line_protocol::Field;
use foldhash::quality::RandomState;
use parking_lot::RwLock;
use sensordb_engine::{BatchKindError, Engine, SeriesId, SeriesKey, SeriesKeyError, ValueKind, WriteBatch};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

const SHARDS: usize = 64;

/// One measurement + tag set, with the ids of its fields.
#[derive(Debug)]
pub struct CachedSeries {
    /// The canonical key text of its series without the field (`[database ]measurement,tags`,
    /// see `SeriesKey::canonical`), or why the measurement and tags make no valid key.
    prefix: Result<Box<str>, SeriesKeyError>,
    /// Field name, series id, kind; in first-seen order, which is usually the order of the
    /// fields in every line of this series, so a field is looked for at its position first.
    fields: RwLock<Vec<(Box<str>, SeriesId, ValueKind)>>,
}

/// Why a field cannot be written.
#[derive(Debug)]
pub enum FieldError {
    /// The series exists with another kind of value.
    Conflict { existing: ValueKind, attempted: ValueKind },
    /// The field would be a new series beyond the request's `max_new_series_per_request`.
    NewSeriesLimit,
    /// Any other engine refusal (bad key, disk full, a database at its series limit, ...).
    Engine(sensordb_engine::Error),
}

/// New series one request may still create (`max_new_series_per_request`).
#[derive(Clone, Copy, Debug)]
pub struct NewSeriesBudget {
    pub left: usize,
}

impl CachedSeries {
    fn new(database: &str, measurement: String, tags: Vec<(String, String)>) -> Self {
        let prefix = SeriesKey::new(measurement, tags, "_").and_then(|key| key.in_database(database)).map(|key| {
            let mut text = key.canonical();
            // The field `_` needs no escape: the text ends with " _".
            text.truncate(text.len() - 2);
            text.into_boxed_str()
        });
        CachedSeries { prefix, fields: RwLock::new(Vec::new()) }
    }

    /// The key of `field` in this series.
    fn key(&self, field: &str) -> Result<SeriesKey, SeriesKeyError> {
        let prefix = self.prefix.as_ref().map_err(Clone::clone)?;
        let template = SeriesKey::parse(&format!("{prefix} _"))?;
        SeriesKey::new(template.measurement(), template.tags().iter().map(|(k, v)| (k.as_str(), v.as_str())), field)?
            .in_database(template.database())
    }

    /// The measurement (unescaped), for messages.
    pub fn measurement(&self) -> String {
        self.key("_").map(|key| key.measurement().to_string()).unwrap_or_default()
    }

    /// The series id of `field` written with a value of `kind`, registering it when new (which
    /// takes one from `budget`; none left, it is refused).
    pub fn field_id(&self, engine: &Engine, field: &str, kind: ValueKind, budget: &mut NewSeriesBudget) -> Result<SeriesId, FieldError> {
        if let Some(&(_, id, existing)) = self.fields.read().iter().find(|entry| &*entry.0 == field) {
            return if existing == kind { Ok(id) } else { Err(FieldError::Conflict { existing, attempted: kind }) };
        }
        let key = self.key(field).map_err(|e| FieldError::Engine(e.into()))?;
        // Only here, once per series and process: a lookup before the creation tells new from
        // known (two requests creating the same series at once both count it).
        let known = engine.find_series(&key).is_some();
        if !known && budget.left == 0 {
            return Err(FieldError::NewSeriesLimit);
        }
        match engine.series_id_unsynced(&key, kind) {
            Ok(id) => {
                if !known {
                    budget.left -= 1;
                }
                self.remember(field, id, kind);
                Ok(id)
            }
            Err(sensordb_engine::Error::KindMismatch { existing, attempted, .. }) => {
                if let Some(id) = engine.find_series(&key) {
                    self.remember(field, id, existing);
                }
                Err(FieldError::Conflict { existing, attempted })
            }
            Err(e) => Err(FieldError::Engine(e)),
        }
    }

    fn remember(&self, field: &str, id: SeriesId, kind: ValueKind) {
        let mut fields = self.fields.write();
        if !fields.iter().any(|entry| &*entry.0 == field) {
            // Exactly as long as needed: most series have one to a few fields, for ever.
            fields.reserve_exact(1);
            fields.push((field.into(), id, kind));
        }
    }
}

/// One series text as a writer has met it: its shared entry, every field resolved through it
/// so far, and the field layout of the last line.
///
/// Lines of one series mostly repeat the last line's fields (same names, order and kinds): they
/// resolve by comparing names with the layout. Lines that differ (TSBS leaves fields out at
/// random) resolve against the fields this writer already knows; only a field new here goes to
/// the shared entry. Either way no lock, hash of the shared maps or reference count is touched,
/// so concurrent writers of the same series do not bounce the shared entries' cache lines
/// between cores.
pub struct BodySeries {
    pub series: Arc<CachedSeries>,
    /// The names of the known fields, back to back: one allocation, and comparisons stay
    /// within a few cache lines (comparing with names in an earlier line's text, long gone from
    /// the CPU caches in a large body, cost a cache miss per field).
    names: String,
    known: Vec<KnownField>,
    /// Indices into `known` of the fields of the last line resolved, in line order.
    layout: Vec<usize>,
    /// The write batch entries of the layout's fields (see [`BodySeries::slots`]).
    slots: Vec<usize>,
}

struct KnownField {
    /// End of the name in `names` (it starts where the previous one ends).
    end: usize,
    kind: ValueKind,
    id: SeriesId,
    /// The field's write batch entry for body number `slot_body`.
    slot: usize,
    slot_body: u64,
}

impl BodySeries {
    pub fn new(series: Arc<CachedSeries>) -> Self {
        BodySeries { series, names: String::new(), known: Vec::new(), layout: Vec::new(), slots: Vec::new() }
    }

    /// Whether no field of this series has resolved through this entry yet.
    pub fn has_no_fields(&self) -> bool {
        self.known.is_empty()
    }

    fn name(&self, k: usize) -> &str {
        let start = if k == 0 { 0 } else { self.known[k - 1].end };
        &self.names[start..self.known[k].end]
    }

    /// Resolves the fields of one line (`(name, kind)` in line order) into the layout, so that
    /// [`BodySeries::slots`] gives their batch entries; registers fields new to the catalog. On
    /// failure, the index of the failing field (the layout is then unspecified).
    pub fn resolve(&mut self, engine: &Engine, fields: &[Field<'_>], budget: &mut NewSeriesBudget) -> Result<(), (usize, FieldError)> {
        if self.layout.len() == fields.len()
            && self.layout.iter().zip(fields).all(|(&k, field)| self.known[k].kind == field.value.kind() && same(self.name(k), &field.key))
        {
            return Ok(());
        }
        self.layout.clear();
        for (j, field) in fields.iter().enumerate() {
            let (name, kind) = (&*field.key, field.value.kind());
            // At the field's position first: known fields are in first-seen order.
            let found = if j < self.known.len() && same(self.name(j), name) {
                Some(j)
            } else {
                (0..self.known.len()).find(|&k| same(self.name(k), name))
            };
            let k = match found {
                Some(k) if self.known[k].kind == kind => k,
                Some(k) => return Err((j, FieldError::Conflict { existing: self.known[k].kind, attempted: kind })),
                None => {
                    let id = self.series.field_id(engine, name, kind, budget).map_err(|e| (j, e))?;
                    self.names.push_str(name);
                    self.known.push(KnownField { end: self.names.len(), kind, id, slot: 0, slot_body: 0 });
                    self.known.len() - 1
                }
            };
            self.layout.push(k);
        }
        Ok(())
    }

    /// The write batch entries of the fields of the line last resolved, in field order. An
    /// entry is looked up in `batch` once per field and body: a body holds each series several
    /// times, and a hash lookup per value was most of `WriteBatch::push`. `body` numbers the
    /// body (and so its batch) among those this entry has seen, from 1.
    pub fn slots(&mut self, batch: &mut WriteBatch, body: u64) -> Result<&[usize], BatchKindError> {
        self.slots.clear();
        for &k in &self.layout {
            let field = &mut self.known[k];
            if field.slot_body != body {
                field.slot = batch.entry_index(field.id, field.kind)?;
                field.slot_body = body;
            }
            self.slots.push(field.slot);
        }
        Ok(&self.slots)
    }
}

/// String equality without a `memcmp` call (field names are short), eight bytes at a time: a
/// byte loop over TSBS's names (up to 24 bytes, ten a line) took 9% of the server's CPU.
#[inline]
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if a.len() < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    // Whole words, then the last eight bytes (overlapping the previous word when the length is
    // not a multiple of eight).
    let last = a.len() - 8;
    (0..last).step_by(8).all(|i| word(a, i) == word(b, i)) && word(a, last) == word(b, last)
}

/// The sharded map from raw series text to [`CachedSeries`], for one database.
pub struct SeriesCache {
    database: Box<str>,
    /// foldhash, seeded per cache: the series text comes from clients, so the seed keeps them
    /// from choosing colliding texts, and hashing a line's series text costs a few nanoseconds
    /// where SipHash took about 60 (twice per line: shard, then map).
    hasher: RandomState,
    shards: Vec<Shard>,
}

/// Raw series text to entry, for the texts whose hash picks this shard.
type Shard = RwLock<HashMap<Box<str>, Arc<CachedSeries>, RandomState>>;

impl SeriesCache {
    pub fn new(database: &str) -> Self {
        // Each map has its own seed: with the shard's, the keys of a shard would share the low
        // bits that pick their bucket.
        let shards = (0..SHARDS).map(|_| RwLock::new(HashMap::with_hasher(RandomState::default()))).collect();
        SeriesCache { database: database.into(), hasher: RandomState::default(), shards }
    }

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
        let entry = Arc::new(CachedSeries::new(&self.database, measurement, tags));
        Ok(shard.write().entry(series_text.into()).or_insert(entry).clone())
    }

    /// Drops the entry of `series_text` if it has no fields: a series refused by a limit leaves
    /// nothing behind, however many new texts clients send.
    pub fn forget_if_fieldless(&self, series_text: &str) {
        let shard = &self.shards[(self.hasher.hash_one(series_text) as usize) % SHARDS];
        let mut shard = shard.write();
        if shard.get(series_text).is_some_and(|entry| entry.fields.read().is_empty()) {
            shard.remove(series_text);
        }
    }

    /// Number of measurement + tag sets cached.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn same_compares_every_byte_of_any_length() {
        let names = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "nominal_fuel_consumption", "nominal_fuel_consumptiom", "é_x"];
        for a in names {
            for b in names {
                assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
            }
        }
        for len in 0..40 {
            let a = "x".repeat(len);
            for at in 0..len {
                let mut b = a.clone().into_bytes();
                b[at] = b'y';
                assert!(!same(&a, std::str::from_utf8(&b).expect("ascii")), "{len} {at}");
            }
            assert!(same(&a, &a.clone()));
        }
    }
}
