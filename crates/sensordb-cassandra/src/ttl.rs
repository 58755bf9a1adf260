//! Row lifetimes (issue 15 item 2): a block row is written `USING TTL` so that Cassandra
//! expires it when the engine would count its block dead, and TimeWindowCompactionStrategy
//! drops whole SSTables of expired rows without a single delete.
//!
//! The engine counts a block dead once its newest point is older than now − the series'
//! storage period (the `reclaim` module). Its row therefore *expires* at
//! `newest point + period + slack`, in whole seconds rounded up, and is sent with
//! `TTL = expiry − now` (at least 1 s: a block that is dead already still gets a row, which
//! goes at once). The slack covers clocks: Cassandra counts a TTL from its own clock, and a
//! node whose clock runs ahead would expire a row while the engine still reads it.
//!
//! A row gets no TTL (and is deleted as before when its segment goes) when the series has no
//! period, or when its expiry is out of Cassandra's reach: TTLs over 20 years are refused, and a
//! node in `storage_compatibility_mode: CASSANDRA_4` (5.0's default) refuses expiries after
//! 2038-01-19 (`expiration_date_overflow_policy` REJECT).
//!
//! The expiry (not the TTL) is what the store records per block in its group row: it is the
//! same whenever it is computed, so the store knows at any later time whether a row is gone or
//! about to go.

use std::time::Duration;

/// Cassandra's largest TTL: 20 years, in seconds.
pub(crate) const TTL_MAX_S: i64 = 630_720_000;

/// The latest expiry a Cassandra 5.0 node accepts in its default storage compatibility mode
/// (local deletion times are signed 32-bit seconds), a day short of it for clocks.
pub(crate) const EXPIRY_LIMIT_S: i64 = i32::MAX as i64 - 86_400;

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// When the row of a block whose newest point is `max_timestamp_ns` expires, in seconds since
/// the epoch, under `period` (`None`: never, the row gets no TTL).
pub(crate) fn row_expiry(max_timestamp_ns: i64, period: Option<Duration>, slack: Duration) -> Option<i64> {
    let period = i64::try_from(period?.as_nanos()).ok()?;
    let slack = i64::try_from(slack.as_nanos()).ok()?;
    let expiry_ns = max_timestamp_ns.checked_add(period)?.checked_add(slack)?;
    // Rounded up: the row must never go before the block is dead.
    let expiry = expiry_ns.div_euclid(NANOS_PER_SECOND) + i64::from(expiry_ns.rem_euclid(NANOS_PER_SECOND) != 0);
    (expiry <= EXPIRY_LIMIT_S).then_some(expiry)
}

/// The TTL to write a row expiring at `expiry` (seconds) with, at `now` (seconds); `None` when
/// Cassandra would refuse it (the row is then written without a TTL).
pub(crate) fn ttl_seconds(expiry: i64, now: i64) -> Option<i32> {
    let ttl = expiry.saturating_sub(now).max(1);
    if ttl > TTL_MAX_S {
        return None;
    }
    i32::try_from(ttl).ok()
}

/// Whether a row expiring at `expiry` is gone or goes within `horizon` of `now` (seconds):
/// such a row is left to expire, never deleted (a delete would only add a tombstone).
pub(crate) fn expires_within(expiry: Option<i64>, now: i64, horizon: Duration) -> bool {
    let horizon = i64::try_from(horizon.as_secs()).unwrap_or(i64::MAX);
    expiry.is_some_and(|expiry| expiry <= now.saturating_add(horizon))
}

/// Seconds since the epoch by the system clock.
pub(crate) fn now_seconds() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_secs()).unwrap_or(i64::MAX)
}

/// Expiries of a group's blocks as stored in its group row: 8 bytes little-endian per block,
/// 0 for a block without one; `None` when no block has one (the column stays unset).
pub(crate) fn encode_expiries(expiries: &[Option<i64>]) -> Option<Vec<u8>> {
    if expiries.iter().all(Option::is_none) {
        return None;
    }
    Some(expiries.iter().flat_map(|e| e.unwrap_or(0).to_le_bytes()).collect())
}

/// The inverse of [`encode_expiries`] for a group of `blocks` blocks; `None` if the bytes do
/// not fit.
pub(crate) fn decode_expiries(bytes: Option<&[u8]>, blocks: usize) -> Option<Vec<Option<i64>>> {
    let Some(bytes) = bytes else { return Some(vec![None; blocks]) };
    if bytes.len() != blocks * 8 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(8)
            .map(|chunk| {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                Some(i64::from_le_bytes(word)).filter(|&e| e != 0)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_row_expires_when_its_block_is_dead_rounded_up_to_the_second() {
        // Newest point at 1000.5 s, 30-day period, no slack: dead after 1000.5 s + 30 d.
        let newest = 1_000 * NANOS_PER_SECOND + NANOS_PER_SECOND / 2;
        assert_eq!(row_expiry(newest, Some(30 * DAY), Duration::ZERO), Some(1_001 + 30 * 86_400));
        assert_eq!(row_expiry(1_000 * NANOS_PER_SECOND, Some(Duration::from_secs(2)), Duration::ZERO), Some(1_002), "exact seconds stay");
        assert_eq!(row_expiry(1_000 * NANOS_PER_SECOND, Some(Duration::from_secs(2)), Duration::from_secs(60)), Some(1_062));
        assert_eq!(row_expiry(-NANOS_PER_SECOND / 2, Some(Duration::from_secs(1)), Duration::ZERO), Some(1), "before 1970 rounds up too");
        assert_eq!(row_expiry(1_000, None, Duration::ZERO), None, "no period: no TTL");
    }

    #[test]
    fn the_ttl_counts_from_now_and_is_never_zero() {
        let expiry = row_expiry(1_000 * NANOS_PER_SECOND, Some(Duration::from_secs(3)), Duration::ZERO).expect("expiry");
        assert_eq!(ttl_seconds(expiry, 1_000), Some(3));
        assert_eq!(ttl_seconds(expiry, 1_002), Some(1));
        // Dead already (a backfill older than the period): 1 s, since TTL 0 would mean "never".
        assert_eq!(ttl_seconds(expiry, 5_000), Some(1));
    }

    #[test]
    fn lifetimes_cassandra_would_refuse_get_no_ttl() {
        let now = 1_800_000_000; // 2027
        let ten_years = row_expiry(now * NANOS_PER_SECOND, Some(10 * 365 * DAY), Duration::ZERO).expect("before 2038");
        assert_eq!(ttl_seconds(ten_years, now), Some(10 * 365 * 86_400));
        assert_eq!(row_expiry(now * NANOS_PER_SECOND, Some(12 * 365 * DAY), Duration::ZERO), None, "after 2038");
        assert_eq!(ttl_seconds(now + TTL_MAX_S + 1, now), None, "over 20 years");
        assert_eq!(ttl_seconds(now + TTL_MAX_S, now), Some(TTL_MAX_S as i32));
        assert_eq!(row_expiry(i64::MAX - 5, Some(DAY), Duration::ZERO), None, "overflow");
        assert_eq!(row_expiry(0, Some(Duration::MAX), Duration::ZERO), None);
    }

    #[test]
    fn only_rows_gone_or_going_within_the_horizon_are_left_to_expire() {
        let hour = Duration::from_secs(3_600);
        assert!(expires_within(Some(100), 100, Duration::ZERO));
        assert!(expires_within(Some(3_700), 100, hour));
        assert!(!expires_within(Some(3_701), 100, hour));
        assert!(!expires_within(None, i64::MAX, hour), "a row without TTL never goes by itself");
    }

    #[test]
    fn expiries_round_trip_through_the_group_row() {
        assert_eq!(encode_expiries(&[None, None]), None);
        assert_eq!(decode_expiries(None, 2), Some(vec![None, None]));
        let expiries = vec![Some(5), None, Some(1_700_000_000)];
        let bytes = encode_expiries(&expiries).expect("some");
        assert_eq!(decode_expiries(Some(&bytes), 3), Some(expiries));
        assert_eq!(decode_expiries(Some(&bytes), 2), None, "a length that does not fit is damage");
    }
}
