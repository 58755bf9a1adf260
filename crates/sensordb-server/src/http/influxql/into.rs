//! `SELECT ... INTO`: the SELECT runs as without INTO, each row of its result becomes a point of
//! the target measurement (the series' GROUP BY tags as tags, the non-null column values as
//! fields, the row's time), written through the ordinary write path, and the statement answers
//! InfluxDB's `result` series: `time` 0 and the number of points `written`.

use super::super::line_protocol::{Precision, ReadOptions};
use super::super::write::{ingest, now_ns};
use super::super::HttpState;
use sensordb_influxql::SelectStatement;
use sensordb_query::{Context, FieldValue, QueryError, ResultRow, ResultSeries};
use std::fmt::Write as _;

pub fn select_into(http: &HttpState, context: &Context<'_>, statement: &SelectStatement) -> Result<Vec<ResultSeries>, QueryError> {
    let Some(target) = &statement.into else { return sensordb_query::select::select(context, statement) };
    if target.retention_policy.as_deref().is_some_and(|rp| rp != "autogen") {
        return Err(QueryError::invalid(format!("retention policy not found: {}", target.retention_policy.as_deref().unwrap_or(""))));
    }
    let database = target.database.as_deref().unwrap_or(context.database);
    if database.is_empty() {
        return Err(QueryError::invalid("database name required"));
    }
    let select = SelectStatement { into: None, ..statement.clone() };
    let series = sensordb_query::select::select(context, &select)?;
    let (body, points) = line_protocol(&series, target.measurement.as_deref());
    if points > 0 {
        let cache = http.cache(database).map_err(|e| QueryError::Storage(e.message))?;
        let options = ReadOptions { precision: Precision::Nanoseconds, default_timestamp: now_ns(), max_line_bytes: usize::MAX };
        let report = ingest(http, &cache, &body, options).map_err(|e| QueryError::Storage(e.message))?;
        if let Some(error) = report.first_error {
            return Err(QueryError::invalid(format!("partial write: {}", error.message)));
        }
    }
    Ok(vec![ResultSeries {
        name: "result".into(),
        columns: vec!["time".into(), "written".into()].into(),
        rows: vec![ResultRow { time: 0, values: vec![FieldValue::Integer(points as i64)] }],
        has_time: true,
        ..ResultSeries::default()
    }])
}

/// The rows of `series` as line protocol, one line per row with at least one non-null value
/// (InfluxDB writes no point without fields), and the number of lines. `measurement` `None`
/// keeps each series' own name (`INTO :MEASUREMENT`). Tags with empty values are left out, as
/// a point cannot carry them.
pub fn line_protocol(series: &[ResultSeries], measurement: Option<&str>) -> (String, usize) {
    let mut body = String::new();
    let mut points = 0;
    for s in series {
        let mut key = escape(measurement.unwrap_or(&s.name), &[',', ' ']);
        for (k, v) in s.tags.iter().filter(|(_, v)| !v.is_empty()) {
            let _ = write!(key, ",{}={}", escape(k, &[',', ' ', '=']), escape(v, &[',', ' ', '=']));
        }
        let columns = &s.columns[usize::from(s.has_time)..];
        for row in &s.rows {
            let mut fields = String::new();
            for (name, value) in columns.iter().zip(&row.values) {
                let Some(text) = field_value(value) else { continue };
                fields.push(if fields.is_empty() { ' ' } else { ',' });
                fields.push_str(&escape(name, &[',', ' ', '=']));
                fields.push('=');
                fields.push_str(&text);
            }
            if fields.is_empty() {
                continue;
            }
            let _ = writeln!(body, "{key}{fields} {}", row.time);
            points += 1;
        }
    }
    (body, points)
}

fn field_value(value: &FieldValue) -> Option<String> {
    Some(match value {
        FieldValue::Null => return None,
        FieldValue::Float(x) if !x.is_finite() => return None,
        // The shortest text that reads back as the same float, never an exponent (a float
        // field: line protocol reads a number without a suffix as one).
        FieldValue::Float(x) => format!("{x}"),
        FieldValue::Integer(n) => format!("{n}i"),
        FieldValue::Unsigned(n) => format!("{n}u"),
        FieldValue::Boolean(b) => b.to_string(),
        FieldValue::String(s) => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
    })
}

fn escape(text: &str, special: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if special.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_points_with_group_tags_and_non_null_fields() {
        let series = vec![ResultSeries {
            name: "readings".into(),
            tags: vec![("name".into(), "truck 1".into()), ("fleet".into(), String::new())].into(),
            columns: vec!["time".into(), "elapsed".into(), "mean".into()].into(),
            rows: vec![
                ResultRow { time: 10, values: vec![FieldValue::Integer(3), FieldValue::Null] },
                ResultRow { time: 20, values: vec![FieldValue::Null, FieldValue::Null] },
                ResultRow { time: 30, values: vec![FieldValue::Null, FieldValue::Float(2.5)] },
            ],
            has_time: true,
        }];
        let (body, points) = line_protocol(&series, Some("out m"));
        assert_eq!(points, 2);
        assert_eq!(body, "out\\ m,name=truck\\ 1 elapsed=3i 10\nout\\ m,name=truck\\ 1 mean=2.5 30\n");
        let (body, _) = line_protocol(&series, None);
        assert!(body.starts_with("readings,name=truck\\ 1 elapsed=3i 10\n"), "{body}");
    }

    #[test]
    fn floats_read_back_exactly() {
        assert_eq!(field_value(&FieldValue::Float(0.1 + 0.2)).as_deref(), Some("0.30000000000000004"));
        assert_eq!(field_value(&FieldValue::Float(2.0)).as_deref(), Some("2"));
        assert_eq!(field_value(&FieldValue::Float(1e-7)).as_deref(), Some("0.0000001"));
        assert_eq!(field_value(&FieldValue::Float(f64::NAN)), None);
        assert_eq!(field_value(&FieldValue::String("a\"b".into())).as_deref(), Some("\"a\\\"b\""));
    }
}
