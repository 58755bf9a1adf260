//! `sensordb bench ingest`: maximum sustained ingest over the network, for a bounded time.
//!
//! `clients` connections each write their share of a data set as fast as the server takes it:
//! rows come from the TSBS-IoT-like generator (without defects, so every point is distinct) or a
//! line-protocol file; a row goes to client `tag set id % clients`, so a client owns its series.
//! Everything is prepared before the clock starts; a client that reaches the end of its share
//! starts over.
//!
//! - native: one transaction per batch of `batch_points` points over the client library
//!   (`sensordb-client`), each committed (durable) before the next; a round after the first
//!   shifts every timestamp by the data set's span, so the server stores distinct points.
//!   Bytes are the point-record bytes of the SEND frames.
//! - http: InfluxDB line protocol, `POST /write?db=<db>&precision=ns` (2xx, normally 204, is
//!   success) over a keep-alive HTTP/1.1 connection per client (HTTPS with `tls`, through the
//!   client library's rustls connector). Bodies are rendered before the
//!   clock starts (see [`render_row`]); a later round resends the same bodies (the same points).
//!   Bytes are body bytes. The client is a small hand-written one on a tokio `TcpStream`: one
//!   buffered write per request, the answer's head parsed in place, no per-request allocation
//!   but the read buffer's growth. Measured against hyper 1's http1 client (one keep-alive
//!   connection, sequential POSTs to a minimal 204 server on 127.0.0.1, release build), client
//!   CPU per request: 8.7 µs vs 10.1 µs for 200-byte bodies, 19.3 vs 22.7 µs for 100 kB,
//!   111 vs 117 µs for 1 MB; so the cheaper one is kept, without hyper's dependencies.
//!
//! A progress bar on stderr ticks the points/s of each second; the figures are points/s and
//! MB/s (10^6 bytes) of wall time.
//!
//! This file holds the run and its clients; `http` the HTTP/1.1 client connection, `render` the
//! line-protocol rendering of rows.

mod http;
mod render;

pub use http::{ClientStream, HttpAnswer, HttpConnection};
pub use render::{render_row, render_rows};

use crate::line_protocol::LineProtocolReader;
use crate::row::Row;
use crate::tsbs::{Disorder, TsbsConfig, TsbsGenerator};
use http::http_connect;
use sensordb_client::{Client, ClientOptions, ClientTls};
use sensordb_engine::{SeriesKey, Timestamp, Value, ValueKind};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// Which listener to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestProtocol {
    Native,
    Http,
}

impl std::str::FromStr for IngestProtocol {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "native" => Ok(IngestProtocol::Native),
            "http" => Ok(IngestProtocol::Http),
            other => Err(format!("unknown protocol {other:?}: expected native or http")),
        }
    }
}

impl std::fmt::Display for IngestProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IngestProtocol::Native => "native",
            IngestProtocol::Http => "http",
        })
    }
}

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct IngestBenchConfig {
    pub protocol: IngestProtocol,
    pub token: String,
    pub clients: usize,
    /// Time during which new requests start; those running then finish.
    pub duration: Duration,
    /// Points per transaction or HTTP body.
    pub batch_points: usize,
    /// Trucks of the generated fleet.
    pub scale: u32,
    /// Hours of generated data (at the TSBS 10 s interval).
    pub hours: u32,
    pub seed: u64,
    /// Line protocol to send instead of generated rows.
    pub file: Option<PathBuf>,
    /// Database named in the HTTP request.
    pub db: String,
    /// Draw a progress bar on stderr (hidden when stderr is no terminal).
    pub progress: bool,
    pub reply_timeout: Duration,
    /// TLS for a server with `tls_cert`/`tls_key` (both protocols); `None` is plaintext.
    pub tls: Option<ClientTls>,
}

impl Default for IngestBenchConfig {
    fn default() -> Self {
        IngestBenchConfig {
            protocol: IngestProtocol::Native,
            token: String::new(),
            clients: 2,
            duration: Duration::from_secs(10),
            batch_points: 10_000,
            scale: 100,
            hours: 6,
            seed: 123,
            file: None,
            db: "sensordb".to_string(),
            progress: true,
            reply_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct IngestReport {
    /// Points of the prepared data set (one round).
    pub dataset_points: u64,
    pub series: usize,
    /// Generating or reading, cutting and (HTTP) rendering, before the clock.
    pub prepare_time: Duration,
    /// Points acknowledged by the server.
    pub points: u64,
    /// Point-record bytes (native) or body bytes (HTTP) acknowledged.
    pub bytes: u64,
    /// Transactions or requests acknowledged.
    pub requests: u64,
    pub failed: u64,
    /// Most rounds any client made through its share.
    pub rounds: u64,
    pub wall: Duration,
    pub points_per_second: f64,
    pub mb_per_second: f64,
    /// Points/s of each whole second of the run.
    pub per_second: Vec<u64>,
    pub errors: BTreeMap<String, u64>,
}

/// One client's prepared share: its series and its batches.
#[derive(Default)]
struct Share {
    /// Series of this client, indexed by the `u32` of the points.
    series: Vec<(SeriesKey, ValueKind)>,
    /// Native batches: (series index, timestamp, value).
    batches: Vec<Vec<(u32, Timestamp, Value)>>,
    /// HTTP bodies and their point counts.
    bodies: Vec<(bytes::Bytes, u64)>,
}

/// Counters the clients add to and the progress task reads.
#[derive(Default)]
struct Counters {
    points: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
    failed: AtomicU64,
}

fn rows(config: &IngestBenchConfig) -> Result<Box<dyn Iterator<Item = Result<Row, String>>>, String> {
    Ok(match &config.file {
        Some(path) => {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let reader = LineProtocolReader::new(std::io::BufReader::with_capacity(1 << 20, file));
            Box::new(reader.map(|row| row.map_err(|e| e.to_string())))
        }
        None => {
            let tsbs = TsbsConfig { scale: config.scale, seed: config.seed, disorder: Disorder::none(), ..TsbsConfig::default() }
                .with_duration(i64::from(config.hours) * 3_600_000_000_000);
            Box::new(TsbsGenerator::new(tsbs).map(Ok))
        }
    })
}

/// Prepares every client's share; returns them with the data set's points, series and span.
fn prepare(config: &IngestBenchConfig) -> Result<(Vec<Share>, u64, usize, i64), String> {
    let clients = config.clients.max(1);
    let batch_points = config.batch_points.max(1);
    let mut shares: Vec<Share> = (0..clients).map(|_| Share::default()).collect();
    let mut index: Vec<HashMap<String, u32>> = vec![HashMap::new(); clients];
    let mut current: Vec<Vec<(u32, Timestamp, Value)>> = vec![Vec::new(); clients];
    let mut text: Vec<Vec<u8>> = vec![Vec::new(); clients];
    let mut text_points = vec![0u64; clients];
    let (mut points, mut min_ts, mut max_ts) = (0u64, i64::MAX, i64::MIN);
    for row in rows(config)? {
        let row = row?;
        let c = row.tags.id as usize % clients;
        min_ts = min_ts.min(row.timestamp);
        max_ts = max_ts.max(row.timestamp);
        points += row.fields.len() as u64;
        match config.protocol {
            IngestProtocol::Native => {
                for (field, value) in &row.fields {
                    let key = row.series_key(field).map_err(|e| e.to_string())?;
                    let share = &mut shares[c];
                    let id = *index[c].entry(key.canonical()).or_insert_with(|| {
                        share.series.push((key, value.kind()));
                        share.series.len() as u32 - 1
                    });
                    current[c].push((id, row.timestamp, value.clone()));
                }
                if current[c].len() >= batch_points {
                    shares[c].batches.push(std::mem::take(&mut current[c]));
                }
            }
            IngestProtocol::Http => {
                for (field, _) in &row.fields {
                    index[c].entry(row.series_key(field).map_err(|e| e.to_string())?.canonical()).or_insert(0);
                }
                render_row(&row, &mut text[c]);
                text_points[c] += row.fields.len() as u64;
                if text_points[c] >= batch_points as u64 {
                    shares[c].bodies.push((std::mem::take(&mut text[c]).into(), text_points[c]));
                    text_points[c] = 0;
                }
            }
        }
    }
    for c in 0..clients {
        if !current[c].is_empty() {
            shares[c].batches.push(std::mem::take(&mut current[c]));
        }
        if !text[c].is_empty() {
            shares[c].bodies.push((std::mem::take(&mut text[c]).into(), text_points[c]));
        }
    }
    let series = index.iter().map(HashMap::len).sum();
    let span = if points == 0 { 1 } else { max_ts - min_ts + 1 };
    Ok((shares, points, series, span))
}

/// Runs the benchmark against `addr` (the native listener or the HTTP one, as `protocol` says).
pub async fn run(config: &IngestBenchConfig, addr: SocketAddr) -> Result<IngestReport, String> {
    let prepare_started = Instant::now();
    let prepared_config = config.clone();
    let (shares, dataset_points, series, span) =
        tokio::task::spawn_blocking(move || prepare(&prepared_config)).await.map_err(|e| format!("prepare task: {e}"))??;
    if dataset_points == 0 {
        return Err("the data set is empty".to_string());
    }
    let prepare_time = prepare_started.elapsed();

    // Connect and register series before the clock starts.
    let mut native_clients = Vec::new();
    if config.protocol == IngestProtocol::Native {
        for share in &shares {
            let options = ClientOptions {
                token: config.token.clone(),
                client_name: "sensordb bench ingest".to_string(),
                reply_timeout: config.reply_timeout,
                tls: config.tls.clone(),
                ..ClientOptions::default()
            };
            let client = Client::connect_with(addr, options).await.map_err(|e| format!("connect: {e}"))?;
            let mut handles = Vec::with_capacity(share.series.len());
            for (key, kind) in &share.series {
                handles.push(client.series(key, *kind).await.map_err(|e| format!("series {key}: {e}"))?);
            }
            native_clients.push((client, handles));
        }
    }

    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let deadline = started + config.duration;
    let progress = spawn_progress(config, counters.clone(), started);
    let mut tasks = Vec::new();
    match config.protocol {
        IngestProtocol::Native => {
            for (share, (client, handles)) in shares.into_iter().zip(native_clients) {
                let counters = counters.clone();
                tasks.push(tokio::spawn(async move { native_client(client, handles, share.batches, span, deadline, &counters).await }));
            }
        }
        IngestProtocol::Http => {
            let request_head = format!(
                "POST /write?db={}&precision=ns HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain; charset=utf-8\r\n{}",
                config.db,
                if config.token.is_empty() { String::new() } else { format!("Authorization: Token {}\r\n", config.token) }
            );
            let request_head: Arc<str> = request_head.into();
            let tls = match &config.tls {
                Some(tls) => Some(tls.connector().map_err(|e| format!("TLS: {e}"))?),
                None => None,
            };
            for share in shares {
                let counters = counters.clone();
                let head = request_head.clone();
                let timeout = config.reply_timeout;
                let tls = tls.clone();
                tasks.push(tokio::spawn(async move { http_client(addr, tls, head, share.bodies, deadline, timeout, &counters).await }));
            }
        }
    }
    let mut report = IngestReport { dataset_points, series, prepare_time, ..IngestReport::default() };
    for task in tasks {
        match task.await {
            Ok((rounds, errors)) => {
                report.rounds = report.rounds.max(rounds);
                for (message, count) in errors {
                    *report.errors.entry(message).or_default() += count;
                }
            }
            Err(error) => *report.errors.entry(format!("client task: {error}")).or_default() += 1,
        }
    }
    report.wall = started.elapsed();
    report.per_second = progress.finish().await;
    report.points = counters.points.load(Ordering::Relaxed);
    report.bytes = counters.bytes.load(Ordering::Relaxed);
    report.requests = counters.requests.load(Ordering::Relaxed);
    report.failed = counters.failed.load(Ordering::Relaxed);
    let seconds = report.wall.as_secs_f64().max(1e-9);
    report.points_per_second = report.points as f64 / seconds;
    report.mb_per_second = report.bytes as f64 / seconds / 1e6;
    Ok(report)
}

type ClientOutcome = (u64, BTreeMap<String, u64>);

/// How long an HTTP request may run past the end of the run.
const HTTP_GRACE: Duration = Duration::from_secs(5);

async fn native_client(
    client: Client,
    handles: Vec<sensordb_client::SeriesHandle>,
    batches: Vec<Vec<(u32, Timestamp, Value)>>,
    span: i64,
    deadline: Instant,
    counters: &Counters,
) -> ClientOutcome {
    let mut errors = BTreeMap::new();
    let mut round = 0u64;
    'rounds: while !batches.is_empty() {
        let shift = span.saturating_mul(round as i64);
        for batch in &batches {
            if Instant::now() >= deadline {
                break 'rounds;
            }
            let mut tx = client.transaction();
            for (series, timestamp, value) in batch {
                if let Err(error) = tx.push(&handles[*series as usize], timestamp + shift, value.clone()) {
                    *errors.entry(format!("push: {error}")).or_default() += 1;
                }
            }
            let points = tx.len() as u64;
            match tx.commit().await {
                Ok(stats) => {
                    counters.points.fetch_add(points, Ordering::Relaxed);
                    counters.bytes.fetch_add(stats.bytes, Ordering::Relaxed);
                    counters.requests.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    *errors.entry(error.to_string()).or_default() += 1;
                    if !error.is_retryable() {
                        break 'rounds;
                    }
                }
            }
        }
        round += 1;
    }
    client.disconnect().await;
    (round, errors)
}

async fn http_client(
    addr: SocketAddr,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    head: Arc<str>,
    bodies: Vec<(bytes::Bytes, u64)>,
    deadline: Instant,
    timeout: Duration,
    counters: &Counters,
) -> ClientOutcome {
    let mut errors = BTreeMap::new();
    let mut connection: Option<HttpConnection> = None;
    let mut round = 0u64;
    'rounds: while !bodies.is_empty() {
        for (body, points) in &bodies {
            if Instant::now() >= deadline {
                break 'rounds;
            }
            if connection.is_none() {
                match tokio::time::timeout(timeout, http_connect(addr, tls.as_ref())).await {
                    Ok(Ok(opened)) => connection = Some(opened),
                    Ok(Err(error)) => {
                        counters.failed.fetch_add(1, Ordering::Relaxed);
                        *errors.entry(format!("connect: {error}")).or_default() += 1;
                        break 'rounds;
                    }
                    Err(_) => {
                        counters.failed.fetch_add(1, Ordering::Relaxed);
                        *errors.entry("connect: timed out".to_string()).or_default() += 1;
                        break 'rounds;
                    }
                }
            }
            let Some(conn) = connection.as_mut() else { break 'rounds };
            // A request may run past the deadline, but not by more than the grace.
            let wait = timeout.min(deadline.saturating_duration_since(Instant::now()) + HTTP_GRACE);
            match tokio::time::timeout(wait, conn.post(&head, body)).await {
                Ok(Ok(answer)) if (200..300).contains(&answer.status) => {
                    counters.points.fetch_add(*points, Ordering::Relaxed);
                    counters.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                    counters.requests.fetch_add(1, Ordering::Relaxed);
                    if answer.close {
                        connection = None;
                    }
                }
                Ok(Ok(answer)) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    let message = String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)]).into_owned();
                    *errors.entry(format!("HTTP {}: {message}", answer.status)).or_default() += 1;
                    if answer.status == 404 || answer.status == 405 || answer.status == 401 || answer.status == 403 {
                        // The server does not take writes here: going on would only repeat it.
                        break 'rounds;
                    }
                    if answer.close {
                        connection = None;
                    }
                }
                Ok(Err(error)) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    *errors.entry(format!("HTTP: {error}")).or_default() += 1;
                    connection = None;
                }
                Err(_) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    let message =
                        format!("HTTP: no answer to POST /write within {:.1} s (is the HTTP API implemented and up?)", wait.as_secs_f64());
                    *errors.entry(message).or_default() += 1;
                    connection = None;
                }
            }
        }
        round += 1;
    }
    (round, errors)
}

/// The progress task: a bar over the run's seconds whose message is the last second's points/s.
struct Progress {
    task: tokio::task::JoinHandle<Vec<u64>>,
    stop: Arc<tokio::sync::Notify>,
}

impl Progress {
    async fn finish(self) -> Vec<u64> {
        self.stop.notify_one();
        self.task.await.unwrap_or_default()
    }
}

fn spawn_progress(config: &IngestBenchConfig, counters: Arc<Counters>, started: Instant) -> Progress {
    let stop = Arc::new(tokio::sync::Notify::new());
    let seconds = config.duration.as_secs().max(1);
    let bar = if config.progress {
        indicatif::ProgressBar::with_draw_target(Some(seconds), indicatif::ProgressDrawTarget::stderr())
    } else {
        indicatif::ProgressBar::hidden()
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} s  {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(format!("ingest {}", config.protocol));
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut per_second = Vec::new();
            let mut ticks =
                tokio::time::interval_at(tokio::time::Instant::from_std(started) + Duration::from_secs(1), Duration::from_secs(1));
            let mut last = 0u64;
            // Bounded: the run's seconds plus time for the last requests to finish.
            for _ in 0..seconds + 3600 {
                tokio::select! {
                    _ = ticks.tick() => {
                        let now = counters.points.load(Ordering::Relaxed);
                        per_second.push(now - last);
                        bar.set_position((per_second.len() as u64).min(seconds));
                        bar.set_message(format!("{} points/s, {} total", now - last, now));
                        last = now;
                    }
                    _ = stop.notified() => break,
                }
            }
            bar.finish_and_clear();
            per_second
        })
    };
    Progress { task, stop }
}

/// The summary line `sensordb bench ingest` prints.
pub fn format_report(config: &IngestBenchConfig, report: &IngestReport) -> Vec<String> {
    let mut lines = vec![
        format!(
            "data: {} points in {} series ({}), prepared in {:.2} s before the clock",
            report.dataset_points,
            report.series,
            match &config.file {
                Some(file) => file.display().to_string(),
                None => format!("generated TSBS scale={} hours={} seed={}", config.scale, config.hours, config.seed),
            },
            report.prepare_time.as_secs_f64()
        ),
        format!(
            "ingest protocol={} clients={} batch_points={} seconds={}: {} points, {} {} in {:.2} s wall = {:.0} points/s, {:.2} MB/s ({} {}, {} failed, {} rounds through the data)",
            config.protocol,
            config.clients,
            config.batch_points,
            config.duration.as_secs_f64(),
            report.points,
            report.bytes,
            if config.protocol == IngestProtocol::Native { "record bytes" } else { "body bytes" },
            report.wall.as_secs_f64(),
            report.points_per_second,
            report.mb_per_second,
            report.requests,
            if config.protocol == IngestProtocol::Native { "transactions" } else { "requests" },
            report.failed,
            report.rounds
        ),
    ];
    if !report.per_second.is_empty() {
        let text: Vec<String> = report.per_second.iter().map(u64::to_string).collect();
        lines.push(format!("points per second: {}", text.join(" ")));
    }
    for (message, count) in report.errors.iter().take(10) {
        lines.push(format!("error ×{count}: {message}"));
    }
    lines
}
