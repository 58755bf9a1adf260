//! `/sensordb/graph`: the points a plot of `width` pixels needs, per series, by M4 downsampling
//! (first, last, minimum and maximum of every pixel column; see `sensordb_query::m4`), so a
//! week at 1 Hz draws from at most 4 × width points and spikes stay visible.
//!
//! `GET /sensordb/graph?db=D&measurement=M&field=F[&tag.K=V...]&from=T&to=T[&width=N]`: times
//! in nanoseconds or RFC 3339, `[from, to]` inclusive (default: the last hour), `width` 1 to
//! 10,000 (default 1,000). Answers `{"series":[{"key":"m,t=v f","tags":{...},"points":[[ms,
//! value],...]}]}` with times in milliseconds (what JavaScript numbers hold exactly) and at most
//! 1,000 series. A damaged block is left out and the rest drawn: the JSON then carries
//! `"damage":[messages]` and the header `X-Sensordb-Damage` (see [`super::damage`]).

use super::damage::{Damage, DAMAGE_HEADER};
use super::influxql::engine_storage::with_slice_of;
use super::query::parse_time;
use super::{json_response, v1_token, ApiError, HttpState};
use crate::auth::Scope;
use crate::http::params::Params;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sensordb_engine::{SeriesEntry, ValueColumn};
use sensordb_query::m4::M4;
use std::sync::Arc;

const WIDTH_MAX: usize = 10_000;
const SERIES_MAX: usize = 1_000;

pub async fn graph(State(http): State<Arc<HttpState>>, params: Params, headers: HeaderMap) -> Result<Response, ApiError> {
    http.server.tokens.check(v1_token(&headers, params.get("p")).as_deref(), Scope::Read)?;
    let required = |name: &str| {
        params
            .get(name)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| ApiError::bad_request(format!("missing required parameter {name:?}")))
    };
    let (database, measurement, field) = (required("db")?, required("measurement")?, required("field")?);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
    let time = |name: &str, default: i64| match params.get(name) {
        Some(t) => parse_time(t).ok_or_else(|| ApiError::bad_request(format!("bad {name} time {t:?}"))),
        None => Ok(default),
    };
    let to = time("to", now)?;
    let from = time("from", to.saturating_sub(3_600_000_000_000))?;
    if from > to {
        return Err(ApiError::bad_request("from is after to"));
    }
    let width = match params.get("width") {
        Some(w) => w
            .parse::<usize>()
            .ok()
            .filter(|w| (1..=WIDTH_MAX).contains(w))
            .ok_or_else(|| ApiError::bad_request(format!("width must be 1 to {WIDTH_MAX}")))?,
        None => 1_000,
    };
    let tags: Vec<(String, String)> =
        params.0.iter().filter_map(|(k, v)| k.strip_prefix("tag.").map(|k| (k.to_string(), v.clone()))).collect();
    let _turn = http.queries.clone().acquire_owned().await.map_err(|_| ApiError::unavailable("server is shutting down"))?;
    let worker = http.clone();
    let body = tokio::task::spawn_blocking(move || -> Result<(String, Option<axum::http::HeaderValue>), ApiError> {
        let filter: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut entries = worker.server.engine.select_series(Some(&database), Some(&measurement), &filter);
        entries.retain(|e| e.key.field() == field);
        entries.sort_by_key(|e| e.key.canonical());
        if entries.len() > SERIES_MAX {
            return Err(ApiError::bad_request(format!(
                "{} series match; a graph shows at most {SERIES_MAX}: add tag filters",
                entries.len()
            )));
        }
        // Written straight into the answer's text: a week's graph is 4,000 points, and a tree of
        // JSON values cost more than drawing them.
        let mut body = Vec::with_capacity(64 * 1024);
        body.extend_from_slice(b"{\"series\":[");
        let mut damage = Damage::default();
        for (i, entry) in entries.iter().enumerate() {
            let points = m4_of(&worker, entry, from, to, width, &mut damage).map_err(ApiError::from_engine)?;
            if i > 0 {
                body.push(b',');
            }
            write_series(&mut body, entry, &points);
        }
        body.push(b']');
        if !damage.is_empty() {
            body.extend_from_slice(b",\"damage\":");
            json(&mut body, damage.messages());
        }
        body.push(b'}');
        crate::metrics::Metrics::add(&worker.server.metrics.damaged_blocks_skipped, damage.count() as u64);
        let body = String::from_utf8(body).map_err(|_| ApiError::internal("BUG: the graph's JSON is not UTF-8"))?;
        Ok((body, damage.header()))
    })
    .await
    .map_err(ApiError::join)??;
    let (body, damage) = body;
    let mut response = json_response(StatusCode::OK, body);
    if let Some(damage) = damage {
        response.headers_mut().insert(DAMAGE_HEADER, damage);
    }
    Ok(response)
}

fn m4_of(
    http: &HttpState,
    entry: &SeriesEntry,
    from: i64,
    to: i64,
    width: usize,
    damage: &mut Damage,
) -> Result<Vec<(i64, f64)>, sensordb_engine::Error> {
    let mut m4 = M4::new(from, to, width);
    let mut read = http.server.engine.read(entry.id, from, to.saturating_add(1));
    let mut strings = Vec::new();
    // Cached blocks are lent, not copied.
    while let Some(chunk) = read.next_view() {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                damage.note(&entry.key.series_text(), e)?;
                continue;
            }
        };
        let (values, window) = chunk.values();
        // Payloads draw nothing: skip them before converting them to strings.
        if matches!(values, ValueColumn::Bytes(_)) {
            continue;
        }
        with_slice_of(values, window, &mut strings, |values| m4.add(chunk.timestamps(), values));
    }
    Ok(m4.points())
}

/// One series object: `{"key":..,"tags":{..},"points":[[ms,value],..]}`.
fn write_series(body: &mut Vec<u8>, entry: &SeriesEntry, points: &[(i64, f64)]) {
    body.extend_from_slice(b"{\"key\":");
    json(body, &entry.key.canonical());
    body.extend_from_slice(b",\"tags\":{");
    for (i, (k, v)) in entry.key.tags().iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        json(body, k);
        body.push(b':');
        json(body, v);
    }
    body.extend_from_slice(b"},\"points\":[");
    for (i, &(t, v)) in points.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.push(b'[');
        json(body, &t.div_euclid(1_000_000));
        body.push(b',');
        // serde_json writes a float as the shortest text that reads back the same, and NaN and
        // the infinities (which JSON lacks) as null.
        json(body, &v);
        body.push(b']');
    }
    body.extend_from_slice(b"]}");
}

/// `value` as JSON, appended.
fn json(body: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    // Writing into a Vec cannot fail, and these values (strings, numbers) always serialise.
    let _ = serde_json::to_writer(&mut *body, value);
}
