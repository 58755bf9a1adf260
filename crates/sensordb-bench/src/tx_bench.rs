//! `sensordb bench tx`: a site-to-site style load test of the native transactional protocol,
//! modelled on NiFi's site-to-site load test (`numOfClient`, `numOfTx`, `numOfPacketsPerTx`,
//! `txIntervalMillis` → `totalSuccessfulTx`, `totalFailureTx`, `avgCreateTxMillis`,
//! `avgSendMillis`, `avgConfirmMillis`, `avgCompleteMillis`).
//!
//! Each of `clients` clients holds its own connection and writes one of `series` series
//! (`bench_tx,series=S value`, F64, or `payload` of bytes with `payload_bytes`; client `n` writes
//! series `n % series`, with timestamps that interleave so every point is distinct: creating a
//! series costs the server a durable catalog write, so 10,000 clients do not make 10,000 series
//! unless asked to). Every `interval` it commits one
//! transaction of `packets` packets; a packet is `points` points (or one bytes value) and the
//! client is set up so that each packet goes out as one SEND frame. Client `n` starts at
//! `n × interval / clients`, so the load is spread over one interval; a client that falls behind
//! starts its next transaction at once (no catch-up burst).
//!
//! Phases: connect (in waves of `connect_wave` connections, so the server's accept queue is not
//! flooded, each client registering its series), then the timed phase, which ends when every
//! client has run its `transactions` or, with `duration`, when the duration is over (no new
//! transaction starts after it; those running finish), then the disconnect (every connection
//! closes after the timed phase, so the teardown of clients that finished first does not load
//! the processes while others still measure). Timings per transaction are the client
//! library's [`TxStats`]: create (CREATE → CREATED), send (writing every SEND frame), confirm
//! (CONFIRM → CONFIRMED, the checksum exchange) and complete (COMPLETE → COMPLETED: the points
//! are durable); "transaction" is the whole `commit()` call, retries included. Pipelined (the
//! default), CREATE, SENDs and CONFIRM go out in one write, so create and confirm both count
//! from it.

use crate::load::{ms, Percentiles};
use sensordb_client::{Client, ClientOptions, ClientTls, SeriesHandle, TxStats};
use sensordb_engine::{SeriesKey, Timestamp, Value, ValueKind};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::MissedTickBehavior;

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct TxBenchConfig {
    pub token: String,
    pub clients: usize,
    /// Series written (client `n` writes series `n % series`); 0 means one per client.
    pub series: usize,
    /// Transactions per client.
    pub transactions: u64,
    /// Packets per transaction.
    pub packets: u64,
    /// Points per packet (ignored with `payload_bytes`).
    pub points: u64,
    /// Bytes per packet: each packet is one bytes value of this size instead of `points` floats.
    pub payload_bytes: Option<usize>,
    /// Between the starts of a client's transactions.
    pub interval: Duration,
    /// Optional bound on the timed phase.
    pub duration: Option<Duration>,
    /// Connections opened at once.
    pub connect_wave: usize,
    /// Commit attempts per transaction (the first included); 1 counts every error as a failure,
    /// as the NiFi test did.
    pub max_attempts: u32,
    /// Longest wait for one answer.
    pub reply_timeout: Duration,
    /// First timestamp written (ns): point k of client n is at `start + k × clients + n`.
    pub start: Timestamp,
    /// TLS for a server with `tls_cert`/`tls_key`; `None` is plaintext.
    pub tls: Option<ClientTls>,
    /// Commits pipelined (CREATE, SENDs and CONFIRM in one write, then COMPLETE: two round
    /// trips) or frame by frame (three round trips, a write per frame); see
    /// [`ClientOptions::pipeline`].
    pub pipeline: bool,
    /// With `pipeline`: COMPLETE_CHECKED in the same write (one round trip) when the server
    /// speaks protocol version 2; see [`ClientOptions::checked_complete`].
    pub checked_complete: bool,
    /// A server in another process whose CPU time is measured over the timed phase, beside
    /// this process's.
    pub server_pid: Option<u32>,
}

impl Default for TxBenchConfig {
    fn default() -> Self {
        TxBenchConfig {
            token: String::new(),
            clients: 10,
            series: 100,
            transactions: 10,
            packets: 5,
            points: 100,
            payload_bytes: None,
            interval: Duration::from_millis(1000),
            duration: None,
            connect_wave: 250,
            max_attempts: 1,
            reply_timeout: Duration::from_secs(30),
            start: 1_700_000_000_000_000_000,
            tls: None,
            pipeline: true,
            checked_complete: true,
            server_pid: None,
        }
    }
}

impl TxBenchConfig {
    /// Series actually written: `series` (one per client for 0), at most one per client.
    pub fn effective_series(&self) -> usize {
        if self.series == 0 {
            self.clients
        } else {
            self.series.min(self.clients)
        }
    }

    /// Points in one transaction.
    pub fn points_per_transaction(&self) -> u64 {
        self.packets * if self.payload_bytes.is_some() { 1 } else { self.points }
    }

    /// Points if every transaction of every client succeeds.
    pub fn expected_points(&self) -> u64 {
        self.clients as u64 * self.transactions * self.points_per_transaction()
    }

    /// Bytes of one packet's records on the wire, at most: a SEND body of this size carries one
    /// packet, so the client cuts a transaction into exactly `packets` SEND frames.
    fn packet_bytes(&self) -> usize {
        match self.payload_bytes {
            Some(bytes) => bytes + 32,
            None => self.points as usize * 20 + 32,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct TxBenchReport {
    pub clients_connected: usize,
    pub connect_failures: usize,
    /// The connect phase (waves, handshakes and series registration).
    pub connect_time: Duration,
    pub successful: u64,
    pub failed: u64,
    /// Transactions never started: their client could not connect, or `duration` ran out.
    pub not_started: u64,
    /// Successful transactions that needed more than one attempt.
    pub retried: u64,
    pub avg_create_ms: f64,
    pub avg_send_ms: f64,
    pub avg_confirm_ms: f64,
    pub avg_complete_ms: f64,
    pub avg_transaction_ms: f64,
    pub complete: Percentiles,
    pub transaction: Percentiles,
    /// Points of successful transactions.
    pub points: u64,
    /// Record bytes of successful transactions (one attempt each).
    pub bytes: u64,
    /// The timed phase: first transaction start to last transaction end.
    pub wall: Duration,
    pub points_per_second: f64,
    pub mb_per_second: f64,
    /// Successful transactions per second.
    pub transactions_per_second: f64,
    /// Error messages of failures and connect failures with their counts.
    pub errors: BTreeMap<String, u64>,
    /// CPU time (user + system) of this process over the timed phase: the clients, and the
    /// server too when it runs in this process.
    pub client_cpu: Duration,
    /// CPU time of the server process over the timed phase, when it runs in its own.
    pub server_cpu: Option<Duration>,
    /// Every successful transaction as (commit start since the timed phase began, complete
    /// latency, whole commit), ordered by start: where in the run the slow ones were.
    pub timeline: Vec<(Duration, Duration, Duration)>,
    /// Wall-clock time at which the timed phase began (the timeline's zero).
    pub started_at: Option<std::time::SystemTime>,
}

/// One client's results.
#[derive(Default)]
struct ClientResult {
    /// Per successful transaction: its statistics, its whole commit, and when it started
    /// (since the timed phase began).
    stats: Vec<(TxStats, Duration, Duration)>,
    failed: u64,
    not_started: u64,
    errors: BTreeMap<String, u64>,
}

/// Runs the load test against a native listener at `addr`.
pub async fn run(config: &TxBenchConfig, addr: SocketAddr) -> TxBenchReport {
    let config = Arc::new(config.clone());
    let connect_started = Instant::now();
    let (clients, connect_errors) = connect_all(&config, addr).await;
    let connect_time = connect_started.elapsed();
    let connect_failures = config.clients - clients.len();

    // The timed phase starts a little in the future, once every client task is spawned and
    // waits for its first transaction: spawning 10,000 tasks (and their timers) takes the
    // client's runtime tens of milliseconds, which would otherwise delay the answers of the
    // first clients' transactions and be measured as their latency.
    let lead = Duration::from_millis(100) + Duration::from_micros(20) * config.clients as u32;
    let started = Instant::now() + lead;
    let deadline = config.duration.map(|d| tokio::time::Instant::from_std(started) + d);
    let payload = config.payload_bytes.map(|len| crate::engine_bench::noise_bytes(len, 7));
    let clients_connected = clients.len();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(n, client, handle)| {
            let config = config.clone();
            let payload = payload.clone();
            tokio::spawn(async move { client_loop(&config, n, client, handle, payload, started, deadline).await })
        })
        .collect();
    tokio::time::sleep_until(tokio::time::Instant::from_std(started)).await;
    let cpu_before = (crate::engine_bench::process_cpu_time(), config.server_pid.and_then(crate::load::cpu_time_of));
    let started_at = std::time::SystemTime::now();
    let mut results = Vec::with_capacity(tasks.len());
    let mut finished = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok((result, client)) => {
                results.push(result);
                finished.push(client);
            }
            Err(error) => {
                let mut result = ClientResult { failed: config.transactions, ..ClientResult::default() };
                result.errors.insert(format!("client task: {error}"), 1);
                results.push(result);
            }
        }
    }
    let wall = started.elapsed();
    let client_cpu = crate::engine_bench::process_cpu_time().saturating_sub(cpu_before.0);
    let server_cpu =
        cpu_before.1.zip(config.server_pid.and_then(crate::load::cpu_time_of)).map(|(before, after)| after.saturating_sub(before));
    // Connections close once the timed phase is over, not as each client finishes: 10,000
    // TCP teardowns in the last interval would otherwise load both processes while the
    // clients still running measure their transactions (see `client_loop`).
    let closing: Vec<_> = finished.into_iter().map(|client| tokio::spawn(async move { client.disconnect().await })).collect();
    for close in closing {
        let _ = close.await;
    }

    let mut report = TxBenchReport {
        clients_connected,
        connect_failures,
        connect_time,
        not_started: connect_failures as u64 * config.transactions,
        errors: connect_errors,
        wall,
        started_at: Some(started_at),
        client_cpu,
        server_cpu,
        ..TxBenchReport::default()
    };
    let (mut create, mut send, mut confirm, mut complete_sum, mut whole_sum) = (0f64, 0f64, 0f64, 0f64, 0f64);
    let mut complete = Vec::new();
    let mut whole = Vec::new();
    for result in results {
        report.failed += result.failed;
        report.not_started += result.not_started;
        for (message, count) in result.errors {
            *report.errors.entry(message).or_default() += count;
        }
        for (stats, elapsed, began) in result.stats {
            report.timeline.push((began, stats.complete, elapsed));
            report.successful += 1;
            report.retried += u64::from(stats.attempts > 1);
            report.points += stats.points;
            report.bytes += stats.bytes;
            create += ms(stats.create);
            send += ms(stats.send);
            confirm += ms(stats.confirm);
            complete_sum += ms(stats.complete);
            whole_sum += ms(elapsed);
            complete.push(stats.complete);
            whole.push(elapsed);
        }
    }
    let n = report.successful.max(1) as f64;
    report.avg_create_ms = create / n;
    report.avg_send_ms = send / n;
    report.avg_confirm_ms = confirm / n;
    report.avg_complete_ms = complete_sum / n;
    report.avg_transaction_ms = whole_sum / n;
    report.timeline.sort_unstable();
    report.complete = Percentiles::of(&mut complete);
    report.transaction = Percentiles::of(&mut whole);
    let seconds = wall.as_secs_f64().max(1e-9);
    report.points_per_second = report.points as f64 / seconds;
    report.mb_per_second = report.bytes as f64 / seconds / 1e6;
    report.transactions_per_second = report.successful as f64 / seconds;
    report
}

/// Connects every client in waves of `connect_wave` and registers its series; returns the
/// connected ones and the errors of the others.
async fn connect_all(config: &Arc<TxBenchConfig>, addr: SocketAddr) -> (Vec<(usize, Client, SeriesHandle)>, BTreeMap<String, u64>) {
    let mut connected = Vec::with_capacity(config.clients);
    let mut errors = BTreeMap::new();
    let wave = config.connect_wave.max(1);
    let mut first = 0;
    while first < config.clients {
        let last = (first + wave).min(config.clients);
        let tasks: Vec<_> = (first..last)
            .map(|n| {
                let config = config.clone();
                tokio::spawn(async move { (n, connect_one(&config, addr, n).await) })
            })
            .collect();
        for task in tasks {
            match task.await {
                Ok((n, Ok((client, handle)))) => connected.push((n, client, handle)),
                Ok((_, Err(error))) => *errors.entry(error_kind(&format!("connect: {error}"))).or_default() += 1,
                Err(error) => *errors.entry(format!("connect task: {error}")).or_default() += 1,
            }
        }
        first = last;
    }
    (connected, errors)
}

async fn connect_one(config: &TxBenchConfig, addr: SocketAddr, n: usize) -> Result<(Client, SeriesHandle), String> {
    let options = ClientOptions {
        token: config.token.clone(),
        client_name: format!("sensordb bench tx client {n}"),
        max_attempts: config.max_attempts.max(1),
        reply_timeout: config.reply_timeout,
        packet_bytes: config.packet_bytes(),
        tls: config.tls.clone(),
        pipeline: config.pipeline,
        checked_complete: config.checked_complete,
        ..ClientOptions::default()
    };
    let client = Client::connect_with(addr, options).await.map_err(|e| e.to_string())?;
    let (field, kind) = if config.payload_bytes.is_some() { ("payload", ValueKind::Bytes) } else { ("value", ValueKind::F64) };
    let series = config.effective_series();
    let key = SeriesKey::new("bench_tx", [("series", (n % series.max(1)).to_string())], field).map_err(|e| e.to_string())?;
    let handle = client.series(&key, kind).await.map_err(|e| e.to_string())?;
    Ok((client, handle))
}

async fn client_loop(
    config: &TxBenchConfig,
    n: usize,
    client: Client,
    handle: SeriesHandle,
    payload: Option<bytes::Bytes>,
    started: Instant,
    deadline: Option<tokio::time::Instant>,
) -> (ClientResult, Client) {
    let mut result = ClientResult { stats: Vec::with_capacity(config.transactions as usize), ..ClientResult::default() };
    let offset = config.interval.mul_f64(n as f64 / config.clients.max(1) as f64);
    let first = tokio::time::Instant::from_std(started) + offset;
    let mut ticks = tokio::time::interval_at(first, config.interval.max(Duration::from_micros(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let per_packet = if payload.is_some() { 1 } else { config.points };
    // Point k of client n is at start + (k × clients + n) ns: distinct across the clients that
    // share a series.
    let step = config.clients.max(1) as i64;
    let mut timestamp = config.start + n as i64;
    for t in 0..config.transactions {
        ticks.tick().await;
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            result.not_started += config.transactions - t;
            break;
        }
        let mut tx = client.transaction();
        tx.reserve(&handle, (config.packets * per_packet) as usize);
        let mut pushed = Ok(());
        'build: for _packet in 0..config.packets {
            for i in 0..per_packet {
                let value = match &payload {
                    Some(bytes) => Value::Bytes(bytes.clone()),
                    None => Value::F64((t * 1000 + i) as f64 * 0.5),
                };
                pushed = tx.push(&handle, timestamp, value);
                timestamp += step;
                if pushed.is_err() {
                    break 'build;
                }
            }
        }
        if let Err(error) = pushed {
            result.failed += 1;
            *result.errors.entry(format!("push: {error}")).or_default() += 1;
            continue;
        }
        let commit_started = Instant::now();
        match tx.commit().await {
            Ok(stats) => result.stats.push((stats, commit_started.elapsed(), commit_started.duration_since(started))),
            Err(error) => {
                result.failed += 1;
                *result.errors.entry(error_kind(&error.to_string())).or_default() += 1;
            }
        }
    }
    // Disconnected by `run` after the timed phase: a steady load has no connection teardown,
    // and at the end of a run the clients that finish first would otherwise close their
    // connections (a FIN each way, processed on loopback by both processes) beside the
    // clients still measuring.
    (result, client)
}

/// An error message with transaction ids (runs of 16 or more hex digits) replaced by `…`, so
/// errors of the same kind are counted together.
pub fn error_kind(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut run = String::new();
    for c in message.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        if run.len() >= 16 {
            out.push('…');
        } else {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// The report as the lines `sensordb bench tx` prints (after the command line and settings).
pub fn format_report(config: &TxBenchConfig, report: &TxBenchReport) -> Vec<String> {
    let mut lines = vec![
        format!(
            "numOfClient={}, series={}, numOfTx={}, numOfPacketsPerTx={}, {}, txIntervalMillis={}, totalSuccessfulTx={}, totalFailureTx={}, avgCreateTxMillis={:.3}, avgSendMillis={:.3}, avgConfirmMillis={:.3}, avgCompleteMillis={:.3}",
            config.clients,
            config.effective_series(),
            config.transactions,
            config.packets,
            match config.payload_bytes {
                Some(bytes) => format!("payloadBytesPerPacket={bytes}"),
                None => format!("pointsPerPacket={}", config.points),
            },
            config.interval.as_millis(),
            report.successful,
            report.failed,
            report.avg_create_ms,
            report.avg_send_ms,
            report.avg_confirm_ms,
            report.avg_complete_ms
        ),
        format!(
            "connect: {} of {} clients in {:.2} s (waves of {}), {} failed; commits {}",
            report.clients_connected,
            config.clients,
            report.connect_time.as_secs_f64(),
            config.connect_wave,
            report.connect_failures,
            match (config.pipeline, config.checked_complete) {
                (true, true) => "pipelined with a checked COMPLETE (CREATE+SENDs+CONFIRM+COMPLETE_CHECKED in one write; COMPLETE ms is the whole commit)",
                (true, false) => "pipelined (CREATE+SENDs+CONFIRM, then COMPLETE)",
                (false, _) => "frame by frame",
            }
        ),
        format!(
            "transactions: {} successful, {} failed, {} not started, {} retried (max attempts {}), {:.1} tx/s",
            report.successful, report.failed, report.not_started, report.retried, config.max_attempts, report.transactions_per_second
        ),
        format!(
            "complete ms: avg {:.3}, p50 {:.3}, p99 {:.3}, max {:.3}",
            report.avg_complete_ms,
            ms(report.complete.p50),
            ms(report.complete.p99),
            ms(report.complete.max)
        ),
        format!(
            "transaction ms: avg {:.3}, p50 {:.3}, p99 {:.3}, max {:.3}",
            report.avg_transaction_ms,
            ms(report.transaction.p50),
            ms(report.transaction.p99),
            ms(report.transaction.max)
        ),
        format!(
            "throughput: {} points, {} record bytes in {:.2} s wall = {:.0} points/s, {:.2} MB/s",
            report.points,
            report.bytes,
            report.wall.as_secs_f64(),
            report.points_per_second,
            report.mb_per_second
        ),
    ];
    let wall = report.wall.as_secs_f64().max(1e-9);
    let share = |cpu: Duration| 100.0 * cpu.as_secs_f64() / wall;
    lines.push(match report.server_cpu {
        Some(server) => format!(
            "cpu over the timed phase: client process {:.2} s ({:.0}% of one core), server process {:.2} s ({:.0}%)",
            report.client_cpu.as_secs_f64(),
            share(report.client_cpu),
            server.as_secs_f64(),
            share(server)
        ),
        None => format!(
            "cpu over the timed phase: {:.2} s ({:.0}% of one core) for clients and server together",
            report.client_cpu.as_secs_f64(),
            share(report.client_cpu)
        ),
    });
    for (message, count) in report.errors.iter().take(10) {
        lines.push(format!("error ×{count}: {message}"));
    }
    lines
}

const CSV_HEADER: &str = "unix_time,clients,series,transactions,packets,points_per_packet,payload_bytes,interval_ms,duration_s,max_attempts,durability,successful,failed,not_started,retried,connect_failures,connect_s,avg_create_ms,avg_send_ms,avg_confirm_ms,avg_complete_ms,complete_p50_ms,complete_p99_ms,complete_max_ms,avg_tx_ms,tx_p50_ms,tx_p99_ms,tx_max_ms,points,bytes,wall_s,points_per_s,mb_per_s,server_points_stored,client_cpu_s,server_cpu_s,pipeline,checked_complete";

/// Appends one row with every parameter and result to `path`, writing the header first when the
/// file is new or empty. `durability` and `stored` describe an in-process server ("" and `None`
/// for an external one).
pub fn append_csv(
    path: &Path,
    config: &TxBenchConfig,
    report: &TxBenchReport,
    durability: &str,
    stored: Option<u64>,
) -> std::io::Result<()> {
    let is_new = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let mut text = String::new();
    if is_new {
        text.push_str(CSV_HEADER);
        text.push('\n');
    }
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let fields: Vec<String> = vec![
        unix.to_string(),
        config.clients.to_string(),
        config.effective_series().to_string(),
        config.transactions.to_string(),
        config.packets.to_string(),
        if config.payload_bytes.is_some() { String::new() } else { config.points.to_string() },
        config.payload_bytes.map_or(String::new(), |b| b.to_string()),
        config.interval.as_millis().to_string(),
        config.duration.map_or(String::new(), |d| format!("{}", d.as_secs_f64())),
        config.max_attempts.to_string(),
        durability.to_string(),
        report.successful.to_string(),
        report.failed.to_string(),
        report.not_started.to_string(),
        report.retried.to_string(),
        report.connect_failures.to_string(),
        format!("{:.3}", report.connect_time.as_secs_f64()),
        format!("{:.3}", report.avg_create_ms),
        format!("{:.3}", report.avg_send_ms),
        format!("{:.3}", report.avg_confirm_ms),
        format!("{:.3}", report.avg_complete_ms),
        format!("{:.3}", ms(report.complete.p50)),
        format!("{:.3}", ms(report.complete.p99)),
        format!("{:.3}", ms(report.complete.max)),
        format!("{:.3}", report.avg_transaction_ms),
        format!("{:.3}", ms(report.transaction.p50)),
        format!("{:.3}", ms(report.transaction.p99)),
        format!("{:.3}", ms(report.transaction.max)),
        report.points.to_string(),
        report.bytes.to_string(),
        format!("{:.3}", report.wall.as_secs_f64()),
        format!("{:.0}", report.points_per_second),
        format!("{:.3}", report.mb_per_second),
        stored.map_or(String::new(), |s| s.to_string()),
        format!("{:.3}", report.client_cpu.as_secs_f64()),
        report.server_cpu.map_or(String::new(), |cpu| format!("{:.3}", cpu.as_secs_f64())),
        config.pipeline.to_string(),
        (config.pipeline && config.checked_complete).to_string(),
    ];
    text.push_str(&fields.join(","));
    text.push('\n');
    file.write_all(text.as_bytes())
}

/// Column names of the CSV file.
/// Writes the run's timeline: one CSV row per successful transaction, by start time.
pub fn write_timeline(path: &Path, report: &TxBenchReport) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "start_ms,complete_ms,transaction_ms")?;
    for (began, complete, whole) in &report.timeline {
        writeln!(out, "{:.3},{:.3},{:.3}", ms(*began), ms(*complete), ms(*whole))?;
    }
    out.flush()
}

pub fn csv_header() -> &'static str {
    CSV_HEADER
}
