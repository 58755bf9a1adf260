//! The InfluxDB-compatible HTTP API (HTTP/1.1, axum over hyper). Reference: `docs/HTTP.md`.
//!
//! | endpoint | scope | answers |
//! |---|---|---|
//! | `POST /write` (v1) | write | 204; 400 bad parameter / bad line (partial write) / field type conflict; 401/403; 413; 415; 503 disk full |
//! | `POST /api/v2/write` | write | as `/write` |
//! | `GET`/`POST /query` | read (`SELECT`, `SHOW`), write (`CREATE`, `DROP`) | 200 (a failed statement's error inside its result); 400 parse error |
//! | `GET /sensordb/points` | read | 200 JSON or CSV points (damaged blocks left out and named, see [`damage`]); 400 |
//! | `GET /sensordb/series` | read | 200 JSON series list |
//! | `GET /sensordb/graph` | read | 200 JSON M4 points per series for a plot of `width` pixels (damage as for points); 400 |
//! | `GET /`, `GET /assets/...` | open | 200 the graph page (see [`page`]) |
//! | `GET`/`HEAD /ping` | open | 204 |
//! | `GET /health` | open | 200 `{"status":"pass"}` |
//! | `GET /metrics` | open | 200 Prometheus text |
//!
//! Tokens come from `Authorization: Token <t>` / `Bearer <t>`, `Authorization: Basic` (the
//! password is the token), or the v1 `p` query parameter, which wins over the header as in
//! InfluxDB 1.x. Errors are JSON `{"error": "...", "code": "...", "message": "..."}` (the 1.x
//! field and the 2.x ones).
//!
//! Connections hold a permit of the shared `connections` semaphore for their whole life (the
//! accept loop waits for one, so excess clients wait in the kernel's accept queue) and are closed
//! when idle, when a request's headers come too slowly, or when its body stalls (see
//! [`connection`], [`body_deadline`]); write bodies hold `in_flight_bytes` permits until durable
//! (see [`write`]). On the shutdown signal the server stops accepting, lets requests in progress
//! finish, and returns.
//!
//! Databases (v1 `db`, v2 `bucket`) are namespaces of series in the engine, persisted with
//! their retention (storage period, capacity) in the data directory.

pub mod body_deadline;
pub mod connection;
pub mod damage;
pub mod graph;
pub mod influxql;
pub mod line_protocol;
pub mod page;
pub mod params;
pub mod query;
pub mod series_cache;
pub mod write;

pub use connection::serve;

use crate::auth::AuthError;
use crate::metrics::Metrics;
use crate::state::ServerState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use parking_lot::RwLock;
use series_cache::SeriesCache;
use std::collections::HashMap;
use std::sync::Arc;

/// What the HTTP handlers share.
pub struct HttpState {
    pub server: Arc<ServerState>,
    /// Series caches by database.
    caches: RwLock<HashMap<String, Arc<SeriesCache>>>,
    /// Write batches reused between write requests.
    batches: write::BatchPool,
    /// Buffers for decompressed bodies, reused between write requests.
    bodies: write::BodyPool,
    /// Resolved series texts, kept between write requests.
    memos: write::MemoPool,
    /// Turns for `/query` (`query_concurrency` of them).
    queries: Arc<tokio::sync::Semaphore>,
    /// Series lists of recent queries.
    series_lists: influxql::engine_storage::SeriesLists,
    /// Shapes of queries too large to run inline.
    inline_misses: influxql::inline::Misses,
}

impl HttpState {
    pub fn new(server: Arc<ServerState>) -> HttpState {
        HttpState {
            caches: RwLock::new(HashMap::new()),
            batches: write::BatchPool::default(),
            bodies: write::BodyPool::default(),
            memos: write::MemoPool::default(),
            queries: Arc::new(tokio::sync::Semaphore::new(server.config.query_concurrency)),
            series_lists: Default::default(),
            inline_misses: Default::default(),
            server,
        }
    }

    /// The series cache of `database`; the first write to a database creates it (durably) in
    /// the engine, as InfluxDB 1.x creates nothing but our users expect `SHOW DATABASES` to
    /// list what they wrote to.
    pub fn cache(&self, database: &str) -> Result<Arc<SeriesCache>, ApiError> {
        if let Some(cache) = self.caches.read().get(database) {
            return Ok(cache.clone());
        }
        self.server.engine.create_database(database).map_err(ApiError::from_engine)?;
        Ok(self.caches.write().entry(database.to_string()).or_insert_with(|| Arc::new(SeriesCache::new(database))).clone())
    }

    /// Forgets every cached series id: after a deletion, cached ids may name deleted series.
    pub fn clear_caches(&self) {
        self.caches.write().clear();
    }
}

/// The routes over `http`.
pub fn router(http: Arc<HttpState>) -> Router {
    Router::new()
        .route("/write", post(write::write_v1))
        .route("/api/v2/write", post(write::write_v2))
        .route("/query", get(influxql::query).post(influxql::query))
        .route("/sensordb/points", get(query::points))
        .route("/sensordb/series", get(query::series))
        .route("/sensordb/graph", get(graph::graph))
        .route("/", get(page::index))
        .route("/assets/{name}", get(page::asset))
        .route("/ping", get(ping))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(http.clone(), count_requests))
        .with_state(http)
}

async fn count_requests(State(http): State<Arc<HttpState>>, request: Request, next: Next) -> Response {
    let metrics = &http.server.metrics;
    Metrics::add(&metrics.http_requests, 1);
    let response = next.run(request).await;
    if response.status().is_client_error() || response.status().is_server_error() {
        Metrics::add(&metrics.http_errors, 1);
    }
    response
}

async fn ping() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert("X-Influxdb-Version", HeaderValue::from_static("1.8.10-sensordb"));
    response
}

async fn health() -> Response {
    json_response(StatusCode::OK, r#"{"name":"sensordb","message":"ready for queries and writes","status":"pass"}"#.to_string())
}

async fn metrics(State(http): State<Arc<HttpState>>) -> Response {
    let text = http.server.metrics.render(&http.server.engine);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The token of a request's `Authorization` header (`Token`, `Bearer`, or the password of
/// `Basic`).
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD.decode(rest).ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        return decoded.split_once(':').map(|(_, password)| password.to_string());
    }
    None
}

/// The token of a request that may carry InfluxDB 1.x credentials: the `p` query parameter when
/// it is given, else the `Authorization` header. As in InfluxDB 1.x, credentials in the URL take
/// precedence: the 1.x Python client sends `Basic root:root` by default even when the caller
/// puts `u` and `p` in the URL.
pub fn v1_token(headers: &HeaderMap, p: Option<&str>) -> Option<String> {
    match p.filter(|p| !p.is_empty()) {
        Some(p) => Some(p.to_string()),
        None => bearer_token(headers),
    }
}

/// An error answer: JSON `{"error": message, "code": 2.x code, "message": message[, "line": N]}`
/// with a status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The first bad line of a write body.
    pub line: Option<u64>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), line: None, retry_after: None }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    pub fn join(e: tokio::task::JoinError) -> ApiError {
        Self::internal(format!("request task failed: {e}"))
    }

    /// Disk full → 503 with `Retry-After`; a kind mismatch → 400 field type conflict; a bad key
    /// → 400; anything else (poisoned engine, I/O, corruption) → 500.
    pub fn from_engine(e: sensordb_engine::Error) -> ApiError {
        use sensordb_engine::Error;
        match e {
            Error::NoSpace { .. } => ApiError { retry_after: Some(30), ..Self::unavailable(format!("insufficient storage: {e}")) },
            Error::KindMismatch { key, existing, attempted } => Self::bad_request(format!(
                "field type conflict: input field of series \"{key}\" is type {attempted}, already exists as type {existing}"
            )),
            Error::InvalidSeriesKey(_) | Error::PayloadTooLarge { .. } => Self::bad_request(e.to_string()),
            Error::Closed => Self::unavailable(e.to_string()),
            other => {
                tracing::error!(error = %other, "engine failure");
                Self::internal(other.to_string())
            }
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        match e {
            AuthError::Unauthenticated => Self::new(StatusCode::UNAUTHORIZED, "authorization failed: missing or unknown token"),
            AuthError::Forbidden(scope) => Self::new(StatusCode::FORBIDDEN, format!("token lacks the {scope:?} scope").to_lowercase()),
        }
    }
}

/// The InfluxDB 2.x error code of an answer's status.
fn influx2_code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not found",
        StatusCode::PAYLOAD_TOO_LARGE => "request too large",
        StatusCode::TOO_MANY_REQUESTS => "too many requests",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        status if status.is_server_error() => "internal error",
        _ => "invalid",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // "error" is what InfluxDB 1.x answers; "code" and "message" what 2.x answers, and what
        // 2.x clients (influxdb-client, Telegraf's outputs.influxdb_v2) show of an error.
        let mut body = serde_json::json!({ "error": self.message, "code": influx2_code(self.status), "message": self.message });
        if let Some(line) = self.line {
            body["line"] = line.into();
        }
        let mut response = json_response(self.status, body.to_string());
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Token"));
        }
        response
    }
}
