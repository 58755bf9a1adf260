//! Admission of writers as the disk fills: the one implementation of the throttle every writer
//! goes through, [`Engine::write`] itself (with [`EngineOptions::throttle_writes`]) and the
//! server's HTTP and native loops alike.
//!
//! A writer asks [`Engine::admit`] before its write, with the instant it began to wait: at `U_h`
//! the answer is [`Admission::WaitForSpace`] (wait with [`Engine::wait_for_space`], then ask
//! again) until [`ReclaimOptions::full_wait_max`] has passed, and then `NoSpace`. After the
//! write, [`Engine::acknowledgement_delay`] says how long to hold the acknowledgement between
//! `U_l` and `U_h`. How a writer waits is its own business: the engine blocks its thread, the
//! server waits asynchronously; what it waits for is decided here. The formula itself lives in
//! `reclaim::throttle`.
//!
//! [`EngineOptions::throttle_writes`]: super::EngineOptions::throttle_writes
//! [`ReclaimOptions::full_wait_max`]: crate::ReclaimOptions::full_wait_max

use super::{Engine, Inner};
use crate::error::{Error, Result};
use crate::reclaim::throttle::Admission;
use std::time::{Duration, Instant};

/// Usage older than this is measured again before a writer is admitted (a statvfs and a
/// directory listing).
const ADMISSION_MEASURE_AGE: Duration = Duration::from_millis(10);

/// The longest one wait for space lasts before the writer asks again: a reclaim cycle usually
/// ends sooner.
const SPACE_WAIT_SLICE: Duration = Duration::from_millis(200);

/// "write refused: disk full", at most every 10 s.
static REFUSED_LOG: crate::retry::LogLimiter = crate::retry::LogLimiter::new(crate::retry::LOG_INTERVAL);

impl Inner {
    /// Admission at usage measured at most [`ADMISSION_MEASURE_AGE`] ago, so writers faster
    /// than reclaim cycles cannot run far past a threshold between two cycles.
    pub(super) fn admission(&self) -> Admission {
        if self.maintenance.reclaimer.measurement_age() > ADMISSION_MEASURE_AGE {
            self.maintenance.reclaimer.measure(self.options.fs.as_ref(), &self.data_dir, self.own_bytes());
        }
        self.maintenance.reclaimer.admission()
    }

    /// See [`Engine::admit`].
    pub(super) fn admit(&self, waiting_since: Instant) -> Result<Admission> {
        let admission = self.admission();
        if admission == Admission::WaitForSpace {
            if waiting_since.elapsed() >= self.options.reclaim.full_wait_max {
                return Err(self.refuse_for_space());
            }
            self.health.check_writable()?;
        }
        Ok(admission)
    }

    /// The error of a write refused after waiting [`ReclaimOptions::full_wait_max`] for space:
    /// counted in the reclaim statistics (`/metrics`) and logged (once per 10 s, with how many
    /// were left out).
    ///
    /// [`ReclaimOptions::full_wait_max`]: crate::ReclaimOptions::full_wait_max
    pub(super) fn refuse_for_space(&self) -> Error {
        let reclaimer = &self.maintenance.reclaimer;
        reclaimer.count_refused_write();
        if let Some(suppressed) = REFUSED_LOG.allow("write refused") {
            let usage = reclaimer.stats().usage;
            tracing::warn!(
                file_system_usage = usage.file_system_share,
                own_usage = usage.own_share,
                own_bytes = usage.own_bytes,
                waited_ms = self.options.reclaim.full_wait_max.as_millis() as u64,
                suppressed,
                "write refused: disk full"
            );
        }
        Error::NoSpace { path: self.data_dir.clone() }
    }

    /// See [`Engine::wait_for_space`].
    pub(super) fn wait_for_space(&self) {
        self.request_reclaim();
        self.maintenance.reclaimer.wait_for_cycle(SPACE_WAIT_SLICE);
    }

    /// See [`Engine::acknowledgement_delay`].
    pub(super) fn acknowledgement_delay(&self) -> Option<Duration> {
        match self.admission() {
            Admission::After(delay) => Some(delay),
            Admission::Now | Admission::WaitForSpace => None,
        }
    }

    /// sensordb's bytes on disk: segments, catalog, WAL.
    pub(super) fn own_bytes(&self) -> u64 {
        let wal_bytes: u64 = std::fs::read_dir(&self.wal_dir)
            .map(|entries| entries.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
            .unwrap_or(0);
        self.store.stats().bytes + self.catalog.file_bytes() + wal_bytes
    }
}

impl Engine {
    /// What a writer that began waiting at `waiting_since` must do before its write:
    /// [`Admission::Now`] or [`Admission::After`] — write (the delay is for the acknowledgement,
    /// see [`Engine::acknowledgement_delay`]); [`Admission::WaitForSpace`] — usage is at `U_h`:
    /// wait ([`Engine::wait_for_space`]) and ask again with the same `waiting_since`. Fails with
    /// `NoSpace` once the writer has waited [`ReclaimOptions::full_wait_max`], or with the
    /// engine's error when it can no longer write.
    ///
    /// [`ReclaimOptions::full_wait_max`]: crate::ReclaimOptions::full_wait_max
    pub fn admit(&self, waiting_since: Instant) -> Result<Admission> {
        self.inner.admit(waiting_since)
    }

    /// Blocks until the next reclaim cycle ends (asking for one now), at most 200 ms: the wait of a writer that [`Engine::admit`] told to wait for space.
    pub fn wait_for_space(&self) {
        self.inner.wait_for_space();
    }

    /// How long a writer holds its acknowledgement after a write, while usage is between the
    /// throttle thresholds: `T = (U − U_l)/(U_h − U_l)` seconds; `None` outside them.
    pub fn acknowledgement_delay(&self) -> Option<Duration> {
        self.inner.acknowledgement_delay()
    }

    /// The throttle's reading at the current disk usage (measured again when stale), without
    /// deciding anything; writers use [`Engine::admit`] and [`Engine::acknowledgement_delay`].
    pub fn admission(&self) -> Admission {
        self.inner.admission()
    }
}
