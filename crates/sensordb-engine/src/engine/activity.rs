//! When writes last came, and how many points came since the engine last sealed the open
//! segment: the flusher seals a segment whose load has ended (`EngineOptions::segment_seal_idle`)
//! so background compaction merges its short blocks seconds after the load rather than when the
//! segment reaches its age. Two relaxed atomics a write batch; no lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Points that must have come since the last seal for a pause to seal the open segment: a
/// fleet writing a little in bursts (a collector's interval apart) would otherwise seal a small
/// segment every burst, each one more file for compaction to merge.
pub const SEAL_IDLE_POINTS_MIN: u64 = 1 << 20;

/// Writes this recent keep background compaction to its I/O pace
/// (`ReclaimOptions::merge_bytes_per_second`); after a longer pause it runs unpaced, as no
/// writer waits on the disk (a fleet's load left gigabytes of one-point blocks that the pace
/// alone would merge in an hour).
pub const WRITES_RECENT: Duration = Duration::from_secs(2);

pub(super) struct WriteActivity {
    since: Instant,
    /// Milliseconds from `since` to the last write.
    last_write_ms: AtomicU64,
    points_since_seal: AtomicU64,
}

impl WriteActivity {
    pub(super) fn new() -> WriteActivity {
        WriteActivity { since: Instant::now(), last_write_ms: AtomicU64::new(0), points_since_seal: AtomicU64::new(0) }
    }

    /// A write of `points` points has been taken.
    pub(super) fn wrote(&self, points: usize) {
        self.points_since_seal.fetch_add(points as u64, Ordering::Relaxed);
        self.last_write_ms.store(self.since.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Whether at least [`SEAL_IDLE_POINTS_MIN`] points came since the last seal and none in
    /// the last `idle`.
    pub(super) fn load_ended(&self, idle: Duration) -> bool {
        let last = Duration::from_millis(self.last_write_ms.load(Ordering::Relaxed));
        self.points_since_seal.load(Ordering::Relaxed) >= SEAL_IDLE_POINTS_MIN && self.since.elapsed().saturating_sub(last) >= idle
    }

    /// Whether a write came in the last `window`.
    pub(super) fn written_within(&self, window: Duration) -> bool {
        let last_ms = self.last_write_ms.load(Ordering::Relaxed);
        // 0 is also a write in the first millisecond, which left points to seal.
        let written = last_ms > 0 || self.points_since_seal.load(Ordering::Relaxed) > 0;
        written && self.since.elapsed().saturating_sub(Duration::from_millis(last_ms)) < window
    }

    /// The engine sealed the open segment (or found none to seal).
    pub(super) fn sealed(&self) {
        self.points_since_seal.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_ends_after_enough_points_and_a_pause() {
        let activity = WriteActivity::new();
        assert!(!activity.load_ended(Duration::ZERO), "nothing written");
        activity.wrote(SEAL_IDLE_POINTS_MIN as usize - 1);
        assert!(!activity.load_ended(Duration::ZERO), "too few points");
        activity.wrote(1);
        assert!(activity.load_ended(Duration::ZERO));
        assert!(!activity.load_ended(Duration::from_secs(3600)), "written just now");
        activity.sealed();
        assert!(!activity.load_ended(Duration::ZERO), "counted again from the seal");
    }

    #[test]
    fn writes_are_recent_within_their_window() {
        let activity = WriteActivity::new();
        assert!(!activity.written_within(Duration::from_secs(3600)), "nothing written");
        activity.wrote(1);
        assert!(activity.written_within(Duration::from_secs(3600)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!activity.written_within(Duration::from_millis(10)), "the write is older than the window");
        assert!(activity.written_within(Duration::from_secs(3600)));
    }
}
