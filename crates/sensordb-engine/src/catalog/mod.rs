//! The series catalog: the persisted, append-only map from series key to compact series id and
//! value kind.
//!
//! Ids are dense (1, 2, 3, …) so that in-memory structures can index by id. A series is made
//! durable in the catalog before any WAL record that names it is acknowledged, so recovery never
//! meets an id it cannot resolve.
//!
//! File layout (all fixed-width integers little-endian; varints are unsigned LEB128; full
//! description in `docs/format/catalog.md`):
//! ```text
//! file header (16 bytes)
//!   0  8  magic "SDBCATLG"
//!   8  2  format version (2; 1 = no tombstones yet)   u16 LE
//!  10  2  reserved (0)                                u16 LE
//!  12  4  CRC32C of bytes [0, 12)                     u32 LE
//! record (repeated, back to back, no padding)
//!   0  n  length L of the body (n = 1..=3 bytes)      varint
//!   n  4  CRC32C of the n length bytes + the body     u32 LE
//! n+4  L  body:
//!           series id                                 varint
//!           value kind, or 0xFE for a tombstone       u8
//!           P: bytes of the key text shared with the
//!              previous record's key text (0 first)   varint
//!           suffix: key text bytes [P, end)           L - (bytes above)
//! ```
//! The key text is the canonical form (model::SeriesKey::canonical), UTF-8: the previous record's
//! text cut at P, then the suffix. Writers cut P back to a character boundary, readers validate
//! the joined text as UTF-8.
//!
//! A tombstone deletes an earlier series: its id is that series' id (not a new one) and its key
//! text is that series' key. The key is free again afterwards: a later record may give it a new
//! id. Format version 2 introduced tombstones; a version 1 file is read as is and its header is
//! rewritten as version 2 before its first tombstone is appended.
//!
//! A torn or corrupt tail is cut off at the last good record on open and reported; ids are
//! checked to be dense, so a lost record in the middle is detected instead of misnumbering.
//! Since each key is stored relative to the one before it, a damaged record also loses every
//! later record (they cannot be decoded without it): that is the price of prefix sharing.
//!
//! In memory every key is held as its canonical text in one arena with a hash table of ids
//! (`keys`: about 60 bytes a series), and parsed into a `SeriesKey` only when asked for one.
//!
//! Each database may hold at most [`Catalog::set_series_per_database_max`] live series (as
//! InfluxDB's `max-series-per-database`): every series costs memory here and in the engine, so a
//! client inventing keys cannot grow them without bound. Series already stored stay readable and
//! writable when the limit is lowered below their number; only new ones are refused.

mod keys;
mod record;
mod select;

use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, StorageFile};
use crate::model::{KeyText, SeriesId, SeriesKey, ValueKind};
use keys::KeyTable;
use parking_lot::{Mutex, RwLock};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"SDBCATLG";
const FORMAT_VERSION: u16 = 2;
/// The last version without tombstones, still read.
const FORMAT_VERSION_WITHOUT_TOMBSTONES: u16 = 1;
const HEADER_BYTES: u64 = 16;
/// Longest series key accepted, in bytes.
pub const SERIES_KEY_BYTES_MAX: usize = 64 * 1024;

/// One known series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesEntry {
    pub id: SeriesId,
    pub key: Arc<SeriesKey>,
    pub kind: ValueKind,
}

/// Where a reader of the catalog stood: how many series had been created (they are appended,
/// never reordered) and how many deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesCursor {
    created: usize,
    deletions: u64,
}

impl SeriesCursor {
    /// Series created before it (deleted ones too): how many a visit from the start meets
    /// at most.
    pub fn created(&self) -> usize {
        self.created
    }
}

struct State {
    /// Key text, kind and deletion of every series (index = id - 1); live ones by text. A
    /// deleted key is free for a new id.
    keys: KeyTable,
    /// Bumped by every deletion, so caches of per-series facts know to refresh.
    deletions: u64,
    /// Live series per database.
    per_database: HashMap<String, usize>,
}

/// A key text read from the file, as the catalog keeps it.
struct StoredText<'a> {
    /// The canonical form, the one lookups make (the writer wrote that form; an older build's
    /// spelling of the same key is found all the same).
    canonical: Cow<'a, str>,
    database: Cow<'a, str>,
}

impl<'a> StoredText<'a> {
    /// `text` as kept, or why it is not a key.
    fn of(text: &'a str) -> std::result::Result<StoredText<'a>, String> {
        // Nearly every text is canonical without escapes: taken apart in place, not parsed
        // (parsing was a third of loading a catalog of millions of series).
        if let Some(parts) = KeyText::split(text) {
            return Ok(StoredText { canonical: Cow::Borrowed(text), database: Cow::Borrowed(parts.database()) });
        }
        let key = SeriesKey::parse(text).map_err(|e| e.to_string())?;
        Ok(StoredText { canonical: Cow::Owned(key.canonical()), database: Cow::Owned(key.database().to_string()) })
    }
}

impl State {
    fn cursor(&self) -> SeriesCursor {
        SeriesCursor { created: self.keys.len(), deletions: self.deletions }
    }

    /// The entry of the series at `index` (id - 1), its key parsed from the text.
    fn entry(&self, index: usize) -> Option<SeriesEntry> {
        let kind = ValueKind::try_from(self.keys.kind_byte(index)?).ok()?;
        // Every text in the table parsed when it was added (from a `SeriesKey` or the file).
        let key = SeriesKey::parse(self.keys.text(index)).expect("BUG: catalog key texts are canonical keys");
        Some(SeriesEntry { id: SeriesId(index as u32 + 1), key: Arc::new(key), kind })
    }

    fn kind(&self, index: usize) -> Option<ValueKind> {
        ValueKind::try_from(self.keys.kind_byte(index)?).ok()
    }

    fn count_live(&mut self, database: &str, added: bool) {
        if added {
            // Looked up before inserting: a load of millions of series into a few databases
            // allocated the name's copy once per series.
            match self.per_database.get_mut(database) {
                Some(count) => *count += 1,
                None => {
                    self.per_database.insert(database.to_string(), 1);
                }
            }
        } else if let Some(count) = self.per_database.get_mut(database) {
            *count = count.saturating_sub(1);
        }
    }
}

/// The catalog. Lookups take a shared lock; creating a series takes the append lock.
pub struct Catalog {
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    sync_on_create: bool,
    state: RwLock<State>,
    /// Serialises appends.
    append: Mutex<Tail>,
    /// Every series up to this id is durable (with `sync_on_create`; otherwise unused). Ids
    /// above it were created by [`Catalog::get_or_create_unsynced`] and wait for
    /// [`Catalog::sync_through`].
    durable_through: AtomicU32,
    /// Most live series one database may hold (`usize::MAX`: no limit).
    series_per_database_max: AtomicUsize,
}

/// Where the next record goes and what it is encoded against.
struct Tail {
    /// End offset of the last whole record.
    end: u64,
    /// Key text of the last record in the file (empty when there is none).
    last_text: String,
    /// Format version in the file header.
    version: u16,
    /// Why an fsync of the file failed, if one did. Linux may report a later fsync as
    /// successful although the failed one's pages were dropped, so after a failure no sync
    /// is trusted again.
    sync_failed: Option<String>,
}

/// What opening the catalog found wrong and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatalogRecovery {
    /// Offset where a torn or corrupt tail was cut off, with the reason.
    pub truncated_at: Option<(u64, String)>,
}

/// The file header of the current format version.
fn header_bytes() -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_BYTES as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    let checksum = crc32c(&header);
    header.extend_from_slice(&checksum.to_le_bytes());
    header
}

impl Catalog {
    /// Opens or creates the catalog at `path`. With `sync_on_create`, each new series is fsynced
    /// before `get_or_create` returns.
    pub fn open(fs: &dyn FileSystem, path: &Path, sync_on_create: bool) -> Result<(Catalog, CatalogRecovery)> {
        Self::open_keeping_cuts(fs, path, sync_on_create, None, || ()).0
    }

    /// [`Catalog::open`] that first copies a damaged tail it cuts off into `quarantine` (see
    /// [`crate::quarantine`]). If that copy fails, the tail is cut anyway: the catalog must
    /// append after its last good record, so the bytes cannot stay where they are.
    ///
    /// `beside` runs on this thread while another decodes the file (the engine opens its
    /// segment store there: at millions of series each takes about a second). It runs after
    /// the catalog's creation and before any repair of its tail, so the order of the changes
    /// both make on disk does not depend on the threads' timing.
    pub fn open_keeping_cuts<T>(
        fs: &dyn FileSystem,
        path: &Path,
        sync_on_create: bool,
        quarantine: Option<&crate::quarantine::Quarantine>,
        beside: impl FnOnce() -> T,
    ) -> (Result<(Catalog, CatalogRecovery)>, T) {
        let (file, bytes, unfinished) = match Self::read_or_create(fs, path) {
            Ok(read) => read,
            // `beside` runs all the same: the caller always gets both.
            Err(e) => return (Err(e), beside()),
        };
        let (parsed, beside) = std::thread::scope(|scope| {
            match std::thread::Builder::new().name("sensordb-catalog".into()).spawn_scoped(scope, || Self::parse(path, &bytes)) {
                Ok(parsing) => {
                    let beside = beside();
                    (parsing.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), beside)
                }
                // No thread to spare: one after the other.
                Err(_) => {
                    let beside = beside();
                    (Self::parse(path, &bytes), beside)
                }
            }
        });
        (parsed.and_then(|parsed| Self::finish_open(fs, path, sync_on_create, quarantine, file, parsed, unfinished)), beside)
    }

    /// The catalog file at `path`, created with its header if missing, and its bytes; whether
    /// its creation had been cut short (it was then written anew).
    fn read_or_create(fs: &dyn FileSystem, path: &Path) -> Result<(Arc<dyn StorageFile>, Vec<u8>, bool)> {
        let io = |e| Error::io(path, e);
        let file = if fs.exists(path) {
            fs.open_rw(path).map_err(io)?
        } else {
            let file = fs.create(path).map_err(io)?;
            file.write_all_at(&header_bytes(), 0).map_err(io)?;
            file.sync_data().map_err(io)?;
            if let Some(dir) = path.parent() {
                fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
            }
            file
        };
        let mut bytes = file.read_all().map_err(io)?;
        let unfinished = bytes.len() < HEADER_BYTES as usize && (header_bytes().starts_with(&bytes) || bytes.iter().all(|&b| b == 0));
        if unfinished {
            // A power loss cut the creation short before the header was durable (the directory
            // entry can outlive the data): the file never held a series, so it starts anew.
            tracing::warn!(file = %path.display(), bytes = bytes.len(), "catalog without a complete header: written anew");
            bytes = header_bytes();
            file.write_all_at(&bytes, 0).and_then(|()| file.sync_data()).map_err(io)?;
        }
        Ok((file, bytes, unfinished))
    }

    /// The catalog of the decoded `file`, its damaged tail (if any) kept in `quarantine` and
    /// cut off.
    fn finish_open(
        fs: &dyn FileSystem,
        path: &Path,
        sync_on_create: bool,
        quarantine: Option<&crate::quarantine::Quarantine>,
        file: Arc<dyn StorageFile>,
        (state, tail, mut recovery): (State, Tail, CatalogRecovery),
        unfinished: bool,
    ) -> Result<(Catalog, CatalogRecovery)> {
        let io = |e| Error::io(path, e);
        if let Some((offset, reason)) = &mut recovery.truncated_at {
            if let Some(quarantine) = quarantine {
                match quarantine.keep_bytes(fs, path, file.as_ref(), *offset) {
                    Ok(Some(kept)) => reason.push_str(&format!(" (bytes kept as {})", kept.display())),
                    Ok(None) => {}
                    Err(e) => reason.push_str(&format!(" (keeping the cut bytes failed: {e})")),
                }
            }
            tracing::warn!(file = %path.display(), offset = *offset, reason = %reason, "catalog tail cut off");
            file.set_len(*offset).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        if unfinished {
            // Reported after the cut above, which must not take the new header.
            recovery.truncated_at = Some((0, "catalog creation was cut short (no complete header); written anew".into()));
        }
        let durable_through = AtomicU32::new(state.keys.len() as u32);
        let catalog = Catalog {
            path: path.to_path_buf(),
            file,
            sync_on_create,
            state: RwLock::new(state),
            append: Mutex::new(tail),
            durable_through,
            series_per_database_max: AtomicUsize::new(usize::MAX),
        };
        Ok((catalog, recovery))
    }

    /// The first damage in the catalog bytes `bytes` (read from `path`) as opening them would
    /// find it, without changing anything: (offset, what), or `None` when they are sound.
    pub fn verify(path: &Path, bytes: &[u8]) -> Option<(u64, String)> {
        match Self::parse(path, bytes) {
            Ok((_, _, recovery)) => {
                recovery.truncated_at.map(|(offset, what)| (offset, format!("{what}; the next start cuts the file here")))
            }
            Err(Error::Corruption { offset, detail, .. }) => Some((offset, format!("{detail}; the engine does not start over it"))),
            Err(other) => Some((0, other.to_string())),
        }
    }

    fn parse(path: &Path, bytes: &[u8]) -> Result<(State, Tail, CatalogRecovery)> {
        let header = bytes.get(..HEADER_BYTES as usize).ok_or_else(|| Error::corruption(path, 0, "catalog header truncated"))?;
        if &header[..8] != MAGIC || crc32c(&header[..12]).to_le_bytes() != header[12..16] {
            return Err(Error::corruption(path, 0, "bad catalog header"));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version != FORMAT_VERSION && version != FORMAT_VERSION_WITHOUT_TOMBSTONES {
            return Err(Error::UnsupportedVersion { path: path.into(), found: version, supported: FORMAT_VERSION });
        }
        let mut state = State { keys: KeyTable::new(), deletions: 0, per_database: HashMap::new() };
        let mut offset = HEADER_BYTES as usize;
        // The table sized once: growing through every doubling rehashed every key again and
        // again (a quarter of a large catalog's load). The arena gets the records' bytes, less
        // than the texts (prefixes are shared), so it grows a few times and never overshoots.
        let (records, body_bytes) = record::count(&bytes[offset..]);
        state.keys.reserve(records, body_bytes);
        let mut last_text = String::new();
        let mut recovery = CatalogRecovery::default();
        while offset < bytes.len() {
            let (record, len) = match record::decode(&bytes[offset..], &last_text) {
                Ok(decoded) => decoded,
                Err(reason) => {
                    recovery.truncated_at = Some((offset as u64, reason));
                    break;
                }
            };
            let key = match StoredText::of(&record.text) {
                Ok(key) => key,
                Err(reason) => {
                    recovery.truncated_at = Some((offset as u64, reason));
                    break;
                }
            };
            match record.kind {
                None => {
                    let index = (record.id as usize).wrapping_sub(1);
                    let names_a_live_series =
                        index < state.keys.len() && state.keys.text(index) == key.canonical && !state.keys.is_deleted(index);
                    if version == FORMAT_VERSION_WITHOUT_TOMBSTONES || !names_a_live_series {
                        recovery.truncated_at =
                            Some((offset as u64, format!("tombstone for series id {} does not name a live series", record.id)));
                        break;
                    }
                    state.keys.delete(index);
                    state.deletions += 1;
                    state.count_live(&key.database, false);
                }
                Some(kind) => {
                    if record.id as usize != state.keys.len() + 1 {
                        return Err(Error::corruption(
                            path,
                            offset as u64,
                            format!("series id {} out of sequence (expected {})", record.id, state.keys.len() + 1),
                        ));
                    }
                    if let Err(first) = state.keys.push_new(&key.canonical, kind as u8) {
                        // The writer never repeats a key: only damage that kept the checksums
                        // intact can. Cut here like any other damage.
                        let repeated = &key.canonical;
                        recovery.truncated_at = Some((offset as u64, format!("series key {repeated} repeats series id {}", first + 1)));
                        break;
                    }
                    state.count_live(&key.database, true);
                }
            }
            last_text = record.text;
            offset += len;
        }
        state.keys.shrink_to_fit();
        Ok((state, Tail { end: offset as u64, last_text, version, sync_failed: None }, recovery))
    }

    /// The id of `key`, creating the series with `kind` if it is new. Fails when the series
    /// exists with another kind.
    pub fn get_or_create(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        self.create(key, kind, self.sync_on_create)
    }

    /// [`Catalog::get_or_create`] without the fsync of a new series: the series becomes
    /// durable with the next [`Catalog::sync_through`] (or [`Catalog::sync`]) that covers its
    /// id. For a writer that names the id in no durable record before that: the engine's write
    /// path syncs through the newest id of a batch before logging it, so many new series cost
    /// one fsync instead of one each.
    pub fn get_or_create_unsynced(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        self.create(key, kind, false)
    }

    fn create(&self, key: &SeriesKey, kind: ValueKind, sync: bool) -> Result<SeriesId> {
        // Spelled once: both lookups and the record use it (three spellings cost a quarter of
        // a new series' work on the HTTP write path).
        let text = key.canonical();
        if let Some(id) = self.lookup(&text, kind)? {
            if sync {
                // It may have been created unsynced: durable before its id is handed out.
                self.sync_through(id)?;
            }
            return Ok(id);
        }
        let mut tail = self.append.lock();
        // Another thread may have created it while we waited for the append lock.
        if let Some(id) = self.lookup(&text, kind)? {
            if sync {
                self.sync_locked(&mut tail)?;
            }
            return Ok(id);
        }
        if text.len() > SERIES_KEY_BYTES_MAX {
            return Err(Error::RecordTooLarge { len: text.len(), limit: SERIES_KEY_BYTES_MAX });
        }
        let limit = self.series_per_database_max.load(Ordering::Relaxed);
        if self.series_in_database(key.database()) >= limit {
            return Err(Error::SeriesLimit { database: key.database().to_string(), limit });
        }
        let id =
            SeriesId(u32::try_from(self.state.read().keys.len() + 1).map_err(|_| Error::Poisoned("series id space exhausted".into()))?);
        let mut bytes = Vec::with_capacity(16 + text.len());
        record::encode(&mut bytes, id.0, Some(kind), &tail.last_text, &text);
        let io = |e| Error::io(&self.path, e);
        if let Some(reason) = &tail.sync_failed {
            return Err(Error::Poisoned(reason.clone()));
        }
        let mut written = self.file.write_all_at(&bytes, tail.end);
        if written.is_ok() && sync {
            written = self.file.sync_data();
            if written.is_err() && self.durable_through.load(Ordering::Acquire) < id.0 - 1 {
                // Unsynced records of earlier series may be lost with this record's pages.
                tail.sync_failed = Some(format!("catalog fsync failed with unsynced series before id {}", id.0));
            }
        }
        if let Err(e) = written {
            // Cut off whatever part was written so the next append starts on a record boundary;
            // the tail (end and last key text) stays where it was, so the next record is encoded
            // against the last record that is really in the file.
            let _ = self.file.set_len(tail.end);
            return Err(io(e));
        }
        tail.end += bytes.len() as u64;
        tail.last_text = text;
        if sync {
            // The fsync covered every record before this one too.
            self.durable_through.store(id.0, Ordering::Release);
        }
        let mut state = self.state.write();
        state.count_live(key.database(), true);
        state.keys.push(&tail.last_text, kind as u8);
        Ok(id)
    }

    /// Deletes series `id` durably (a tombstone record, synced): its key is free for a new id
    /// and its data is dead. Returns false when it was deleted already or never existed.
    pub fn delete(&self, id: SeriesId) -> Result<bool> {
        Ok(self.delete_many(&[id])? == 1)
    }

    /// Deletes every series of `ids` that exists and is not deleted yet, with one write and one
    /// fsync for all their tombstones; returns how many were deleted.
    pub fn delete_many(&self, ids: &[SeriesId]) -> Result<usize> {
        let mut tail = self.append.lock();
        let victims: Vec<(usize, String)> = {
            let state = self.state.read();
            let mut seen = std::collections::HashSet::new();
            ids.iter()
                .filter_map(|id| (id.0 as usize).checked_sub(1))
                .filter(|&index| index < state.keys.len() && !state.keys.is_deleted(index) && seen.insert(index))
                .map(|index| (index, state.keys.text(index).to_string()))
                .collect()
        };
        if victims.is_empty() {
            return Ok(0);
        }
        if let Some(reason) = &tail.sync_failed {
            return Err(Error::Poisoned(reason.clone()));
        }
        let io = |e| Error::io(&self.path, e);
        if tail.version == FORMAT_VERSION_WITHOUT_TOMBSTONES {
            self.file.write_all_at(&header_bytes(), 0).and_then(|()| self.file.sync_data()).map_err(io)?;
            tail.version = FORMAT_VERSION;
        }
        let mut bytes = Vec::with_capacity(victims.iter().map(|(_, text)| 16 + text.len()).sum());
        let mut previous = tail.last_text.clone();
        for (index, text) in &victims {
            record::encode(&mut bytes, *index as u32 + 1, None, &previous, text);
            previous.clone_from(text);
        }
        let newest = self.state.read().keys.len() as u32;
        let mut written = self.file.write_all_at(&bytes, tail.end);
        if written.is_ok() {
            written = self.file.sync_data();
            if written.is_err() && self.durable_through.load(Ordering::Acquire) < newest {
                // Unsynced records of earlier series may be lost with these records' pages.
                tail.sync_failed = Some(format!("catalog fsync failed with unsynced series up to id {newest}"));
            }
        }
        if let Err(e) = written {
            let _ = self.file.set_len(tail.end);
            return Err(io(e));
        }
        self.durable_through.store(newest, Ordering::Release);
        tail.end += bytes.len() as u64;
        tail.last_text = previous;
        let mut state = self.state.write();
        for (index, text) in &victims {
            state.keys.delete(*index);
            let key = SeriesKey::parse(text).expect("BUG: catalog key texts are canonical keys");
            state.count_live(key.database(), false);
        }
        state.deletions += victims.len() as u64;
        Ok(victims.len())
    }

    /// Whether series `id` is deleted.
    pub fn is_deleted(&self, id: SeriesId) -> bool {
        let Some(index) = (id.0 as usize).checked_sub(1) else { return false };
        self.state.read().keys.is_deleted(index)
    }

    /// How many deletions have happened; changes whenever a series is deleted.
    pub fn deletions(&self) -> u64 {
        self.state.read().deletions
    }

    /// Calls `visit` with the canonical key text of every series from id `first` on (ids in
    /// order, deleted ones too), and whether it is deleted.
    pub fn visit_texts_from(&self, first: SeriesId, mut visit: impl FnMut(&str, bool)) {
        let state = self.state.read();
        for index in (first.0 as usize).saturating_sub(1)..state.keys.len() {
            visit(state.keys.text(index), state.keys.is_deleted(index));
        }
    }

    /// The id of the series spelled `text` (its key's canonical form), if there is one.
    fn lookup(&self, text: &str, kind: ValueKind) -> Result<Option<SeriesId>> {
        let state = self.state.read();
        let Some(index) = state.keys.find(text) else { return Ok(None) };
        let existing = state.kind(index).ok_or_else(|| Error::Poisoned(format!("catalog: series {text} has no valid kind")))?;
        if existing != kind {
            return Err(Error::KindMismatch { key: text.to_string(), existing, attempted: kind });
        }
        Ok(Some(SeriesId(index as u32 + 1)))
    }

    /// Makes every series created so far durable. A flush calls this before it writes blocks,
    /// so a segment never names a series the catalog could lose in a power cut, whatever the
    /// durability mode.
    pub fn sync(&self) -> Result<()> {
        let mut tail = self.append.lock();
        self.sync_locked(&mut tail)
    }

    /// Makes series `id` and every one before it durable, when the catalog syncs new series at
    /// all (`sync_on_create`); an fsync only when one of them is not durable yet. A failed
    /// fsync fails this and every later call.
    pub fn sync_through(&self, id: SeriesId) -> Result<()> {
        if !self.sync_on_create || id.0 <= self.durable_through.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut tail = self.append.lock();
        if id.0 <= self.durable_through.load(Ordering::Acquire) {
            return Ok(());
        }
        self.sync_locked(&mut tail)
    }

    /// Syncs the file (the append lock held, so `by_id.len()` is the newest id in the file).
    fn sync_locked(&self, tail: &mut Tail) -> Result<()> {
        if let Some(reason) = &tail.sync_failed {
            return Err(Error::Poisoned(reason.clone()));
        }
        let newest = self.state.read().keys.len() as u32;
        if newest <= self.durable_through.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Err(e) = self.file.sync_data() {
            let error = Error::io(&self.path, e);
            tail.sync_failed = Some(format!("catalog fsync failed: {error}"));
            return Err(error);
        }
        self.durable_through.store(newest, Ordering::Release);
        Ok(())
    }

    /// The series with `id`, if known.
    pub fn get(&self, id: SeriesId) -> Option<SeriesEntry> {
        let index = (id.0 as usize).checked_sub(1)?;
        self.state.read().entry(index)
    }

    /// Calls `with` with the canonical key text of `id` (see `SeriesKey::canonical`), if known;
    /// no key is parsed or allocated.
    pub fn with_text<T>(&self, id: SeriesId, with: impl FnOnce(&str) -> T) -> Option<T> {
        let index = (id.0 as usize).checked_sub(1)?;
        let state = self.state.read();
        (index < state.keys.len()).then(|| with(state.keys.text(index)))
    }

    /// Heap bytes of the in-memory key table.
    pub fn memory_bytes(&self) -> usize {
        self.state.read().keys.heap_bytes()
    }

    /// The value kind of `id`, if known; cheaper than [`Catalog::get`].
    pub fn kind(&self, id: SeriesId) -> Option<ValueKind> {
        let index = (id.0 as usize).checked_sub(1)?;
        self.state.read().kind(index)
    }

    /// The id of `key`, if known.
    pub fn find(&self, key: &SeriesKey) -> Option<SeriesId> {
        let text = key.canonical();
        self.state.read().keys.find(&text).map(|index| SeriesId(index as u32 + 1))
    }

    pub fn len(&self) -> usize {
        self.state.read().keys.len()
    }

    /// Live series of `database`.
    pub fn series_in_database(&self, database: &str) -> usize {
        self.state.read().per_database.get(database).copied().unwrap_or(0)
    }

    /// Refuses new series ([`Error::SeriesLimit`]) in a database already holding `max` live
    /// series; `usize::MAX` for no limit (the default).
    pub fn set_series_per_database_max(&self, max: usize) {
        self.series_per_database_max.store(max, Ordering::Relaxed);
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live series of `database` (any when `None`) and `measurement` (any when `None`) whose
    /// tags include every `(key, value)` of `tag_filter`, in id order.
    pub fn select(&self, database: Option<&str>, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Vec<SeriesEntry> {
        let state = self.state.read();
        let mut selected = Vec::new();
        Self::visit_in(&state, 0, database, measurement, tag_filter, |index, _| selected.extend(state.entry(index)));
        selected
    }

    /// Calls `visit` with the id, kind and canonical key text of every live series of
    /// `database` (and `measurement` when given, and tag `tag.0` = `tag.1` when given) created
    /// after `since` (every one without it), in id order, without parsing the texts it can take
    /// apart in place. Returns the cursor after them; `None` when a series was deleted since
    /// `since` (visit everything again). Runs under the catalog's read lock: a new series waits
    /// until it returns.
    pub fn visit_selected(
        &self,
        since: Option<SeriesCursor>,
        database: &str,
        measurement: Option<&str>,
        tag: Option<(&str, &str)>,
        mut visit: impl FnMut(SeriesId, ValueKind, &str),
    ) -> Option<SeriesCursor> {
        let state = self.state.read();
        let first = match since {
            Some(since) if state.deletions != since.deletions || state.keys.len() < since.created => return None,
            Some(since) => since.created,
            None => 0,
        };
        Self::visit_in(&state, first, Some(database), measurement, tag.as_slice(), |index, text| {
            if let Some(kind) = state.kind(index) {
                visit(SeriesId(index as u32 + 1), kind, text);
            }
        });
        Some(state.cursor())
    }

    /// Calls `visit` with the index and text of every live key from index `first` on of
    /// `database` (any when `None`) and `measurement` (any when `None`) whose tags include
    /// every `(key, value)` of `tags`, in index order.
    fn visit_in(
        state: &State,
        first: usize,
        database: Option<&str>,
        measurement: Option<&str>,
        tags: &[(&str, &str)],
        mut visit: impl FnMut(usize, &str),
    ) {
        // Texts that cannot match are passed over without parsing: the canonical text starts
        // with the database and measurement, and holds each tag pair as `,key=value`. No key
        // holds a pair that cannot be written so (an empty value).
        let prefix = select::Prefix::new(database, measurement);
        let Some(pairs) = tags.iter().map(|(k, v)| select::pair_text(k, v)).collect::<Option<Vec<String>>>() else { return };
        let finders: Vec<memchr::memmem::Finder<'_>> = pairs.iter().map(memchr::memmem::Finder::new).collect();
        for index in first..state.keys.len() {
            let text = state.keys.text(index);
            if state.keys.is_deleted(index) || !prefix.may_match(text) || finders.iter().any(|f| f.find(text.as_bytes()).is_none()) {
                continue;
            }
            // The texts that may match are taken apart in place, or parsed where escaped.
            let matches = match KeyText::split(text) {
                Some(parts) => {
                    database.is_none_or(|d| parts.database() == d)
                        && measurement.is_none_or(|m| parts.measurement() == m)
                        && tags.iter().all(|&tag| parts.tags().any(|pair| pair == tag))
                }
                None => {
                    let key = SeriesKey::parse(text).expect("BUG: catalog key texts are canonical keys");
                    database.is_none_or(|d| key.database() == d)
                        && measurement.is_none_or(|m| key.measurement() == m)
                        && tags.iter().all(|(k, v)| key.tag(k) == Some(v))
                }
            };
            if matches {
                visit(index, text);
            }
        }
    }

    /// Where the catalog stands now; it changes whenever a series is created or deleted, so
    /// callers may keep what [`Catalog::select`] gave them under it.
    pub fn cursor(&self) -> SeriesCursor {
        self.state.read().cursor()
    }

    /// Bytes on disk.
    pub fn file_bytes(&self) -> u64 {
        self.append.lock().end
    }
}

#[cfg(test)]
mod tests;
