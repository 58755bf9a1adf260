//! Time in queries: the literals of time conditions (`'2016-01-01T00:00:00Z'`, `1700000000000ms`,
//! `now() - 1h`), the range a WHERE clause selects, and timestamps rendered as InfluxDB renders
//! them (RFC 3339 with the fraction's trailing zeros cut, or integers in an epoch unit).
//!
//! Dates use `jiff` (a kept crate with its own time-zone database, which `tz()` needs too).

use crate::error::QueryError;
use sensordb_influxql::{BinaryOp, Expr};

/// An inclusive range of nanosecond timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    pub from: i64,
    pub to: i64,
}

impl TimeRange {
    pub const ALL: TimeRange = TimeRange { from: i64::MIN, to: i64::MAX };

    pub fn is_empty(&self) -> bool {
        self.from > self.to
    }

    pub fn intersect(self, other: TimeRange) -> TimeRange {
        TimeRange { from: self.from.max(other.from), to: self.to.min(other.to) }
    }

    pub fn has_lower_bound(&self) -> bool {
        self.from != i64::MIN
    }

    pub fn has_upper_bound(&self) -> bool {
        self.to != i64::MAX
    }
}

/// Parses a time string as InfluxDB accepts it in conditions: RFC 3339 with or without a
/// fraction and offset, `2006-01-02 15:04:05[.fraction]` (UTC) or a bare date.
pub fn parse_time_string(text: &str) -> Option<i64> {
    parse_time_string_in(text, None)
}

/// [`parse_time_string`], a time without an offset taken in `zone`'s local time (a statement's
/// `tz()`, as InfluxDB reads it) instead of UTC.
pub fn parse_time_string_in(text: &str, zone: Option<&jiff::tz::TimeZone>) -> Option<i64> {
    if let Some(nanos) = parse_rfc3339(text) {
        return Some(nanos);
    }
    let civil = text
        .parse::<jiff::civil::DateTime>()
        .ok()
        .or_else(|| text.parse::<jiff::civil::Date>().ok().map(|d| d.to_datetime(jiff::civil::Time::midnight())))?;
    let ts = civil.to_zoned(zone.cloned().unwrap_or(jiff::tz::TimeZone::UTC)).ok()?.timestamp();
    i64::try_from(ts.as_nanosecond()).ok()
}

/// An instant in RFC 3339 with its offset (`2016-01-01T00:00:00Z`, `...T01:00:00.5+01:00`) as
/// nanoseconds since the epoch; `None` for anything else, a time without an offset included,
/// or an instant beyond the i64 nanoseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let instant = text.parse::<jiff::Timestamp>().ok()?;
    i64::try_from(instant.as_nanosecond()).ok()
}

/// RFC 3339 in UTC with nanoseconds, trailing zeros of the fraction removed (Go's RFC3339Nano).
pub fn format_time(nanos: i64) -> String {
    let mut out = String::with_capacity(30);
    write_time(&mut out, nanos);
    out
}

/// [`format_time`] appended to `out`, without allocating: a result of 10,000 series writes
/// 10,000 times, and calendar arithmetic on days is cheaper than a general formatter. Every
/// i64 of nanoseconds lies in the years 1677-2262, so the year always has four digits.
pub fn write_time(out: &mut String, nanos: i64) {
    let seconds = nanos.div_euclid(1_000_000_000);
    let fraction = nanos.rem_euclid(1_000_000_000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let of_day = seconds.rem_euclid(86_400);
    debug_assert!((1000..=9999).contains(&year), "year {year} of {nanos} ns");
    let mut text = *b"0000-00-00T00:00:00.000000000Z";
    put_digits(&mut text[0..4], year as u64);
    put_digits(&mut text[5..7], u64::from(month));
    put_digits(&mut text[8..10], u64::from(day));
    put_digits(&mut text[11..13], (of_day / 3600) as u64);
    put_digits(&mut text[14..16], (of_day / 60 % 60) as u64);
    put_digits(&mut text[17..19], (of_day % 60) as u64);
    let end = if fraction == 0 {
        19
    } else {
        put_digits(&mut text[20..29], fraction as u64);
        // Go's RFC3339Nano: the fraction's trailing zeros are cut.
        let mut end = 29;
        while text[end - 1] == b'0' {
            end -= 1;
        }
        end
    };
    out.push_str(std::str::from_utf8(&text[..end]).unwrap_or_default());
    out.push('Z');
}

/// Writes `value`'s last `digits.len()` decimal digits, zero-padded, into `digits`.
fn put_digits(digits: &mut [u8], mut value: u64) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Time zones (jiff's), as results carry them.
pub use jiff::tz as zone;

/// The zone of a statement's `tz('...')`, or an error naming an unknown one (as InfluxDB's
/// "unable to find time zone").
pub fn zone_of(statement: &sensordb_influxql::SelectStatement) -> Result<Option<jiff::tz::TimeZone>, QueryError> {
    statement
        .timezone
        .as_deref()
        .map(|name| jiff::tz::TimeZone::get(name).map_err(|_| QueryError::invalid(format!("unable to find time zone {name}"))))
        .transpose()
}

/// `nanos` in RFC 3339 in `zone`'s local time with its offset (`2016-03-27T00:00:00+01:00`), as
/// InfluxDB writes times under `tz()`; without a zone, UTC with `Z`.
pub fn format_time_in(nanos: i64, zone: Option<&jiff::tz::TimeZone>) -> String {
    let Some(zone) = zone else { return format_time(nanos) };
    let ts = jiff::Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let zoned = ts.to_zoned(zone.clone());
    let seconds = zoned.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let offset = zoned.strftime("%:z").to_string();
    let fraction = nanos.rem_euclid(1_000_000_000);
    let offset = if offset == "+00:00" { "Z".to_string() } else { offset };
    if fraction == 0 {
        format!("{seconds}{offset}")
    } else {
        let digits = format!("{fraction:09}");
        format!("{seconds}.{}{offset}", digits.trim_end_matches('0'))
    }
}

/// The nanosecond value of a time operand: a time string, an integer (nanoseconds), a duration
/// literal (`1700000000000ms`), `now()`, and sums and differences of those.
pub fn time_value(expr: &Expr, now: i64, zone: Option<&jiff::tz::TimeZone>) -> Result<i64, QueryError> {
    match expr {
        Expr::String(s) => parse_time_string_in(s, zone).ok_or_else(|| QueryError::invalid(format!("invalid time string {s:?}"))),
        Expr::Integer(n) => Ok(*n),
        Expr::Float(x) => Ok(*x as i64),
        Expr::Duration(d) => Ok(d.nanos()),
        Expr::Paren(inner) => time_value(inner, now, zone),
        Expr::Call(call) if call.name == "now" && call.args.is_empty() => Ok(now),
        Expr::Binary(b) if matches!(b.op, BinaryOp::Add | BinaryOp::Sub) => {
            let (lhs, rhs) = (time_value(&b.lhs, now, zone)?, time_value(&b.rhs, now, zone)?);
            Ok(if b.op == BinaryOp::Add { lhs.saturating_add(rhs) } else { lhs.saturating_sub(rhs) })
        }
        other => Err(QueryError::invalid(format!("invalid time expression {other}"))),
    }
}

fn is_time_ref(expr: &Expr) -> bool {
    matches!(expr, Expr::VarRef(v) if v.name.eq_ignore_ascii_case("time"))
}

/// Splits a WHERE clause into the time range it selects and the rest of the condition. Time
/// conditions must be joined to the rest by AND, as InfluxDB requires. Times without an offset
/// are in `zone` (`tz()`), else UTC.
pub fn split_condition(
    condition: Option<&Expr>,
    now: i64,
    zone: Option<&jiff::tz::TimeZone>,
) -> Result<(TimeRange, Option<Expr>), QueryError> {
    let Some(condition) = condition else { return Ok((TimeRange::ALL, None)) };
    let mut range = TimeRange::ALL;
    let rest = strip_time(condition, now, zone, &mut range)?;
    Ok((range, rest))
}

fn strip_time(expr: &Expr, now: i64, zone: Option<&jiff::tz::TimeZone>, range: &mut TimeRange) -> Result<Option<Expr>, QueryError> {
    match expr {
        Expr::Paren(inner) => strip_time(inner, now, zone, range),
        Expr::Binary(b) if b.op == BinaryOp::And => {
            let lhs = strip_time(&b.lhs, now, zone, range)?;
            let rhs = strip_time(&b.rhs, now, zone, range)?;
            Ok(match (lhs, rhs) {
                (Some(l), Some(r)) => Some(Expr::Binary(Box::new(sensordb_influxql::BinaryExpr { op: BinaryOp::And, lhs: l, rhs: r }))),
                (one, None) | (None, one) => one,
            })
        }
        Expr::Binary(b) if is_time_ref(&b.lhs) || is_time_ref(&b.rhs) => {
            let (op, value) = if is_time_ref(&b.lhs) { (b.op, &b.rhs) } else { (mirror(b.op), &b.lhs) };
            let t = time_value(value, now, zone)?;
            let bound = match op {
                BinaryOp::Gt => TimeRange { from: t.saturating_add(1), to: i64::MAX },
                BinaryOp::GtEq => TimeRange { from: t, to: i64::MAX },
                BinaryOp::Lt => TimeRange { from: i64::MIN, to: t.saturating_sub(1) },
                BinaryOp::LtEq => TimeRange { from: i64::MIN, to: t },
                BinaryOp::Eq => TimeRange { from: t, to: t },
                other => return Err(QueryError::invalid(format!("invalid time comparison operator: {}", other.as_str()))),
            };
            *range = range.intersect(bound);
            Ok(None)
        }
        Expr::Binary(b) if b.op == BinaryOp::Or && (mentions_time(&b.lhs) || mentions_time(&b.rhs)) => {
            Err(QueryError::invalid("invalid time condition: time ranges joined by OR are not supported"))
        }
        other => Ok(Some(other.clone())),
    }
}

pub(crate) fn mentions_time(expr: &Expr) -> bool {
    match expr {
        Expr::Binary(b) => mentions_time(&b.lhs) || mentions_time(&b.rhs),
        Expr::Paren(inner) | Expr::Negate(inner) => mentions_time(inner),
        other => is_time_ref(other),
    }
}

/// `x op time` as `time op' x`.
fn mirror(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::GtEq => BinaryOp::LtEq,
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::LtEq => BinaryOp::GtEq,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sensordb_influxql::{parse, Statement};

    /// Go's RFC3339Nano through jiff's general formatter: what [`write_time`] must equal.
    fn reference_format(nanos: i64) -> String {
        let ts = jiff::Timestamp::from_nanosecond(i128::from(nanos)).expect("in range");
        let seconds = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
        let fraction = nanos.rem_euclid(1_000_000_000);
        if fraction == 0 {
            format!("{seconds}Z")
        } else {
            format!("{seconds}.{}Z", format!("{fraction:09}").trim_end_matches('0'))
        }
    }

    #[test]
    fn times_are_written_as_go_writes_rfc3339_nano() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1_451_606_400_000_000_000), "2016-01-01T00:00:00Z");
        assert_eq!(format_time(1_451_606_400_120_000_000), "2016-01-01T00:00:00.12Z");
        assert_eq!(format_time(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(format_time(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
        for nanos in [i64::MIN, i64::MAX, i64::MIN + 1, -86_400_000_000_000 * 365 * 100, 4_102_444_800_000_000_000] {
            assert_eq!(format_time(nanos), reference_format(nanos), "{nanos}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_time_is_written_as_the_general_formatter_writes_it(nanos in proptest::prelude::any::<i64>(), day in -106_751i64..106_750, second in 0i64..86_400) {
            proptest::prop_assert_eq!(format_time(nanos), reference_format(nanos));
            // Whole seconds near day boundaries, leap days included.
            let whole = (day * 86_400 + second) * 1_000_000_000;
            proptest::prop_assert_eq!(format_time(whole), reference_format(whole));
        }
    }

    fn condition(query: &str) -> Expr {
        let parsed = parse(query).expect("parses");
        let Statement::Select(select) = &parsed.statements[0] else { panic!("select") };
        select.condition.clone().expect("has WHERE")
    }

    #[test]
    fn time_strings_in_the_forms_influxdb_accepts() {
        assert_eq!(parse_time_string("2016-01-01T00:00:00Z"), Some(1_451_606_400_000_000_000));
        assert_eq!(parse_time_string("2016-01-01T01:00:00+01:00"), Some(1_451_606_400_000_000_000));
        assert_eq!(parse_time_string("2016-01-01 00:00:00.5"), Some(1_451_606_400_500_000_000));
        assert_eq!(parse_time_string("2016-01-01"), Some(1_451_606_400_000_000_000));
        assert_eq!(parse_time_string("yesterday"), None);
    }

    #[test]
    fn formatting_cuts_trailing_zeros_of_the_fraction() {
        assert_eq!(format_time(1_451_606_400_000_000_000), "2016-01-01T00:00:00Z");
        assert_eq!(format_time(1_451_606_400_500_000_000), "2016-01-01T00:00:00.5Z");
        assert_eq!(format_time(1), "1970-01-01T00:00:00.000000001Z");
        assert_eq!(format_time(-1_000_000_000), "1969-12-31T23:59:59Z");
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").expect("zone");
        assert_eq!(format_time_in(1_458_946_800_000_000_000, Some(&berlin)), "2016-03-26T00:00:00+01:00");
        assert_eq!(format_time_in(1_459_029_600_500_000_000, Some(&berlin)), "2016-03-26T23:00:00.5+01:00");
        assert_eq!(format_time_in(1_459_044_000_000_000_000, Some(&berlin)), "2016-03-27T04:00:00+02:00");
        assert_eq!(format_time_in(0, Some(&jiff::tz::TimeZone::UTC)), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_where_clause_gives_its_range_and_keeps_the_rest() {
        let now = 10_000_000_000_000;
        let c = condition("SELECT a FROM m WHERE \"host\" = 'x' AND time >= 1700000000000ms and time <= 1700003600000ms");
        let (range, rest) = split_condition(Some(&c), now, None).expect("valid");
        assert_eq!(range, TimeRange { from: 1_700_000_000_000_000_000, to: 1_700_003_600_000_000_000 });
        assert_eq!(rest.expect("tag condition remains").to_string(), "host = 'x'");
        let c = condition("SELECT a FROM m WHERE time > now() - 1h");
        let (range, rest) = split_condition(Some(&c), now, None).expect("valid");
        assert_eq!(range, TimeRange { from: now - 3_600_000_000_000 + 1, to: i64::MAX });
        assert!(rest.is_none());
        let c = condition("SELECT a FROM m WHERE time < '2016-01-01T00:00:00Z' AND (a > 1 AND time > 5)");
        let (range, rest) = split_condition(Some(&c), now, None).expect("valid");
        assert_eq!(range, TimeRange { from: 6, to: 1_451_606_399_999_999_999 });
        assert_eq!(rest.expect("rest").to_string(), "a > 1");
    }

    #[test]
    fn time_under_or_is_refused() {
        let c = condition("SELECT a FROM m WHERE time > 5 OR a > 1");
        assert!(split_condition(Some(&c), 0, None).is_err());
    }
}
