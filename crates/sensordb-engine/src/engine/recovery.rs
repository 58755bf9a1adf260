//! Opening a data directory: the directory lock, the catalog, the block store, and the replay
//! of the WAL files the store does not cover into a fresh memtable. Produces the parts the
//! engine is assembled from ([`Recovered`]) and the [`RecoveryReport`]; knows nothing of the
//! engine's running state.

use super::options::EngineOptions;
use crate::batch::WriteBatch;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::filenames::{catalog_path, parse_numbered_file, segment_dir, wal_dir, LOCK_FILE, WAL_EXTENSION};
use crate::fs::{create_dir_all_durably, FileSystem};
use crate::mark::TxMark;
use crate::memtable::Memtable;
use crate::model::{SeriesId, SeriesKey, ValueKind};
use crate::quarantine::Quarantine;
use crate::store::{BlockStore, SegmentStore, SegmentStoreOptions};
use crate::wal::{Durability, Wal, WalOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What start-up found and repaired.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub series: usize,
    pub segments: usize,
    pub wal_records_replayed: u64,
    pub points_replayed: u64,
    /// Completion marks found in the replayed records (see [`crate::mark`]).
    pub marks_replayed: u64,
    /// Every damaged spot worked around: (file, offset, what). What was set aside says where
    /// it went in the quarantine (`<data>/quarantine`, see [`crate::quarantine`]).
    pub problems: Vec<(PathBuf, u64, String)>,
    pub duration: Duration,
}

/// What start-up recovered, for the engine to take over.
pub(super) struct Recovered {
    pub(super) lock: DirectoryLock,
    pub(super) catalog: Catalog,
    pub(super) store: Arc<dyn BlockStore>,
    /// Every WAL file with a smaller id is contained in the store.
    pub(super) wal_checkpoint: u64,
    pub(super) wal: Option<Wal>,
    pub(super) wal_dir: PathBuf,
    /// The replayed points of the WAL files the store does not cover.
    pub(super) memtable: Memtable,
    /// The completion marks of those files, in replay order.
    pub(super) marks: Vec<TxMark>,
    pub(super) report: RecoveryReport,
}

/// Opens the directory lock, catalog, store and WAL of `dir` (created if needed), repairing what
/// a crash left behind. The store is `given_store` if any (already open: what its opening found
/// is its owner's to report), otherwise the segment store in `dir`. `report.duration` is left
/// for the caller, which finishes the start.
pub(super) fn recover(dir: &Path, options: &EngineOptions, given_store: Option<Arc<dyn BlockStore>>) -> Result<Recovered> {
    let fs = options.fs.clone();
    // A new data directory's own entry is synced too: files synced in it are durable only then.
    create_dir_all_durably(fs.as_ref(), dir, options.durability != Durability::None).map_err(|e| Error::io(dir, e))?;
    let lock = DirectoryLock::acquire(dir)?;
    let mut report = RecoveryReport::default();
    let quarantine = Quarantine::new(dir, options.durability != Durability::None);

    let store_options = SegmentStoreOptions {
        segment_bytes_max: options.segment_bytes_max,
        segment_blocks_max: options.segment_blocks_max,
        sync: options.durability != Durability::None,
        ..SegmentStoreOptions::default()
    };
    // The segment store opens while the catalog is decoded: neither needs the other until both
    // are open.
    let (catalog_opened, store_opened) =
        Catalog::open_keeping_cuts(fs.as_ref(), &catalog_path(dir), options.durability == Durability::Fsync, Some(&quarantine), || {
            given_store.is_none().then(|| SegmentStore::open(fs.clone(), &segment_dir(dir), store_options))
        });
    let (catalog, catalog_recovery) = catalog_opened?;
    if let Some((offset, what)) = catalog_recovery.truncated_at {
        report.problems.push((catalog_path(dir), offset, what));
    }
    report.series = catalog.len();

    let store: Arc<dyn BlockStore> = match (given_store, store_opened) {
        (Some(store), _) => {
            report.segments = store.stats().segments;
            store
        }
        (None, Some(opened)) => {
            let (store, store_recovery) = opened?;
            report.segments = store_recovery.segments;
            report.problems.extend(store_recovery.problems);
            for (path, offset, what) in store_recovery.unreadable {
                // The rest serves; the damaged file goes where the operator can look at it.
                let outcome = match quarantine.set_aside(fs.as_ref(), &path) {
                    Ok(target) => format!("segment set aside as {}", target.display()),
                    Err(e) => format!("segment left out where it is; setting it aside failed: {e}"),
                };
                report.problems.push((path, offset, format!("{what}; {outcome}")));
            }
            Arc::new(store)
        }
        (None, None) => unreachable!("BUG: the segment store opens when none is given"),
    };
    let wal_checkpoint = store.wal_checkpoint();
    for (id, kind) in store.series_kinds_above(SeriesId(catalog.len() as u32)) {
        adopt_lost_series(&catalog, &catalog_path(dir), id, kind, &mut report)?;
    }

    let active = Memtable::new(options.memtable_shards);
    let wal_dir = wal_dir(dir);
    let mut marks = Vec::new();
    let wal = if options.durability == Durability::None {
        None
    } else {
        remove_covered_wal_files(fs.as_ref(), &wal_dir, wal_checkpoint)?;
        let wal_options = WalOptions {
            durability: options.durability,
            file_bytes_max: options.wal_file_bytes_max,
            quarantine: Some(quarantine.clone()),
            ..WalOptions::default()
        };
        let catalog_file = catalog_path(dir);
        let mut replay = |record: &[u8]| -> Result<()> {
            let (batch, record_marks) = WriteBatch::decode_with_marks(record)
                .map_err(|what| Error::corruption(&wal_dir, 0, format!("undecodable WAL batch: {what}")))?;
            report.marks_replayed += record_marks.len() as u64;
            marks.extend(record_marks);
            for entry in batch.entries() {
                adopt_lost_series(&catalog, &catalog_file, entry.series, entry.values.kind(), &mut report)?;
                match catalog.kind(entry.series) {
                    Some(kind) if kind == entry.values.kind() => active.insert(entry),
                    _ => {
                        tracing::error!(
                            series = entry.series.0,
                            "WAL names a series the catalog lacks, or points of another kind; skipped"
                        );
                        continue;
                    }
                }
                report.points_replayed += entry.timestamps.len() as u64;
            }
            report.wal_records_replayed += 1;
            Ok(())
        };
        let (wal, wal_recovery) = Wal::open(fs.clone(), &wal_dir, wal_options, &mut replay)?;
        report.problems.extend(wal_recovery.truncated.iter().cloned());
        Some(wal)
    };
    Ok(Recovered { lock, catalog, store, wal_checkpoint, wal, wal_dir, memtable: active, marks, report })
}

/// Measurement under which series whose catalog record was lost to damage are re-registered.
pub const LOST_SERIES_MEASUREMENT: &str = "sensordb_lost_series";

/// Most series ids re-registered as lost at once. An id further beyond the catalog's end is
/// taken for damage in whatever names it, not for lost catalog records: re-registering it would
/// make start-up create (and under `fsync` sync) millions of placeholder records.
pub const LOST_SERIES_MAX: usize = 65_536;

/// When stored data names series `id` but the catalog (cut after damage) ends before it,
/// registers placeholder series `sensordb_lost_series,id=<n> value` up to `id`, so the data stays
/// readable and the id is never handed to a new, unrelated series. Returns false (registering
/// nothing) when `id` lies more than [`LOST_SERIES_MAX`] beyond the catalog's end.
fn adopt_lost_series(catalog: &Catalog, catalog_file: &Path, id: SeriesId, kind: ValueKind, report: &mut RecoveryReport) -> Result<bool> {
    let known = catalog.len();
    let wanted = id.0 as usize;
    if wanted <= known {
        return Ok(true);
    }
    if wanted - known > LOST_SERIES_MAX {
        report.problems.push((
            catalog_file.to_path_buf(),
            0,
            format!("data names series id {wanted}, far beyond the catalog's last id {known}: taken for damage, not adopted"),
        ));
        return Ok(false);
    }
    for next in known + 1..=wanted {
        let key = SeriesKey::new(LOST_SERIES_MEASUREMENT, [("id", next.to_string())], "value")?;
        // Ids below `id` with no data of their own take the same kind; nothing reads them.
        catalog.get_or_create(&key, kind)?;
    }
    report.problems.push((
        catalog_file.to_path_buf(),
        0,
        format!(
            "series ids {}..={wanted} had data but no catalog record; registered as {LOST_SERIES_MEASUREMENT},id=<id> value",
            known + 1
        ),
    ));
    Ok(true)
}

/// Deletes WAL files whose records are all in segments already.
fn remove_covered_wal_files(fs: &dyn FileSystem, dir: &Path, checkpoint: u64) -> Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    let mut removed = false;
    for path in fs.list(dir).map_err(|e| Error::io(dir, e))? {
        if parse_numbered_file(&path, WAL_EXTENSION).is_some_and(|id| id < checkpoint) {
            fs.remove(&path).map_err(|e| Error::io(&path, e))?;
            removed = true;
        }
    }
    if removed {
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

/// An exclusive advisory lock on the data directory, so two engines never share it.
pub(super) struct DirectoryLock {
    _file: std::fs::File,
}

impl DirectoryLock {
    fn acquire(dir: &Path) -> Result<DirectoryLock> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: flock on a valid descriptor owned by `file` for the duration of the call.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            return Err(Error::io(&path, std::io::Error::other("data directory is in use by another sensordb process")));
        }
        Ok(DirectoryLock { _file: file })
    }
}
