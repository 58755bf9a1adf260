//! The write endpoints: `POST /write` (InfluxDB 1.x) and `POST /api/v2/write` (InfluxDB 2.x).
//!
//! A request goes: token check (`write` scope) → parameter check → body size check against
//! `max_body_bytes` (the `Content-Length` before reading, the bytes while reading, the
//! decompressed bytes for `Content-Encoding: gzip`, so a gzip bomb stops at the limit) → in-flight
//! byte permits (one per body byte, taken before reading with a `Content-Length`, before reading
//! past 64 KiB without one, and given back once the write is durable; a sender waits for them,
//! it is never refused) → parse and resolve series ids → one engine
//! write, durable before the answer → `204 No Content`.
//!
//! # Partial writes
//! As InfluxDB 1.x does, the valid lines of a body with bad lines ARE stored: the answer is then
//! `400` with `{"error": "partial write: line N: <why> dropped=D", "line": N}`, naming the first
//! bad line and counting every dropped line. A line whose field has another type than the
//! existing series (`field type conflict`) is dropped whole, and reported the same way.
//!
//! # Disk full
//! When the engine reports the disk full the answer is `503 Service Unavailable` with
//! `Retry-After: 30`: nothing of that body is stored, and InfluxDB clients retry a 503 after
//! backing off, by which time retention may have freed space.
//!
//! `gunzip` inflates gzip bodies within the size limit.

mod gunzip;

use super::line_protocol::{parse_series, Field, FieldValue, LineError, Lines, Precision, ReadOptions};
use super::series_cache::{BodySeries, FieldError, NewSeriesBudget, SeriesCache};
use super::{bearer_token, v1_token, ApiError, HttpState};
use crate::auth::Scope;
use crate::http::params::Params;
use crate::metrics::Metrics;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use sensordb_engine::{Value, WriteBatch};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OwnedSemaphorePermit;

/// What one body gave.
#[derive(Debug, Default)]
pub struct WriteReport {
    /// Points stored.
    pub points: usize,
    /// The first bad line.
    pub first_error: Option<LineError>,
    /// Lines not stored.
    pub dropped_lines: usize,
    /// The series limit that dropped lines (`max-series-per-database limit exceeded: (N)`), if
    /// one did; those lines are counted in `dropped_lines` too.
    pub limit_exceeded: Option<String>,
}

/// Write batches kept between requests: a batch that has held a body's points holds the next
/// similar body's without growing hundreds of small per-series vectors again. Bounded in number
/// and in the points each may keep.
#[derive(Default)]
pub struct BatchPool {
    batches: Mutex<Vec<WriteBatch>>,
}

/// Batches kept at most: one per request being parsed at once on a small machine.
const POOLED_BATCHES_MAX: usize = 8;
/// Points a kept batch may hold without allocating (about 16 bytes each).
const POOLED_BATCH_POINTS_MAX: usize = 256 * 1024;

impl BatchPool {
    fn take(&self) -> WriteBatch {
        self.batches.lock().pop().unwrap_or_default()
    }

    fn give_back(&self, mut batch: WriteBatch) {
        batch.clear();
        if batch.capacity_points() > POOLED_BATCH_POINTS_MAX {
            return;
        }
        let mut batches = self.batches.lock();
        if batches.len() < POOLED_BATCHES_MAX {
            batches.push(batch);
        }
    }
}

/// What the write path keeps between bodies of one database: the [`BodySeries`] of every series
/// text met, so a series already seen in an earlier body resolves its fields with no lookup in
/// the shared [`SeriesCache`] (a read lock and a reference count on entries both workers touch,
/// and three allocations, per series per body: 4-5% of the server's CPU under TSBS).
pub struct SeriesMemo {
    /// The cache the entries came from; a memo taken for another cache (another database, or
    /// the same after `clear_caches`) starts empty.
    cache: Option<Arc<SeriesCache>>,
    series: hashbrown::HashMap<String, BodySeries, foldhash::fast::RandomState>,
    /// Bodies ingested with this memo, numbering each body's write batch entries.
    bodies: u64,
}

/// Series texts a memo keeps between bodies; one holding more starts over (the lines of one
/// body may add more, as the per-body map they replace did).
const MEMO_SERIES_MAX: usize = 16_384;
/// Memos kept at most.
const POOLED_MEMOS_MAX: usize = 4;

#[derive(Default)]
pub struct MemoPool {
    memos: Mutex<Vec<SeriesMemo>>,
}

impl MemoPool {
    fn take(&self, cache: &Arc<SeriesCache>) -> SeriesMemo {
        let mut memo =
            self.memos.lock().pop().unwrap_or_else(|| SeriesMemo { cache: None, series: hashbrown::HashMap::default(), bodies: 0 });
        if !memo.cache.as_ref().is_some_and(|c| Arc::ptr_eq(c, cache)) || memo.series.len() > MEMO_SERIES_MAX {
            // A new map rather than `clear`: a cleared map keeps its largest table.
            memo.series = hashbrown::HashMap::default();
            memo.cache = Some(cache.clone());
        }
        memo.bodies += 1;
        memo
    }

    fn give_back(&self, memo: SeriesMemo) {
        let mut memos = self.memos.lock();
        if memos.len() < POOLED_MEMOS_MAX {
            memos.push(memo);
        }
    }
}

/// Buffers for decompressed bodies, kept between requests: a fresh buffer is zeroed and
/// page-faulted in for every body (2% of the server's CPU under TSBS), a kept one only where it
/// grows. Bounded in number and in the bytes each may keep.
#[derive(Default)]
pub struct BodyPool {
    buffers: Mutex<Vec<Vec<u8>>>,
}

/// Buffers kept at most.
const POOLED_BODIES_MAX: usize = 8;
/// Largest buffer kept.
const POOLED_BODY_BYTES_MAX: usize = 4 << 20;

impl BodyPool {
    fn take(&self) -> Vec<u8> {
        self.buffers.lock().pop().unwrap_or_default()
    }

    fn give_back(&self, buffer: Vec<u8>) {
        if buffer.len() > POOLED_BODY_BYTES_MAX {
            return;
        }
        let mut buffers = self.buffers.lock();
        if buffers.len() < POOLED_BODIES_MAX {
            buffers.push(buffer);
        }
    }
}

/// Parses `body`, resolves series ids and writes the valid points (blocking until durable).
pub fn ingest(http: &HttpState, cache: &Arc<SeriesCache>, body: &str, options: ReadOptions) -> Result<WriteReport, ApiError> {
    let mut batch = http.batches.take();
    let mut memo = http.memos.take(cache);
    let result = ingest_into(http, cache, &mut memo, body, options, &mut batch);
    http.batches.give_back(batch);
    if result.is_ok() {
        http.memos.give_back(memo);
    }
    result
}

fn ingest_into(
    http: &HttpState,
    cache: &SeriesCache,
    memo: &mut SeriesMemo,
    body: &str,
    options: ReadOptions,
    batch: &mut WriteBatch,
) -> Result<WriteReport, ApiError> {
    let engine = &http.server.engine;
    let mut report = WriteReport::default();
    let mut fields: Vec<Field<'_>> = Vec::with_capacity(16);
    let body_number = memo.bodies;
    let seen = &mut memo.series;
    let mut budget = NewSeriesBudget { left: http.server.config.max_new_series_per_request };
    let mut lines = Lines::new(body, options);
    loop {
        // A series text this memo took from the fast reader is not checked again (a let, not a
        // `while let`, so that the borrow of `seen` ends before the body takes it mutably).
        let next = lines.next_line_knowing(&mut fields, &|text| seen.get(text).is_some_and(|known| known.fast_read));
        let Some(line) = next else { break };
        let mut line = match line {
            Ok(line) => line,
            Err(e) => {
                report.dropped_lines += 1;
                report.first_error.get_or_insert(e);
                continue;
            }
        };
        // One hash of the series text per line; the key is only allocated for a new one.
        let body_series = match seen.entry_ref(line.series_text) {
            hashbrown::hash_map::EntryRef::Occupied(entry) => entry.into_mut(),
            hashbrown::hash_map::EntryRef::Vacant(entry) => {
                let fast_read = line.series.is_none();
                let series = cache.get_or_insert(line.series_text, || match line.series.take() {
                    Some(series) => Ok(series),
                    None => parse_series(line.series_text)
                        .ok_or_else(|| ApiError::internal(format!("BUG: cannot read series text {:?} again", line.series_text))),
                })?;
                let body_series = entry.insert(BodySeries::new(series));
                body_series.fast_read = fast_read;
                body_series
            }
        };
        let mut failed: Option<String> = None;
        match body_series.resolve(engine, cache.database(), &fields, &mut budget) {
            Ok(()) => {}
            Err((_, limit @ (FieldError::NewSeriesLimit | FieldError::Engine(sensordb_engine::Error::SeriesLimit { .. })))) => {
                report.dropped_lines += 1;
                report.limit_exceeded.get_or_insert_with(|| match limit {
                    FieldError::Engine(sensordb_engine::Error::SeriesLimit { limit, .. }) => {
                        format!("max-series-per-database limit exceeded: ({limit})")
                    }
                    _ => format!("max-new-series-per-request limit exceeded: ({})", http.server.config.max_new_series_per_request),
                });
                // A line whose first series was refused leaves no entry behind (other fields
                // of the line may have been created; they stay, as their series exist).
                if body_series.has_no_fields() {
                    seen.remove(line.series_text);
                    cache.forget_if_fieldless(line.series_text);
                }
                fields.clear();
                continue;
            }
            Err((j, FieldError::Conflict { existing, attempted })) => {
                failed = Some(format!(
                    "field type conflict: input field \"{}\" on measurement \"{}\" is type {attempted}, already exists as type {existing}",
                    fields[j].key,
                    body_series.series.measurement()
                ));
            }
            Err((_, FieldError::Engine(sensordb_engine::Error::RecordTooLarge { len, limit }))) => {
                // A series key longer than the catalog takes: a bad line (InfluxDB 1.8's "max key
                // length exceeded"), not a failure of the body. Nothing of it stays behind.
                if body_series.has_no_fields() {
                    seen.remove(line.series_text);
                    cache.forget_if_fieldless(line.series_text);
                }
                let message = format!("max key length exceeded: series key of {len} bytes, the limit is {limit} bytes");
                report.dropped_lines += 1;
                report.first_error.get_or_insert(LineError { line: line.number, message });
                fields.clear();
                continue;
            }
            Err((_, FieldError::Engine(e))) => {
                if !matches!(e, sensordb_engine::Error::InvalidSeriesKey(_)) {
                    return Err(ApiError::from_engine(e));
                }
                failed = Some(e.to_string());
            }
        }
        if let Some(message) = failed {
            report.dropped_lines += 1;
            report.first_error.get_or_insert(LineError { line: line.number, message });
            continue;
        }
        // Cannot fail: kinds were checked against the catalog above.
        let bug = |e: sensordb_engine::BatchKindError| ApiError::internal(format!("BUG: {e}"));
        let slots = body_series.slots(batch, body_number).map_err(bug)?;
        for (&slot, field) in slots.iter().zip(fields.drain(..)) {
            let value = match field.value {
                FieldValue::F64(x) => Value::F64(x),
                FieldValue::I64(x) => Value::I64(x),
                FieldValue::U64(x) => Value::U64(x),
                FieldValue::Bool(x) => Value::Bool(x),
                FieldValue::String(s) => Value::Bytes(bytes::Bytes::copy_from_slice(s.as_bytes())),
            };
            batch.push_at(slot, line.timestamp, value).map_err(bug)?;
        }
    }
    if !batch.is_empty() {
        let started = Instant::now();
        engine.write(batch).map_err(ApiError::from_engine)?;
        http.server.metrics.record_write_latency(started.elapsed());
        report.points = batch.len();
        Metrics::add(&http.server.metrics.points_written, batch.len() as u64);
    }
    Ok(report)
}

/// `POST /write?db=D[&precision=P][&u=U&p=TOKEN]`.
pub async fn write_v1(State(http): State<Arc<HttpState>>, params: Params, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let checked = || {
        let token = v1_token(&headers, params.get("p"));
        http.server.tokens.check(token.as_deref(), Scope::Write)?;
        let db = params.get("db").filter(|db| !db.is_empty()).ok_or_else(|| ApiError::bad_request("database is required"))?;
        let precision = Precision::from_v1(params.get("precision").unwrap_or(""))
            .ok_or_else(|| ApiError::bad_request("invalid precision: expected one of n, ns, u, us, ms, s, m, h"))?;
        Ok((http.cache(db)?, precision))
    };
    match checked() {
        Ok((cache, precision)) => write_body(&http, cache, &headers, body, precision).await,
        Err(e) => Err(refuse_unread(&http, body, e).await),
    }
}

/// `POST /api/v2/write?bucket=B[&org=O][&precision=P]` with `Authorization: Token T`. As in
/// InfluxDB 1.8's compatibility endpoint, `bucket` is `database[/retention policy]`; every
/// database has the one policy (`autogen`, its storage period), so the policy name is not used,
/// as v1's `rp` parameter is not.
pub async fn write_v2(State(http): State<Arc<HttpState>>, params: Params, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let checked = || {
        http.server.tokens.check(bearer_token(&headers).as_deref(), Scope::Write)?;
        let bucket = params.get("bucket").filter(|b| !b.is_empty()).ok_or_else(|| ApiError::bad_request("bucket is required"))?;
        let database = bucket.split_once('/').map_or(bucket, |(database, _retention_policy)| database);
        if database.is_empty() {
            return Err(ApiError::bad_request(format!("bucket {bucket:?} names no database: expected database[/retention policy]")));
        }
        let precision = Precision::from_v2(params.get("precision").unwrap_or(""))
            .ok_or_else(|| ApiError::bad_request("invalid precision: expected one of ns, us, ms, s"))?;
        Ok((http.cache(database)?, precision))
    };
    match checked() {
        Ok((cache, precision)) => write_body(&http, cache, &headers, body, precision).await,
        Err(e) => Err(refuse_unread(&http, body, e).await),
    }
}

/// Reads and drops the body of a write refused before its body was read (token, database,
/// precision), at most `max_body_bytes` of it, then gives back `error`. Closing the connection
/// with the body unread instead makes the kernel reset it, and a client still sending then
/// sees "broken pipe" or "connection reset" instead of the answer (Telegraf's outputs.influxdb
/// with a read-only token did, about one run in four).
async fn refuse_unread(http: &HttpState, body: Body, error: ApiError) -> ApiError {
    drain(body, http.server.config.max_body_bytes).await;
    error
}

/// In-flight byte permits, mirrored in the `sensordb_in_flight_bytes` gauge.
struct InFlight {
    http: Arc<HttpState>,
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl InFlight {
    /// Waits for `bytes` permits (at most all of them, so one request never waits forever).
    async fn acquire(http: &Arc<HttpState>, bytes: usize) -> Result<InFlight, ApiError> {
        let bytes = bytes.min(http.server.config.max_in_flight_bytes).min(u32::MAX as usize);
        let permit = if bytes == 0 {
            None
        } else {
            Some(
                http.server
                    .in_flight_bytes
                    .clone()
                    .acquire_many_owned(bytes as u32)
                    .await
                    .map_err(|_| ApiError::unavailable("server shutting down"))?,
            )
        };
        http.server.metrics.in_flight_bytes.fetch_add(bytes as i64, Ordering::Relaxed);
        Ok(InFlight { http: http.clone(), permit, bytes })
    }
}

impl InFlight {
    /// Gives back every permit beyond `bytes`.
    fn shrink_to(&mut self, bytes: usize) {
        if bytes >= self.bytes {
            return;
        }
        if let Some(permit) = self.permit.as_mut() {
            drop(permit.split(self.bytes - bytes));
        }
        self.http.server.metrics.in_flight_bytes.fetch_sub((self.bytes - bytes) as i64, Ordering::Relaxed);
        self.bytes = bytes;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.permit.take();
        self.http.server.metrics.in_flight_bytes.fetch_sub(self.bytes as i64, Ordering::Relaxed);
    }
}

/// Bytes of a body without `Content-Length` (chunked) read before it takes permits: most such
/// bodies (Telegraf's gzip stream of a few thousand points) end within them and take permits
/// for their length once read, as before. One that goes on reserves `max_body_bytes` (or all of
/// `max_in_flight_bytes`, if less) before more is read, so the bytes handlers buffer stay within
/// `max_in_flight_bytes` plus this much per connection (hyper buffers about as much itself).
const UNCOUNTED_BODY_BYTES: usize = 64 << 10;

fn too_large(limit: usize) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body exceeds the limit of {limit} bytes"))
}

/// Reads what is left of an over-limit body (up to one more limit's worth), so the client gets
/// to read the 413 instead of a connection reset.
async fn drain(mut body: Body, budget: usize) {
    let mut seen = 0usize;
    while seen < budget {
        match body.frame().await {
            Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len()),
            _ => break,
        }
    }
}

async fn write_body(
    http: &Arc<HttpState>,
    cache: Arc<SeriesCache>,
    headers: &HeaderMap,
    mut body: Body,
    precision: Precision,
) -> Result<Response, ApiError> {
    let limit = http.server.config.max_body_bytes;
    let gzip = match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase()) {
        None => false,
        Some(e) if e == "gzip" => true,
        Some(e) if e == "identity" || e.is_empty() => false,
        Some(e) => return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("unsupported Content-Encoding {e:?}"))),
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        drain(body, limit).await;
        return Err(too_large(limit));
    }
    // With a declared length the permits come before the body is read, so a writer over the
    // in-flight limit waits with its body still in the socket: TCP backpressure. Without one
    // (chunked), see `UNCOUNTED_BODY_BYTES`.
    let mut in_flight = match declared {
        Some(n) => Some(InFlight::acquire(http, n).await?),
        None => None,
    };
    let mut raw = Vec::with_capacity(declared.unwrap_or(8192).min(limit));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request(format!("cannot read request body: {e}")))?;
        if let Some(data) = frame.data_ref() {
            if raw.len() + data.len() > limit {
                drain(body, limit).await;
                return Err(too_large(limit));
            }
            if in_flight.is_none() && raw.len() + data.len() > UNCOUNTED_BODY_BYTES {
                // A body without length that goes on: permits for the most it may grow to, in
                // one wait holding no others (waits holding some could deadlock), before
                // reading more. What it does not use is given back once it is read.
                let reserved = InFlight::acquire(http, limit).await?;
                raw.reserve_exact(reserved.bytes.saturating_sub(raw.len()));
                in_flight = Some(reserved);
            }
            raw.extend_from_slice(data);
        }
    }
    Metrics::add(&http.server.metrics.bytes_received, raw.len() as u64);
    match in_flight.as_mut() {
        None => in_flight = Some(InFlight::acquire(http, raw.len()).await?),
        Some(reserved) if declared.is_none() => reserved.shrink_to(raw.len()),
        Some(_) => {}
    }
    // The body's text is `text[..text_len]`; a decompressed one lives in a pooled buffer.
    let (text, text_len, pooled) = if gzip {
        let mut buffer = http.bodies.take();
        let (buffer, decoded_len) = tokio::task::spawn_blocking(move || gunzip::gunzip(&raw, limit, &mut buffer).map(|len| (buffer, len)))
            .await
            .map_err(ApiError::join)??;
        if in_flight.as_ref().is_some_and(|f| f.bytes < decoded_len) {
            // Give back the compressed size, then wait for the decompressed size in one go:
            // never hold some permits while waiting for more.
            drop(in_flight.take());
            in_flight = Some(InFlight::acquire(http, decoded_len).await?);
        }
        (buffer, decoded_len, true)
    } else {
        let len = raw.len();
        (raw, len, false)
    };
    // A line without a timestamp gets the arrival time truncated to the request's precision, as
    // InfluxDB does (`time.Truncate`): written with `precision=s`, it lands on a whole second.
    let now = now_ns();
    let default_timestamp = now - now.rem_euclid(precision.nanos());
    let options = ReadOptions { precision, default_timestamp, max_line_bytes: http.server.config.max_line_bytes };
    http.server.wait_for_space().await.map_err(ApiError::from_engine)?;
    let worker = http.clone();
    let report = tokio::task::spawn_blocking(move || {
        let report = ingest_text(&worker, &cache, &text[..text_len], options);
        if pooled {
            worker.bodies.give_back(text);
        }
        report
    })
    .await
    .map_err(ApiError::join)??;
    drop(in_flight);
    if report.points > 0 {
        http.server.throttle_acknowledgement().await;
    }
    partial_write_answer(report)
}

/// 204 when every line was stored, else 400 naming the first bad line and the series limit
/// that dropped lines, as InfluxDB 1.x words them (`partial write: max-series-per-database
/// limit exceeded: (N) dropped=K`).
fn partial_write_answer(report: WriteReport) -> Result<Response, ApiError> {
    let dropped = report.dropped_lines;
    match (report.first_error, report.limit_exceeded) {
        (None, None) => Ok(StatusCode::NO_CONTENT.into_response()),
        (None, Some(limit)) => Err(ApiError::bad_request(format!("partial write: {limit} dropped={dropped}"))),
        (Some(first), limit) => {
            let limit = limit.map_or(String::new(), |limit| format!("; {limit}"));
            Err(ApiError {
                line: Some(first.line),
                ..ApiError::bad_request(format!("partial write: line {}: {}{limit} dropped={dropped}", first.line, first.message))
            })
        }
    }
}

/// [`ingest`] for a body that may not be UTF-8: the whole lines before the first bad byte are
/// stored, and the line holding it is reported.
fn ingest_text(http: &HttpState, cache: &Arc<SeriesCache>, text: &[u8], options: ReadOptions) -> Result<WriteReport, ApiError> {
    match std::str::from_utf8(text) {
        Ok(text) => ingest(http, cache, text, options),
        Err(e) => {
            let valid = &text[..e.valid_up_to()];
            let cut = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count() as u64;
            let rest_lines = text[cut..].split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
            let head = std::str::from_utf8(&text[..cut]).unwrap_or("");
            let mut report = ingest(http, cache, head, options)?;
            report.dropped_lines += rest_lines;
            let error = LineError { line, message: "invalid UTF-8".into() };
            report.first_error = Some(report.first_error.map_or(error.clone(), |first| if first.line < line { first } else { error }));
            Ok(report)
        }
    }
}

/// The wall clock in nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
