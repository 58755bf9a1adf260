//! `/query`: InfluxQL as InfluxDB 1.x answers it. Statements are parsed by `sensordb-influxql`
//! (an error names its line and character), SELECT and the descriptive SHOWs run in
//! `sensordb-query` over the engine, and the statements that change databases run here.
//!
//! Parameters: `q` (in the URL or a form body), `db`, `epoch` (`ns`, `u`, `ms`, `s`, `m`, `h`;
//! RFC 3339 times without it), `chunked=true` with `chunk_size` (rows per chunk, default
//! 10,000: one JSON object per line, `"partial":true` on all but a statement's last), `p`/`u`
//! (v1 credentials).
//!
//! Bounds: at most `query_concurrency` queries run at once (others wait); a query longer than
//! `query_timeout_ms`, reading more than `query_points_scanned_max` points or making more than
//! `query_buckets_max` buckets per series ends with an error in its statement's result. Queries
//! run on blocking threads, except small ones (a few named measurements of few series, a few
//! blocks read, a short answer; see `inline.rs`): a dashboard's lookup costs less than the
//! hand-over to another thread, so it runs on the thread that took its request.

mod admin;
pub(super) mod engine_storage;
pub(super) mod inline;
mod into;
pub mod render;
mod stream;

use super::{v1_token, ApiError, HttpState};
use crate::auth::Scope;
use crate::http::params::Params;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use engine_storage::EngineStorage;
use render::Epoch;
use sensordb_influxql::Statement;
use sensordb_query::{Context, Limits, QueryError, StatementResult, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows per chunk of a `chunked=true` answer when `chunk_size` is not given (InfluxDB's).
const DEFAULT_CHUNK_SIZE: usize = 10_000;

/// Whether a statement only reads.
fn reads_only(statement: &Statement) -> bool {
    match statement {
        Statement::Select(select) => select.into.is_none(),
        _ => !deletes(statement),
    }
}

/// Whether a statement may remove series (so cached series ids must go).
fn deletes(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::CreateDatabase(_)
            | Statement::DropDatabase(_)
            | Statement::DropSeries(_)
            | Statement::DropMeasurement(_)
            | Statement::Delete(_)
    )
}

/// `GET`/`POST /query`.
pub async fn query(State(http): State<Arc<HttpState>>, mut params: Params, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let form =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if form {
        let body_params: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&body).map_err(|e| ApiError::bad_request(format!("bad form body: {e}")))?;
        params.0.extend(body_params);
    }
    let token = v1_token(&headers, params.get("p"));
    let text = params.get("q").ok_or_else(|| ApiError::bad_request("missing required parameter \"q\""))?;
    let parsed = sensordb_influxql::parse(text).map_err(|e| ApiError::bad_request(format!("error parsing query: {e}")))?;
    if parsed.statements.is_empty() {
        return Err(ApiError::bad_request("error parsing query: empty query"));
    }
    for statement in &parsed.statements {
        http.server.tokens.check(token.as_deref(), if reads_only(statement) { Scope::Read } else { Scope::Write })?;
    }
    let database = params.get("db").unwrap_or_default().to_string();
    let epoch = Epoch::from_param(params.get("epoch"));
    let chunk_size = (params.get("chunked") == Some("true"))
        .then(|| params.get("chunk_size").and_then(|s| s.parse::<usize>().ok()).filter(|&n| n > 0).unwrap_or(DEFAULT_CHUNK_SIZE));

    let config = &http.server.config;
    let timeout = Duration::from_millis(config.query_timeout_ms);
    let turn = http.queries.clone().acquire_owned().await.map_err(|_| ApiError::unavailable("server is shutting down"))?;
    let limits = Limits { max_points_scanned: config.query_points_scanned_max, max_buckets: config.query_buckets_max };
    // A small query runs where its request arrived: handing it to a blocking thread and back
    // cost more than the query (80-140 µs of CPU a lookup). Its bounds keep a worker's turn
    // short; a query that outgrows them runs again on a blocking thread.
    let shape = inline::Shape::of(text, &database);
    if inline::runs_inline(&http, &parsed.statements, &database) && !http.inline_misses.contains(shape) {
        let inline_limits = Limits { max_points_scanned: limits.max_points_scanned.min(inline::POINTS_MAX), ..limits };
        let ran = run_statements(&http, &parsed.statements, &database, inline_limits, timeout);
        let metrics = &http.server.metrics;
        crate::metrics::Metrics::add(&metrics.queries_inline, 1);
        if ran.iter().any(|r| r.limited) {
            crate::metrics::Metrics::add(&metrics.queries_inline_retried, 1);
            http.inline_misses.insert(shape);
        } else {
            let results: Vec<StatementResult> = ran.into_iter().map(|r| r.result).collect();
            let rows: usize = results.iter().flat_map(|r| &r.series).map(|s| s.rows.len()).sum();
            if rows <= inline::ROWS_MAX {
                drop(turn);
                let mut out = String::new();
                render_results(&mut out, &results, epoch, chunk_size, &mut |_| true);
                return Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], axum::body::Body::from(out)).into_response());
            }
            // A long answer is written on a blocking thread, like any other.
            let answer = stream::streamed(move |out, flush| {
                let _turn = turn;
                stream::Written { completed: render_results(out, &results, epoch, chunk_size, flush), leftovers: results }
            });
            return finish_answer(answer, timeout).await;
        }
    }
    let worker_http = http.clone();
    // The statements run and their answer is written on one blocking thread; the query's turn
    // lasts until the answer is written.
    let answer = stream::streamed(move |out, flush| {
        let _turn = turn;
        let ran = run_statements(&worker_http, &parsed.statements, &database, limits, timeout);
        if ran.iter().any(|r| r.deletes) {
            worker_http.clear_caches();
        }
        let results: Vec<StatementResult> = ran.into_iter().map(|r| r.result).collect();
        stream::Written { completed: render_results(out, &results, epoch, chunk_size, flush), leftovers: results }
    });
    finish_answer(answer, timeout).await
}

/// The response of a streamed answer, or the error that ended it.
async fn finish_answer(
    answer: impl std::future::Future<Output = Result<Response, stream::WriterFailed>>,
    timeout: Duration,
) -> Result<Response, ApiError> {
    match tokio::time::timeout(timeout + Duration::from_millis(100), answer).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(stream::WriterFailed)) => Err(ApiError::internal("the query failed (see the server's log)")),
        Err(_) => Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "query timeout: the query ran longer than query_timeout_ms")),
    }
}

/// Writes the answer of `results`: one JSON object, or with `chunk_size` one per chunk. False
/// when `flush` stopped it.
fn render_results(
    out: &mut String,
    results: &[StatementResult],
    epoch: Epoch,
    chunk_size: Option<usize>,
    flush: &mut render::Flush<'_>,
) -> bool {
    match chunk_size {
        None => {
            out.push_str("{\"results\":[");
            for (id, result) in results.iter().enumerate() {
                if id > 0 {
                    out.push(',');
                }
                if !render::statement_flushing(out, id, result, epoch, flush) {
                    return false;
                }
            }
            out.push_str("]}");
            true
        }
        Some(size) => chunked(out, results, epoch, size, flush),
    }
}

/// One statement's outcome.
struct Ran {
    result: StatementResult,
    /// The statement may have deleted series (cached series ids must go).
    deletes: bool,
    /// It failed on a limit of the server.
    limited: bool,
}

/// Runs each statement in turn, stopping after the first that fails (as InfluxDB does).
fn run_statements(http: &HttpState, statements: &[Statement], database: &str, limits: Limits, timeout: Duration) -> Vec<Ran> {
    let storage = EngineStorage::new(&http.server.engine, Instant::now() + timeout, &http.series_lists);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
    let context = Context { storage: &storage, database, now, limits };
    let mut results = Vec::with_capacity(statements.len());
    for statement in statements {
        let deletes = deletes(statement);
        let outcome = run_one(http, &context, statement);
        let failed = outcome.is_err();
        let limited = matches!(outcome, Err(QueryError::Limit(_)));
        let warnings = storage.take_damage();
        crate::metrics::Metrics::add(&http.server.metrics.damaged_blocks_skipped, warnings.len() as u64);
        results.push(match outcome {
            Ok(series) => {
                let time_zone = match statement {
                    Statement::Select(select) => sensordb_query::time::zone_of(select).ok().flatten(),
                    _ => None,
                };
                Ran { result: StatementResult { series, warnings, time_zone, ..StatementResult::default() }, deletes, limited }
            }
            Err(e) => {
                Ran { result: StatementResult { error: Some(e.to_string()), warnings, ..StatementResult::default() }, deletes, limited }
            }
        });
        if failed {
            break;
        }
    }
    results
}

fn run_one(http: &HttpState, context: &Context<'_>, statement: &Statement) -> Result<Vec<sensordb_query::ResultSeries>, QueryError> {
    let needs_database = || {
        if context.database.is_empty() {
            Err(QueryError::invalid("database name required"))
        } else {
            Ok(())
        }
    };
    let storage = context.storage;
    let db = context.database;
    match statement {
        Statement::Select(select) => {
            let names_database =
                select.sources.iter().all(|s| matches!(s, sensordb_influxql::Source::Measurement(m) if m.database.is_some()));
            if !names_database {
                needs_database()?;
            }
            into::select_into(http, context, select)
        }
        Statement::ShowMeasurements(s) => {
            if s.database.is_none() {
                needs_database()?;
            }
            sensordb_query::show::measurements(storage, db, s)
        }
        Statement::ShowTagKeys(s) => {
            if s.database.is_none() {
                needs_database()?;
            }
            sensordb_query::show::tag_keys(storage, db, s)
        }
        Statement::ShowTagValues(s) => {
            if s.database.is_none() {
                needs_database()?;
            }
            sensordb_query::show::tag_values(storage, db, s)
        }
        Statement::ShowFieldKeys(s) => {
            if s.database.is_none() {
                needs_database()?;
            }
            sensordb_query::show::field_keys(storage, db, s)
        }
        Statement::ShowSeries(s) => {
            if s.database.is_none() {
                needs_database()?;
            }
            sensordb_query::show::series(storage, db, s)
        }
        Statement::ShowDatabases => Ok(admin::show_databases(&http.server.engine)),
        Statement::ShowRetentionPolicies(s) => {
            let database = s.database.as_deref().unwrap_or(db);
            if database.is_empty() {
                return Err(QueryError::invalid("database name required"));
            }
            admin::show_retention_policies(&http.server.engine, database)
        }
        Statement::CreateDatabase(create) => admin::create_database(&http.server.engine, create),
        Statement::DropSeries(drop) => {
            needs_database()?;
            admin::drop_series(&http.server.engine, db, drop)
        }
        Statement::DropMeasurement(drop) => {
            needs_database()?;
            admin::drop_measurement(&http.server.engine, db, &drop.name)
        }
        Statement::DropDatabase(drop) => admin::drop_database(&http.server.engine, &drop.name),
        Statement::Delete(_) => Err(QueryError::invalid("DELETE is not supported; use DROP SERIES or a storage period")),
    }
}

/// `chunked=true`: one `{"results":[...]}` object per line, each series cut into `size` rows.
fn chunked(out: &mut String, results: &[StatementResult], epoch: Epoch, size: usize, flush: &mut render::Flush<'_>) -> bool {
    for (id, result) in results.iter().enumerate() {
        if result.error.is_some() || result.series.is_empty() {
            out.push_str("{\"results\":[");
            render::statement(out, id, result, epoch);
            out.push_str("]}\n");
            continue;
        }
        let pieces: Vec<(usize, std::ops::Range<usize>)> = result
            .series
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let n = s.rows.len().max(1);
                (0..n.div_ceil(size)).map(move |c| (i, c * size..((c + 1) * size).min(s.rows.len())))
            })
            .collect();
        for (p, (i, rows)) in pieces.iter().enumerate() {
            let series = &result.series[*i];
            let series_continues = rows.end < series.rows.len();
            let more = p + 1 < pieces.len();
            out.push_str("{\"results\":[{\"statement_id\":");
            out.push_str(&id.to_string());
            out.push_str(",\"series\":[");
            if !render::series_flushing(out, series, rows.clone(), (epoch, result.time_zone.as_ref()), series_continues, flush) {
                return false;
            }
            out.push(']');
            if more {
                out.push_str(",\"partial\":true");
            }
            out.push_str("}]}\n");
        }
    }
    true
}
