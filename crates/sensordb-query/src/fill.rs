//! `fill(...)`: what the buckets of `GROUP BY time` without points show.

use crate::value::FieldValue;

#[derive(Clone, Debug, Default, PartialEq)]
pub enum Fill {
    /// An empty bucket's row shows null (InfluxDB's default).
    #[default]
    Null,
    /// Rows of empty buckets are left out.
    None,
    /// Empty buckets show this value.
    Value(FieldValue),
    /// Empty buckets repeat the last value before them.
    Previous,
    /// Empty buckets between two values get the straight line between them.
    Linear,
}

impl From<sensordb_influxql::Fill> for Fill {
    fn from(fill: sensordb_influxql::Fill) -> Fill {
        match fill {
            sensordb_influxql::Fill::Null => Fill::Null,
            sensordb_influxql::Fill::None => Fill::None,
            sensordb_influxql::Fill::Previous => Fill::Previous,
            sensordb_influxql::Fill::Linear => Fill::Linear,
            sensordb_influxql::Fill::Integer(n) => Fill::Value(FieldValue::Integer(n)),
            sensordb_influxql::Fill::Float(x) => Fill::Value(FieldValue::Float(x)),
        }
    }
}

/// Fills the nulls of one column of bucketed results (`times` ascending unless `descending`);
/// `originally_empty[i]` says that bucket `i` had no points (a null from a non-empty bucket, such
/// as the `stddev` of one point, is left alone). `fill(none)` leaves the column as it is: the
/// caller drops the rows that are empty in every column.
pub fn fill_column(fill: &Fill, times: &[i64], values: &mut [FieldValue], originally_empty: &[bool]) {
    assert_eq!(times.len(), values.len(), "BUG: fill over columns of different lengths");
    match fill {
        Fill::Null | Fill::None => {}
        Fill::Value(v) => {
            for (value, &empty) in values.iter_mut().zip(originally_empty) {
                if empty {
                    *value = v.clone();
                }
            }
        }
        Fill::Previous => {
            let mut last: Option<FieldValue> = None;
            for (value, &empty) in values.iter_mut().zip(originally_empty) {
                if empty {
                    if let Some(last) = &last {
                        *value = last.clone();
                    }
                } else if !value.is_null() {
                    last = Some(value.clone());
                }
            }
        }
        Fill::Linear => {
            let known: Vec<usize> = (0..values.len()).filter(|&i| !originally_empty[i] && values[i].as_f64().is_some()).collect();
            for pair in known.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let (ya, yb) = (values[a].as_f64().unwrap_or(0.0), values[b].as_f64().unwrap_or(0.0));
                let integer = matches!(values[a], FieldValue::Integer(_)) && matches!(values[b], FieldValue::Integer(_));
                for i in a + 1..b {
                    let fraction = (times[i] - times[a]) as f64 / (times[b] - times[a]) as f64;
                    let y = ya + (yb - ya) * fraction;
                    values[i] = if integer { FieldValue::Integer(y as i64) } else { FieldValue::Float(y) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(fill: Fill, values: Vec<FieldValue>, empty: &[bool]) -> Vec<FieldValue> {
        let times: Vec<i64> = (0..values.len() as i64).map(|i| i * 10).collect();
        let mut values = values;
        fill_column(&fill, &times, &mut values, empty);
        values
    }

    use FieldValue::{Float as F, Null as N};

    #[test]
    fn fills_replace_only_empty_buckets() {
        let empty = [false, true, false, true];
        assert_eq!(run(Fill::Value(F(0.0)), vec![F(1.0), N, N, N], &empty), vec![F(1.0), F(0.0), N, F(0.0)]);
        assert_eq!(run(Fill::Previous, vec![F(1.0), N, F(3.0), N], &empty), vec![F(1.0), F(1.0), F(3.0), F(3.0)]);
        assert_eq!(run(Fill::Null, vec![F(1.0), N, F(3.0), N], &empty), vec![F(1.0), N, F(3.0), N]);
    }

    #[test]
    fn linear_interpolates_between_known_values_only() {
        let empty = [true, false, true, true, false, true];
        let out = run(Fill::Linear, vec![N, F(1.0), N, N, F(4.0), N], &empty);
        assert_eq!(out, vec![N, F(1.0), F(2.0), F(3.0), F(4.0), N]);
        let ints = run(Fill::Linear, vec![FieldValue::Integer(0), N, FieldValue::Integer(3)], &[false, true, false]);
        assert_eq!(ints[1], FieldValue::Integer(1));
    }
}
