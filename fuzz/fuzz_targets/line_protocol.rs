//! Fuzzes the InfluxDB line-protocol reader of the HTTP write endpoints,
//! `sensordb_server::http::line_protocol`: `Lines` over a whole request body, which splits it
//! into records and reads each with the single-pass reader `fast::parse_line_knowing`, handing
//! what that does not take to the `influxdb-line-protocol` crate (the reference parser); and
//! `parse_series` / `series_prefix`. Series texts the fast reader read are passed back as known,
//! as the write path does, so repeated series take the path that skips checking them.
//!
//! The first input byte chooses the options (timestamp precision; a 32-byte line limit when its
//! top bit is set, else 1 MiB); the rest, made UTF-8 (lossily), is the body.
//!
//! Asserts: no panic; `Lines` gives exactly what reading the body with the crate alone gives,
//! record by record: the body split by the crate's `split_lines`, each record without its `\r`
//! and leading whitespace, blank and comment records skipped, too-long records refused, the rest
//! parsed with `influxdb_line_protocol::parse_lines` (one line per record) under InfluxDB 1.8's
//! rules of `line_protocol::influxdb_1_8` (the record as `text_for_the_crate` writes it, non-finite
//! floats refused) and the timestamp scaled by the precision with overflow and timestamps outside
//! InfluxDB's range refused. So an error for the same records (at the same
//! line number, counted over the whole body), and for each valid record the same line number,
//! measurement and tags (from `parse_series` of the series text when the fast reader took the
//! line), fields (f64 bitwise) and timestamp, and the series text `series_prefix` gives. This is
//! the fast reader checked against its reference on every input: it must never accept a line the
//! crate refuses, nor read one differently.
#![no_main]

use influxdb_line_protocol::FieldValue as F;
use libfuzzer_sys::fuzz_target;
use sensordb_server::http::line_protocol::influxdb_1_8::{finite_float, text_for_the_crate, timestamp_out_of_range};
use sensordb_server::http::line_protocol::{parse_series, series_prefix, Field, FieldValue, Lines, Precision, ReadOptions};
use std::borrow::Cow;

const PRECISIONS: [Precision; 6] =
    [Precision::Nanoseconds, Precision::Microseconds, Precision::Milliseconds, Precision::Seconds, Precision::Minutes, Precision::Hours];

const DEFAULT_TIMESTAMP: i64 = 1_700_000_000_000_000_000;

type Series = (String, Vec<(String, String)>);
type Fields = Vec<(String, FieldValue<'static>)>;

/// What reading one record with the crate alone gives.
#[derive(Debug)]
enum Expected<'a> {
    Error,
    Line { trimmed: &'a str, series: Series, fields: Fields, timestamp: i64 },
}

/// The crate's reading of a record (leading whitespace removed) as one line; `None` when it
/// holds no line.
fn reference(trimmed: &str) -> Option<Result<(Series, Fields, Option<i64>), String>> {
    let text = match text_for_the_crate(trimmed) {
        Ok(text) => text,
        // A record with a field set holds a line: refused.
        Err(e) => return Some(Err(e)),
    };
    let mut parsed = influxdb_line_protocol::parse_lines(&text);
    let line = match parsed.next()? {
        Ok(line) => line,
        Err(e) => return Some(Err(e.to_string())),
    };
    if parsed.next().is_some() {
        return Some(Err("more than one line in a record".to_string()));
    }
    if line.field_set.iter().any(|(_, value)| matches!(value, F::F64(x) if !finite_float(*x))) {
        return Some(Err("float out of range".to_string()));
    }
    let tags = line.series.tag_set.iter().flatten().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let fields = line
        .field_set
        .iter()
        .map(|(key, value)| {
            let value = match value {
                F::F64(x) => FieldValue::F64(*x),
                F::I64(x) => FieldValue::I64(*x),
                F::U64(x) => FieldValue::U64(*x),
                F::Boolean(x) => FieldValue::Bool(*x),
                F::String(s) => FieldValue::String(Cow::Owned(s.to_string())),
            };
            (key.to_string(), value)
        })
        .collect();
    Some(Ok(((line.series.measurement.to_string(), tags), fields, line.timestamp)))
}

/// The body's records as the crate reads them, each with the line number it starts on.
fn expected<'a>(body: &'a str, options: &ReadOptions) -> Vec<(u64, Expected<'a>)> {
    let mut out = Vec::new();
    for record in influxdb_line_protocol::split_lines(body) {
        let offset = record.as_ptr() as usize - body.as_ptr() as usize;
        let number = 1 + body.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() as u64;
        let text = record.strip_suffix('\r').unwrap_or(record);
        // What `Lines` skips before a line: spaces and tabs, as InfluxDB does.
        let trimmed = text.trim_start_matches([' ', '\t']);
        // Never panic on any text, accepted or not.
        let _ = (series_prefix(record), parse_series(trimmed), parse_series(series_prefix(trimmed)));
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if trimmed.len() > options.max_line_bytes {
            out.push((number, Expected::Error));
            continue;
        }
        let expected = match reference(trimmed) {
            None => continue,
            Some(Err(_)) => Expected::Error,
            Some(Ok((series, fields, timestamp))) => match timestamp {
                None => Expected::Line { trimmed, series, fields, timestamp: options.default_timestamp },
                Some(t) => match t.checked_mul(options.precision.nanos()) {
                    Some(timestamp) if timestamp_out_of_range(timestamp).is_none() => Expected::Line { trimmed, series, fields, timestamp },
                    _ => Expected::Error,
                },
            },
        };
        out.push((number, expected));
    }
    out
}

/// Fields equal, f64 compared bit for bit.
fn same_fields(ours: &[Field<'_>], theirs: &Fields) -> bool {
    ours.len() == theirs.len()
        && ours.iter().zip(theirs).all(|(a, (key, value))| {
            a.key.as_ref() == key
                && match (&a.value, value) {
                    (FieldValue::F64(x), FieldValue::F64(y)) => x.to_bits() == y.to_bits(),
                    (x, y) => x == y,
                }
        })
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else { return };
    let options = ReadOptions {
        precision: PRECISIONS[usize::from(choice & 0x7f) % PRECISIONS.len()],
        default_timestamp: DEFAULT_TIMESTAMP,
        max_line_bytes: if choice & 0x80 != 0 { 32 } else { 1 << 20 },
    };
    let body = String::from_utf8_lossy(rest);
    let body: &str = &body;
    let expected = expected(body, &options);

    let mut lines = Lines::new(body, options);
    let mut fields = Vec::new();
    let mut read = 0;
    // Series texts the fast reader read: later lines of them take the known-text path, as the
    // write path's do.
    let mut known: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        let next = lines.next_line_knowing(&mut fields, &|text| known.contains(text));
        let Some(result) = next else { break };
        let Some((number, want)) = expected.get(read) else {
            panic!("Lines read more records than the crate: {result:?} after {read}; body {body:?}");
        };
        match (result, want) {
            (Err(error), Expected::Error) => {
                assert_eq!(error.line, *number, "error on another line; body {body:?}");
                assert!(!error.message.is_empty());
            }
            (Ok(line), Expected::Line { trimmed, series, fields: want_fields, timestamp }) => {
                assert_eq!(line.number, *number, "line number differs; record {trimmed:?}");
                assert_eq!(line.series_text, series_prefix(trimmed), "series text differs; record {trimmed:?}");
                let fast = line.series.is_none();
                if fast {
                    known.insert(line.series_text.to_string());
                }
                let ours = match line.series {
                    Some(series) => series,
                    None => parse_series(line.series_text)
                        .unwrap_or_else(|| panic!("parse_series refuses the series text of an accepted line {trimmed:?}")),
                };
                assert_eq!(&ours, series, "series differ (fast reader: {fast}); record {trimmed:?}");
                assert!(
                    same_fields(&fields, want_fields),
                    "fields differ (fast reader: {fast}); record {trimmed:?}: ours {fields:?}, crate {want_fields:?}"
                );
                assert_eq!(line.timestamp, *timestamp, "timestamp differs (fast reader: {fast}); record {trimmed:?}");
            }
            (Ok(line), Expected::Error) => panic!(
                "Lines accepts a record the crate refuses (fast reader: {}): line {} {:?}, fields {fields:?}; body {body:?}",
                line.series.is_none(),
                line.number,
                line.series_text
            ),
            (Err(error), want) => panic!("Lines refuses a record the crate reads: {error}; crate {want:?}"),
        }
        read += 1;
    }
    assert_eq!(read, expected.len(), "Lines read fewer records than the crate; body {body:?}");
});
