//! The SHOW statements that describe a database's series: measurements, tag keys, tag values,
//! field keys and series, in InfluxDB 1.x's result shapes (no time column; one result series
//! per measurement where InfluxDB gives one).

use crate::error::QueryError;
use crate::eval::{tag_condition, Regexes, Verdict};
use crate::result::{ResultRow, ResultSeries};
use crate::storage::{Storage, StoredSeries};
use crate::value::FieldValue;
use sensordb_influxql::{
    BinaryOp, Expr, Measurement, MeasurementName, ShowFieldKeys, ShowMeasurements, ShowSeries, ShowTagKeys, ShowTagValues, TagKeyFilter,
};
use std::collections::{BTreeMap, BTreeSet};

fn series_of(storage: &dyn Storage, database: &str, sources: &[Measurement]) -> Result<Vec<StoredSeries>, QueryError> {
    if sources.is_empty() {
        return Ok(storage.series(database, None).to_vec());
    }
    let mut out = Vec::new();
    for source in sources {
        let db = source.database.as_deref().unwrap_or(database);
        match &source.name {
            MeasurementName::Name(name) => out.extend(storage.series(db, Some(name)).iter().cloned()),
            MeasurementName::Regex(pattern) => {
                let re = Regexes::one(pattern.as_str())?;
                out.extend(storage.series(db, None).iter().filter(|s| re.is_match(&s.measurement)).cloned());
            }
        }
    }
    Ok(out)
}

/// Keeps the series whose tags satisfy `condition` (field parts count as satisfied: InfluxDB's
/// SHOW conditions are on tags).
fn filter(series: Vec<StoredSeries>, condition: Option<&Expr>) -> Result<Vec<StoredSeries>, QueryError> {
    let Some(condition) = condition else { return Ok(series) };
    let regexes = Regexes::compile([condition])?;
    let no_fields = |_: &str| false;
    Ok(series.into_iter().filter(|s| tag_condition(condition, &s.tags, &no_fields, &regexes) != Verdict::False).collect())
}

fn rows(values: impl IntoIterator<Item = Vec<FieldValue>>) -> Vec<ResultRow> {
    values.into_iter().map(|values| ResultRow { time: 0, values }).collect()
}

fn text(s: &str) -> FieldValue {
    FieldValue::String(s.into())
}

fn page<T>(items: Vec<T>, offset: Option<u64>, limit: Option<u64>) -> Vec<T> {
    items.into_iter().skip(offset.unwrap_or(0) as usize).take(limit.map_or(usize::MAX, |l| l as usize)).collect()
}

pub fn measurements(storage: &dyn Storage, database: &str, statement: &ShowMeasurements) -> Result<Vec<ResultSeries>, QueryError> {
    let database = statement.database.as_deref().unwrap_or(database);
    let series = filter(storage.series(database, None).to_vec(), statement.condition.as_ref())?;
    let mut names: BTreeSet<&str> = series.iter().map(|s| &*s.measurement).collect();
    if let Some(with) = &statement.with_measurement {
        match &with.name {
            MeasurementName::Name(name) => names.retain(|n| n == name),
            MeasurementName::Regex(pattern) => {
                let re = Regexes::one(pattern.as_str())?;
                names.retain(|n| re.is_match(n));
            }
        }
    }
    let names = page(names.into_iter().collect(), statement.offset, statement.limit);
    if names.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![ResultSeries {
        name: "measurements".into(),
        columns: vec!["name".into()].into(),
        rows: rows(names.into_iter().map(|n| vec![text(n)])),
        ..ResultSeries::default()
    }])
}

/// Groups series by measurement, in name order.
fn by_measurement(series: Vec<StoredSeries>) -> BTreeMap<String, Vec<StoredSeries>> {
    let mut out: BTreeMap<String, Vec<StoredSeries>> = BTreeMap::new();
    for s in series {
        out.entry(s.measurement.to_string()).or_default().push(s);
    }
    out
}

pub fn tag_keys(storage: &dyn Storage, database: &str, statement: &ShowTagKeys) -> Result<Vec<ResultSeries>, QueryError> {
    let database = statement.database.as_deref().unwrap_or(database);
    let series = filter(series_of(storage, database, &statement.sources)?, statement.condition.as_ref())?;
    let mut out = Vec::new();
    for (measurement, members) in by_measurement(series) {
        let keys: BTreeSet<&str> = members.iter().flat_map(|s| s.tags.iter().map(|(k, _)| k.as_str())).collect();
        let keys = page(keys.into_iter().collect(), statement.offset, statement.limit);
        if !keys.is_empty() {
            out.push(ResultSeries {
                name: measurement.into(),
                columns: vec!["tagKey".into()].into(),
                rows: rows(keys.into_iter().map(|k| vec![text(k)])),
                ..ResultSeries::default()
            });
        }
    }
    Ok(page(out, statement.series_offset, statement.series_limit))
}

pub fn tag_values(storage: &dyn Storage, database: &str, statement: &ShowTagValues) -> Result<Vec<ResultSeries>, QueryError> {
    let database = statement.database.as_deref().unwrap_or(database);
    let series = filter(series_of(storage, database, &statement.sources)?, statement.condition.as_ref())?;
    let key_matches: Box<dyn Fn(&str) -> bool> = match &statement.key {
        TagKeyFilter::Eq(k) => {
            let k = k.clone();
            Box::new(move |key| key == k)
        }
        TagKeyFilter::NotEq(k) => {
            let k = k.clone();
            Box::new(move |key| key != k)
        }
        TagKeyFilter::In(keys) => {
            let keys = keys.clone();
            Box::new(move |key| keys.iter().any(|k| k == key))
        }
        TagKeyFilter::Regex(r) => {
            let re = Regexes::one(r.as_str())?;
            Box::new(move |key| re.is_match(key))
        }
        TagKeyFilter::NotRegex(r) => {
            let re = Regexes::one(r.as_str())?;
            Box::new(move |key| !re.is_match(key))
        }
    };
    let mut out = Vec::new();
    for (measurement, members) in by_measurement(series) {
        let pairs: BTreeSet<(&str, &str)> =
            members.iter().flat_map(|s| s.tags.iter().filter(|(k, _)| key_matches(k)).map(|(k, v)| (k.as_str(), v.as_str()))).collect();
        let pairs = page(pairs.into_iter().collect(), statement.offset, statement.limit);
        if !pairs.is_empty() {
            out.push(ResultSeries {
                name: measurement.into(),
                columns: vec!["key".into(), "value".into()].into(),
                rows: rows(pairs.into_iter().map(|(k, v)| vec![text(k), text(v)])),
                ..ResultSeries::default()
            });
        }
    }
    Ok(out)
}

pub fn field_keys(storage: &dyn Storage, database: &str, statement: &ShowFieldKeys) -> Result<Vec<ResultSeries>, QueryError> {
    let database = statement.database.as_deref().unwrap_or(database);
    let series = series_of(storage, database, &statement.sources)?;
    let mut out = Vec::new();
    for (measurement, members) in by_measurement(series) {
        let fields: BTreeMap<&str, &str> = members.iter().map(|s| (&*s.field, s.kind.influx_name())).collect();
        let fields = page(fields.into_iter().collect(), statement.offset, statement.limit);
        out.push(ResultSeries {
            name: measurement.into(),
            columns: vec!["fieldKey".into(), "fieldType".into()].into(),
            rows: rows(fields.into_iter().map(|(f, t)| vec![text(f), text(t)])),
            ..ResultSeries::default()
        });
    }
    Ok(out)
}

/// A series key as InfluxDB prints it: `measurement,tag=value,...` with line-protocol escapes.
pub fn series_key(measurement: &str, tags: &[(String, String)]) -> String {
    let escape = |s: &str, extra: &[char]| {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            if c == ',' || c == ' ' || extra.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    let mut key = escape(measurement, &[]);
    for (k, v) in tags {
        key.push(',');
        key.push_str(&escape(k, &['=']));
        key.push('=');
        key.push_str(&escape(v, &['=']));
    }
    key
}

pub fn series(storage: &dyn Storage, database: &str, statement: &ShowSeries) -> Result<Vec<ResultSeries>, QueryError> {
    let database = statement.database.as_deref().unwrap_or(database);
    let all = filter(series_of(storage, database, &statement.sources)?, statement.condition.as_ref())?;
    let keys: BTreeSet<String> = all.iter().map(|s| series_key(&s.measurement, &s.tags)).collect();
    let keys = page(keys.into_iter().collect(), statement.offset, statement.limit);
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![ResultSeries {
        columns: vec!["key".into()].into(),
        rows: rows(keys.into_iter().map(|k| vec![FieldValue::String(k.into())])),
        ..ResultSeries::default()
    }])
}

/// The measurements and tag equalities of a `DROP SERIES` / `DELETE` condition, for stores that
/// delete by tag equality: only `tag = 'value'` joined by AND is accepted.
pub fn tag_equalities(condition: Option<&Expr>) -> Result<Vec<(String, String)>, QueryError> {
    let mut out = Vec::new();
    fn walk(expr: &Expr, out: &mut Vec<(String, String)>) -> Result<(), QueryError> {
        match expr {
            Expr::Paren(inner) => walk(inner, out),
            Expr::Binary(b) if b.op == BinaryOp::And => {
                walk(&b.lhs, out)?;
                walk(&b.rhs, out)
            }
            Expr::Binary(b) if b.op == BinaryOp::Eq => match (&b.lhs, &b.rhs) {
                (Expr::VarRef(k), Expr::String(v)) | (Expr::String(v), Expr::VarRef(k)) => {
                    out.push((k.name.clone(), v.clone()));
                    Ok(())
                }
                _ => Err(QueryError::invalid(format!("only tag = 'value' conditions are supported here, got {expr}"))),
            },
            other => Err(QueryError::invalid(format!("only tag = 'value' conditions joined by AND are supported here, got {other}"))),
        }
    }
    if let Some(condition) = condition {
        walk(condition, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStorage;
    use crate::value::FieldValue::{Float as F, Integer as I};
    use sensordb_influxql::{parse, Statement};

    fn store() -> MemoryStorage {
        let mut m = MemoryStorage::default();
        m.insert("db", "cpu", &[("host", "a"), ("dc", "x")], "usage", vec![(0, F(1.0))]);
        m.insert("db", "cpu", &[("host", "b"), ("dc", "y")], "usage", vec![(0, F(1.0))]);
        m.insert("db", "cpu", &[("host", "b"), ("dc", "y")], "n", vec![(0, I(1))]);
        m.insert("db", "mem", &[("host", "a")], "free", vec![(0, I(1))]);
        m.insert("db", "m x", &[("k", "a,b c")], "f", vec![(0, F(1.0))]);
        m
    }

    fn run(text: &str) -> Vec<ResultSeries> {
        let storage = store();
        let parsed = parse(text).expect("parses");
        match &parsed.statements[0] {
            Statement::ShowMeasurements(s) => measurements(&storage, "db", s),
            Statement::ShowTagKeys(s) => tag_keys(&storage, "db", s),
            Statement::ShowTagValues(s) => tag_values(&storage, "db", s),
            Statement::ShowFieldKeys(s) => field_keys(&storage, "db", s),
            Statement::ShowSeries(s) => series(&storage, "db", s),
            other => panic!("not a SHOW: {other:?}"),
        }
        .expect("runs")
    }

    fn values(series: &ResultSeries) -> Vec<Vec<String>> {
        series.rows.iter().map(|r| r.values.iter().map(|v| v.to_string()).collect()).collect()
    }

    #[test]
    fn measurements_with_regex_condition_and_limit() {
        assert_eq!(values(&run("SHOW MEASUREMENTS")[0]), vec![vec!["cpu"], vec!["m x"], vec!["mem"]]);
        assert_eq!(values(&run("SHOW MEASUREMENTS WITH MEASUREMENT =~ /^m/ LIMIT 1")[0]), vec![vec!["m x"]]);
        assert_eq!(values(&run("SHOW MEASUREMENTS WHERE \"dc\" = 'y'")[0]), vec![vec!["cpu"]]);
        assert!(run("SHOW MEASUREMENTS WITH MEASUREMENT = nothing").is_empty());
    }

    #[test]
    fn tag_keys_values_and_field_keys_per_measurement() {
        let keys = run("SHOW TAG KEYS FROM cpu");
        assert_eq!((&*keys[0].name, values(&keys[0])), ("cpu", vec![vec!["dc".to_string()], vec!["host".to_string()]]));
        let tag_values = run("SHOW TAG VALUES FROM cpu WITH KEY = \"host\" WHERE dc = 'y'");
        assert_eq!(values(&tag_values[0]), vec![vec!["host", "b"]]);
        let all = run("SHOW TAG VALUES WITH KEY =~ /host/");
        assert_eq!(all.iter().map(|s| &*s.name).collect::<Vec<_>>(), vec!["cpu", "mem"]);
        let fields = run("SHOW FIELD KEYS FROM cpu");
        assert_eq!(fields[0].columns[..], ["fieldKey", "fieldType"]);
        assert_eq!(values(&fields[0]), vec![vec!["n", "integer"], vec!["usage", "float"]]);
    }

    #[test]
    fn series_keys_are_escaped_like_line_protocol() {
        let keys = values(&run("SHOW SERIES")[0]);
        assert_eq!(keys, vec![vec!["cpu,dc=x,host=a"], vec!["cpu,dc=y,host=b"], vec!["m\\ x,k=a\\,b\\ c"], vec!["mem,host=a"]]);
        assert_eq!(values(&run("SHOW SERIES FROM cpu WHERE host = 'a'")[0]), vec![vec!["cpu,dc=x,host=a"]]);
    }
}
