//! sensordb's own raw read API: points by series and time (`/sensordb/points`) and the series
//! list (`/sensordb/series`). (InfluxQL's `/query` is in [`super::influxql`]. These paths were
//! `/api/v1/query` and `/api/v1/series` before, which are Prometheus' paths: Grafana's Prometheus
//! data source would have taken sensordb for a Prometheus.)
//!
//! `/sensordb/points?measurement=M[&field=F][&tag.<k>=<v>...][&from=T][&to=T][&format=json|csv][&limit=N]`
//! returns the points in `[from, to)` (nanoseconds or RFC 3339; the default range is everything)
//! of every series of measurement M (and field F, when given) carrying all the given tags:
//! JSON `{"series":[{"key":"m,t=v f","kind":"float","points":[[ts,value],...]}],"truncated":false}`
//! or CSV `series,timestamp,value` (keys quoted as CSV requires). Byte values are base64 in JSON
//! and CSV; non-finite floats are `null` in JSON. At most `limit` points are returned over all
//! series (default 1,000,000, at most 10,000,000): when more match, the answer carries
//! `"truncated":true` (JSON) or the header `X-Sensordb-Truncated: true` (both formats). A
//! damaged block is left out and the rest answered: the JSON carries `"damage":[messages]` and
//! both formats the header `X-Sensordb-Damage` (see [`super::damage`]).
//!
//! `/sensordb/series[?measurement=M][&tag.<k>=<v>...]` lists matching series:
//! `{"series":[{"key":..., "measurement":..., "tags":{...}, "field":..., "kind":...}]}`.

use super::damage::{Damage, DAMAGE_HEADER};
use super::{json_response, v1_token, ApiError, HttpState};
use crate::auth::Scope;
use crate::http::params::Params;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sensordb_engine::{Value, ValueColumn};
use std::fmt::Write as _;
use std::sync::Arc;

/// Default and largest `limit` of `/sensordb/points`.
pub const DEFAULT_POINT_LIMIT: usize = 1_000_000;
pub const MAX_POINT_LIMIT: usize = 10_000_000;

fn tag_filter(params: &[(String, String)]) -> Vec<(&str, &str)> {
    params.iter().filter_map(|(k, v)| k.strip_prefix("tag.").map(|k| (k, v.as_str()))).collect()
}

/// `GET /sensordb/series`.
pub async fn series(State(http): State<Arc<HttpState>>, params: Params, headers: HeaderMap) -> Result<Response, ApiError> {
    let token = v1_token(&headers, params.get("p"));
    http.server.tokens.check(token.as_deref(), Scope::Read)?;
    let filter = tag_filter(&params.0);
    let entries = http.server.engine.select_series(params.get("db"), params.get("measurement"), &filter);
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let tags: serde_json::Map<String, serde_json::Value> =
                e.key.tags().iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str()))).collect();
            serde_json::json!({
                "key": e.key.series_text(),
                "database": e.key.database(),
                "measurement": e.key.measurement(),
                "tags": tags,
                "field": e.key.field(),
                "kind": e.kind.to_string(),
            })
        })
        .collect();
    Ok(json_response(StatusCode::OK, serde_json::json!({ "series": list }).to_string()))
}

/// `GET /sensordb/points`.
pub async fn points(State(http): State<Arc<HttpState>>, params: Params, headers: HeaderMap) -> Result<Response, ApiError> {
    let token = v1_token(&headers, params.get("p"));
    http.server.tokens.check(token.as_deref(), Scope::Read)?;
    let measurement = params
        .get("measurement")
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing required parameter \"measurement\""))?
        .to_string();
    let field = params.get("field").map(str::to_string);
    let from = match params.get("from") {
        Some(t) => parse_time(t).ok_or_else(|| ApiError::bad_request(format!("bad from time {t:?}")))?,
        None => i64::MIN,
    };
    let to = match params.get("to") {
        Some(t) => parse_time(t).ok_or_else(|| ApiError::bad_request(format!("bad to time {t:?}")))?,
        None => i64::MAX,
    };
    let csv = match params.get("format").unwrap_or("json") {
        "json" => false,
        "csv" => true,
        other => return Err(ApiError::bad_request(format!("unknown format {other:?}: expected json or csv"))),
    };
    let limit = match params.get("limit") {
        Some(n) => n.parse::<usize>().map_err(|_| ApiError::bad_request(format!("bad limit {n:?}")))?.min(MAX_POINT_LIMIT),
        None => DEFAULT_POINT_LIMIT,
    };
    let tags: Vec<(String, String)> = tag_filter(&params.0).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let database = params.get("db").map(str::to_string);
    let worker = http.clone();
    let (body, truncated, damage) = tokio::task::spawn_blocking(move || {
        let filter: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut entries = worker.server.engine.select_series(database.as_deref(), Some(&measurement), &filter);
        if let Some(field) = &field {
            entries.retain(|e| e.key.field() == field);
        }
        entries.sort_by_key(|e| e.key.canonical());
        render_points(&worker, &entries, from, to, limit, csv)
    })
    .await
    .map_err(ApiError::join)??;
    let content_type = if csv { "text/csv" } else { "application/json" };
    let mut response = (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if truncated {
        response.headers_mut().insert("X-Sensordb-Truncated", HeaderValue::from_static("true"));
    }
    crate::metrics::Metrics::add(&http.server.metrics.damaged_blocks_skipped, damage.count() as u64);
    if let Some(damage) = damage.header() {
        response.headers_mut().insert(DAMAGE_HEADER, damage);
    }
    Ok(response)
}

fn render_points(
    http: &HttpState,
    entries: &[sensordb_engine::SeriesEntry],
    from: i64,
    to: i64,
    limit: usize,
    csv: bool,
) -> Result<(String, bool, Damage), ApiError> {
    let mut out = String::with_capacity(4096);
    let mut left = limit;
    let mut truncated = false;
    let mut damage = Damage::default();
    if csv {
        out.push_str("series,timestamp,value\n");
    } else {
        out.push_str("{\"series\":[");
    }
    for (i, entry) in entries.iter().enumerate() {
        let key = entry.key.series_text();
        let csv_key = csv_quote(&key);
        if !csv {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"key\":{},\"kind\":\"{}\",\"points\":[", serde_json::Value::from(key.as_str()), entry.kind);
        }
        let mut first = true;
        let mut read = http.server.engine.read(entry.id, from, to);
        'chunks: while let Some(chunk) = read.next_chunk() {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    damage.note(&key, e).map_err(ApiError::from_engine)?;
                    continue;
                }
            };
            for (j, &ts) in chunk.timestamps.iter().enumerate() {
                if left == 0 {
                    truncated = true;
                    break 'chunks;
                }
                left -= 1;
                if csv {
                    let _ = write!(out, "{csv_key},{ts},");
                    write_value(&mut out, &chunk.values, j, true);
                    out.push('\n');
                } else {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    let _ = write!(out, "[{ts},");
                    write_value(&mut out, &chunk.values, j, false);
                    out.push(']');
                }
            }
        }
        if !csv {
            out.push_str("]}");
        }
    }
    if !csv {
        let _ = write!(out, "],\"truncated\":{truncated}");
        if !damage.is_empty() {
            let _ = write!(out, ",\"damage\":{}", serde_json::Value::from(damage.messages().to_vec()));
        }
        out.push('}');
    }
    Ok((out, truncated, damage))
}

fn write_value(out: &mut String, values: &ValueColumn, index: usize, csv: bool) {
    match values.get(index) {
        Value::F64(x) if x.is_finite() => {
            let _ = write!(out, "{x:?}");
        }
        Value::F64(x) => {
            if csv {
                let _ = write!(out, "{x}");
            } else {
                out.push_str("null");
            }
        }
        Value::I64(x) => {
            let _ = write!(out, "{x}");
        }
        Value::U64(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Bool(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Bytes(b) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(&b);
            if csv {
                out.push_str(&encoded);
            } else {
                let _ = write!(out, "\"{encoded}\"");
            }
        }
    }
}

fn csv_quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// A time as integer nanoseconds or RFC 3339 with its offset (`2016-01-01T00:00:00Z`, fractions
/// and offsets allowed; the query crate's parser, as InfluxQL conditions use it).
pub fn parse_time(text: &str) -> Option<i64> {
    if let Ok(ns) = text.parse::<i64>() {
        return Some(ns);
    }
    sensordb_query::time::parse_rfc3339(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(parse_time("1451606400000000000"), Some(1_451_606_400_000_000_000));
        assert_eq!(parse_time("2016-01-01T00:00:00Z"), Some(1_451_606_400_000_000_000));
        assert_eq!(parse_time("2016-01-01T01:00:00.5+01:00"), Some(1_451_606_400_500_000_000));
        assert_eq!(parse_time("1969-12-31T23:59:59Z"), Some(-1_000_000_000));
        assert_eq!(parse_time("2016-02-29T00:00:00Z"), Some(1_456_704_000_000_000_000));
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2016-01-01T00:00:00"), None);
        assert_eq!(parse_time("2016-02-30T00:00:00Z"), None);
        assert_eq!(parse_time("2016-01-01T00:00:00Z trailing"), None);
    }
}
