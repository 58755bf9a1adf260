//! The engine as a query's [`Storage`]: series from the catalog, points from range reads (oldest
//! or newest first, stopping where the query has enough), the newest points from
//! `Engine::last_points` (no history read), and the query's deadline checked before each series
//! is read.

use sensordb_engine::{Engine, KeyText, QueryStart, SeriesCursor, SeriesId, SeriesKey, Value, ValueColumn, ValueKind};
use sensordb_query::{ColumnSlice, FieldKind, FieldValue, ScanOrder, SeriesList, Storage, StorageError, StoredSeries};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

pub struct EngineStorage<'a> {
    pub engine: &'a Engine,
    /// Reads after this instant fail: the query has run out of time.
    pub deadline: Instant,
    pub series: &'a SeriesLists,
    /// Damaged blocks stepped over since the last [`Storage::take_damage`].
    pub damage: parking_lot::Mutex<Vec<String>>,
    /// When the query began: its reads keep each other's blocks in the block cache.
    query_start: QueryStart,
}

impl<'a> EngineStorage<'a> {
    pub fn new(engine: &'a Engine, deadline: Instant, series: &'a SeriesLists) -> EngineStorage<'a> {
        EngineStorage { engine, deadline, series, damage: parking_lot::Mutex::new(Vec::new()), query_start: engine.query_start() }
    }
}

/// Lists of series a query asked for, by database and measurement, kept between queries: a
/// dashboard's lookups would otherwise spend most of their time listing and sorting the catalog.
/// Series created since a list was made are merged into it (a fleet that keeps growing pays for
/// its new series, not for the whole list again: rebuilding took 11-17 s at 2 M series); a
/// deletion makes the list be built again. Each tag set is one shared allocation for all its
/// fields, and a list is sorted by measurement, tag set, then field.
///
/// A query naming one tag value (`WHERE device = '...'`) of a measurement whose whole list is
/// not kept takes only that value's series from the catalog, with the measurement's field
/// names and tag keys: right after a start, looking up one device of 2 M series built the whole
/// list first (1.5 s) to find its 2. Such a pass over the catalog costs about a twentieth of
/// building the list; a measurement looked up this way more than [`PART_LOOKUPS_MAX`] times
/// gets its whole list, whose index then answers every lookup without a pass.
#[derive(Default)]
pub struct SeriesLists {
    lists: parking_lot::Mutex<SeriesListMap>,
    parts: parking_lot::Mutex<Parts>,
}

/// Lists of one tag value's series, each measurement's names, and how many lookups by tag
/// value each measurement had, by database and measurement.
#[derive(Default)]
struct Parts {
    lists: FastMap<PartKey, (SeriesCursor, Arc<SeriesList>)>,
    names: HashMap<(String, String), (SeriesCursor, Arc<MeasurementNames>)>,
    lookups: HashMap<(String, String), usize>,
}

/// Database, measurement, tag key and tag value of a part.
type PartKey = (String, String, String, String);

/// The maps a query looks up on every request, hashed fast and looked up by borrowed keys
/// (making owned keys and SipHashing them cost a few thousand instructions a lookup query).
type FastMap<K, V> = hashbrown::HashMap<K, V, foldhash::fast::RandomState>;

/// A [`SeriesListMap`] key, borrowed; hashed as the owned tuple is (a derived `Hash` of a
/// tuple struct feeds its fields in order, as a tuple's does).
#[derive(Hash)]
struct ListKey<'a>(&'a str, Option<&'a str>);

impl hashbrown::Equivalent<(String, Option<String>)> for ListKey<'_> {
    fn equivalent(&self, key: &(String, Option<String>)) -> bool {
        self.0 == key.0 && self.1 == key.1.as_deref()
    }
}

/// A [`PartKey`], borrowed.
#[derive(Hash)]
struct PartKeyRef<'a>(&'a str, &'a str, &'a str, &'a str);

impl hashbrown::Equivalent<PartKey> for PartKeyRef<'_> {
    fn equivalent(&self, key: &PartKey) -> bool {
        self.0 == key.0 && self.1 == key.1 && self.2 == key.2 && self.3 == key.3
    }
}

/// The field names and tag keys of all the series of a measurement.
#[derive(Clone, Default)]
struct MeasurementNames {
    fields: std::collections::BTreeSet<String>,
    tag_keys: std::collections::BTreeSet<String>,
}

impl MeasurementNames {
    fn add(&mut self, text: &str) {
        let mut add = |field: &str, tag_keys: &mut dyn Iterator<Item = &str>| {
            if !self.fields.contains(field) {
                self.fields.insert(field.to_string());
            }
            for key in tag_keys {
                if !self.tag_keys.contains(key) {
                    self.tag_keys.insert(key.to_string());
                }
            }
        };
        match KeyText::split(text) {
            Some(parts) => add(parts.field(), &mut parts.tags().map(|(k, _)| k)),
            None => {
                let key = SeriesKey::parse(text).expect("BUG: catalog key texts are canonical keys");
                add(key.field(), &mut key.tags().iter().map(|(k, _)| k.as_str()));
            }
        }
    }
}

/// Lookups by tag value of one measurement answered from the catalog before its whole list is
/// built: a dashboard of a few devices never pays for the list, one of many pays once.
const PART_LOOKUPS_MAX: usize = 8;

/// One tag set, shared by the series of its fields.
type Tags = Arc<[(String, String)]>;

type SeriesListMap = FastMap<(String, Option<String>), (SeriesCursor, Arc<SeriesList>)>;

/// Lists kept at most; beyond it the cache starts over (queries over many measurements at once
/// are rare, and each list is rebuilt in one catalog pass).
const SERIES_LISTS_MAX: usize = 256;

impl SeriesLists {
    /// The length of the list of `database`/`measurement` if it is kept and current, without
    /// building it (building one walks the catalog).
    pub fn current_len(&self, engine: &Engine, database: &str, measurement: &str) -> Option<usize> {
        let cursor = engine.series_cursor();
        let lists = self.lists.lock();
        let (seen, list) = lists.get(&ListKey(database, Some(measurement)))?;
        (*seen == cursor).then_some(list.len())
    }

    /// The number of series of `database`/`measurement` whose tag `key` is `value`, if the
    /// measurement's list or that value's own list is kept and current (see
    /// [`SeriesLists::current_len`]). A measurement asked by few tag values (TSBS high-load's
    /// five fleets) never has its whole list kept: its parts answer.
    pub fn current_len_with(&self, engine: &Engine, database: &str, measurement: &str, (key, value): (&str, &str)) -> Option<usize> {
        let cursor = engine.series_cursor();
        let whole = {
            let lists = self.lists.lock();
            match lists.get(&ListKey(database, Some(measurement))) {
                Some((seen, list)) if *seen == cursor => Some(list.clone()),
                Some(_) => return None,
                None => None,
            }
        };
        if let Some(list) = whole {
            return Some(list.tag_sets_with(key, value).map(<[StoredSeries]>::len).sum());
        }
        let parts = self.parts.lock();
        let (seen, part) = parts.lists.get(&PartKeyRef(database, measurement, key, value))?;
        (*seen == cursor).then(|| part.len())
    }

    fn get(&self, engine: &Engine, database: &str, measurement: Option<&str>) -> Arc<SeriesList> {
        let kept = self.lists.lock().get(&ListKey(database, measurement)).cloned();
        let (cursor, list) = match kept {
            Some((seen, list)) if seen == engine.series_cursor() => return list,
            Some((seen, list)) => {
                let mut created = ListBuilder::with_room(engine.series_cursor().created().saturating_sub(seen.created()));
                match engine.visit_series(Some(seen), database, measurement, None, |id, kind, text| created.add(id, kind, text)) {
                    Some(cursor) if created.list.is_empty() => (cursor, list),
                    Some(cursor) => (cursor, Arc::new(SeriesList::new(with_created(&list, created.finish())))),
                    None => build(engine, database, measurement),
                }
            }
            None => build(engine, database, measurement),
        };
        let mut lists = self.lists.lock();
        if lists.len() >= SERIES_LISTS_MAX {
            lists.clear();
        }
        lists.insert((database.to_string(), measurement.map(str::to_string)), (cursor, list.clone()));
        list
    }
}

impl SeriesLists {
    /// The series of `measurement` whose tag `key` is `value`, unless its whole list is kept
    /// or it has been looked up by tag value often (see [`SeriesLists`]).
    fn part(&self, engine: &Engine, database: &str, measurement: &str, key: &str, value: &str) -> Option<Arc<SeriesList>> {
        if self.lists.lock().contains_key(&ListKey(database, Some(measurement))) {
            return None;
        }
        let kept = {
            let mut parts = self.parts.lock();
            let kept = parts.lists.get(&PartKeyRef(database, measurement, key, value)).cloned();
            if let Some((seen, list)) = &kept {
                if *seen == engine.series_cursor() {
                    return Some(list.clone());
                }
            }
            // Only passes over the catalog count.
            if parts.lookups.len() >= SERIES_LISTS_MAX {
                parts.lookups.clear();
            }
            let lookups = parts.lookups.entry((database.to_string(), measurement.to_string())).or_insert(0);
            *lookups += 1;
            if *lookups > PART_LOOKUPS_MAX {
                return None;
            }
            kept
        };
        let tag = Some((key, value));
        let (cursor, series) = match kept {
            Some((seen, list)) => {
                let mut created = ListBuilder::default();
                match engine.visit_series(Some(seen), database, Some(measurement), tag, |id, kind, text| created.add(id, kind, text)) {
                    Some(cursor) => (cursor, with_created(&list, created.finish())),
                    None => part_of(engine, database, measurement, tag),
                }
            }
            None => part_of(engine, database, measurement, tag),
        };
        // Names taken after the series: they cover every series of the part.
        let names = self.measurement_names(engine, database, measurement);
        let field_names = names.fields.iter().map(|f| Arc::from(f.as_str())).collect();
        let list = Arc::new(SeriesList::part_of_measurement(series, field_names, names.tag_keys.iter().cloned().collect()));
        let mut parts = self.parts.lock();
        if parts.lists.len() >= SERIES_LISTS_MAX {
            parts.lists.clear();
        }
        parts.lists.insert((database.to_string(), measurement.to_string(), key.to_string(), value.to_string()), (cursor, list.clone()));
        Some(list)
    }

    /// The field names and tag keys of `measurement` as they are now, kept between calls and
    /// brought up to date with the series created since.
    fn measurement_names(&self, engine: &Engine, database: &str, measurement: &str) -> Arc<MeasurementNames> {
        let key = (database.to_string(), measurement.to_string());
        let kept = self.parts.lock().names.get(&key).cloned();
        let (cursor, names) = match kept {
            Some((seen, names)) if seen == engine.series_cursor() => return names,
            Some((seen, names)) => {
                let mut grown = (*names).clone();
                match engine.visit_series(Some(seen), database, Some(measurement), None, |_, _, text| grown.add(text)) {
                    Some(cursor) => (cursor, grown),
                    None => names_of(engine, database, measurement),
                }
            }
            None => names_of(engine, database, measurement),
        };
        let names = Arc::new(names);
        let mut parts = self.parts.lock();
        if parts.names.len() >= SERIES_LISTS_MAX {
            parts.names.clear();
        }
        parts.names.insert(key, (cursor, names.clone()));
        names
    }
}

/// The series of `measurement` with tag `tag`, from one pass over the catalog.
fn part_of(engine: &Engine, database: &str, measurement: &str, tag: Option<(&str, &str)>) -> (SeriesCursor, Vec<StoredSeries>) {
    let mut builder = ListBuilder::default();
    let cursor = engine.visit_series(None, database, Some(measurement), tag, |id, kind, text| builder.add(id, kind, text));
    (cursor.expect("BUG: a visit from the start is never outdated"), builder.finish())
}

/// The names of `measurement`, from one pass over the catalog.
fn names_of(engine: &Engine, database: &str, measurement: &str) -> (SeriesCursor, MeasurementNames) {
    let mut names = MeasurementNames::default();
    let cursor = engine.visit_series(None, database, Some(measurement), None, |_, _, text| names.add(text));
    (cursor.expect("BUG: a visit from the start is never outdated"), names)
}

/// The whole list of `database`/`measurement`, from one pass over the catalog.
fn build(engine: &Engine, database: &str, measurement: Option<&str>) -> (SeriesCursor, Arc<SeriesList>) {
    let mut builder = ListBuilder::with_room(engine.series_cursor().created());
    let cursor = engine.visit_series(None, database, measurement, None, |id, kind, text| builder.add(id, kind, text));
    let cursor = cursor.expect("BUG: a visit from the start is never outdated");
    (cursor, Arc::new(SeriesList::new(builder.finish())))
}

/// Builds a list from the catalog's key texts, each tag set, measurement and field name one
/// allocation shared by every series that has it: the query's column lists are made of field
/// names, and equal names are then told apart from different ones by their pointers. Texts are
/// taken apart in place ([`KeyText::split`]): parsing each into a `SeriesKey` and sorting by
/// comparing texts was most of a first query's 3.4 s of CPU at 2 M series.
#[derive(Default)]
struct ListBuilder {
    /// Series in the catalog's order, each with the index of its tag set, measurement and
    /// field name in the vectors below.
    list: Vec<StoredSeries>,
    parts_of: Vec<[u32; 3]>,
    /// Tag sets in order of first use; a set seen again apart from its first use is repeated
    /// here, and [`ListBuilder::finish`] makes them one (sorting puts them side by side: a
    /// hash table of every set cost a cache miss per series).
    tag_sets: Vec<Tags>,
    measurements: Names,
    fields: Names,
}

/// Distinct names, by index.
#[derive(Default)]
struct Names {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
}

impl Names {
    fn index_of(&mut self, name: &str) -> u32 {
        if let Some(&at) = self.index.get(name) {
            return at;
        }
        let at = u32::try_from(self.names.len()).expect("fewer than 2^32 names in one list");
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.index.insert(name, at);
        at
    }

    /// Each name's rank in text order, by index.
    fn ranks(&self) -> Vec<u32> {
        let mut by_text: Vec<usize> = (0..self.names.len()).collect();
        by_text.sort_unstable_by(|&a, &b| self.names[a].cmp(&self.names[b]));
        let mut ranks = vec![0; self.names.len()];
        for (rank, at) in by_text.into_iter().enumerate() {
            ranks[at] = rank as u32;
        }
        ranks
    }
}

impl ListBuilder {
    /// A builder for about `series` series (an upper bound: untouched room costs no memory).
    fn with_room(series: usize) -> ListBuilder {
        ListBuilder { list: Vec::with_capacity(series), parts_of: Vec::with_capacity(series), ..ListBuilder::default() }
    }

    fn add(&mut self, id: SeriesId, kind: ValueKind, text: &str) {
        match KeyText::split(text) {
            Some(parts) => self.push(id, kind, parts.measurement(), parts.tags(), parts.field()),
            None => {
                let key = SeriesKey::parse(text).expect("BUG: catalog key texts are canonical keys");
                self.push(id, kind, key.measurement(), key.tags().iter().map(|(k, v)| (k.as_str(), v.as_str())), key.field());
            }
        }
    }

    fn push<'t>(
        &mut self,
        id: SeriesId,
        kind: ValueKind,
        measurement: &str,
        tags: impl Iterator<Item = (&'t str, &'t str)> + Clone,
        field: &str,
    ) {
        // The fields of one device are mostly created together: the series before mostly has
        // the same tag set and measurement.
        let before = self.parts_of.last().copied();
        let set = match before {
            Some([set, ..]) if same_pairs(&self.tag_sets[set as usize], tags.clone()) => set,
            _ => {
                let set = u32::try_from(self.tag_sets.len()).expect("fewer than 2^32 tag sets in one list");
                self.tag_sets.push(tags.map(|(k, v)| (k.to_string(), v.to_string())).collect());
                set
            }
        };
        let measurement = match before {
            Some([_, at, _]) if *self.measurements.names[at as usize] == *measurement => at,
            _ => self.measurements.index_of(measurement),
        };
        let field = self.fields.index_of(field);
        self.list.push(StoredSeries {
            handle: u64::from(id.0),
            measurement: self.measurements.names[measurement as usize].clone(),
            tags: self.tag_sets[set as usize].clone(),
            field: self.fields.names[field as usize].clone(),
            kind: field_kind(kind),
        });
        self.parts_of.push([set, measurement, field]);
    }

    /// The series sorted as a list is: by measurement, tag set, then field, equal tag sets
    /// sharing one allocation. Each part is ranked once among its distinct values and the
    /// series sorted by their ranks: comparing through three pointers per series missed the
    /// cache on nearly every comparison.
    fn finish(self) -> Vec<StoredSeries> {
        let ListBuilder { mut list, parts_of, tag_sets, measurements, fields } = self;
        let mut by_content: Vec<u32> = (0..tag_sets.len() as u32).collect();
        // Stable: of equal sets the first made comes first, and is the one kept. Quick on sets
        // made in order, as a fleet's numbered devices often are.
        by_content.sort_by(|&a, &b| tag_sets[a as usize].cmp(&tag_sets[b as usize]));
        // Each set's rank, equal sets ranked alike, and the set whose allocation it takes.
        let mut tag_rank = vec![(0u32, 0u32); tag_sets.len()];
        let mut rank = 0;
        for (at, &set) in by_content.iter().enumerate() {
            let kept = match at.checked_sub(1).map(|before| by_content[before]) {
                Some(before) if tag_sets[before as usize] == tag_sets[set as usize] => tag_rank[before as usize].1,
                Some(_) => {
                    rank += 1;
                    set
                }
                None => set,
            };
            tag_rank[set as usize] = (rank, kept);
        }
        drop(by_content);
        for (series, &[set, ..]) in list.iter_mut().zip(&parts_of) {
            let kept = tag_rank[set as usize].1;
            if kept != set {
                series.tags = tag_sets[kept as usize].clone();
            }
        }
        let (measurement_rank, field_rank) = (measurements.ranks(), fields.ranks());
        let mut order: Vec<(u32, u32, u32, u32)> = parts_of
            .iter()
            .enumerate()
            .map(|(at, &[set, measurement, field])| {
                (measurement_rank[measurement as usize], tag_rank[set as usize].0, field_rank[field as usize], at as u32)
            })
            .collect();
        drop(parts_of);
        // Keys are distinct, so an unstable sort gives the one order.
        order.sort_unstable();
        let sources: Vec<u32> = order.into_iter().map(|(.., at)| at).collect();
        permute(&mut list, sources);
        if list.capacity() > 2 * list.len() {
            list.shrink_to_fit();
        }
        list
    }
}

/// Whether the tag set `set` holds exactly `pairs`.
fn same_pairs<'t>(set: &[(String, String)], mut pairs: impl Iterator<Item = (&'t str, &'t str)>) -> bool {
    set.iter().all(|(k, v)| pairs.next() == Some((k.as_str(), v.as_str()))) && pairs.next().is_none()
}

/// Reorders `items` in place so that position `k` holds the item that was at `sources[k]` (a
/// permutation): a second list of millions of series would double the memory of building one.
fn permute<T>(items: &mut [T], mut sources: Vec<u32>) {
    assert_eq!(items.len(), sources.len(), "one source per position");
    for start in 0..items.len() {
        // Each cycle of the permutation is followed once; a done position points at itself.
        let mut current = start;
        loop {
            let source = sources[current] as usize;
            sources[current] = current as u32;
            if source == start {
                break;
            }
            items.swap(current, source);
            current = source;
        }
    }
}

/// The order of a list: by measurement, tag set, then field. Equal allocations compare without
/// reading their text (the list shares one per tag set, measurement and field name).
fn list_order(a: &StoredSeries, b: &StoredSeries) -> Ordering {
    fn same_or_cmp<T: ?Sized + Ord>(x: &Arc<T>, y: &Arc<T>) -> Ordering {
        if Arc::ptr_eq(x, y) {
            Ordering::Equal
        } else {
            x.cmp(y)
        }
    }
    same_or_cmp(&a.measurement, &b.measurement).then_with(|| same_or_cmp(&a.tags, &b.tags)).then_with(|| same_or_cmp(&a.field, &b.field))
}

/// `list` with the series of `created` merged in, in order. A new series shares the tag set,
/// measurement and field name allocations of the series beside it where they are equal, so the
/// list keeps one allocation per tag set (the runs of `SeriesList::tag_sets` rely on equal sets
/// being equal, the pointers make comparing them cheap).
fn with_created(list: &SeriesList, created: Vec<StoredSeries>) -> Vec<StoredSeries> {
    let field_names = list.field_names();
    let old = list.series();
    let mut merged: Vec<StoredSeries> = Vec::with_capacity(old.len() + created.len());
    // The new series are few beside the list: each finds its place by binary search, and the
    // old series between places are copied in runs, without comparing them.
    let mut copied = 0;
    for mut series in created {
        let place = copied + old[copied..].partition_point(|s| list_order(s, &series).is_lt());
        merged.extend_from_slice(&old[copied..place]);
        copied = place;
        if let Ok(at) = field_names.binary_search(&series.field) {
            series.field = field_names[at].clone();
        }
        // Equal tag sets lie side by side: take the allocation of the series before or after.
        let beside = merged.last().into_iter().chain(old.get(place));
        for other in beside {
            if other.measurement == series.measurement {
                series.measurement = other.measurement.clone();
                if other.tags == series.tags {
                    series.tags = other.tags.clone();
                    break;
                }
            }
        }
        merged.push(series);
    }
    merged.extend_from_slice(&old[copied..]);
    merged
}

fn field_kind(kind: ValueKind) -> FieldKind {
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

    fn series(&self, database: &str, measurement: Option<&str>) -> Arc<SeriesList> {
        self.series.get(self.engine, database, measurement)
    }

    fn series_with_tag(&self, database: &str, measurement: &str, key: &str, value: &str) -> Option<Arc<SeriesList>> {
        self.series.part(self.engine, database, measurement, key, value)
    }

    fn take_damage(&self) -> Vec<String> {
        std::mem::take(&mut *self.damage.lock())
    }

    fn last(&self, series: &[&StoredSeries]) -> Result<Vec<Option<(i64, FieldValue)>>, StorageError> {
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
                        Value::Bytes(b) => FieldValue::String(String::from_utf8_lossy(&b).into()),
                    };
                    (t, value)
                })
            })
            .collect())
    }

    fn oldest_bounds(&self, series: &[&StoredSeries]) -> Result<Vec<Option<i64>>, StorageError> {
        let ids: Vec<SeriesId> = series.iter().map(|s| SeriesId(s.handle as u32)).collect();
        Ok(self.engine.oldest_bounds(&ids))
    }

    fn scan(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.scan_edge(series, from, to, order, None, sink)
    }

    fn scan_at_most(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        limit: usize,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.scan_edge(series, from, to, order, Some(limit), sink)
    }
}

impl EngineStorage<'_> {
    /// [`Storage::scan`], copying only `limit` points of the memtables when the sink takes
    /// no more (a `LIMIT 1` over data still in memory copied all of it).
    fn scan_edge(
        &self,
        series: &StoredSeries,
        from: i64,
        to: i64,
        order: ScanOrder,
        limit: Option<usize>,
        sink: &mut dyn FnMut(&[i64], ColumnSlice<'_>) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        if Instant::now() > self.deadline {
            return Err(StorageError("query timeout: the query ran longer than query_timeout_ms".into()));
        }
        let id = u32::try_from(series.handle).map_err(|_| StorageError(format!("bad series handle {}", series.handle)))?;
        // The engine reads [from, to); a point at i64::MAX itself is beyond every query.
        let (id, to) = (SeriesId(id), to.saturating_add(1));
        let read = match limit {
            Some(limit) => self.engine.read_edge(id, from, to, order == ScanOrder::NewestFirst, limit),
            None => self.engine.read(id, from, to),
        };
        let mut read = read.in_query(self.query_start);
        let mut strings = Vec::new();
        loop {
            // Cached blocks are lent, not copied.
            let chunk = match order {
                ScanOrder::OldestFirst => read.next_view(),
                ScanOrder::NewestFirst => read.next_view_back(),
            };
            let Some(chunk) = chunk else { break };
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // A damaged block is left out and named; the read goes on with the next one.
                Err(e @ sensordb_engine::Error::Corruption { .. }) => {
                    let mut damage = self.damage.lock();
                    if damage.len() < DAMAGE_MESSAGES_MAX {
                        damage.push(format!("points of {} left out: {e}", series_name(series)));
                    }
                    continue;
                }
                Err(e) => return Err(StorageError(format!("reading {}: {e}", series.measurement))),
            };
            let (values, window) = chunk.values();
            if with_slice_of(values, window, &mut strings, |values| sink(chunk.timestamps(), values)).is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// Damage messages kept per query: one damaged file can touch every series of a query.
const DAMAGE_MESSAGES_MAX: usize = 16;

/// `measurement,tag=value field`, as a message names a series.
fn series_name(series: &StoredSeries) -> String {
    let mut name = series.measurement.to_string();
    for (k, v) in series.tags.iter() {
        name.push_str(&format!(",{k}={v}"));
    }
    format!("{name} {}", series.field)
}

/// `f` over the values in `window` of `values` as a column slice (payloads as strings, in
/// `strings`).
pub fn with_slice_of<T>(
    values: &ValueColumn,
    window: std::ops::Range<usize>,
    strings: &mut Vec<String>,
    f: impl FnOnce(ColumnSlice<'_>) -> T,
) -> T {
    match values {
        ValueColumn::F64(v) => f(ColumnSlice::Float(&v[window])),
        ValueColumn::I64(v) => f(ColumnSlice::Integer(&v[window])),
        ValueColumn::U64(v) => f(ColumnSlice::Unsigned(&v[window])),
        ValueColumn::Bool(v) => f(ColumnSlice::Boolean(&v[window])),
        ValueColumn::Bytes(v) => {
            strings.clear();
            strings.extend(v[window].iter().map(|b| String::from_utf8_lossy(b).into_owned()));
            f(ColumnSlice::String(strings))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sensordb_engine::{Durability, EngineOptions, SeriesKey, WriteBatch};
    use sensordb_influxql::{parse, Statement};
    use sensordb_query::select::select;
    use sensordb_query::{Context, Limits};

    /// Two sensors of 2,000 points in blocks of 500; one byte flipped in the first block.
    fn damaged_engine(dir: &std::path::Path) -> (Engine, std::path::PathBuf) {
        let options = EngineOptions { durability: Durability::Fsync, block_points_max: 500, ..EngineOptions::default() };
        let engine = Engine::open(dir, options.clone()).expect("open");
        let ids: Vec<SeriesId> = (0..2)
            .map(|s| {
                let key = SeriesKey::new("m", [("sensor", format!("s{s}"))], "v").expect("key");
                engine.series_id(&key, ValueKind::F64).expect("id")
            })
            .collect();
        let mut batch = WriteBatch::new();
        for t in 0..2_000 {
            for &id in &ids {
                batch.push(id, t, Value::F64(t as f64)).expect("push");
            }
        }
        engine.write(&batch).expect("write");
        engine.close().expect("close");
        let mut segments: Vec<_> = std::fs::read_dir(dir.join("segments")).expect("dir").map(|e| e.expect("entry").path()).collect();
        segments.sort();
        let segment = segments.pop().expect("a segment");
        // The first block starts on page 2 (as the engine's corruption test finds it); hit its
        // timestamps, just past the block header.
        let mut bytes = std::fs::read(&segment).expect("read");
        bytes[8192 + 62] ^= 0x5a;
        std::fs::write(&segment, bytes).expect("write");
        (Engine::open(dir, options).expect("reopen"), segment)
    }

    #[test]
    fn a_damaged_block_is_left_out_and_named_while_the_rest_answers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, segment) = damaged_engine(dir.path());
        let lists = SeriesLists::default();
        let storage = EngineStorage::new(&engine, Instant::now() + std::time::Duration::from_secs(60), &lists);
        let parsed = parse("SELECT count(v) FROM m GROUP BY sensor").expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage: &storage, database: "default", now: 0, limits: Limits::default() };
        let series = select(&context, statement).expect("answers despite the damage");
        let counts: Vec<FieldValue> = series.iter().map(|s| s.rows[0].values[0].clone()).collect();
        // One block of 500 points of one sensor is gone; everything else is counted.
        let total: i64 = counts.iter().map(|c| if let FieldValue::Integer(n) = c { n } else { &0 }).sum();
        assert_eq!(total, 4_000 - 500, "{counts:?}");
        let damage = storage.take_damage();
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(damage[0].contains(&segment.display().to_string()) && damage[0].contains("offset 8192"), "{}", damage[0]);
        assert!(damage[0].starts_with("points of m,sensor=s"), "{}", damage[0]);
        assert!(storage.take_damage().is_empty(), "taken once");
    }

    use proptest::prelude::*;

    proptest! {
        /// `permute` puts at each position the item its source names.
        #[test]
        fn permute_places_each_item_at_its_position(sources in proptest::collection::vec(0u32..1000, 0..60).prop_map(|keys| {
            let mut sources: Vec<u32> = (0..keys.len() as u32).collect();
            sources.sort_by_key(|&i| keys[i as usize]);
            sources
        })) {
            let items: Vec<u32> = (0..sources.len() as u32).map(|i| i * 10).collect();
            let mut permuted = items.clone();
            permute(&mut permuted, sources.clone());
            let expected: Vec<u32> = sources.iter().map(|&s| items[s as usize]).collect();
            prop_assert_eq!(permuted, expected);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        /// A list built from the catalog's texts holds every series of the database, sorted by
        /// measurement, tag set and field, whatever order they were created in (escaped names
        /// and tag sets met again after others included), with one allocation per tag set.
        #[test]
        fn a_built_list_is_sorted_and_shares_each_tag_set(
            keys in proptest::collection::vec(("m|n|m x", proptest::collection::btree_map("a|b|c,d", "1|2|3=", 0..3), "f|g|h i"), 1..40),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("open");
            // A key created twice is one series.
            let mut created = std::collections::BTreeMap::new();
            for (measurement, tags, field) in &keys {
                let key = SeriesKey::new(measurement.as_str(), tags.clone(), field.as_str()).expect("key");
                created.insert(engine.series_id(&key, ValueKind::F64).expect("id").0, key.clone());
                // Another database's series are never listed.
                engine.series_id(&key.in_database("other").expect("key"), ValueKind::F64).expect("id");
            }
            let mut created: Vec<(u32, SeriesKey)> = created.into_iter().collect();
            created.sort_by(|a, b| (a.1.measurement(), a.1.tags(), a.1.field()).cmp(&(b.1.measurement(), b.1.tags(), b.1.field())));
            let expected: Vec<String> =
                created.iter().map(|(id, key)| format!("{id} {} {:?} {}", key.measurement(), key.tags(), key.field())).collect();
            let list = build(&engine, "default", None).1;
            prop_assert_eq!(series_list_entries(&list), expected);
            for pair in list.windows(2) {
                prop_assert_eq!(pair[0].tags == pair[1].tags, Arc::ptr_eq(&pair[0].tags, &pair[1].tags), "one allocation per tag set");
            }
        }
    }

    /// Each series of `list` as text: handle, measurement, tags and field.
    fn series_list_entries(list: &SeriesList) -> Vec<String> {
        list.iter().map(|s| format!("{} {} {:?} {}", s.handle, s.measurement, s.tags, s.field)).collect()
    }

    fn create(engine: &Engine, measurement: &str, sensor: &str, field: &str) {
        let key = SeriesKey::new(measurement, [("sensor", sensor)], field).expect("key");
        engine.series_id(&key, ValueKind::F64).expect("id");
    }

    #[test]
    fn a_kept_list_takes_in_new_series_without_being_built_again_and_a_deletion_rebuilds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("open");
        for sensor in ["b", "d", "f"] {
            create(&engine, "m", sensor, "temp");
        }
        create(&engine, "other", "a", "temp");
        let lists = SeriesLists::default();
        let first = lists.get(&engine, "default", Some("m"));
        assert_eq!(first.len(), 3);
        assert!(Arc::ptr_eq(&first, &lists.get(&engine, "default", Some("m"))), "kept while nothing changed");

        // New sensors before, between and after the old ones; a new field of an old sensor on
        // each side of its old field; a series of another measurement.
        for (sensor, field) in [("a", "temp"), ("c", "temp"), ("g", "temp"), ("d", "hum"), ("d", "wind"), ("b", "temp2")] {
            create(&engine, "m", sensor, field);
        }
        create(&engine, "other", "z", "temp");
        let grown = lists.get(&engine, "default", Some("m"));
        let rebuilt = build(&engine, "default", Some("m")).1;
        assert_eq!(series_list_entries(&grown), series_list_entries(&rebuilt), "merged in order, as a list built anew");
        let sensor_f = |list: &SeriesList| list.iter().find(|s| s.tags[0].1 == "f").expect("sensor f").tags.clone();
        assert!(Arc::ptr_eq(&sensor_f(&first), &sensor_f(&grown)), "the old series were taken over, not built again");
        // One allocation per tag set: sensor d's three fields share theirs.
        let of_d: Vec<&StoredSeries> = grown.iter().filter(|s| s.tags[0].1 == "d").collect();
        assert_eq!(of_d.len(), 3);
        assert!(of_d.windows(2).all(|w| Arc::ptr_eq(&w[0].tags, &w[1].tags)), "sensor d's fields share one tag set");
        assert_eq!(grown.tag_sets().len(), 6, "a, b, c, d, f, g");
        assert_eq!(grown.field_names(), ["hum", "temp", "temp2", "wind"].map(Arc::<str>::from).as_slice());

        engine.delete_series("default", Some("m"), &[("sensor", "c")]).expect("delete");
        let after_delete = lists.get(&engine, "default", Some("m"));
        assert!(after_delete.iter().all(|s| s.tags[0].1 != "c"), "the deleted series is gone");
        assert_eq!(after_delete.len(), grown.len() - 1);
        assert!(!Arc::ptr_eq(&sensor_f(&grown), &sensor_f(&after_delete)), "built again after a deletion");
    }

    /// Sensors a-e with temp and hum, e also with volt and a site tag and a note; 10 points each.
    fn fleet(dir: &std::path::Path) -> Engine {
        let engine = Engine::open(dir, EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("open");
        let mut batch = WriteBatch::new();
        for sensor in ["a", "b", "c", "d", "e"] {
            let mut keys = vec![SeriesKey::new("m", [("sensor", sensor)], "temp"), SeriesKey::new("m", [("sensor", sensor)], "hum")];
            if sensor == "e" {
                keys.push(SeriesKey::new("m", [("sensor", sensor), ("site", "x")], "volt"));
            }
            for (n, key) in keys.into_iter().enumerate() {
                let id = engine.series_id(&key.expect("key"), ValueKind::F64).expect("id");
                for t in 0..10 {
                    batch.push(id, t * 1_000_000_000, Value::F64((t + n as i64) as f64)).expect("push");
                }
            }
        }
        // And a note (a string field) on e.
        let note = engine.series_id(&SeriesKey::new("m", [("sensor", "e")], "note").expect("key"), ValueKind::Bytes).expect("id");
        for t in 0..10 {
            batch.push(note, t * 1_000_000_000, Value::Bytes(bytes::Bytes::from_static(b"ok"))).expect("push");
        }
        engine.write(&batch).expect("write");
        engine
    }

    fn answer(engine: &Engine, lists: &SeriesLists, query: &str) -> String {
        let storage = EngineStorage::new(engine, Instant::now() + std::time::Duration::from_secs(60), lists);
        let parsed = parse(query).expect("parses");
        let Statement::Select(statement) = &parsed.statements[0] else { panic!("a SELECT") };
        let context = Context { storage: &storage, database: "default", now: 20_000_000_000, limits: Limits::default() };
        format!("{:?}", select(&context, statement).expect("answers"))
    }

    #[test]
    fn a_lookup_by_tag_value_reads_its_series_alone_and_answers_as_the_whole_list_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = fleet(dir.path());
        for query in [
            "SELECT * FROM m WHERE sensor = 'b'",
            "SELECT * FROM m WHERE sensor = 'e' AND time >= 2s",
            "SELECT last(temp) FROM m WHERE sensor = 'b' GROUP BY *",
            "SELECT last(*) FROM m WHERE sensor = 'e' GROUP BY *",
            "SELECT mean(temp), max(hum) FROM m WHERE sensor = 'c' AND time >= 0s AND time < 10s GROUP BY time(5s), *",
            "SELECT count(temp) FROM m WHERE sensor = 'zz'",
            "SELECT temp FROM m WHERE sensor = 'a' AND temp > 3 ORDER BY time DESC LIMIT 2",
            // `note` is a field: no tag lookup, the whole list answers.
            "SELECT * FROM m WHERE note = 'ok'",
        ] {
            let parts = SeriesLists::default();
            let by_part = answer(&engine, &parts, query);
            let whole = SeriesLists::default();
            whole.get(&engine, "default", Some("m"));
            assert_eq!(by_part, answer(&engine, &whole, query), "{query}");
            assert!(by_part.contains("values") || query.contains("'zz'"), "{query}: {by_part}");
        }
        let lists = SeriesLists::default();
        let part = lists.part(&engine, "default", "m", "sensor", "e").expect("a part");
        assert_eq!(series_list_entries(&part).len(), 4, "sensor e's four series");
        assert_eq!(part.field_names(), ["hum", "note", "temp", "volt"].map(Arc::<str>::from).as_slice(), "the measurement's fields");
        assert_eq!(part.tag_keys(), ["sensor", "site"]);
        let part_b = lists.part(&engine, "default", "m", "sensor", "b").expect("a part");
        assert_eq!(part_b.tag_keys(), ["sensor", "site"], "the measurement's tag keys, not the part's");
        assert!(lists.lists.lock().is_empty(), "no whole list was built");

        // A new field of b is taken in, and so is its name.
        create(&engine, "m", "b", "wind");
        let grown = lists.part(&engine, "default", "m", "sensor", "b").expect("a part");
        assert_eq!(grown.len(), 3);
        assert!(grown.field_names().iter().any(|f| &**f == "wind"));
        assert!(Arc::ptr_eq(&grown, &lists.part(&engine, "default", "m", "sensor", "b").expect("a part")), "kept while nothing changed");
        // A deletion: the part is made again without the deleted series.
        engine.delete_series("default", Some("m"), &[("sensor", "b")]).expect("delete");
        let deleted = lists.part(&engine, "default", "m", "sensor", "b").expect("a part");
        assert_eq!(deleted.len(), 0);
        assert!(!deleted.field_names().iter().any(|f| &**f == "wind"), "names of deleted series go");

        // Many lookups of one measurement: its whole list is built instead.
        let mut answered = 0;
        // Each another value (a value looked up again is answered from its kept part).
        while lists.part(&engine, "default", "m", "sensor", &format!("v{answered}")).is_some() {
            answered += 1;
            assert!(answered <= PART_LOOKUPS_MAX, "the lookups are bounded");
        }
        assert_eq!(answered + 4, PART_LOOKUPS_MAX, "four passes over the catalog before these");
        // A kept whole list answers lookups from its index.
        let whole = SeriesLists::default();
        whole.get(&engine, "default", Some("m"));
        assert!(whole.part(&engine, "default", "m", "sensor", "a").is_none());
    }
}
