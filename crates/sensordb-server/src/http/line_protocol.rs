//! Strict InfluxDB line-protocol reading for the write endpoints.
//!
//! One line is parsed by the `influxdb-line-protocol` crate (the InfluxDB IOx parser, written to
//! match the Go one: escapes, quoted strings that may hold newlines, `i`/`u` suffixes, every
//! boolean spelling, duplicate-tag and trailing-content errors). This module adds what a request
//! body needs around it: splitting the body into records the way the Go server does (a newline
//! inside a quoted string field does not end the record), line numbers counted from 1 over the
//! whole body, comment and blank lines, CRLF line ends, the per-line byte limit, timestamp
//! precision with overflow checks, and the default timestamp (the request's arrival time) for lines
//! without one.
//!
//! A repeated tag key passes here and is refused when the series key is built (see
//! `write::ingest`), once per distinct series text.
//!
//! Lines are first read by the single-pass reader in [`fast`], which covers everything clients
//! normally send; a record it does not take (a bad line, or a rare valid shape such as a newline in
//! a quoted string) goes to the crate, which then accepts it or words the error. So the crate stays
//! the judge of what is valid, and its messages are the ones clients see.
//!
//! Where InfluxDB 1.8 reads a line otherwise than the crate (`.5` and `1.`, commas in field keys,
//! non-finite floats, the timestamp range), this reader follows InfluxDB 1.8: the rules are in
//! [`influxdb_1_8`], applied around the crate and built into the fast reader.
//!
//! Every problem is a [`LineError`] naming the (first) line number of the offending record; the
//! reader goes on with the next record, so the caller decides what to do with the valid ones.

mod fast;
pub mod influxdb_1_8;

pub use fast::{Field, FieldValue};
use std::borrow::Cow;

/// Unit of the timestamps in a request body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    #[default]
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Minutes,
    Hours,
}

impl Precision {
    /// The v1 `precision` parameter: `n`, `ns`, `u`, `us`, `µ`, `ms`, `s`, `m`, `h`.
    pub fn from_v1(text: &str) -> Option<Precision> {
        Some(match text {
            "" | "n" | "ns" => Precision::Nanoseconds,
            "u" | "us" | "µ" | "µs" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            "m" => Precision::Minutes,
            "h" => Precision::Hours,
            _ => return None,
        })
    }

    /// The v2 `precision` parameter: `ns`, `us`, `ms`, `s`.
    pub fn from_v2(text: &str) -> Option<Precision> {
        Some(match text {
            "" | "ns" => Precision::Nanoseconds,
            "us" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            _ => return None,
        })
    }

    /// Nanoseconds per unit.
    pub fn nanos(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }
}

/// A record that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// Line number, from 1, of the record's first line.
    pub line: u64,
    pub message: String,
}

/// One valid record; its fields are in the buffer given to [`Lines::next_line`].
#[derive(Debug)]
pub struct Line<'a> {
    /// Line number, from 1, of the record's first line.
    pub number: u64,
    /// The raw (still escaped) measurement and tag text: the series cache key.
    pub series_text: &'a str,
    /// The unescaped measurement and tags, when the crate read the line; otherwise they come
    /// from [`parse_series`] (only needed when the series text is not cached yet).
    pub series: Option<(String, Vec<(String, String)>)>,
    /// In nanoseconds.
    pub timestamp: i64,
}

/// The unescaped measurement and tags of the series text of a valid line.
pub fn parse_series(series_text: &str) -> Option<(String, Vec<(String, String)>)> {
    fast::parse_series(series_text)
}

/// How to read a body.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions {
    pub precision: Precision,
    /// Timestamp (ns) for records without one.
    pub default_timestamp: i64,
    pub max_line_bytes: usize,
}

/// The records of a body, each a [`Line`] or a [`LineError`]; blank and comment lines are skipped.
pub struct Lines<'a> {
    records: Records<'a>,
    next_number: u64,
    options: ReadOptions,
}

impl<'a> Lines<'a> {
    pub fn new(body: &'a str, options: ReadOptions) -> Lines<'a> {
        Lines { records: Records { rest: Some(body) }, next_number: 1, options }
    }

    /// The next record: a [`Line`] with its fields in `fields` (cleared first), or an error.
    pub fn next_line(&mut self, fields: &mut Vec<Field<'a>>) -> Option<Result<Line<'a>, LineError>> {
        self.next_line_knowing(fields, &|_| false)
    }

    /// [`Lines::next_line`] that takes as read the series texts `known` says the fast reader
    /// read before ([`fast::parse_line_knowing`]).
    pub fn next_line_knowing(&mut self, fields: &mut Vec<Field<'a>>, known: &dyn Fn(&str) -> bool) -> Option<Result<Line<'a>, LineError>> {
        loop {
            let (record, quoted) = self.records.next()?;
            let number = self.next_number;
            if quoted {
                self.next_number += record.bytes().filter(|&b| b == b'\n').count() as u64;
            }
            self.next_number += 1;
            if let Some(result) = self.read(number, record, fields, known) {
                return Some(result);
            }
        }
    }

    fn read(
        &self,
        number: u64,
        record: &'a str,
        fields: &mut Vec<Field<'a>>,
        known: &dyn Fn(&str) -> bool,
    ) -> Option<Result<Line<'a>, LineError>> {
        let text = record.strip_suffix('\r').unwrap_or(record);
        // Only spaces and tabs, as InfluxDB and the crate skip: other Unicode whitespace (a
        // no-break space, a form feed) belongs to the measurement name.
        let trimmed = text.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return None;
        }
        let error = |message: String| LineError { line: number, message };
        if trimmed.len() > self.options.max_line_bytes {
            return Some(Err(error(format!("line of {} bytes exceeds the limit of {} bytes", trimmed.len(), self.options.max_line_bytes))));
        }
        let (series_text, series, timestamp) = match fast::parse_line_knowing(trimmed, fields, known) {
            Some(line) => (line.series_text, None, line.timestamp),
            None => match slow_parse(trimmed, fields) {
                Ok(Some((series, timestamp))) => (series_prefix(trimmed), Some(series), timestamp),
                Ok(None) => return None,
                Err(message) => return Some(Err(error(message))),
            },
        };
        let timestamp = match timestamp {
            Some(t) => match t.checked_mul(self.options.precision.nanos()) {
                Some(t) => t,
                None => return Some(Err(error(format!("timestamp {t} overflows nanoseconds")))),
            },
            None => self.options.default_timestamp,
        };
        if let Some(message) = influxdb_1_8::timestamp_out_of_range(timestamp) {
            return Some(Err(error(message)));
        }
        Some(Ok(Line { number, series_text, series, timestamp }))
    }
}

/// Measurement and tags of a line read by the crate, and its timestamp.
type SlowLine = ((String, Vec<(String, String)>), Option<i64>);

/// Reads a record with the crate (the fields into `fields`), under InfluxDB 1.8's rules
/// ([`influxdb_1_8`]); `Ok(None)` when it holds no line.
fn slow_parse<'a>(trimmed: &'a str, fields: &mut Vec<Field<'a>>) -> Result<Option<SlowLine>, String> {
    use influxdb_line_protocol::FieldValue as F;
    fields.clear();
    let text = influxdb_1_8::text_for_the_crate(trimmed).map_err(|e| format!("unable to parse '{}': {e}", excerpt(trimmed)))?;
    let mut parsed = influxdb_line_protocol::parse_lines(&text);
    let line = match parsed.next() {
        Some(Ok(line)) => line,
        Some(Err(e)) => return Err(format!("unable to parse '{}': {e}", excerpt(trimmed))),
        None => return Ok(None),
    };
    if parsed.next().is_some() {
        return Err("more than one line in a record".to_string());
    }
    for (key, value) in &line.field_set {
        let value = match value {
            F::F64(x) if !influxdb_1_8::finite_float(*x) => {
                return Err(format!("unable to parse '{}': float value of field \"{key}\" is out of range", excerpt(trimmed)));
            }
            F::F64(x) => FieldValue::F64(*x),
            F::I64(x) => FieldValue::I64(*x),
            F::U64(x) => FieldValue::U64(*x),
            F::Boolean(x) => FieldValue::Bool(*x),
            F::String(s) => FieldValue::String(Cow::Owned(s.to_string())),
        };
        fields.push(Field { key: Cow::Owned(key.to_string()), value });
    }
    let tags = line.series.tag_set.iter().flatten().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Ok(Some(((line.series.measurement.to_string(), tags), line.timestamp)))
}

/// Reads every record of `body`: each valid line with its fields, or the error (for tests).
#[cfg(test)]
pub fn read_all(body: &str, options: ReadOptions) -> Vec<Result<(Line<'_>, Vec<Field<'_>>), LineError>> {
    let mut lines = Lines::new(body, options);
    let mut out = Vec::new();
    let mut fields = Vec::new();
    while let Some(result) = lines.next_line(&mut fields) {
        out.push(result.map(|line| (line, fields.clone())));
    }
    out
}

/// Splits a body into records as the Go server's `scanLine` does (and the crate's
/// `split_lines`): a newline ends a record unless it is inside a quoted string field value.
/// A segment without any `"` or backslash is cut at its first newline at once; only one holding a quote is
/// scanned with the full state machine.
struct Records<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Records<'a> {
    /// The record, and whether it may hold a newline (inside a quoted string).
    type Item = (&'a str, bool);

    fn next(&mut self) -> Option<(&'a str, bool)> {
        let rest = self.rest?;
        let bytes = rest.as_bytes();
        let (end, quoted) = match memchr::memchr3(b'\n', b'"', b'\\', bytes) {
            Some(i) if bytes[i] == b'\n' => (Some(i), false),
            Some(_) => (quoted_record_end(bytes), true),
            None => (None, false),
        };
        match end {
            Some(end) => {
                self.rest = Some(&rest[end + 1..]);
                Some((&rest[..end], quoted))
            }
            None => {
                self.rest = None;
                Some((rest, quoted))
            }
        }
    }
}

/// The index of the newline ending the first record of `bytes`, honouring quoted strings (a
/// byte-wise port of the Go `scanLine` state machine; the markers are ASCII, so skipping one byte
/// after a backslash is the same as skipping one character).
fn quoted_record_end(bytes: &[u8]) -> Option<usize> {
    let (mut quoted, mut fields, mut escape) = (false, false, false);
    let (mut equals, mut commas) = (0u64, 0u64);
    for (i, &c) in bytes.iter().enumerate() {
        if escape {
            escape = false;
            continue;
        }
        match c {
            b'\\' => escape = true,
            b' ' => fields = true,
            b'=' if fields && !quoted => equals += 1,
            b',' if fields && !quoted => commas += 1,
            b'"' if fields && equals > commas => quoted = !quoted,
            b'\n' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// At most 64 bytes of `line`, for error messages.
fn excerpt(line: &str) -> &str {
    if line.len() <= 64 {
        return line;
    }
    let mut end = 64;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// The measurement and tag text: everything before the first unescaped space.
pub fn series_prefix(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b' ' => return &line[..i],
            _ => i += 1,
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ReadOptions {
        ReadOptions { precision: Precision::Nanoseconds, default_timestamp: 42, max_line_bytes: 1 << 20 }
    }

    #[test]
    fn reads_values_series_text_and_line_numbers() {
        let body = "# comment\n\nm,host=a f=1.5,i=5i,u=5u,t=T,s=\"a\nb\" 7\r\nm x=1\n";
        let lines: Vec<_> = read_all(body, options()).into_iter().collect::<Result<_, _>>().expect("valid");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].0.number, 3);
        assert_eq!(lines[0].0.series_text, "m,host=a");
        assert_eq!(lines[0].0.timestamp, 7);
        assert_eq!(lines[0].1[2].value, FieldValue::U64(5));
        assert_eq!(lines[0].1[3].value, FieldValue::Bool(true));
        assert_eq!(lines[0].1[4].value, FieldValue::String("a\nb".into()));
        assert_eq!(lines[1].0.number, 5, "the quoted newline counts as a line");
        assert_eq!(lines[1].0.timestamp, 42, "default timestamp");
    }

    #[test]
    fn only_spaces_and_tabs_are_skipped_before_a_line() {
        let body = " \t m f=1 1\n\u{a0}m f=2 2\n\u{c}m f=3 3\n";
        let lines: Vec<_> = read_all(body, options()).into_iter().collect::<Result<_, _>>().expect("valid");
        let series: Vec<&str> = lines.iter().map(|(line, _)| line.series_text).collect();
        assert_eq!(series, vec!["m", "\u{a0}m", "\u{c}m"]);
    }

    #[test]
    fn errors_name_the_line_and_reading_goes_on() {
        let body = "m f=1 1\nm f= 2\nm f=12x 3\nm f=1 4 extra\nm f=1 5\n";
        let results = read_all(body, options());
        let lines: Vec<u64> = results
            .iter()
            .map(|r| match r {
                Ok((line, _)) => line.number,
                Err(e) => 1000 + e.line,
            })
            .collect();
        assert_eq!(lines, vec![1, 1002, 1003, 1004, 5]);
    }

    #[test]
    fn records_split_like_the_crate() {
        for body in [
            "a f=1 1\nb f=\"x\ny\" 2\n\nc f=\"q\\\"\n\",g=1 3\r\nd\\\ne f=1",
            "m,t=\"a f=1\nm s=\"\",t=\"\n\" 4\n",
            "m f=1,s=\"open\nnever closed",
            "\n\n",
            "",
            "m s=\"é\\\"\né\" 1\nx f=1",
        ] {
            let ours: Vec<&str> = Records { rest: Some(body) }.map(|(record, _)| record).collect();
            let crate_: Vec<&str> = influxdb_line_protocol::split_lines(body).collect();
            assert_eq!(ours, crate_, "{body:?}");
        }
    }

    #[test]
    fn precision_limits_and_overflow() {
        let mut opts = options();
        opts.precision = Precision::Hours;
        let first = |body: &'static str, opts| read_all(body, opts).into_iter().next().expect("one");
        let (line, _) = first("m f=1 2", opts).expect("valid");
        assert_eq!(line.timestamp, 7_200_000_000_000);
        assert!(first("m f=1 9223372036854775807", opts).is_err());
        opts.max_line_bytes = 4;
        assert!(first("m f=1 2", opts).is_err());
        assert_eq!(Precision::from_v1("u"), Some(Precision::Microseconds));
        assert_eq!(Precision::from_v2("m"), None);
    }
}
