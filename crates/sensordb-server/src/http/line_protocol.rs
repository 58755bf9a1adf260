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
//! Every problem is a [`LineError`] naming the (first) line number of the offending record; the
//! reader goes on with the next record, so the caller decides what to do with the valid ones.

use influxdb_line_protocol::ParsedLine;

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

/// One valid record.
#[derive(Debug)]
pub struct Line<'a> {
    /// Line number, from 1, of the record's first line.
    pub number: u64,
    /// The raw (still escaped) measurement and tag text: the series cache key.
    pub series_text: &'a str,
    pub parsed: ParsedLine<'a>,
    /// In nanoseconds.
    pub timestamp: i64,
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

    fn read(&self, number: u64, record: &'a str) -> Option<Result<Line<'a>, LineError>> {
        let text = record.strip_suffix('\r').unwrap_or(record);
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return None;
        }
        let error = |message: String| LineError { line: number, message };
        if trimmed.len() > self.options.max_line_bytes {
            return Some(Err(error(format!(
                "line of {} bytes exceeds the limit of {} bytes",
                trimmed.len(),
                self.options.max_line_bytes
            ))));
        }
        let mut parsed = influxdb_line_protocol::parse_lines(trimmed);
        let line = match parsed.next() {
            Some(Ok(line)) => line,
            Some(Err(e)) => return Some(Err(error(format!("unable to parse '{}': {e}", excerpt(trimmed))))),
            None => return None,
        };
        if parsed.next().is_some() {
            return Some(Err(error("more than one line in a record".to_string())));
        }
        let timestamp = match line.timestamp {
            Some(t) => match t.checked_mul(self.options.precision.nanos()) {
                Some(t) => t,
                None => return Some(Err(error(format!("timestamp {t} overflows nanoseconds")))),
            },
            None => self.options.default_timestamp,
        };
        Some(Ok(Line { number, series_text: series_prefix(trimmed), parsed: line, timestamp }))
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Line<'a>, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let record = self.records.next()?;
            let number = self.next_number;
            self.next_number += 1 + memchr_count(record.as_bytes(), b'\n');
            if let Some(result) = self.read(number, record) {
                return Some(result);
            }
        }
    }
}

/// Splits a body into records as the Go server's `scanLine` does (and the crate's
/// `split_lines`): a newline ends a record unless it is inside a quoted string field value.
/// A segment without any `"` or backslash is cut at its first newline at once; only one holding a quote is
/// scanned with the full state machine.
struct Records<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        let bytes = rest.as_bytes();
        let newline = bytes.iter().position(|&b| b == b'\n');
        let simple_end = newline.unwrap_or(bytes.len());
        let end = if bytes[..simple_end].iter().any(|&b| b == b'"' || b == b'\\') { quoted_record_end(bytes) } else { newline };
        match end {
            Some(end) => {
                self.rest = Some(&rest[end + 1..]);
                Some(&rest[..end])
            }
            None => {
                self.rest = None;
                Some(rest)
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

fn memchr_count(bytes: &[u8], byte: u8) -> u64 {
    bytes.iter().filter(|&&b| b == byte).count() as u64
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
    use influxdb_line_protocol::FieldValue;

    fn options() -> ReadOptions {
        ReadOptions { precision: Precision::Nanoseconds, default_timestamp: 42, max_line_bytes: 1 << 20 }
    }

    #[test]
    fn reads_values_series_text_and_line_numbers() {
        let body = "# comment\n\nm,host=a f=1.5,i=5i,u=5u,t=T,s=\"a\nb\" 7\r\nm x=1\n";
        let lines: Vec<_> = Lines::new(body, options()).collect::<Result<_, _>>().expect("valid");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].number, 3);
        assert_eq!(lines[0].series_text, "m,host=a");
        assert_eq!(lines[0].timestamp, 7);
        assert!(matches!(lines[0].parsed.field_set[2].1, FieldValue::U64(5)));
        assert!(matches!(lines[0].parsed.field_set[3].1, FieldValue::Boolean(true)));
        assert_eq!(lines[1].number, 5, "the quoted newline counts as a line");
        assert_eq!(lines[1].timestamp, 42, "default timestamp");
    }

    #[test]
    fn errors_name_the_line_and_reading_goes_on() {
        let body = "m f=1 1\nm f= 2\nm f=12x 3\nm f=1 4 extra\nm f=1 5\n";
        let results: Vec<_> = Lines::new(body, options()).collect();
        let lines: Vec<u64> = results
            .iter()
            .map(|r| match r {
                Ok(line) => line.number,
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
            let ours: Vec<&str> = Records { rest: Some(body) }.collect();
            let crate_: Vec<&str> = influxdb_line_protocol::split_lines(body).collect();
            assert_eq!(ours, crate_, "{body:?}");
        }
    }

    #[test]
    fn precision_limits_and_overflow() {
        let mut opts = options();
        opts.precision = Precision::Hours;
        let line = Lines::new("m f=1 2", opts).next().expect("one").expect("valid");
        assert_eq!(line.timestamp, 7_200_000_000_000);
        assert!(Lines::new("m f=1 9223372036854775807", opts).next().expect("one").is_err());
        opts.max_line_bytes = 4;
        assert!(Lines::new("m f=1 2", opts).next().expect("one").is_err());
        assert_eq!(Precision::from_v1("u"), Some(Precision::Microseconds));
        assert_eq!(Precision::from_v2("m"), None);
    }
}
