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
//!   8  2  format version (1)                          u16 LE
//!  10  2  reserved (0)                                u16 LE
//!  12  4  CRC32C of bytes [0, 12)                     u32 LE
//! record (repeated, back to back, no padding)
//!   0  n  length L of the body (n = 1..=3 bytes)      varint
//!   n  4  CRC32C of the n length bytes + the body     u32 LE
//! n+4  L  body:
//!           series id                                 varint
//!           value kind                                u8
//!           P: bytes of the key text shared with the
//!              previous record's key text (0 first)   varint
//!           suffix: key text bytes [P, end)           L - (bytes above)
//! ```
//! The key text is the canonical form (model::SeriesKey::canonical), UTF-8: the previous record's
//! text cut at P, then the suffix. Writers cut P back to a character boundary, readers validate
//! the joined text as UTF-8.
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
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"SDBCATLG";
const FORMAT_VERSION: u16 = 1;
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
    by_key: HashMap<Arc<SeriesKey>, SeriesId>,
    /// `by_id[i]` is the series with id `i + 1`.
    by_id: Vec<SeriesEntry>,
}

/// The catalog. Lookups take a shared lock; creating a series takes the append lock.
pub struct Catalog {
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    sync_on_create: bool,
    state: RwLock<State>,
    /// Serialises appends.
    append: Mutex<Tail>,
}

/// Where the next record goes and what it is encoded against.
struct Tail {
    /// End offset of the last whole record.
    end: u64,
    /// Key text of the last record in the file (empty when there is none).
    last_text: String,
}

/// What opening the catalog found wrong and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatalogRecovery {
    /// Offset where a torn or corrupt tail was cut off, with the reason.
    pub truncated_at: Option<(u64, String)>,
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
            let mut header = Vec::with_capacity(HEADER_BYTES as usize);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            header.extend_from_slice(&0u16.to_le_bytes());
            let checksum = crc32c(&header);
            header.extend_from_slice(&checksum.to_le_bytes());
            file.write_all_at(&header, 0).map_err(io)?;
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
        let catalog = Catalog {
            path: path.to_path_buf(),
            file,
            sync_on_create,
            state: RwLock::new(state),
            append: Mutex::new(tail),
        };
        Ok((catalog, recovery))
    }

    fn parse(path: &Path, bytes: &[u8]) -> Result<(State, Tail, CatalogRecovery)> {
        let header = bytes
            .get(..HEADER_BYTES as usize)
            .ok_or_else(|| Error::corruption(path, 0, "catalog header truncated"))?;
        if &header[..8] != MAGIC || crc32c(&header[..12]).to_le_bytes() != header[12..16] {
            return Err(Error::corruption(path, 0, "bad catalog header"));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version != FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { path: path.into(), found: version, supported: FORMAT_VERSION });
        }
        let mut state = State { by_key: HashMap::new(), by_id: Vec::new() };
        let mut offset = HEADER_BYTES as usize;
        let mut last_text = String::new();
        let mut recovery = CatalogRecovery::default();
        while offset < bytes.len() {
            let parsed = record::decode(&bytes[offset..], &last_text).and_then(|(record, len)| {
                let key = SeriesKey::parse(&record.text).map_err(|e| e.to_string())?;
                Ok((record, key, len))
            });
            match parsed {
                Ok((record, key, len)) => {
                    if record.id as usize != state.by_id.len() + 1 {
                        return Err(Error::corruption(
                            path,
                            offset as u64,
                            format!("series id {} out of sequence (expected {})", record.id, state.by_id.len() + 1),
                        ));
                    }
                    let entry = SeriesEntry { id: SeriesId(record.id), key: Arc::new(key), kind: record.kind };
                    state.by_key.insert(entry.key.clone(), entry.id);
                    state.by_id.push(entry);
                    last_text = record.text;
                    offset += len;
                }
                Err(reason) => {
                    recovery.truncated_at = Some((offset as u64, reason));
                    break;
                }
            }
        }
        Ok((state, Tail { end: offset as u64, last_text }, recovery))
    }

    /// The id of `key`, creating the series with `kind` if it is new. Fails when the series
    /// exists with another kind.
    pub fn get_or_create(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        if let Some(id) = self.lookup(key, kind)? {
            return Ok(id);
        }
        let mut tail = self.append.lock();
        // Another thread may have created it while we waited for the append lock.
        if let Some(id) = self.lookup(key, kind)? {
            return Ok(id);
        }
        let text = key.canonical();
        if text.len() > SERIES_KEY_BYTES_MAX {
            return Err(Error::RecordTooLarge { len: text.len(), limit: SERIES_KEY_BYTES_MAX });
        }
        let id = SeriesId(u32::try_from(self.state.read().by_id.len() + 1).map_err(|_| Error::Poisoned("series id space exhausted".into()))?);
        let mut bytes = Vec::with_capacity(16 + text.len());
        record::encode(&mut bytes, id.0, kind, &tail.last_text, &text);
        let io = |e| Error::io(&self.path, e);
        let written = self.file.write_all_at(&bytes, tail.end).and_then(|()| {
            if self.sync_on_create {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            // Cut off whatever part was written so the next append starts on a record boundary;
            // the tail (end and last key text) stays where it was, so the next record is encoded
            // against the last record that is really in the file.
            let _ = self.file.set_len(tail.end);
            return Err(io(e));
        }
        tail.end += bytes.len() as u64;
        tail.last_text = text;
        let key = Arc::new(key.clone());
        let mut state = self.state.write();
        state.by_key.insert(key.clone(), id);
        state.by_id.push(SeriesEntry { id, key, kind });
        Ok(id)
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

    /// Series of `measurement` whose tags include every `(key, value)` of `tag_filter`, in id order.
    pub fn select(&self, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Vec<SeriesEntry> {
        self.state
            .read()
            .by_id
            .iter()
            .filter(|e| measurement.is_none_or(|m| e.key.measurement() == m))
            .filter(|e| tag_filter.iter().all(|(k, v)| e.key.tag(k) == Some(v)))
            .cloned()
            .collect()
    }

    /// Bytes on disk.
    pub fn file_bytes(&self) -> u64 {
        self.append.lock().end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

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
        assert_eq!(catalog.select(Some("m"), &[]).len(), 2);
        assert_eq!(catalog.select(None, &[("name", "a")]).len(), 2);
        assert_eq!(catalog.select(Some("m"), &[("name", "b")])[0].id, SeriesId(2));
    }
}
