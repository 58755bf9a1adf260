//! Administration: databases and their retention policies, series deletion, reclaim controls
//! and statistics. (Waiting for reclaim as a writer is the `admission` module's.)

use super::{Engine, EngineStats};
use crate::error::{Error, Result};
use crate::model::SeriesId;
use crate::reclaim::policy::{DatabasePolicy, Databases};
use crate::reclaim::{ReclaimOptions, ReclaimStats};
use std::sync::atomic::Ordering;

impl Engine {
    /// Runs one reclaim cycle now (the background thread runs them every
    /// [`ReclaimOptions::interval`]): removes dead segments, merges as the Fisherman chooses,
    /// evicts when full. See the `reclaim` module.
    pub fn reclaim(&self) -> Result<()> {
        self.inner.health.check_writable()?;
        self.inner.reclaim_once()
    }

    pub fn reclaim_options(&self) -> &ReclaimOptions {
        &self.inner.options.reclaim
    }

    pub fn reclaim_stats(&self) -> ReclaimStats {
        self.inner.maintenance.reclaimer.stats()
    }

    /// Databases and their retention policies.
    pub fn databases(&self) -> Databases {
        self.inner.maintenance.reclaimer.databases()
    }

    /// Creates `name` (durably) unless it exists; its policy starts empty (keep until full).
    pub fn create_database(&self, name: &str) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidSeriesKey(crate::model::SeriesKeyError::EmptyDatabase));
        }
        if self.inner.maintenance.reclaimer.databases().policies.contains_key(name) {
            return Ok(());
        }
        self.inner.maintenance.reclaimer.update_databases(self.inner.options.fs.as_ref(), |d| {
            d.policies.entry(name.to_string()).or_default();
        })
    }

    /// Sets the retention policy of `name`, creating the database if needed; the next reclaim
    /// cycle applies it.
    pub fn set_database_policy(&self, name: &str, policy: DatabasePolicy) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidSeriesKey(crate::model::SeriesKeyError::EmptyDatabase));
        }
        self.inner.maintenance.reclaimer.update_databases(self.inner.options.fs.as_ref(), |d| {
            d.policies.insert(name.to_string(), policy);
        })?;
        self.inner.request_reclaim();
        Ok(())
    }

    /// Deletes the series of `database` and `measurement` carrying every tag of `tag_filter`
    /// (durably); their data is dead from now on and their keys free for new series. Returns
    /// how many series were deleted.
    pub fn delete_series(&self, database: &str, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Result<usize> {
        self.inner.health.check_writable()?;
        let ids: Vec<SeriesId> = self.inner.catalog.select(Some(database), measurement, tag_filter).iter().map(|e| e.id).collect();
        let deleted = self.inner.catalog.delete_many(&ids)?;
        self.inner.ends.forget(ids.iter().copied());
        if deleted > 0 {
            self.inner.request_reclaim();
        }
        Ok(deleted)
    }

    /// The files in the quarantine (`<data>/quarantine`) with their sizes: damaged files and
    /// cut-off bytes that start-up set aside, this time or before, until the operator removes
    /// them (see [`crate::quarantine`]).
    pub fn quarantined_files(&self) -> Result<Vec<(std::path::PathBuf, u64)>> {
        crate::quarantine::quarantined_files(self.inner.options.fs.as_ref(), &self.inner.data_dir)
    }

    pub fn stats(&self) -> EngineStats {
        let inner = &self.inner;
        let memtables = inner.memtables.read();
        let frozen_points = memtables.frozen.as_ref().map_or(0, |m| m.points());
        let frozen_bytes = memtables.frozen.as_ref().map_or(0, |m| m.bytes());
        EngineStats {
            series: inner.catalog.len(),
            memtable_points: memtables.active.points() + frozen_points,
            memtable_bytes: memtables.active.bytes() + frozen_bytes,
            store: inner.store.stats(),
            catalog_bytes: inner.catalog.file_bytes(),
            flushes: inner.flush.count.load(Ordering::Relaxed),
            flush_failures: inner.flush.failures.load(Ordering::Relaxed),
            compaction_failures: inner.maintenance.compaction_failures.load(Ordering::Relaxed),
        }
    }
}
