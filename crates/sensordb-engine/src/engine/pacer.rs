//! Flush pacing: the background flush pauses between slices of encoding while writers are far
//! from waiting for it.

use std::time::{Duration, Instant};

/// Encoding a flush in one go takes a whole core for tens of milliseconds (~70 ms per 16 MiB
/// memtable of `sensordb bench tx`), and on a small machine every writer's latency then waits
/// for CPU behind it. The background flush therefore pauses for `FLUSH_PACE_PAUSE` after every
/// `FLUSH_PACE_SLICE` of encoding (a third of a core at most) while it has time: while the active
/// memtable is under half its flush threshold, so writers are far from waiting for this flush.
/// Once it is half full, or the engine closes, the flush runs at full speed. Explicit flushes
/// (`Engine::flush`, close) never pause. Pacing alone, at normal priority, did not keep slow
/// acknowledgements out of flush windows: the flush thread also runs at nice 19
/// (`background_priority`), and together they did (docs/BENCHMARKS.md, `bench tx`).
pub const FLUSH_PACE_SLICE: Duration = Duration::from_millis(2);
/// See [`FLUSH_PACE_SLICE`].
pub const FLUSH_PACE_PAUSE: Duration = Duration::from_millis(4);

/// Times the encoding between pauses.
pub(super) struct FlushPacer {
    enabled: bool,
    since_pause: Instant,
    /// Pauses taken so far, for the flush's log line.
    pub(super) pauses: u32,
}

impl FlushPacer {
    pub(super) fn new(enabled: bool) -> FlushPacer {
        FlushPacer { enabled, since_pause: Instant::now(), pauses: 0 }
    }

    /// Called between rows: pauses when a slice is used up and `has_time()` says so.
    pub(super) fn pace(&mut self, has_time: impl FnOnce() -> bool) {
        if !self.enabled || self.since_pause.elapsed() < FLUSH_PACE_SLICE {
            return;
        }
        if has_time() {
            std::thread::sleep(FLUSH_PACE_PAUSE);
            self.pauses += 1;
        } else {
            // Writers may soon wait for this flush: no more pauses.
            self.enabled = false;
        }
        self.since_pause = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flush_pacer_pauses_after_each_slice_only_while_there_is_time() {
        // Disabled (explicit flushes): never asks, never pauses.
        let mut pacer = FlushPacer::new(false);
        std::thread::sleep(FLUSH_PACE_SLICE);
        pacer.pace(|| panic!("a disabled pacer asks nothing"));
        assert_eq!(pacer.pauses, 0);

        let mut pacer = FlushPacer::new(true);
        // Within the slice: no pause, no question.
        pacer.since_pause = Instant::now();
        pacer.pace(|| panic!("asked within the slice"));
        // Slice used up, time left: a pause of FLUSH_PACE_PAUSE.
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        let started = Instant::now();
        pacer.pace(|| true);
        assert!(started.elapsed() >= FLUSH_PACE_PAUSE);
        assert_eq!(pacer.pauses, 1);
        // No time left (the active memtable is half full): no pause, and none after.
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        pacer.pace(|| false);
        assert_eq!(pacer.pauses, 1);
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        pacer.pace(|| panic!("once out of time, a flush runs to its end"));
        assert_eq!(pacer.pauses, 1);
    }
}
