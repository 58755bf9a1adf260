//! Rendering rows as InfluxDB line protocol, the bodies the HTTP clients of the benchmark send.

use crate::row::Row;
use sensordb_engine::Value;

/// Appends `row` as one line of InfluxDB line protocol (nanosecond timestamp) to `out`. Tags
/// with an empty value are left out (line protocol has no empty tag values), and so is a row
/// without fields; string values are `Value::Bytes` as UTF-8 (invalid sequences replaced).
pub fn render_row(row: &Row, out: &mut Vec<u8>) {
    if row.fields.is_empty() {
        // Not expressible: a line needs at least one field.
        return;
    }
    escape(&row.measurement, b", ", out);
    for (key, value) in &row.tags.tags {
        if value.is_empty() || key.is_empty() {
            continue;
        }
        out.push(b',');
        escape(key, b",= ", out);
        out.push(b'=');
        escape(value, b",= ", out);
    }
    let mut separator = b' ';
    for (field, value) in &row.fields {
        out.push(separator);
        separator = b',';
        escape(field, b",= ", out);
        out.push(b'=');
        render_value(value, out);
    }
    out.push(b' ');
    out.extend_from_slice(row.timestamp.to_string().as_bytes());
    out.push(b'\n');
}

/// Renders rows into one body.
pub fn render_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        render_row(row, &mut out);
    }
    out
}

fn render_value(value: &Value, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = match value {
        // `{:?}` keeps a fractional part or exponent, so an integral float reads back as a float.
        Value::F64(v) if v.is_finite() => write!(out, "{v:?}"),
        // Line protocol has no spelling for NaN or infinities.
        Value::F64(_) => write!(out, "0.0"),
        Value::I64(v) => write!(out, "{v}i"),
        Value::U64(v) => write!(out, "{v}u"),
        Value::Bool(v) => write!(out, "{v}"),
        Value::Bytes(bytes) => {
            out.push(b'"');
            for c in String::from_utf8_lossy(bytes).chars() {
                match c {
                    '"' => out.extend_from_slice(b"\\\""),
                    '\\' => out.extend_from_slice(b"\\\\"),
                    c => {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            out.push(b'"');
            Ok(())
        }
    };
}

fn escape(text: &str, special: &[u8], out: &mut Vec<u8>) {
    for &b in text.as_bytes() {
        if special.contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
}
