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
//! entries, see [`CachedSeries`]): the raw text is stored once and is the map's key, the
//! canonical text only when it differs, parsed again only when a field new to the process
//! arrives, and the field list is allocated to its length.
//!
//! Each writer keeps a [`BodySeries`] per series text it has met (the write path's
//! `SeriesMemo`, kept between bodies): it holds what the shared cache gave for that series, so
//! later lines resolve with no lock, hash of the shared maps or reference count, and concurrent
//! writers of the same series do not bounce the shared entries' cache lines between cores.

use super::line_protocol::Field;
use foldhash::quality::RandomState;
use hashbrown::HashTable;
use parking_lot::RwLock;
use sensordb_engine::{BatchKindError, Engine, SeriesId, SeriesKey, SeriesKeyError, ValueKind, WriteBatch};
use std::hash::BuildHasher;
use std::sync::Arc;

const SHARDS: usize = 64;

/// One measurement + tag set, with the ids of its fields.
///
/// About 170 bytes with its map slot and allocations (a million devices make a million): the raw
/// text once (it is the map's key too), the canonical text only when it is spelled differently,
/// and the fields' names back to back in one allocation (issue 14: 240 bytes a device before,
/// a seventh of the server's peak at 2 M series).
#[derive(Debug)]
pub struct CachedSeries {
    /// The raw series text of the lines (measurement and tags as the client escaped them).
    text: Box<str>,
    canonical: Canonical,
    fields: RwLock<FieldList>,
}

/// The canonical series text (see `SeriesKey::series_text`) of a [`CachedSeries`].
#[derive(Debug)]
enum Canonical {
    /// The raw text is canonical already (tags in order, nothing escaped): the common case.
    Raw,
    Spelled(Box<str>),
    /// Why the measurement and tags make no valid key.
    Invalid(Box<SeriesKeyError>),
}

/// Field name, series id and kind of each field of a series, in first-seen order, which is
/// usually the order of the fields in every line of this series, so a field is looked for at
/// its position first.
#[derive(Debug, Default)]
struct FieldList {
    /// The names back to back: each field's ends at its `end`.
    names: Box<str>,
    fields: Box<[CachedField]>,
}

#[derive(Clone, Copy, Debug)]
struct CachedField {
    end: u32,
    id: SeriesId,
    kind: ValueKind,
}

impl FieldList {
    fn find(&self, name: &str) -> Option<CachedField> {
        let mut start = 0;
        for field in self.fields.iter() {
            let end = field.end as usize;
            if &self.names[start..end] == name {
                return Some(*field);
            }
            start = end;
        }
        None
    }

    /// The list with `name` added: allocated to its length, as most series keep one to a few
    /// fields for ever.
    fn with(&self, name: &str, id: SeriesId, kind: ValueKind) -> FieldList {
        let names: Box<str> = [&*self.names, name].concat().into_boxed_str();
        let end = u32::try_from(names.len()).expect("BUG: field names of one series over 4 GiB");
        let fields = self.fields.iter().copied().chain([CachedField { end, id, kind }]).collect();
        FieldList { names, fields }
    }
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
    fn new(text: &str, measurement: String, tags: Vec<(String, String)>) -> Self {
        let canonical = match SeriesKey::new(measurement, tags, "_") {
            Ok(key) => {
                let mut canonical = key.series_text();
                // The field `_` needs no escape: the text ends with " _".
                canonical.truncate(canonical.len() - 2);
                if canonical == text {
                    Canonical::Raw
                } else {
                    Canonical::Spelled(canonical.into_boxed_str())
                }
            }
            Err(e) => Canonical::Invalid(Box::new(e)),
        };
        CachedSeries { text: text.into(), canonical, fields: RwLock::new(FieldList::default()) }
    }

    /// The key of field `_` of this series in the default database.
    fn template(&self) -> Result<SeriesKey, SeriesKeyError> {
        let text = match &self.canonical {
            Canonical::Raw => &*self.text,
            Canonical::Spelled(text) => &**text,
            Canonical::Invalid(e) => return Err((**e).clone()),
        };
        SeriesKey::parse(&format!("{text} _"))
    }

    /// The key of `field` of this series in `database`.
    fn key(&self, database: &str, field: &str) -> Result<SeriesKey, SeriesKeyError> {
        let template = self.template()?;
        SeriesKey::new(template.measurement(), template.tags().iter().map(|(k, v)| (k.as_str(), v.as_str())), field)?.in_database(database)
    }

    /// The measurement (unescaped), for messages.
    pub fn measurement(&self) -> String {
        self.template().map(|key| key.measurement().to_string()).unwrap_or_default()
    }

    /// The series id of `field` written with a value of `kind` in `database`, registering it
    /// when new (which takes one from `budget`; none left, it is refused).
    pub fn field_id(
        &self,
        engine: &Engine,
        database: &str,
        field: &str,
        kind: ValueKind,
        budget: &mut NewSeriesBudget,
    ) -> Result<SeriesId, FieldError> {
        if let Some(found) = self.fields.read().find(field) {
            return if found.kind == kind { Ok(found.id) } else { Err(FieldError::Conflict { existing: found.kind, attempted: kind }) };
        }
        let key = self.key(database, field).map_err(|e| FieldError::Engine(e.into()))?;
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
        if fields.find(field).is_none() {
            *fields = fields.with(field, id, kind);
        }
    }

    fn has_no_fields(&self) -> bool {
        self.fields.read().fields.is_empty()
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
    /// The series text was read by the fast line reader, so later lines may skip checking it
    /// ([`Lines::next_line_knowing`](super::line_protocol::Lines::next_line_knowing)).
    pub fast_read: bool,
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
        BodySeries { series, names: String::new(), known: Vec::new(), layout: Vec::new(), slots: Vec::new(), fast_read: false }
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
    pub fn resolve(
        &mut self,
        engine: &Engine,
        database: &str,
        fields: &[Field<'_>],
        budget: &mut NewSeriesBudget,
    ) -> Result<(), (usize, FieldError)> {
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
                    let id = self.series.field_id(engine, database, name, kind, budget).map_err(|e| (j, e))?;
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
    /// where SipHash took about 60. One hash a lookup: bits 40-45 pick the shard, bits a
    /// table's bucket index and tag never reach.
    hasher: RandomState,
    shards: Vec<Shard>,
}

/// The entries whose text's hash picks this shard, found by their own text: a slot is one
/// pointer, where a map from a copy of the text took three.
type Shard = RwLock<HashTable<Arc<CachedSeries>>>;

impl SeriesCache {
    pub fn new(database: &str) -> Self {
        let shards = (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect();
        SeriesCache { database: database.into(), hasher: RandomState::default(), shards }
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    fn hash_and_shard(&self, series_text: &str) -> (u64, &Shard) {
        let hash = self.hasher.hash_one(series_text);
        (hash, &self.shards[(hash >> 40) as usize % SHARDS])
    }

    /// The entry of `series_text`, made by `make` (which unescapes and validates) when new.
    pub fn get_or_insert<E>(
        &self,
        series_text: &str,
        make: impl FnOnce() -> Result<(String, Vec<(String, String)>), E>,
    ) -> Result<Arc<CachedSeries>, E> {
        let (hash, shard) = self.hash_and_shard(series_text);
        let is_it = |entry: &Arc<CachedSeries>| &*entry.text == series_text;
        if let Some(found) = shard.read().find(hash, is_it) {
            return Ok(found.clone());
        }
        let (measurement, tags) = make()?;
        let entry = Arc::new(CachedSeries::new(series_text, measurement, tags));
        let hasher = |entry: &Arc<CachedSeries>| self.hasher.hash_one(&*entry.text);
        Ok(shard.write().entry(hash, is_it, hasher).or_insert(entry).get().clone())
    }

    /// Drops the entry of `series_text` if it has no fields: a series refused by a limit leaves
    /// nothing behind, however many new texts clients send.
    pub fn forget_if_fieldless(&self, series_text: &str) {
        let (hash, shard) = self.hash_and_shard(series_text);
        let mut shard = shard.write();
        if let Ok(entry) = shard.find_entry(hash, |entry| &*entry.text == series_text) {
            if entry.get().has_no_fields() {
                entry.remove();
            }
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
    use super::*;

    fn entry(text: &str, measurement: &str, tags: &[(&str, &str)]) -> CachedSeries {
        CachedSeries::new(text, measurement.into(), tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    type Case = (&'static str, &'static str, &'static [(&'static str, &'static str)], bool);

    /// The raw text is kept as the canonical one only when it is spelled the same; either way
    /// a field's key is the one the measurement and tags make, in the cache's database.
    #[test]
    fn keys_are_made_from_the_canonical_text_whatever_the_raw_spelling() {
        // (raw text, measurement, tags, whether the raw text is canonical)
        let cases: [Case; 4] = [
            ("cpu,host=a,region=b", "cpu", &[("host", "a"), ("region", "b")], true),
            ("cpu,region=b,host=a", "cpu", &[("region", "b"), ("host", "a")], false),
            (r"c\ pu,host=a\,b", "c pu", &[("host", "a,b")], true),
            ("cpu", "cpu", &[], true),
        ];
        for (text, measurement, tags, raw) in cases {
            let cached = entry(text, measurement, tags);
            assert_eq!(matches!(cached.canonical, Canonical::Raw), raw, "{text}");
            for database in ["default", "fleet db"] {
                let expected =
                    SeriesKey::new(measurement, tags.iter().copied(), "usage").and_then(|key| key.in_database(database)).expect("valid");
                assert_eq!(cached.key(database, "usage").expect("valid"), expected, "{text} in {database}");
            }
            assert_eq!(cached.measurement(), measurement);
        }
        let invalid = entry("cpu,host=a,host=b", "cpu", &[("host", "a"), ("host", "b")]);
        assert!(matches!(invalid.canonical, Canonical::Invalid(_)));
        assert!(invalid.key("default", "usage").is_err());
    }

    /// Names that are prefixes of each other are told apart, and every field keeps its id and
    /// kind as more are added, each list exactly as long as its fields.
    #[test]
    fn a_field_list_finds_each_name_it_holds_and_no_other() {
        let mut list = FieldList::default();
        let names = ["ab", "a", "b", "abc", "é"];
        for (i, name) in names.iter().enumerate() {
            assert!(list.find(name).is_none());
            list = list.with(name, SeriesId(i as u32 + 10), if i % 2 == 0 { ValueKind::F64 } else { ValueKind::I64 });
            assert_eq!(list.fields.len(), i + 1);
        }
        assert_eq!(&*list.names, "abababcé", "one allocation, names back to back");
        for (i, name) in names.iter().enumerate() {
            let found = list.find(name).expect("held");
            assert_eq!((found.id, found.kind == ValueKind::F64), (SeriesId(i as u32 + 10), i % 2 == 0), "{name}");
        }
        assert!(list.find("").is_none() && list.find("abcd").is_none() && list.find("ba").is_none());
    }

    #[test]
    fn an_entry_is_found_by_its_raw_text_and_only_a_fieldless_one_is_forgotten() {
        let cache = SeriesCache::new("default");
        let make = |m: &str| Ok::<_, ()>((m.to_string(), vec![("host".to_string(), "a".to_string())]));
        let first = cache.get_or_insert("cpu,host=a", || make("cpu")).expect("made");
        let again = cache.get_or_insert("cpu,host=a", || -> Result<_, ()> { panic!("made twice") }).expect("found");
        assert!(Arc::ptr_eq(&first, &again));
        let other = cache.get_or_insert("mem,host=a", || make("mem")).expect("made");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(cache.len(), 2);
        first.remember("usage", SeriesId(1), ValueKind::F64);
        cache.forget_if_fieldless("cpu,host=a");
        cache.forget_if_fieldless("mem,host=a");
        cache.forget_if_fieldless("disk,host=a");
        assert_eq!(cache.len(), 1);
        let kept = cache.get_or_insert("cpu,host=a", || -> Result<_, ()> { panic!("forgotten") }).expect("found");
        assert!(Arc::ptr_eq(&first, &kept));
    }

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
