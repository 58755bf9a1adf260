//! Reads InfluxDB line protocol (such as files made by `tsbs_generate_data --format=influx`)
//! into [`Row`]s.
//!
//! Parsing of one line is delegated to the `influxdb-line-protocol` crate (the InfluxDB IOx
//! parser, written to match the Go one: escapes, quoted strings, `i`/`u` suffixes, the boolean
//! spellings, duplicate-tag and trailing-content errors). It parses a `&str` of whole lines only,
//! so this module adds what a file reader needs around it: reading from any [`BufRead`] line by
//! line (a quoted string field may span lines), comment and blank lines, CRLF, timestamp precision,
//! an error for a missing timestamp unless a default is configured, errors that name the line
//! number, and interning: rows with the same measurement + tag text share one `Arc<TagSet>` (with
//! a dense id, see [`crate::row::SeriesMap`]), and field names are shared `Arc<str>`s.
//!
//! Value mapping: float → `Value::F64`, `5i` → `I64`, `5u` → `U64`, booleans → `Bool`, strings →
//! `Bytes` (UTF-8, unescaped).

use crate::row::{Row, TagSet};
use influxdb_line_protocol::FieldValue;
use sensordb_engine::{Timestamp, Value};
use sensordb_server::http::line_protocol::series_prefix;
use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

/// Unit of the timestamps in the input: the server's, so both read line protocol alike.
pub use sensordb_server::http::line_protocol::Precision;

/// How to read the input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReaderOptions {
    pub precision: Precision,
    /// Timestamp (ns) for lines without one; `None` makes such lines an error.
    pub default_timestamp: Option<Timestamp>,
}

/// A line that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineProtocolError {
    #[error("line {line}: {message}")]
    Parse { line: u64, message: String },
    #[error("line {line}: {source}")]
    Io { line: u64, source: std::io::Error },
}

impl LineProtocolError {
    /// The (first) line number, from 1, of the offending line.
    pub fn line(&self) -> u64 {
        match self {
            LineProtocolError::Parse { line, .. } | LineProtocolError::Io { line, .. } => *line,
        }
    }
}

/// Iterator of rows read from line protocol. Ends at end of input; after an error it goes on
/// with the next line.
pub struct LineProtocolReader<R> {
    input: R,
    options: ReaderOptions,
    line: u64,
    text: String,
    series: HashMap<Box<str>, (Arc<str>, Arc<TagSet>)>,
    field_names: HashMap<Box<str>, Arc<str>>,
    measurements: HashMap<Box<str>, Arc<str>>,
    done: bool,
}

impl<R: BufRead> LineProtocolReader<R> {
    pub fn new(input: R) -> Self {
        Self::with_options(input, ReaderOptions::default())
    }

    pub fn with_options(input: R, options: ReaderOptions) -> Self {
        LineProtocolReader {
            input,
            options,
            line: 0,
            text: String::new(),
            series: HashMap::new(),
            field_names: HashMap::new(),
            measurements: HashMap::new(),
            done: false,
        }
    }

    /// Number of lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// Number of distinct measurement + tag texts seen (= tag set ids handed out).
    pub fn tag_sets(&self) -> usize {
        self.series.len()
    }

    /// Reads the next record (one line, or more while a quoted string is open) into `self.text`.
    /// Returns the record's first line number, or `None` at end of input.
    fn read_record(&mut self) -> Result<Option<u64>, LineProtocolError> {
        self.text.clear();
        let first = self.line + 1;
        loop {
            let read = self.input.read_line(&mut self.text).map_err(|source| LineProtocolError::Io { line: self.line + 1, source })?;
            if read == 0 {
                return Ok(if self.text.is_empty() { None } else { Some(first) });
            }
            self.line += 1;
            if !ends_inside_string(&self.text) {
                return Ok(Some(first));
            }
        }
    }

    fn parse_record(&mut self, line: u64) -> Result<Option<Row>, LineProtocolError> {
        let text = self.text.trim_end_matches(['\n', '\r']);
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(None);
        }
        let error = |message: String| LineProtocolError::Parse { line, message };
        let mut parsed = influxdb_line_protocol::parse_lines(trimmed);
        let first = match parsed.next() {
            Some(Ok(first)) => first,
            Some(Err(e)) => return Err(error(e.to_string())),
            None => return Ok(None),
        };
        if parsed.next().is_some() {
            return Err(error("more than one line in a record".to_string()));
        }
        let timestamp = match first.timestamp {
            Some(t) => {
                t.checked_mul(self.options.precision.nanos()).ok_or_else(|| error(format!("timestamp {t} overflows nanoseconds")))?
            }
            None => self.options.default_timestamp.ok_or_else(|| error("missing timestamp".to_string()))?,
        };
        let mut fields = Vec::with_capacity(first.field_set.len());
        for (name, value) in &first.field_set {
            let value = match value {
                FieldValue::F64(x) => Value::F64(*x),
                FieldValue::I64(x) => Value::I64(*x),
                FieldValue::U64(x) => Value::U64(*x),
                FieldValue::Boolean(x) => Value::Bool(*x),
                FieldValue::String(s) => Value::Bytes(bytes::Bytes::copy_from_slice(s.as_bytes())),
            };
            let name = intern(&mut self.field_names, name);
            fields.push((name, value));
        }
        let series_text = series_prefix(trimmed);
        let (measurement, tags) = match self.series.get(series_text) {
            Some((measurement, tags)) => (measurement.clone(), tags.clone()),
            None => {
                let measurement_name = first.series.measurement.as_str();
                let measurement = intern(&mut self.measurements, measurement_name);
                let tag_list: Vec<(String, String)> =
                    first.series.tag_set.iter().flatten().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                for (i, (key, _)) in tag_list.iter().enumerate() {
                    if tag_list[..i].iter().any(|(k, _)| k == key) {
                        return Err(error(format!("tag key {key:?} appears twice")));
                    }
                }
                let id = u32::try_from(self.series.len()).map_err(|_| error("too many tag sets".to_string()))?;
                let tags = Arc::new(TagSet { id, tags: tag_list });
                self.series.insert(series_text.into(), (measurement.clone(), tags.clone()));
                (measurement, tags)
            }
        };
        Ok(Some(Row { measurement, tags, fields, timestamp }))
    }
}

impl<R: BufRead> Iterator for LineProtocolReader<R> {
    type Item = Result<Row, LineProtocolError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let line = match self.read_record() {
                Ok(Some(line)) => line,
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            match self.parse_record(line) {
                Ok(Some(row)) => return Some(Ok(row)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }
}

fn intern(names: &mut HashMap<Box<str>, Arc<str>>, name: &str) -> Arc<str> {
    if let Some(name) = names.get(name) {
        return name.clone();
    }
    let interned: Arc<str> = Arc::from(name);
    names.insert(name.into(), interned.clone());
    interned
}

/// Reads every row of `text`, stopping at the first error.
pub fn parse_str(text: &str) -> Result<Vec<Row>, LineProtocolError> {
    LineProtocolReader::new(text.as_bytes()).collect()
}

/// Whether `text` ends inside a quoted string field value (so the record goes on on the next
/// line). Quotes count only after the series part; inside a string a backslash escapes.
fn ends_inside_string(text: &str) -> bool {
    let trimmed = text.trim_start();
    if trimmed.starts_with('#') {
        return false;
    }
    let series = series_prefix(trimmed);
    let bytes = &trimmed.as_bytes()[series.len()..];
    let mut quoted = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => {
                quoted = !quoted;
                i += 1;
            }
            _ => i += 1,
        }
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Row {
        let rows = parse_str(text).expect("parses");
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows.into_iter().next().expect("one row")
    }

    #[test]
    fn reads_all_value_kinds() {
        let row = one("m,host=a f=1.5,i=5i,u=5u,t=true,F=F,s=\"hi\",e=1e3 1700000000000000000\n");
        assert_eq!(&*row.measurement, "m");
        assert_eq!(row.tags.tags, vec![("host".to_string(), "a".to_string())]);
        assert_eq!(row.timestamp, 1_700_000_000_000_000_000);
        let values: Vec<(&str, Value)> = row.fields.iter().map(|(k, v)| (&**k, v.clone())).collect();
        assert_eq!(
            values,
            vec![
                ("f", Value::F64(1.5)),
                ("i", Value::I64(5)),
                ("u", Value::U64(5)),
                ("t", Value::Bool(true)),
                ("F", Value::Bool(false)),
                ("s", Value::Bytes(bytes::Bytes::from_static(b"hi"))),
                ("e", Value::F64(1000.0)),
            ]
        );
    }

    #[test]
    fn reads_a_tsbs_line() {
        let row = one("readings,name=truck_0,fleet=South,driver=Trish,model=H-2,device_version=v2.3 load_capacity=1500,fuel_capacity=150,nominal_fuel_consumption=12,latitude=52.31854,longitude=4.72037,elevation=124,velocity=0,heading=221,grade=0,fuel_consumption=25 1451606400000000000");
        assert_eq!(row.tags.get("device_version"), Some("v2.3"));
        assert_eq!(row.fields.len(), 10);
        assert_eq!(row.fields[3], (Arc::from("latitude"), Value::F64(52.31854)));
        let row = one("diagnostics,name=truck_9 fuel_state=0.6,current_load=2389,status=2i 1451692790000000000");
        assert_eq!(row.fields[2].1, Value::I64(2));
    }

    #[test]
    fn unescapes_names_tags_and_strings() {
        let row = one(r#"my\ meas,tag\,key=va\=l\ ue field\ name="a \"quoted\" \\ str" 1"#);
        assert_eq!(&*row.measurement, "my meas");
        assert_eq!(row.tags.tags, vec![("tag,key".to_string(), "va=l ue".to_string())]);
        assert_eq!(&*row.fields[0].0, "field name");
        assert_eq!(row.fields[0].1, Value::Bytes(bytes::Bytes::from_static(br#"a "quoted" \ str"#)));
    }

    #[test]
    fn string_fields_may_span_lines_and_line_numbers_follow() {
        let text = "m s=\"one\ntwo\" 1\n# comment\n\nm x=1 2\r\nm x= 3\n";
        let results: Vec<_> = LineProtocolReader::new(text.as_bytes()).collect();
        assert_eq!(results.len(), 3);
        let first = results[0].as_ref().expect("row");
        assert_eq!(first.fields[0].1, Value::Bytes(bytes::Bytes::from_static(b"one\ntwo")));
        assert_eq!(results[1].as_ref().expect("row").timestamp, 2);
        let err = results[2].as_ref().expect_err("bad value");
        assert_eq!(err.line(), 6);
        assert!(err.to_string().starts_with("line 6:"), "{err}");
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        for (bad, what) in [
            ("m 1", "no field"),
            ("m,t=1", "no field set"),
            ("m f=1 notatime", "bad timestamp"),
            ("m f=12x 1", "bad number"),
            ("m f=\"open 1", "unterminated string"),
            ("m,a=1,a=2 f=1 1", "duplicate tag"),
            ("m f=1 1 extra", "trailing content"),
            ("m f=99999999999999999999i 1", "integer overflow"),
            (",t=1 f=1 1", "empty measurement"),
        ] {
            let text = format!("m ok=1 1\n{bad}\n");
            let results: Vec<_> = LineProtocolReader::new(text.as_bytes()).collect();
            assert!(results[0].is_ok(), "{what}");
            let err = results.iter().find_map(|r| r.as_ref().err());
            match err {
                Some(err) => assert_eq!(err.line(), 2, "{what}: {err}"),
                None => panic!("{what}: {bad:?} was accepted: {results:?}"),
            }
        }
    }

    #[test]
    fn timestamps_follow_precision_and_may_default() {
        let missing = parse_str("m f=1\n").expect_err("missing timestamp");
        assert!(missing.to_string().contains("missing timestamp"), "{missing}");
        let options = ReaderOptions { precision: Precision::Seconds, default_timestamp: Some(42) };
        let rows: Vec<Row> =
            LineProtocolReader::with_options("m f=1 3\nm f=2\n".as_bytes(), options).collect::<Result<_, _>>().expect("parses");
        assert_eq!(rows[0].timestamp, 3_000_000_000);
        assert_eq!(rows[1].timestamp, 42);
        let overflow = LineProtocolReader::with_options(
            "m f=1 9223372036854775807\n".as_bytes(),
            ReaderOptions { precision: Precision::Milliseconds, default_timestamp: None },
        )
        .next()
        .expect("one result");
        assert!(overflow.is_err());
    }

    #[test]
    fn rows_with_the_same_series_text_share_tag_sets() {
        let rows = parse_str("m,a=1 f=1 1\nm,a=2 f=1 1\nm,a=1 f=2,g=3 2\n").expect("parses");
        assert!(Arc::ptr_eq(&rows[0].tags, &rows[2].tags));
        assert!(Arc::ptr_eq(&rows[0].fields[0].0, &rows[2].fields[0].0));
        assert_eq!((rows[0].tags.id, rows[1].tags.id), (0, 1));
        assert!(Arc::ptr_eq(&rows[0].measurement, &rows[1].measurement));
    }
}
