//! Where the line protocol is read as InfluxDB 1.8 reads it rather than as the
//! `influxdb-line-protocol` crate does. The crate stays the judge of everything else; these rules
//! are applied around it on the slow path (and built into the fast reader, see `fast`):
//!
//! * a float may lack the digits on one side of its point, `.5`, `-.5`, `1.`, `1.e3`
//!   (InfluxDB 1.8's `scanNumber` takes them, the crate does not): [`text_for_the_crate`] writes
//!   the missing `0` in before the crate reads the record;
//! * an unescaped comma cannot be part of a field key, so a trailing comma, `v=1,,w=2` and
//!   `a,b=1` are refused (InfluxDB 1.8's `scanFields` counts one comma fewer than `=`; the crate
//!   takes `,w` as a key and ignores a trailing comma);
//! * a float must be finite: `1e309` is refused as `inf` is (InfluxDB 1.8: "value out of range");
//!   the crate stores +Inf ([`finite_float`]);
//! * a timestamp must lie in the model's `TIMESTAMP_MIN..=TIMESTAMP_MAX`, InfluxDB's range: reads
//!   end before `i64::MAX`, so a point there could never be read back
//!   ([`timestamp_out_of_range`], the native protocol's check too).

use std::borrow::Cow;

pub use sensordb_engine::timestamp_out_of_range;

/// Whether a float field value may be stored.
pub fn finite_float(value: f64) -> bool {
    value.is_finite()
}

/// The record (leading whitespace removed) as the crate should read it: with a `0` written in
/// where a float lacks the digits on one side of its point; an error for a field set with an
/// unescaped comma in a field key (a trailing or doubled comma included). Borrowed when nothing
/// had to change, which is every record a client normally sends.
pub fn text_for_the_crate(record: &str) -> Result<Cow<'_, str>, String> {
    let b = record.as_bytes();
    let fields_start = super::series_prefix(record).len();
    // InfluxDB 1.8's `scanFields`: quotes count only inside values (more `=` than `,` seen),
    // and a valid field set has exactly one comma fewer than `=` outside quoted strings.
    let (mut equals, mut commas, mut quoted) = (0usize, 0usize, false);
    let mut fixed: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = fields_start;
    // The separator spaces before the field set.
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    while i < b.len() {
        match b[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b'"' if equals > commas => quoted = !quoted,
            b'=' if !quoted => {
                equals += 1;
                let value_start = i + 1;
                let value_end = b[value_start..].iter().position(|&c| c == b',' || c == b' ').map_or(b.len(), |n| value_start + n);
                if let Some(zero_at) = missing_zero(&b[value_start..value_end]) {
                    let out = fixed.get_or_insert_with(|| Vec::with_capacity(b.len() + 4));
                    out.extend_from_slice(&b[copied..value_start + zero_at]);
                    out.push(b'0');
                    copied = value_start + zero_at;
                }
                if b.get(value_start) != Some(&b'"') {
                    i = value_end;
                    continue;
                }
            }
            b',' if !quoted => commas += 1,
            b' ' if !quoted => break,
            _ => {}
        }
        i += 1;
    }
    if equals > 0 && commas + 1 != equals {
        return Err("invalid field format: a field key cannot hold an unescaped comma, and the field set cannot end with one".into());
    }
    match fixed {
        None => Ok(Cow::Borrowed(record)),
        Some(mut out) => {
            out.extend_from_slice(&b[copied..]);
            // Only ASCII `0`s were inserted, between ASCII bytes: still UTF-8.
            String::from_utf8(out).map(Cow::Owned).map_err(|_| "BUG: a fixed record is not UTF-8".to_string())
        }
    }
}

/// Where a `0` goes in a float value written without digits on one side of its point
/// (`-?\d*\.\d*([eE][+-]?\d+)?` with digits on exactly one side), `None` for any other value.
fn missing_zero(value: &[u8]) -> Option<usize> {
    let sign = usize::from(value.first() == Some(&b'-'));
    let body = &value[sign..];
    let point = body.iter().position(|&c| c == b'.')?;
    let (int, rest) = (&body[..point], &body[point + 1..]);
    let frac_len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let exponent = &rest[frac_len..];
    let exponent_ok = exponent.is_empty()
        || (matches!(exponent[0], b'e' | b'E') && {
            let digits = exponent[1..].strip_prefix(b"+").or_else(|| exponent[1..].strip_prefix(b"-")).unwrap_or(&exponent[1..]);
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        });
    if !int.iter().all(u8::is_ascii_digit) || !exponent_ok {
        return None;
    }
    match (int.is_empty(), frac_len == 0) {
        (true, false) => Some(sign),
        (false, true) => Some(sign + point + 1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_get_their_missing_zero_and_nothing_else_changes() {
        for (record, expected) in [
            ("m v=.5", "m v=0.5"),
            ("m v=-.5,w=1. 7", "m v=-0.5,w=1.0 7"),
            ("m v=1.e3", "m v=1.0e3"),
            ("m,t=.5 v=.5e-2", "m,t=.5 v=0.5e-2"),
            ("m s=\"v=.5\",v=2.", "m s=\"v=.5\",v=2.0"),
            ("m v=1.5,s=\"a,b\" 1", "m v=1.5,s=\"a,b\" 1"),
            ("m v=. 1", "m v=. 1"),
            ("m v=-. 1", "m v=-. 1"),
            ("m v=.5i 1", "m v=.5i 1"),
            ("m a\\,b=1", "m a\\,b=1"),
        ] {
            assert_eq!(text_for_the_crate(record).as_deref(), Ok(expected), "{record:?}");
        }
        assert!(matches!(text_for_the_crate("m v=1"), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn unescaped_commas_in_field_keys_are_refused() {
        for record in ["m v=1,", "m v=1, 5", "m v=1,,w=2", "m a,b=1", "m v=1,w"] {
            assert!(text_for_the_crate(record).is_err(), "{record:?}");
        }
        for record in ["m v=1,w=2", "m a\\,b=1", "m s=\"x,y\",v=1", "m,a,b=c x=1"] {
            assert!(text_for_the_crate(record).is_ok(), "{record:?}");
        }
    }

    #[test]
    fn the_timestamp_range_is_influxdbs() {
        assert!(timestamp_out_of_range(i64::MAX).is_some());
        assert!(timestamp_out_of_range(i64::MIN + 1).is_some());
        assert!(timestamp_out_of_range(i64::MAX - 1).is_none());
        assert!(timestamp_out_of_range(i64::MIN + 2).is_none());
        assert!(!finite_float(f64::INFINITY) && !finite_float(f64::NAN) && finite_float(f64::MAX));
    }
}
