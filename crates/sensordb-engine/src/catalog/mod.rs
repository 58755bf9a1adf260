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

mod record;

use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, StorageFile};
use crate::model::{SeriesId, SeriesKey, ValueKind};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
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

struct State {
    /// Live series only: a deleted key is free for a new id.
    by_key: HashMap<Arc<SeriesKey>, SeriesId>,
    /// `by_id[i]` is the series with id `i + 1`, deleted or not.
    by_id: Vec<SeriesEntry>,
    /// `deleted[i]`: the series with id `i + 1` is deleted.
    deleted: Vec<bool>,
    /// Bumped by every deletion, so caches of per-series facts know to refresh.
    deletions: u64,
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
        let bytes = file.read_all().map_err(io)?;
        let (state, tail, recovery) = Self::parse(path, &bytes)?;
        if let Some((offset, reason)) = &recovery.truncated_at {
            tracing::warn!(file = %path.display(), offset, reason = %reason, "catalog tail cut off");
            file.set_len(*offset).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        let durable_through = AtomicU32::new(state.by_id.len() as u32);
        let catalog = Catalog {
            path: path.to_path_buf(),
            file,
            sync_on_create,
            state: RwLock::new(state),
            append: Mutex::new(tail),
            durable_through,
        };
        Ok((catalog, recovery))
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
        let mut state = State { by_key: HashMap::new(), by_id: Vec::new(), deleted: Vec::new(), deletions: 0 };
        let mut offset = HEADER_BYTES as usize;
        let mut last_text = String::new();
        let mut recovery = CatalogRecovery::default();
        while offset < bytes.len() {
            let parsed = record::decode(&bytes[offset..], &last_text).and_then(|(record, len)| {
                let key = SeriesKey::parse(&record.text).map_err(|e| e.to_string())?;
                Ok((record, key, len))
            });
            match parsed {
                Ok((record, key, len)) if record.kind.is_none() => {
                    let index = (record.id as usize).wrapping_sub(1);
                    let names_a_live_series = state.by_id.get(index).is_some_and(|e| *e.key == key) && !state.deleted[index];
                    if version == FORMAT_VERSION_WITHOUT_TOMBSTONES || !names_a_live_series {
                        recovery.truncated_at =
                            Some((offset as u64, format!("tombstone for series id {} does not name a live series", record.id)));
                        break;
                    }
                    state.by_key.remove(&key);
                    state.deleted[index] = true;
                    state.deletions += 1;
                    last_text = record.text;
                    offset += len;
                }
                Ok((record, key, len)) => {
                    let kind = record.kind.expect("BUG: tombstones are handled above");
                    if record.id as usize != state.by_id.len() + 1 {
                        return Err(Error::corruption(
                            path,
                            offset as u64,
                            format!("series id {} out of sequence (expected {})", record.id, state.by_id.len() + 1),
                        ));
                    }
                    if let Some(first) = state.by_key.get(&key) {
                        // The writer never repeats a key: only damage that kept the checksums
                        // intact can. Cut here like any other damage.
                        recovery.truncated_at = Some((offset as u64, format!("series key {key} repeats series id {}", first.0)));
                        break;
                    }
                    let entry = SeriesEntry { id: SeriesId(record.id), key: Arc::new(key), kind };
                    state.by_key.insert(entry.key.clone(), entry.id);
                    state.by_id.push(entry);
                    state.deleted.push(false);
                    last_text = record.text;
                    offset += len;
                }
                Err(reason) => {
                    recovery.truncated_at = Some((offset as u64, reason));
                    break;
                }
            }
        }
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
        if let Some(id) = self.lookup(key, kind)? {
            if sync {
                // It may have been created unsynced: durable before its id is handed out.
                self.sync_through(id)?;
            }
            return Ok(id);
        }
        let mut tail = self.append.lock();
        // Another thread may have created it while we waited for the append lock.
        if let Some(id) = self.lookup(key, kind)? {
            if sync {
                self.sync_locked(&mut tail)?;
            }
            return Ok(id);
        }
        let text = key.canonical();
        if text.len() > SERIES_KEY_BYTES_MAX {
            return Err(Error::RecordTooLarge { len: text.len(), limit: SERIES_KEY_BYTES_MAX });
        }
        let id =
            SeriesId(u32::try_from(self.state.read().by_id.len() + 1).map_err(|_| Error::Poisoned("series id space exhausted".into()))?);
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
        let key = Arc::new(key.clone());
        let mut state = self.state.write();
        state.by_key.insert(key.clone(), id);
        state.by_id.push(SeriesEntry { id, key, kind });
        state.deleted.push(false);
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
                .filter(|&index| state.deleted.get(index) == Some(&false) && seen.insert(index))
                .map(|index| (index, state.by_id[index].key.canonical()))
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
        let newest = self.state.read().by_id.len() as u32;
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
        for (index, _) in &victims {
            let key = state.by_id[*index].key.clone();
            state.by_key.remove(&key);
            state.deleted[*index] = true;
        }
        state.deletions += victims.len() as u64;
        Ok(victims.len())
    }

    /// Whether series `id` is deleted.
    pub fn is_deleted(&self, id: SeriesId) -> bool {
        let Some(index) = (id.0 as usize).checked_sub(1) else { return false };
        self.state.read().deleted.get(index).copied().unwrap_or(false)
    }

    /// How many deletions have happened; changes whenever a series is deleted.
    pub fn deletions(&self) -> u64 {
        self.state.read().deletions
    }

    /// Calls `visit` for every series from id `first` on, with whether it is deleted.
    pub fn visit_from(&self, first: SeriesId, mut visit: impl FnMut(&SeriesEntry, bool)) {
        let state = self.state.read();
        let start = (first.0 as usize).saturating_sub(1);
        for (entry, deleted) in state.by_id.iter().zip(&state.deleted).skip(start) {
            visit(entry, *deleted);
        }
    }

    fn lookup(&self, key: &SeriesKey, kind: ValueKind) -> Result<Option<SeriesId>> {
        let state = self.state.read();
        let Some(&id) = state.by_key.get(key) else { return Ok(None) };
        let existing = state.by_id[id.0 as usize - 1].kind;
        if existing != kind {
            return Err(Error::KindMismatch { key: key.canonical(), existing, attempted: kind });
        }
        Ok(Some(id))
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
        let newest = self.state.read().by_id.len() as u32;
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
        self.state.read().by_id.get(index).cloned()
    }

    /// The value kind of `id`, if known; cheaper than [`Catalog::get`].
    pub fn kind(&self, id: SeriesId) -> Option<ValueKind> {
        let index = (id.0 as usize).checked_sub(1)?;
        self.state.read().by_id.get(index).map(|e| e.kind)
    }

    /// The id of `key`, if known.
    pub fn find(&self, key: &SeriesKey) -> Option<SeriesId> {
        self.state.read().by_key.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.state.read().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live series of `database` (any when `None`) and `measurement` (any when `None`) whose
    /// tags include every `(key, value)` of `tag_filter`, in id order.
    pub fn select(&self, database: Option<&str>, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Vec<SeriesEntry> {
        let state = self.state.read();
        state
            .by_id
            .iter()
            .zip(&state.deleted)
            .filter(|(_, deleted)| !**deleted)
            .map(|(e, _)| e)
            .filter(|e| database.is_none_or(|d| e.key.database() == d))
            .filter(|e| measurement.is_none_or(|m| e.key.measurement() == m))
            .filter(|e| tag_filter.iter().all(|(k, v)| e.key.tag(k) == Some(v)))
            .cloned()
            .collect()
    }

    /// A number that changes whenever a series is created or deleted: callers cache what
    /// [`Catalog::select`] gave them under it.
    pub fn generation(&self) -> u64 {
        let state = self.state.read();
        state.by_id.len() as u64 + state.deletions
    }

    /// Bytes on disk.
    pub fn file_bytes(&self) -> u64 {
        self.append.lock().end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_repeated_under_a_second_id_is_cut_as_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let end;
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            catalog.get_or_create(&SeriesKey::new("m", [("name", "a")], "x").expect("key"), ValueKind::F64).expect("create");
            end = catalog.file_bytes();
        }
        // A record with valid framing and checksum that repeats the key under id 2.
        let text = SeriesKey::new("m", [("name", "a")], "x").expect("key").canonical();
        let mut record = Vec::new();
        record::encode(&mut record, 2, Some(ValueKind::F64), &text, &text);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(&record);
        std::fs::write(&path, &bytes).expect("write");
        let (catalog, recovery) = Catalog::open(&RealFs, &path, true).expect("reopen");
        assert_eq!(catalog.len(), 1);
        assert_eq!(recovery.truncated_at.map(|t| t.0), Some(end));
    }
    use crate::fs::{FaultyFs, RealFs};
    use proptest::prelude::*;

    fn key(name: &str, field: &str) -> SeriesKey {
        SeriesKey::new("m", [("name", name)], field).expect("valid")
    }

    #[test]
    fn series_survive_reopen_with_dense_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("series.catalog");
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            assert_eq!(catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create"), SeriesId(1));
            assert_eq!(catalog.get_or_create(&key("b", "x"), ValueKind::Bool).expect("create"), SeriesId(2));
            assert_eq!(catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("again"), SeriesId(1));
        }
        let (catalog, recovery) = Catalog::open(&RealFs, &path, true).expect("reopen");
        assert_eq!(recovery, CatalogRecovery::default());
        assert_eq!(catalog.len(), 2);
        assert_eq!(catalog.find(&key("b", "x")), Some(SeriesId(2)));
        assert_eq!(catalog.kind(SeriesId(2)), Some(ValueKind::Bool));
        assert_eq!(catalog.get_or_create(&key("c", "y"), ValueKind::I64).expect("create"), SeriesId(3));
    }

    #[test]
    fn another_kind_for_an_existing_series_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (catalog, _) = Catalog::open(&RealFs, &dir.path().join("c"), false).expect("open");
        catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create");
        let err = catalog.get_or_create(&key("a", "x"), ValueKind::I64).expect_err("kind mismatch");
        assert!(matches!(err, Error::KindMismatch { existing: ValueKind::F64, attempted: ValueKind::I64, .. }), "{err}");
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_whole_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let second_record_start;
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create");
            second_record_start = catalog.file_bytes();
            catalog.get_or_create(&key("b", "x"), ValueKind::F64).expect("create");
        }
        let full = std::fs::metadata(&path).expect("meta").len();
        for cut in second_record_start + 1..full {
            let copy = dir.path().join(format!("copy{cut}"));
            std::fs::copy(&path, &copy).expect("copy");
            std::fs::OpenOptions::new().write(true).open(&copy).expect("open").set_len(cut).expect("truncate");
            let (catalog, recovery) = Catalog::open(&RealFs, &copy, true).expect("reopen");
            assert_eq!(catalog.len(), 1, "cut at {cut}");
            assert_eq!(recovery.truncated_at.map(|t| t.0), Some(second_record_start));
            assert_eq!(std::fs::metadata(&copy).expect("meta").len(), second_record_start);
        }
    }

    #[test]
    fn a_damaged_header_is_reported_with_offset_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        drop(Catalog::open(&RealFs, &path, true).expect("create"));
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[3] ^= 1;
        std::fs::write(&path, bytes).expect("write");
        let err = Catalog::open(&RealFs, &path, true).err().expect("corrupt");
        assert!(matches!(err, Error::Corruption { offset: 0, .. }), "{err}");
    }

    #[test]
    fn select_filters_by_measurement_and_tags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (catalog, _) = Catalog::open(&RealFs, &dir.path().join("c"), false).expect("open");
        catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create");
        catalog.get_or_create(&key("b", "x"), ValueKind::F64).expect("create");
        catalog.get_or_create(&SeriesKey::new("n", [("name", "a")], "x").expect("key"), ValueKind::F64).expect("create");
        assert_eq!(catalog.select(None, Some("m"), &[]).len(), 2);
        assert_eq!(catalog.select(None, None, &[("name", "a")]).len(), 2);
        assert_eq!(catalog.select(None, Some("m"), &[("name", "b")])[0].id, SeriesId(2));
        let elsewhere = key("a", "x").in_database("other").expect("database");
        catalog.get_or_create(&elsewhere, ValueKind::F64).expect("create");
        assert_eq!(catalog.select(Some("other"), None, &[]).len(), 1);
        assert_eq!(catalog.select(Some(crate::model::DEFAULT_DATABASE), Some("m"), &[]).len(), 2);
    }

    #[test]
    fn deleted_series_stay_deleted_across_reopen_and_their_key_gets_a_new_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            assert_eq!(catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create"), SeriesId(1));
            assert_eq!(catalog.get_or_create(&key("b", "x"), ValueKind::I64).expect("create"), SeriesId(2));
            assert!(catalog.delete(SeriesId(1)).expect("delete"));
            assert!(!catalog.delete(SeriesId(1)).expect("second delete"), "already deleted");
            assert!(!catalog.delete(SeriesId(9)).expect("unknown"), "never existed");
            assert_eq!(catalog.find(&key("a", "x")), None);
            assert_eq!(catalog.select(None, Some("m"), &[]).len(), 1, "deleted series are not selected");
            // The key is free again, under a new id and even another kind.
            assert_eq!(catalog.get_or_create(&key("a", "x"), ValueKind::Bool).expect("recreate"), SeriesId(3));
            catalog.get_or_create(&key("c", "x"), ValueKind::F64).expect("create");
            catalog.get_or_create(&key("d", "x"), ValueKind::F64).expect("create");
            // One write for many tombstones; repeats, deleted and unknown ids are skipped.
            assert_eq!(catalog.delete_many(&[SeriesId(4), SeriesId(5), SeriesId(4), SeriesId(1), SeriesId(77)]).expect("delete many"), 2);
        }
        let (catalog, recovery) = Catalog::open(&RealFs, &path, true).expect("reopen");
        assert_eq!(recovery.truncated_at, None);
        assert!(catalog.is_deleted(SeriesId(1)));
        assert!(!catalog.is_deleted(SeriesId(3)));
        assert_eq!(catalog.find(&key("a", "x")), Some(SeriesId(3)));
        assert_eq!(catalog.kind(SeriesId(3)), Some(ValueKind::Bool));
        assert_eq!(catalog.deletions(), 3);
        assert!(catalog.is_deleted(SeriesId(4)) && catalog.is_deleted(SeriesId(5)));
        assert_eq!(catalog.find(&key("c", "x")), None);
    }

    #[test]
    fn a_version_1_catalog_is_read_and_upgraded_by_its_first_tombstone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            catalog.get_or_create(&key("a", "x"), ValueKind::F64).expect("create");
        }
        // Rewrite the header as version 1, as older releases made it.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
        let checksum = crc32c(&bytes[..12]).to_le_bytes();
        bytes[12..16].copy_from_slice(&checksum);
        std::fs::write(&path, &bytes).expect("write");
        {
            let (catalog, recovery) = Catalog::open(&RealFs, &path, true).expect("version 1 opens");
            assert_eq!(recovery.truncated_at, None);
            assert!(catalog.delete(SeriesId(1)).expect("delete"));
        }
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
        let (catalog, recovery) = Catalog::open(&RealFs, &path, true).expect("reopen");
        assert_eq!(recovery.truncated_at, None);
        assert!(catalog.is_deleted(SeriesId(1)));
    }

    fn reopen_entries(path: &Path) -> (Vec<(String, ValueKind)>, CatalogRecovery) {
        let (catalog, recovery) = Catalog::open(&RealFs, path, true).expect("reopen");
        let entries = (1..=catalog.len() as u32)
            .map(|id| {
                let entry = catalog.get(SeriesId(id)).expect("dense id");
                assert_eq!(entry.id, SeriesId(id));
                assert_eq!(catalog.find(&entry.key), Some(SeriesId(id)));
                (entry.key.canonical(), entry.kind)
            })
            .collect();
        (entries, recovery)
    }

    /// Keys sharing long prefixes, keys sharing none, keys that are prefixes of the previous key,
    /// and multi-byte UTF-8 where the byte-wise shared prefix would end inside a character.
    fn mixed_keys() -> Vec<(SeriesKey, ValueKind)> {
        let mut keys = Vec::new();
        for device in ["a", "b"] {
            for field in ["temperature", "temp", "humidity", "t"] {
                keys.push((SeriesKey::new("room", [("device", device), ("floor", "1")], field).expect("key"), ValueKind::F64));
            }
        }
        for (name, kind) in [
            ("é", ValueKind::I64),
            ("è", ValueKind::Bool),
            ("日本", ValueKind::U64),
            ("日曜", ValueKind::Bytes),
            ("日", ValueKind::F64),
            ("😀", ValueKind::F64),
            ("😁", ValueKind::F64),
        ] {
            keys.push((SeriesKey::new("capteur", [("nom", name)], "valeur").expect("key"), kind));
            keys.push((SeriesKey::new("capteur", [("nom", name)], format!("{name}{name}")).expect("key"), kind));
        }
        keys.push((SeriesKey::new("z", [("esc,aped", "a b=c\\d")], "f ield").expect("key"), ValueKind::I64));
        keys.push((SeriesKey::new("room", [("device", "a")], "temperature").expect("key"), ValueKind::F64));
        keys
    }

    #[test]
    fn keys_with_and_without_shared_prefixes_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("series.catalog");
        let keys = mixed_keys();
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, false).expect("open");
            for (i, (key, kind)) in keys.iter().enumerate() {
                assert_eq!(catalog.get_or_create(key, *kind).expect("create"), SeriesId(i as u32 + 1));
            }
        }
        let (entries, recovery) = reopen_entries(&path);
        assert_eq!(recovery, CatalogRecovery::default());
        let expected: Vec<_> = keys.iter().map(|(k, kind)| (k.canonical(), *kind)).collect();
        assert_eq!(entries, expected);
        // Appending after a reopen encodes against the last key read back.
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, false).expect("open");
            let more = SeriesKey::new("room", [("device", "a")], "temperaturf").expect("key");
            assert_eq!(catalog.get_or_create(&more, ValueKind::F64).expect("create"), SeriesId(keys.len() as u32 + 1));
        }
        let (entries, _) = reopen_entries(&path);
        assert_eq!(entries.last().map(|e| e.0.as_str()), Some("room,device=a temperaturf"));
    }

    /// TSBS IoT keys at scale 100: 100 trucks × 16 fields (10 of `readings` with the three
    /// capacity fields, 6 of `diagnostics`), tags as TSBS draws them, created in the order the
    /// benchmark first meets them: readings of every truck, then diagnostics of every truck.
    fn tsbs_keys() -> Vec<SeriesKey> {
        const CAPACITIES: [&str; 3] = ["load_capacity", "fuel_capacity", "nominal_fuel_consumption"];
        const READINGS: [&str; 7] = ["latitude", "longitude", "elevation", "velocity", "heading", "grade", "fuel_consumption"];
        const DIAGNOSTICS: [&str; 3] = ["fuel_state", "current_load", "status"];
        const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
        const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
        const MODELS: [&str; 3] = ["F-150", "G-2000", "H-2"];
        const VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];
        // A fixed LCG stands in for TSBS's random tag draws.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut pick = |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let trucks: Vec<[(&str, String); 5]> = (0..100)
            .map(|i| {
                [
                    ("name", format!("truck_{i}")),
                    ("fleet", FLEETS[pick(4)].to_string()),
                    ("driver", DRIVERS[pick(6)].to_string()),
                    ("model", MODELS[pick(3)].to_string()),
                    ("device_version", VERSIONS[pick(4)].to_string()),
                ]
            })
            .collect();
        let mut keys = Vec::new();
        for (measurement, fields) in [("readings", &READINGS[..]), ("diagnostics", &DIAGNOSTICS[..])] {
            for tags in &trucks {
                for field in CAPACITIES.iter().chain(fields) {
                    keys.push(SeriesKey::new(measurement, tags.clone(), *field).expect("key"));
                }
            }
        }
        keys
    }

    #[test]
    fn tsbs_keys_take_few_bytes_per_series() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("series.catalog");
        let keys = tsbs_keys();
        assert_eq!(keys.len(), 1600);
        let text_bytes: usize = keys.iter().map(|k| k.canonical().len()).sum();
        let file_bytes;
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, false).expect("open");
            for key in &keys {
                catalog.get_or_create(key, ValueKind::F64).expect("create");
            }
            file_bytes = catalog.file_bytes();
        }
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), file_bytes);
        let per_series = (file_bytes - HEADER_BYTES) as f64 / keys.len() as f64;
        println!("tsbs: {per_series:.2} bytes per series on disk, key text {:.2}", text_bytes as f64 / keys.len() as f64);
        // Field names alone average ~12 bytes and a new truck's tags share little with the
        // previous truck's, so prefix sharing with the previous key cannot reach 20 bytes here:
        // measured 27.1. The bound catches regressions.
        assert!(per_series <= 28.0, "{per_series:.2} bytes per series");
        let (entries, recovery) = reopen_entries(&path);
        assert_eq!(recovery, CatalogRecovery::default());
        assert!(entries.iter().zip(&keys).all(|(e, k)| e.0 == k.canonical()));
    }

    #[test]
    fn keys_differing_only_in_a_short_field_take_under_20_bytes() {
        // The favourable case: one tag set, many fields whose names differ only at the end.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let (catalog, _) = Catalog::open(&RealFs, &path, false).expect("open");
        let tags = [("device_version", "v1.0"), ("driver", "Derek"), ("fleet", "South"), ("model", "F-150"), ("name", "truck_12")];
        for channel in 0..100 {
            catalog
                .get_or_create(&SeriesKey::new("readings", tags, format!("channel_{channel}")).expect("key"), ValueKind::F64)
                .expect("create");
        }
        let per_series = (catalog.file_bytes() - HEADER_BYTES) as f64 / 100.0;
        println!("channels: {per_series:.2} bytes per series on disk");
        assert!(per_series <= 20.0, "{per_series:.2} bytes per series");
    }

    #[test]
    fn a_flipped_byte_in_a_middle_record_cuts_the_file_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let mut starts = Vec::new();
        {
            let (catalog, _) = Catalog::open(&RealFs, &path, true).expect("open");
            for field in ["alpha", "beta", "gamma", "delta", "epsilon"] {
                starts.push(catalog.file_bytes());
                catalog.get_or_create(&key("a", field), ValueKind::F64).expect("create");
            }
            starts.push(catalog.file_bytes());
        }
        let original = std::fs::read(&path).expect("read");
        let (damaged_start, damaged_end) = (starts[2], starts[3]);
        for at in damaged_start..damaged_end {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bytes = original.clone();
                bytes[at as usize] ^= flip;
                let copy = dir.path().join("copy");
                std::fs::write(&copy, &bytes).expect("write");
                let (entries, recovery) = reopen_entries(&copy);
                let (offset, reason) = recovery.truncated_at.expect("reported");
                assert_eq!(offset, damaged_start, "flip {flip:#x} at {at}: {reason}");
                // The two records before survive; the damaged one and every later one (stored
                // relative to it) are lost.
                assert_eq!(entries, [("m,name=a alpha".to_string(), ValueKind::F64), ("m,name=a beta".to_string(), ValueKind::F64)]);
                assert_eq!(std::fs::metadata(&copy).expect("meta").len(), damaged_start);
            }
        }
    }

    #[test]
    fn a_failed_append_leaves_the_next_one_encoded_against_the_last_good_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let fs = FaultyFs::new(Arc::new(RealFs));
        {
            let (catalog, _) = Catalog::open(&fs, &path, true).expect("open");
            catalog.get_or_create(&key("a", "first"), ValueKind::F64).expect("create");
            let end = catalog.file_bytes();
            // A partial write, then ENOSPC.
            fs.set_space_left(Some(3));
            catalog.get_or_create(&key("a", "second_that_failed"), ValueKind::F64).expect_err("no space");
            fs.set_space_left(None);
            assert_eq!(catalog.file_bytes(), end);
            assert_eq!(std::fs::metadata(&path).expect("meta").len(), end);
            // A whole write whose fsync fails is cut off as well.
            fs.set_fail_sync(true);
            catalog.get_or_create(&key("a", "fsync_failed"), ValueKind::F64).expect_err("sync fails");
            fs.set_fail_sync(false);
            assert_eq!(std::fs::metadata(&path).expect("meta").len(), end);
            assert_eq!(catalog.get_or_create(&key("a", "fourth"), ValueKind::I64).expect("create"), SeriesId(2));
            assert_eq!(catalog.find(&key("a", "second_that_failed")), None);
        }
        let (entries, recovery) = reopen_entries(&path);
        assert_eq!(recovery, CatalogRecovery::default());
        assert_eq!(entries, [("m,name=a first".to_string(), ValueKind::F64), ("m,name=a fourth".to_string(), ValueKind::I64)]);
    }

    #[test]
    fn unsynced_series_wait_for_sync_through_and_a_failed_sync_is_never_trusted_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        let fs = FaultyFs::new(Arc::new(RealFs));
        let (catalog, _) = Catalog::open(&fs, &path, true).expect("open");
        let first = catalog.get_or_create(&key("a", "synced"), ValueKind::F64).expect("create");
        fs.set_fail_sync(true);
        // No fsync: neither for a new unsynced series nor for ids already durable.
        let second = catalog.get_or_create_unsynced(&key("a", "lazy"), ValueKind::F64).expect("no fsync needed");
        let third = catalog.get_or_create_unsynced(&key("a", "lazy2"), ValueKind::I64).expect("no fsync needed");
        assert_eq!((first, second, third), (SeriesId(1), SeriesId(2), SeriesId(3)));
        catalog.sync_through(first).expect("durable already");
        // Handing out an unsynced id through the synced path needs the fsync.
        catalog.get_or_create(&key("a", "lazy"), ValueKind::F64).expect_err("fsync fails");
        catalog.sync_through(third).expect_err("fsync fails");
        fs.set_fail_sync(false);
        // Linux may report the next fsync as fine after dropping the failed one's pages.
        catalog.sync_through(third).expect_err("a failed fsync is not retried");
        catalog.get_or_create(&key("a", "new"), ValueKind::F64).expect_err("no more appends");
        catalog.sync_through(first).expect("still durable");
        drop(catalog);
        let (catalog, _) = Catalog::open(&fs, &path, true).expect("reopen");
        assert_eq!(catalog.len(), 3, "the records were written, only their fsync failed");
        let lazy = catalog.get_or_create_unsynced(&key("b", "lazy"), ValueKind::Bool).expect("create");
        catalog.sync_through(lazy).expect("one fsync");
        assert_eq!(catalog.durable_through.load(Ordering::Acquire), lazy.0);
    }

    fn any_kind() -> impl Strategy<Value = ValueKind> {
        prop_oneof![Just(ValueKind::F64), Just(ValueKind::I64), Just(ValueKind::U64), Just(ValueKind::Bool), Just(ValueKind::Bytes)]
    }

    fn any_key() -> impl Strategy<Value = SeriesKey> {
        // A small alphabet with escapes and multi-byte characters makes shared prefixes, and
        // prefixes ending inside a character, common.
        let part = "[ab,= \\\\éè日曜😀]{1,5}";
        (part, proptest::collection::btree_map("[ab,= éè]{1,3}", part, 0..3), part)
            .prop_map(|(measurement, tags, field)| SeriesKey::new(measurement, tags, field).expect("valid key"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_keys_survive_reopen(series in proptest::collection::vec((any_key(), any_kind()), 1..60)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("c");
            let mut expected: Vec<(String, ValueKind)> = Vec::new();
            {
                let (catalog, _) = Catalog::open(&RealFs, &path, false).expect("open");
                for (key, kind) in &series {
                    let text = key.canonical();
                    match expected.iter().position(|(t, _)| *t == text) {
                        Some(i) if expected[i].1 == *kind => {
                            prop_assert_eq!(catalog.get_or_create(key, *kind).expect("existing"), SeriesId(i as u32 + 1));
                        }
                        Some(_) => {
                            let is_mismatch = matches!(catalog.get_or_create(key, *kind), Err(Error::KindMismatch { .. }));
                            prop_assert!(is_mismatch);
                        }
                        None => {
                            expected.push((text, *kind));
                            prop_assert_eq!(catalog.get_or_create(key, *kind).expect("create"), SeriesId(expected.len() as u32));
                        }
                    }
                }
            }
            let (entries, recovery) = reopen_entries(&path);
            prop_assert_eq!(recovery, CatalogRecovery::default());
            prop_assert_eq!(entries, expected);
        }
    }
}
