//! Time windows of `GROUP BY time(interval[, offset])`: which bucket a timestamp falls in and the
//! buckets a query range spans, aligned as InfluxDB aligns them (to the Unix epoch plus the
//! offset, so `time(1h)` buckets start on the hour whatever the query's start). With `tz('zone')`
//! the grid is laid in the zone's local time, as InfluxDB 1.8's `IteratorOptions.Window` lays it:
//! `time(1d)` buckets start at local midnight, and a day across a daylight-saving change is 23 or
//! 25 hours long (an offset change is applied only when it is shorter than the interval). Where
//! that grid would leave a gap (a change of less than the interval inside a window, not at its
//! edge: Lord Howe's half hour under `time(1h)`), the window ends where the next one starts, so
//! windows always tile and every time lies in its own.

use jiff::tz::TimeZone;

/// The bucketing of one query. Times are nanoseconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Bucket length in nanoseconds, > 0.
    pub interval: i64,
    /// Shift of the bucket grid, in `[0, interval)` after normalising.
    pub offset: i64,
    /// `tz()`: the zone whose local time the grid follows; `None` is UTC.
    pub zone: Option<TimeZone>,
}

impl Windows {
    /// `interval` must be positive; `offset` may be any value and is taken modulo the interval
    /// (InfluxDB allows `time(1h, -15m)`, which is `time(1h, 45m)`).
    pub fn new(interval: i64, offset: i64) -> Windows {
        assert!(interval > 0, "window interval must be positive, got {interval}");
        Windows { interval, offset: offset.rem_euclid(interval), zone: None }
    }

    /// The same grid in the local time of `zone`.
    pub fn in_zone(self, zone: Option<TimeZone>) -> Windows {
        Windows { zone, ..self }
    }

    /// The zone's offset from UTC at `t`, in nanoseconds (0 without a zone).
    fn zone_offset(&self, t: i64) -> i64 {
        let Some(zone) = &self.zone else { return 0 };
        let instant = jiff::Timestamp::from_nanosecond(i128::from(t)).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        i64::from(zone.to_offset(instant).seconds()) * 1_000_000_000
    }

    /// The bucket `[start, end)` holding `t`. Saturates near the ends of time.
    pub fn window(&self, t: i64) -> (i64, i64) {
        let t = t.saturating_sub(self.offset);
        let (start, into, zone) = self.start_shifted(t);
        let unadjusted = t.saturating_add(self.interval - into);
        let mut end = unadjusted;
        let end_change = zone - self.zone_offset(end);
        if end_change != 0 && end_change.abs() < self.interval {
            end = end.saturating_add(end_change);
            // InfluxDB moves the end by the change wherever the change falls inside the
            // window; where it does not fall on the window's edge (Lord Howe's half hour under
            // `time(1h)`: 01:00-02:00 local ends where 02:30 begins) that end is no window's
            // start, and the next times would lie in no window. The end then stays where the
            // zone's own next window starts.
            if end <= t || self.start_shifted(end).0 != end {
                end = unadjusted;
            }
        }
        (start.saturating_add(self.offset), end.saturating_add(self.offset))
    }

    /// Of a time `t` already shifted by the offset: its bucket's start (shifted too), how far
    /// `t` lies into the bucket on the zone's clock, and the zone's offset at `t`.
    fn start_shifted(&self, t: i64) -> (i64, i64, i64) {
        let zone = self.zone_offset(t);
        let into = t.saturating_add(zone).rem_euclid(self.interval);
        let mut start = t.saturating_sub(into);
        // The start may lie before an offset change that `t` lies after.
        let start_change = zone - self.zone_offset(start);
        if start_change != 0 && start_change.abs() < self.interval && start.saturating_add(start_change) <= t {
            start = start.saturating_add(start_change);
        }
        (start, into, zone)
    }

    /// Start of the bucket holding `t`.
    pub fn start_of(&self, t: i64) -> i64 {
        self.window(t).0
    }

    /// The edges of the buckets that meet `[from, to]` (both inclusive): bucket `i` is
    /// `[edges[i], edges[i + 1])`. At most `limit` buckets: `None` when there are more (the
    /// caller reports the query as too wide instead of allocating without bound).
    pub fn edges(&self, from: i64, to: i64, limit: usize) -> Option<Vec<i64>> {
        if from > to {
            return Some(Vec::new());
        }
        let (first, mut end) = self.window(from);
        if self.zone.is_none() {
            // A fixed grid: its size is known before it is built.
            let count = (to.saturating_sub(first) / self.interval).saturating_add(1);
            if count as u64 > limit as u64 {
                return None;
            }
            return Some((0..=count).map(|i| first.saturating_add(i * self.interval)).collect());
        }
        let mut edges = vec![first];
        // Bounded by `limit`; each step moves forward (a window's end lies after its start).
        loop {
            if edges.len() > limit {
                return None;
            }
            edges.push(end);
            if end > to || end == i64::MAX {
                return Some(edges);
            }
            let next = self.window(end);
            debug_assert!(next.0 == end, "BUG: windows do not tile: {next:?} after {end}");
            end = next.1.max(end.saturating_add(1));
        }
    }

    /// The starts of the buckets that meet `[from, to]`; see [`Windows::edges`].
    pub fn starts(&self, from: i64, to: i64, limit: usize) -> Option<Vec<i64>> {
        let mut edges = self.edges(from, to, limit)?;
        edges.pop();
        Some(edges)
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

    fn zone(name: &str) -> Option<TimeZone> {
        Some(TimeZone::get(name).expect("zone in jiff's database"))
    }

    /// 2016-03-26T23:00:00Z, midnight of 27 March in Berlin (+01:00).
    const BERLIN_MARCH_27: i64 = 1_459_033_200 * S;

    #[test]
    fn days_in_a_zone_start_at_local_midnight_and_stretch_over_daylight_saving() {
        let days = Windows::new(86_400 * S, 0).in_zone(zone("Europe/Berlin"));
        // Midnight in Berlin, not in UTC.
        assert_eq!(days.window(BERLIN_MARCH_27 + 5 * S), (BERLIN_MARCH_27, BERLIN_MARCH_27 + 23 * 3600 * S));
        // 27 March has 23 hours (clocks go forward at 02:00); the next day starts at 22:00 UTC.
        let edges = days.edges(BERLIN_MARCH_27 - 3600 * S, BERLIN_MARCH_27 + 30 * 3600 * S, 10).expect("few");
        assert_eq!(
            edges,
            vec![BERLIN_MARCH_27 - 24 * 3600 * S, BERLIN_MARCH_27, BERLIN_MARCH_27 + 23 * 3600 * S, BERLIN_MARCH_27 + 47 * 3600 * S]
        );
        // 30 October has 25 hours: 2016-10-29T22:00:00Z to 2016-10-30T23:00:00Z.
        let october_30 = 1_477_778_400 * S;
        assert_eq!(days.window(october_30 + 24 * 3600 * S), (october_30, october_30 + 25 * 3600 * S));
        // Hours keep the UTC grid in a zone a whole number of hours away.
        let hours = Windows::new(3600 * S, 0).in_zone(zone("Europe/Berlin"));
        assert_eq!(hours.window(BERLIN_MARCH_27 + 5 * S), (BERLIN_MARCH_27, BERLIN_MARCH_27 + 3600 * S));
        // Half an hour off in Kolkata (+05:30): hours start at :30 UTC.
        let kolkata = Windows::new(3600 * S, 0).in_zone(zone("Asia/Kolkata"));
        assert_eq!(kolkata.start_of(3600 * S), 1800 * S);
    }

    /// Lord Howe moves its clocks by half an hour (2016-10-02 02:00 local, +10:30, becomes
    /// 02:30, +11:00, at 15:30 UTC): under `time(1h)` the hour 01:00-02:00 local ends where
    /// 02:30 begins, and the next window runs to 03:00 local. InfluxDB's rule alone ends the
    /// first at 15:00 UTC, where no window starts.
    #[test]
    fn a_half_hour_change_inside_an_hour_leaves_no_gap() {
        let hours = Windows::new(3600 * S, 0).in_zone(zone("Australia/Lord_Howe"));
        let (one_local, change) = (1_475_332_200 * S, 1_475_335_800 * S);
        assert_eq!(change - one_local, 3600 * S);
        assert_eq!(hours.window(one_local), (one_local, change));
        assert_eq!(hours.window(change - S), (one_local, change));
        assert_eq!(hours.window(change), (change, change + 1800 * S));
    }

    proptest! {
        #[test]
        fn zoned_windows_hold_their_time_and_tile(
            t in 0i64..(2_000_000_000 * S),
            interval in prop_oneof![Just(60 * S), Just(900 * S), Just(3600 * S), Just(86_400 * S), Just(7 * 86_400 * S)],
            name in prop_oneof![Just("Europe/Berlin"), Just("America/New_York"), Just("Asia/Kolkata"), Just("Australia/Lord_Howe")],
        ) {
            let w = Windows::new(interval, 0).in_zone(zone(name));
            let (start, end) = w.window(t);
            prop_assert!(start <= t && t < end, "{} not in [{}, {})", t, start, end);
            prop_assert_eq!(w.window(end).0, end, "the next window starts where this one ends");
            prop_assert_eq!(w.window(start), (start, end));
        }
    }
}
