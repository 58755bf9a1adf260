//! Results as InfluxDB 1.x writes them: `{"results":[{"statement_id":0,"series":[{"name":...,
//! "tags":{...},"columns":[...],"values":[[...]]}]}]}`, numbers formatted as Go's encoding/json
//! formats them (so `2.0` is `2` and `1e-7` is `1e-7`), times as RFC 3339 or in an epoch unit.

use sensordb_query::time::zone as jiff_zone;
use sensordb_query::time::{format_time_in, write_time};
use sensordb_query::{FieldValue, ResultSeries, StatementResult};
use std::fmt::Write as _;

/// How times are written (the `epoch` parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epoch {
    Rfc3339,
    /// Integer times divided by this many nanoseconds.
    Divisor(i64),
}

impl Epoch {
    /// `epoch=ns|n|u|µ|ms|s|m|h`; anything else (or none) is RFC 3339, as in InfluxDB.
    pub fn from_param(param: Option<&str>) -> Epoch {
        match param {
            Some("ns" | "n") => Epoch::Divisor(1),
            Some("u" | "µ") => Epoch::Divisor(1_000),
            Some("ms") => Epoch::Divisor(1_000_000),
            Some("s") => Epoch::Divisor(1_000_000_000),
            Some("m") => Epoch::Divisor(60_000_000_000),
            Some("h") => Epoch::Divisor(3_600_000_000_000),
            _ => Epoch::Rfc3339,
        }
    }
}

/// A float as Go's encoding/json writes it: the shortest text that reads back as `x`, in
/// exponent form below 1e-6 and from 1e21 (Go's "ES6 format"). That is ECMAScript's
/// Number::toString, which `ryu-js` writes several times faster than `core::fmt` (a latest-value
/// answer writes 10,000 floats); negative zero is the one difference (Go writes `-0`).
pub fn go_float(out: &mut String, x: f64) {
    if !x.is_finite() {
        // JSON has no NaN or infinity; InfluxDB fails the whole response, we write null.
        out.push_str("null");
        return;
    }
    if x == 0.0 && x.is_sign_negative() {
        out.push_str("-0");
        return;
    }
    out.push_str(ryu_js::Buffer::new().format_finite(x));
}

/// An integer in decimal, without `core::fmt`'s machinery.
fn integer(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

fn value(out: &mut String, v: &FieldValue) {
    match v {
        FieldValue::Null => out.push_str("null"),
        FieldValue::Float(x) => go_float(out, *x),
        FieldValue::Integer(n) => integer(out, *n),
        FieldValue::Unsigned(n) => integer(out, *n),
        FieldValue::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        FieldValue::String(s) => string(out, s),
    }
}

/// `s` as a JSON string, escaped in place (names, tag values and times are written once per
/// series or row: a result of 10,000 series writes 50,000 of them). The escapes are
/// serde_json's: `"`, `\\` and the control characters; everything else is copied.
fn string(out: &mut String, s: &str) {
    out.push('"');
    // Almost every name and value needs no escape: one pass the compiler vectorises, one copy.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut copied = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every escaped byte is ASCII, so `i` is a character boundary.
        out.push_str(&s[copied..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        copied = i + 1;
    }
    out.push_str(&s[copied..]);
    out.push('"');
}

fn time(out: &mut String, nanos: i64, epoch: Epoch, zone: Option<&jiff_zone::TimeZone>) {
    match epoch {
        Epoch::Rfc3339 if zone.is_some() => string(out, &format_time_in(nanos, zone)),
        Epoch::Rfc3339 => {
            out.push('"');
            write_time(out, nanos);
            out.push('"');
        }
        Epoch::Divisor(d) => integer(out, nanos / d),
    }
}

/// One series object; `rows` picks which of its rows (chunks write a series in parts).
pub fn series(out: &mut String, s: &ResultSeries, rows: std::ops::Range<usize>, epoch: Epoch, partial: bool) {
    series_flushing(out, s, rows, (epoch, None), partial, &mut |_| true);
}

/// Hands the text written so far to a streamed response between parts: it may take `out`'s
/// text (leaving it empty); false when the reader is gone and writing should stop.
pub type Flush<'a> = dyn FnMut(&mut String) -> bool + 'a;

/// How times are written: the epoch, and the zone of RFC 3339 times (`tz()`).
pub type TimeFormat<'z> = (Epoch, Option<&'z jiff_zone::TimeZone>);

/// [`series`], times in `format`, calling `flush` after each row; stops early when `flush` says
/// so.
pub fn series_flushing(
    out: &mut String,
    s: &ResultSeries,
    rows: std::ops::Range<usize>,
    format: TimeFormat<'_>,
    partial: bool,
    flush: &mut Flush<'_>,
) -> bool {
    let (epoch, zone) = format;
    out.push('{');
    let mut comma = false;
    if !s.name.is_empty() {
        out.push_str("\"name\":");
        string(out, &s.name);
        comma = true;
    }
    if !s.tags.is_empty() {
        if comma {
            out.push(',');
        }
        out.push_str("\"tags\":{");
        for (i, (k, v)) in s.tags.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            string(out, k);
            out.push(':');
            string(out, v);
        }
        out.push('}');
        comma = true;
    }
    if comma {
        out.push(',');
    }
    out.push_str("\"columns\":[");
    for (i, c) in s.columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, c);
    }
    out.push(']');
    if !rows.is_empty() {
        out.push_str(",\"values\":[");
        for (i, row) in s.rows[rows].iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            if s.has_time {
                time(out, row.time, epoch, zone);
            }
            for (j, v) in row.values.iter().enumerate() {
                if j > 0 || s.has_time {
                    out.push(',');
                }
                value(out, v);
            }
            out.push(']');
            if !flush(out) {
                return false;
            }
        }
        out.push(']');
    }
    if partial {
        out.push_str(",\"partial\":true");
    }
    out.push('}');
    true
}

/// One statement's result object.
pub fn statement(out: &mut String, id: usize, result: &StatementResult, epoch: Epoch) {
    statement_flushing(out, id, result, epoch, &mut |_| true);
}

/// [`statement`], calling `flush` after each row; false when it stopped early.
pub fn statement_flushing(out: &mut String, id: usize, result: &StatementResult, epoch: Epoch, flush: &mut Flush<'_>) -> bool {
    let _ = write!(out, "{{\"statement_id\":{id}");
    if !result.series.is_empty() {
        out.push_str(",\"series\":[");
        for (i, s) in result.series.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if !series_flushing(out, s, 0..s.rows.len(), (epoch, result.time_zone.as_ref()), false, flush) {
                return false;
            }
        }
        out.push(']');
    }
    if let Some(error) = &result.error {
        out.push_str(",\"error\":");
        string(out, error);
    }
    if !result.warnings.is_empty() {
        out.push_str(",\"messages\":[");
        for (i, text) in result.warnings.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"level\":\"warning\",\"text\":");
            string(out, text);
            out.push('}');
        }
        out.push(']');
    }
    if result.partial {
        out.push_str(",\"partial\":true");
    }
    out.push('}');
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use sensordb_query::ResultRow;

    fn float(x: f64) -> String {
        let mut out = String::new();
        go_float(&mut out, x);
        out
    }

    /// The formatting `go_float` replaced: `core::fmt`'s shortest text, laid out as Go lays it out.
    fn go_float_by_fmt(x: f64) -> String {
        if !x.is_finite() {
            return "null".into();
        }
        let abs = x.abs();
        if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
            let text = format!("{x:e}");
            match text.split_once('e') {
                Some((mantissa, exponent)) if !exponent.starts_with('-') => format!("{mantissa}e+{exponent}"),
                _ => text,
            }
        } else {
            format!("{x}")
        }
    }

    proptest::proptest! {
        #[test]
        fn floats_are_written_as_fmt_lays_them_out(bits in proptest::num::u64::ANY, small in -1e7f64..1e7, power in -30i32..30) {
            for x in [f64::from_bits(bits), small, small * 10f64.powi(power), (small as i64) as f64] {
                let (text, by_fmt) = (float(x), go_float_by_fmt(x));
                if text != by_fmt {
                    // Only where x lies halfway between two shortest texts: `core::fmt` rounds
                    // the tie up, Go (and ryu-js) to even. Both read back as x, same layout.
                    proptest::prop_assert_eq!(text.len(), by_fmt.len(), "{:e}: {} against {}", x, text, by_fmt);
                    proptest::prop_assert_eq!(text.parse::<f64>().ok(), Some(x));
                    proptest::prop_assert_eq!(by_fmt.parse::<f64>().ok(), Some(x));
                }
            }
        }
    }

    #[test]
    fn floats_at_the_edges_of_the_exponent_form() {
        for x in [
            1e-6,
            // The floats just below the edges.
            f64::from_bits(1e-6f64.to_bits() - 1),
            1e21,
            f64::from_bits(1e21f64.to_bits() - 1),
            1e20,
            0.0,
            -0.0,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            -1.5e-7,
            1e16,
            1e17,
            123.0,
        ] {
            assert_eq!(float(x), go_float_by_fmt(x), "{x:e}");
        }
    }

    #[test]
    fn integers_and_epoch_times() {
        let mut out = String::new();
        value(&mut out, &FieldValue::Integer(i64::MIN));
        out.push(' ');
        value(&mut out, &FieldValue::Unsigned(u64::MAX));
        out.push(' ');
        time(&mut out, -1_500_000_000, Epoch::Divisor(1_000_000_000), None);
        out.push(' ');
        time(&mut out, 1_451_606_400_123_456_789, Epoch::Divisor(1_000_000), None);
        assert_eq!(out, "-9223372036854775808 18446744073709551615 -1 1451606400123");
    }

    #[test]
    fn floats_are_written_as_go_writes_them() {
        assert_eq!(float(2.0), "2");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(float(1e-7), "1e-7");
        assert_eq!(float(1.5e-7), "1.5e-7");
        assert_eq!(float(1e21), "1e+21");
        assert_eq!(float(123456789012345680000.0), "123456789012345680000");
        assert_eq!(float(-0.000001), "-0.000001");
        assert_eq!(float(f64::NAN), "null");
        assert_eq!(float(-0.0), "-0");
        // Exactly halfway between ...62 and ...63: Go's encoding/json rounds to even.
        let tie: f64 = "-124696340047074.625".parse().expect("a float");
        assert_eq!(float(tie), "-124696340047074.62");
        assert_eq!(float(100.0), "100");
        assert_eq!(float(-2.5e-6), "-0.0000025");
    }

    proptest::proptest! {
        #[test]
        fn strings_are_escaped_as_serde_json_escapes_them(text in "(?s).{0,40}", control in 0u8..0x20) {
            for s in [text.clone(), format!("{text}{}\\\"x", control as char)] {
                let mut out = String::new();
                string(&mut out, &s);
                proptest::prop_assert_eq!(&out, &serde_json::to_string(&s).expect("serializes"));
            }
        }
    }

    #[test]
    fn a_series_in_influxdbs_shape() {
        let s = ResultSeries {
            name: "cpu".into(),
            tags: vec![("host".into(), "a".into())].into(),
            columns: vec!["time".into(), "mean".into()].into(),
            rows: vec![ResultRow { time: 1_451_606_400_000_000_000, values: vec![FieldValue::Float(1.5)] }],
            has_time: true,
        };
        let mut out = String::new();
        series(&mut out, &s, 0..1, Epoch::Rfc3339, false);
        assert_eq!(out, r#"{"name":"cpu","tags":{"host":"a"},"columns":["time","mean"],"values":[["2016-01-01T00:00:00Z",1.5]]}"#);
        let mut out = String::new();
        series(&mut out, &s, 0..1, Epoch::from_param(Some("ms")), false);
        assert!(out.contains("[[1451606400000,1.5]]"), "{out}");
    }

    #[test]
    fn warnings_render_as_influxdb_messages() {
        let result = StatementResult { warnings: vec!["points of m v left out: \"x\"".into()], ..StatementResult::default() };
        let mut out = String::new();
        statement(&mut out, 0, &result, Epoch::Rfc3339);
        assert_eq!(out, r#"{"statement_id":0,"messages":[{"level":"warning","text":"points of m v left out: \"x\""}]}"#);
    }
}
