//! Failing without spinning: the exponential [`Backoff`] of a background task that keeps failing
//! (a flush or compaction on a full disk), and the [`LogLimiter`] that keeps a failure repeated
//! thousands of times a minute from filling the log.
//!
//! Both came from a full disk: flushes, compactions and paused writers retried as fast as they
//! were woken, and in 45 s logged 79,868 "compaction failed" and 51,691 "write paused" lines
//! while compaction burnt 15,000 segment ids (issue 13).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When a task that failed may try again: `initial` after the first failure, doubling with
/// each further one up to `max`; a success starts again from nothing.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
    retry_at: Option<Instant>,
}

/// The backoff of the engine's background work: 100 ms doubling to 5 s.
pub const BACKGROUND_RETRY_FIRST: Duration = Duration::from_millis(100);
/// See [`BACKGROUND_RETRY_FIRST`].
pub const BACKGROUND_RETRY_MAX: Duration = Duration::from_secs(5);

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max: max.max(initial), failures: 0, retry_at: None }
    }

    /// [`BACKGROUND_RETRY_FIRST`] doubling to [`BACKGROUND_RETRY_MAX`].
    pub fn background() -> Backoff {
        Backoff::new(BACKGROUND_RETRY_FIRST, BACKGROUND_RETRY_MAX)
    }

    /// Records a failure; returns the pause before the next attempt.
    pub fn failed(&mut self) -> Duration {
        let doublings = self.failures.min(30);
        self.failures = self.failures.saturating_add(1);
        let delay = self.initial.saturating_mul(1u32 << doublings).min(self.max);
        self.retry_at = Some(Instant::now() + delay);
        delay
    }

    /// Records a success: the next failure waits `initial` again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.retry_at = None;
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When the next attempt is due, while failing (`None` after a success).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

/// One log line per kind of event per interval: the first occurrence is logged at once, later
/// ones within the interval are counted, and the next line logged says how many were left out.
/// `const`, so a call site can keep one in a `static`.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    /// (kind, when last logged, occurrences left out since).
    kinds: Mutex<Vec<(&'static str, Instant, u64)>>,
}

/// The interval of the engine's rate-limited log lines.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

impl LogLimiter {
    pub const fn new(interval: Duration) -> LogLimiter {
        LogLimiter { interval, kinds: Mutex::new(Vec::new()) }
    }

    /// `Some(left out since the last line)` when a line of `kind` may be logged now; `None`
    /// (and counted) when one was logged less than the interval ago.
    pub fn allow(&self, kind: &'static str) -> Option<u64> {
        let mut kinds = self.kinds.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        match kinds.iter_mut().find(|(k, _, _)| *k == kind) {
            Some((_, logged_at, left_out)) => {
                if now.duration_since(*logged_at) < self.interval {
                    *left_out += 1;
                    return None;
                }
                let suppressed = *left_out;
                *logged_at = now;
                *left_out = 0;
                Some(suppressed)
            }
            None => {
                kinds.push((kind, now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_a_success_resets_it() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        assert_eq!(backoff.retry_at(), None);
        let delays: Vec<u128> = (0..5).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(backoff.failures(), 5);
        assert!(backoff.retry_at().is_some_and(|at| at > Instant::now()));
        backoff.succeeded();
        assert_eq!(backoff.retry_at(), None);
        assert_eq!(backoff.failed(), Duration::from_millis(100));
    }

    #[test]
    fn a_limited_log_lets_one_line_per_kind_through_per_interval_and_counts_the_rest() {
        let limiter = LogLimiter::new(Duration::from_millis(200));
        assert_eq!(limiter.allow("flush"), Some(0));
        assert_eq!(limiter.allow("compaction"), Some(0), "kinds are limited separately");
        let allowed = (0..1000).filter(|_| limiter.allow("flush").is_some()).count();
        assert_eq!(allowed, 0, "within the interval every line is left out");
        std::thread::sleep(Duration::from_millis(220));
        assert_eq!(limiter.allow("flush"), Some(1000), "the next line says how many were left out");
        assert_eq!(limiter.allow("flush"), None);
    }
}
