//! Time windows of `GROUP BY time(interval[, offset])`: which bucket a timestamp falls in and the
//! buckets a query range spans, aligned as InfluxDB aligns them (to the Unix epoch plus the
//! offset, so `time(1h)` buckets start on the hour whatever the query's start).

/// The bucketing of one query. Times are nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Bucket length in nanoseconds, > 0.
    pub interval: i64,
    /// Shift of the bucket grid, in `[0, interval)` after normalising.
    pub offset: i64,
}

impl Windows {
    /// `interval` must be positive; `offset` may be any value and is taken modulo the interval
    /// (InfluxDB allows `time(1h, -15m)`, which is `time(1h, 45m)`).
    pub fn new(interval: i64, offset: i64) -> Windows {
        assert!(interval > 0, "window interval must be positive, got {interval}");
        Windows { interval, offset: offset.rem_euclid(interval) }
    }

    /// Start of the bucket holding `t`. Saturates at `i64::MIN` near the start of time.
    pub fn start_of(&self, t: i64) -> i64 {
        let shifted = t.saturating_sub(self.offset);
        let into = shifted.rem_euclid(self.interval);
        shifted.saturating_sub(into).saturating_add(self.offset)
    }

    /// The starts of the buckets that meet `[from, to]` (both inclusive), at most `limit` of
    /// them: `None` when there are more (the caller reports the query as too wide instead of
    /// allocating without bound).
    pub fn starts(&self, from: i64, to: i64, limit: usize) -> Option<Vec<i64>> {
        if from > to {
            return Some(Vec::new());
        }
        let first = self.start_of(from);
        let count = (to.saturating_sub(first) / self.interval).saturating_add(1);
        if count as u64 > limit as u64 {
            return None;
        }
        Some((0..count).map(|i| first.saturating_add(i * self.interval)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn buckets_align_to_the_epoch_plus_the_offset() {
        let hour = Windows::new(3600 * S, 0);
        assert_eq!(hour.start_of(3600 * S + 5), 3600 * S);
        assert_eq!(hour.start_of(-1), -3600 * S);
        let shifted = Windows::new(3600 * S, 15 * 60 * S);
        assert_eq!(shifted.start_of(3600 * S), 15 * 60 * S);
        assert_eq!(shifted.start_of(3600 * S + 15 * 60 * S), 3600 * S + 15 * 60 * S);
        // A negative offset is the same grid as its positive complement.
        assert_eq!(Windows::new(3600 * S, -15 * 60 * S), Windows::new(3600 * S, 45 * 60 * S));
    }

    #[test]
    fn starts_cover_the_range_and_refuse_too_many() {
        let w = Windows::new(10 * S, 0);
        assert_eq!(w.starts(5 * S, 25 * S, 100), Some(vec![0, 10 * S, 20 * S]));
        assert_eq!(w.starts(10 * S, 19 * S, 100), Some(vec![10 * S]));
        assert_eq!(w.starts(0, 1_000 * S, 10), None);
        assert_eq!(w.starts(5, 4, 10), Some(vec![]));
    }

    proptest! {
        #[test]
        fn every_time_falls_in_its_bucket(t in -(1i64 << 62)..(1i64 << 62), interval in 1i64..(1 << 40), offset in -(1i64 << 40)..(1 << 40)) {
            let w = Windows::new(interval, offset);
            let start = w.start_of(t);
            prop_assert!(start <= t && t - start < interval);
            prop_assert_eq!((start - w.offset).rem_euclid(interval), 0);
        }
    }
}
