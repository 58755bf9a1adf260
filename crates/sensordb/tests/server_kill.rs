//! SIGKILL of `sensordb serve` during ingest, then a restart on the same data directory (issue 3):
//! every COMPLETEd transaction and every 204-acknowledged write is present exactly once.
//!
//! For each durability mode that promises to survive a crash of the process (`os`, `fsync`; see
//! the README's durability table), native writers (`sensordb-client`) commit transactions of
//! several SEND packets over two series each (numbers, through the WAL) or of byte payloads over
//! 64 KiB (written by the engine straight into a segment), and HTTP writers post line-protocol
//! bodies, while the server is killed with SIGKILL at seeded random moments and restarted on the
//! same directory, [`KILLS`] times (on the same ports when they are free again, so the client
//! library's own retries reach the new process). Then every point is read back through
//! `GET /sensordb/points` and checked against the writers' ledgers:
//! - every acknowledged write (COMPLETED, 204) is present, each point once and with its value
//!   (the reader gives one value per series and timestamp, so "once" is: no timestamp twice in a
//!   series, and the value the writer sent, which a retry sends again unchanged);
//! - no point is present that no writer ever sent;
//! - a native transaction that was never acknowledged is present whole or not at all
//!   (docs/PROTOCOL.md: the server stores a transaction's points "all together, once, or not at
//!   all"). docs/HTTP.md promises no such thing for an unacknowledged body, so for bodies the
//!   outcomes are only counted and printed.
//!
//! Retries, none of which may store a point twice: the client library retries commits across the
//! kill; some commits lose their COMPLETED answer on purpose (the client's test hook) and the
//! library resends them; others lose it with the library's retries off and the writer resends the
//! transaction itself under the same id; every other transaction that failed at a kill is resent
//! under its id after the restart; HTTP bodies are resent after a connection error, as
//! InfluxDB clients do.
//!
//! The seed (`SENSORDB_KILL_SEED`, else the clock) picks the kill moments and the retry choices;
//! every failure message names it. Each writer's points are numbered by a counter `p`: point `p`
//! of writer `w` has timestamp [`timestamp`]`(p)` and the values [`float_value`]`(p)` and
//! [`integer_value`]`(w, p)` (or [`payload_value`]`(p)`), and write `k` of a writer holds points
//! `k·N .. (k+1)·N` of each of its series, so a point read back names its write and its value.

use sensordb_client::{Client, ClientError, ClientOptions, SeriesHandle, TxId, TxStats};
use sensordb_engine::{SeriesKey, Value, ValueKind};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Kills per durability mode.
const KILLS: usize = 3;
/// Native writers; the last one writes byte payloads, the others numbers.
const NATIVE_WRITERS: usize = 4;
const HTTP_WRITERS: usize = 2;
/// Points per series in one transaction of a number writer (it writes two series).
const TX_POINTS: u64 = 120;
/// Largest SEND body the native writers make, so a transaction takes several packets.
const PACKET_BYTES: usize = 512;
/// Values in one transaction of the payload writer, each of [`PAYLOAD_BYTES`]: together over the
/// engine's `direct_write_bytes_min` (64 KiB), so they bypass WAL and memtable.
const PAYLOADS_PER_TX: u64 = 3;
const PAYLOAD_BYTES: usize = 22_000;
/// The payload writer's SEND bodies: each value travels as two PAYLOAD_PART records.
const PAYLOAD_PACKET_BYTES: usize = 16 << 10;
/// Pause of the payload writer between transactions, which bounds the bytes read back.
const PAYLOAD_PAUSE: Duration = Duration::from_millis(30);
/// Lines in one HTTP body (two fields each).
const BODY_LINES: u64 = 50;
/// Attempts of a native commit (the client library's retries) and of an HTTP body, and the
/// back-off step: the n-th retry waits n × step, so a writer gives up after about 450 ms.
const ATTEMPTS: u32 = 6;
const BACKOFF: Duration = Duration::from_millis(30);
/// A kill comes this long (seeded, uniform) after the first acknowledgement since the last start.
const KILL_DELAY_MS: std::ops::Range<u64> = 150..900;
/// After an odd-numbered kill the server stays down this long (seeded), longer than the writers
/// retry, so some writes end unacknowledged; after an even-numbered one it restarts at once, and
/// the writers' retries reach the new process.
const DOWNTIME_MS: std::ops::Range<u64> = 600..1500;
/// Bound on waiting for writers to get an acknowledgement from a fresh server.
const ACK_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on a server start (recovery included) and on a clean stop.
const SERVER_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the whole run of one mode, writers included.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Timestamp of point 0; point `p` is `p` microseconds later.
const BASE_NS: i64 = 1_700_000_000_000_000_000;
const NATIVE_MEASUREMENT: &str = "kill_native";
const HTTP_MEASUREMENT: &str = "kill_http";
/// The database of the HTTP writes; native keys carry none, so they are in `default`.
const HTTP_DATABASE: &str = "killdb";

#[test]
fn sigkill_during_ingest_loses_and_duplicates_nothing_durability_os() {
    run_mode("os");
}

#[test]
fn sigkill_during_ingest_loses_and_duplicates_nothing_durability_fsync() {
    run_mode("fsync");
}

fn timestamp(p: u64) -> i64 {
    BASE_NS + p as i64 * 1_000
}

fn float_value(p: u64) -> f64 {
    p as f64 + 0.5
}

fn integer_value(writer: usize, p: u64) -> i64 {
    p as i64 * 7 + writer as i64
}

fn payload_value(p: u64) -> Vec<u8> {
    (0..PAYLOAD_BYTES).map(|i| (p as usize).wrapping_mul(31).wrapping_add(i) as u8 ^ (i >> 8) as u8).collect()
}

/// Base64, as `/sensordb/points` gives byte values.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]) } else { '=' });
        }
    }
    out
}

/// splitmix64: small, seedable, good enough to pick moments and choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    match std::env::var("SENSORDB_KILL_SEED") {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("SENSORDB_KILL_SEED={text:?} is not a u64")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64),
    }
}

/// What became of one write (a native transaction or an HTTP body). Write `k` of a writer is
/// entry `k` of its ledger; a write without an entry was never sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// Sent at least once (in part, maybe), never acknowledged.
    Sent,
    /// COMPLETED or 204.
    Acked,
}

/// State the controller shares with the writers.
struct Shared {
    stop: AtomicBool,
    /// Acknowledgements so far, over all writers.
    acks: AtomicU64,
    /// (HTTP, native) addresses of the running server.
    addrs: Mutex<(SocketAddr, SocketAddr)>,
}

impl Shared {
    fn addrs(&self) -> (SocketAddr, SocketAddr) {
        *self.addrs.lock().expect("addresses lock")
    }
}

/// How the native writers' retries went.
#[derive(Debug, Default)]
struct NativeCounts {
    /// Commits the client library retried (attempts > 1) without a test hook asking for it:
    /// because of a kill.
    library_retried_at_kill: u64,
    /// Answers dropped on purpose, then resent by the library.
    lost_answer_library: u64,
    /// Answers dropped on purpose with the library's retries off, then resent by the writer.
    lost_answer_explicit: u64,
    /// Transactions that failed (at a kill) and were resent later under the same id.
    resent_after_failure: u64,
    /// Of the resent and retried: COMPLETED with *duplicate* (nothing written again).
    duplicate_answers: u64,
    /// Commits that failed in the end.
    failed_commits: u64,
}

struct NativeWriter {
    index: usize,
    /// Writes byte payloads (one series) instead of numbers (two series).
    payload: bool,
    client_id: [u8; 16],
    ledger: Vec<Status>,
    /// Failed transactions to resend under the same id.
    pending: Vec<u64>,
    counts: NativeCounts,
    /// Errors that a kill cannot explain (server errors, protocol errors).
    unexpected: Vec<String>,
}

/// One connected pair of clients with the same client id: `client` retries, `single` does not.
struct Clients {
    addr: SocketAddr,
    client: Client,
    series: Vec<SeriesHandle>,
    single: Client,
    single_series: Vec<SeriesHandle>,
}

impl NativeWriter {
    /// Points per series in one transaction.
    fn points_per_tx(&self) -> u64 {
        if self.payload {
            PAYLOADS_PER_TX
        } else {
            TX_POINTS
        }
    }

    fn series(&self) -> Vec<(SeriesKey, ValueKind)> {
        let client = self.index.to_string();
        let key = |field: &str| SeriesKey::new(NATIVE_MEASUREMENT, [("client", client.as_str())], field).expect("series key");
        if self.payload {
            vec![(key("p"), ValueKind::Bytes)]
        } else {
            vec![(key("a"), ValueKind::F64), (key("b"), ValueKind::I64)]
        }
    }

    /// What a reader finds of this writer: its series as keyed by `/sensordb/points`, each with the
    /// value of point `p`.
    fn expected(&self) -> Expected<'_> {
        let w = self.index;
        let key = |field: &str| format!("{NATIVE_MEASUREMENT},client={w} {field}");
        let series: Vec<(String, ValueOf)> = if self.payload {
            vec![(key("p"), Box::new(|p| serde_json::Value::from(base64(&payload_value(p)))))]
        } else {
            vec![
                (key("a"), Box::new(|p| serde_json::Value::from(float_value(p)))),
                (key("b"), Box::new(move |p| serde_json::Value::from(integer_value(w, p)))),
            ]
        };
        Expected { writer: format!("native writer {w}"), ledger: &self.ledger, points_per_write: self.points_per_tx(), series }
    }

    async fn connect(&self, addr: SocketAddr) -> Result<Clients, ClientError> {
        let options = ClientOptions {
            client_id: self.client_id,
            client_name: format!("server_kill native writer {}", self.index),
            max_attempts: ATTEMPTS,
            retry_backoff: BACKOFF,
            reply_timeout: Duration::from_secs(10),
            packet_bytes: if self.payload { PAYLOAD_PACKET_BYTES } else { PACKET_BYTES },
            ..ClientOptions::default()
        };
        let define = |client: Client| async move {
            let mut handles = Vec::new();
            for (key, kind) in self.series() {
                handles.push(client.series(&key, kind).await?);
            }
            Ok::<_, ClientError>((client, handles))
        };
        let (client, series) = define(Client::connect_with(addr, options.clone()).await?).await?;
        let (single, single_series) = define(Client::connect_with(addr, ClientOptions { max_attempts: 1, ..options }).await?).await?;
        Ok(Clients { addr, client, series, single, single_series })
    }

    /// Transaction `k` (id `k`, points `k·N .. (k+1)·N` of each series), committed.
    async fn commit(&self, client: &Client, series: &[SeriesHandle], k: u64) -> Result<TxStats, ClientError> {
        let mut tx = client.transaction_with_id(TxId::from_u64(k));
        let n = self.points_per_tx();
        for p in k * n..(k + 1) * n {
            if self.payload {
                tx.push(&series[0], timestamp(p), Value::Bytes(payload_value(p).into()))?;
            } else {
                tx.push(&series[0], timestamp(p), Value::F64(float_value(p)))?;
                tx.push(&series[1], timestamp(p), Value::I64(integer_value(self.index, p)))?;
            }
        }
        tx.commit().await
    }

    /// A failure a kill explains: the connection went, or the server was not there.
    fn note_error(&mut self, k: u64, error: &ClientError) {
        if !matches!(error, ClientError::Io(_) | ClientError::ConnectionLost | ClientError::Frame(_)) {
            self.unexpected.push(format!("native writer {} transaction {k}: {error}", self.index));
        }
    }

    async fn run(mut self, shared: Arc<Shared>, seed: u64) -> NativeWriter {
        let mut rng = Rng(seed ^ (0x100 + self.index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut clients: Option<Clients> = None;
        let deadline = Instant::now() + RUN_TIMEOUT;
        while !shared.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let addr = shared.addrs().1;
            let Some(c) = clients.as_ref().filter(|c| c.addr == addr) else {
                match self.connect(addr).await {
                    Ok(connected) => clients = Some(connected),
                    Err(error) => {
                        if !matches!(error, ClientError::Io(_) | ClientError::ConnectionLost | ClientError::Frame(_)) {
                            self.unexpected.push(format!("native writer {} connecting: {error}", self.index));
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                continue;
            };
            let (k, resent) = match self.pending.pop() {
                Some(k) => (k, true),
                None => {
                    self.ledger.push(Status::Sent);
                    (self.ledger.len() as u64 - 1, false)
                }
            };
            let choice = if resent { None } else { Some(rng.below(8)) };
            let result = match choice {
                Some(0) => {
                    // The answer to COMPLETE is lost; the library resends the whole transaction.
                    self.counts.lost_answer_library += 1;
                    c.client.drop_connection_before_complete_reply(1);
                    self.commit(&c.client, &c.series, k).await
                }
                Some(1) => {
                    // The answer is lost with the library's retries off: the writer resends the
                    // transaction under the same id.
                    c.single.drop_connection_before_complete_reply(1);
                    match self.commit(&c.single, &c.single_series, k).await {
                        Ok(stats) => Ok(stats),
                        Err(error) => {
                            self.note_error(k, &error);
                            self.counts.lost_answer_explicit += 1;
                            self.commit(&c.client, &c.series, k).await
                        }
                    }
                }
                _ => self.commit(&c.client, &c.series, k).await,
            };
            match result {
                Ok(stats) => {
                    self.ledger[k as usize] = Status::Acked;
                    shared.acks.fetch_add(1, Ordering::SeqCst);
                    self.counts.library_retried_at_kill += u64::from(stats.attempts > 1 && choice != Some(0));
                    self.counts.duplicate_answers += u64::from(stats.duplicate);
                    self.counts.resent_after_failure += u64::from(resent);
                }
                Err(error) => {
                    self.note_error(k, &error);
                    self.counts.failed_commits += 1;
                    // The server may have moved (other ports): connect again.
                    clients = None;
                    // Every other failed transaction is resent under its id once the server is
                    // back; the others are abandoned, to be found whole or absent. (Each writer
                    // fails at least once per long downtime, and writers start at both.)
                    if (self.counts.failed_commits + self.index as u64).is_multiple_of(2) {
                        self.pending.push(k);
                    }
                }
            }
            if self.payload {
                tokio::time::sleep(PAYLOAD_PAUSE).await;
            }
        }
        self.pending.clear();
        self
    }
}

#[derive(Debug, Default)]
struct HttpCounts {
    /// Bodies acknowledged after more than one attempt.
    retried: u64,
}

struct HttpWriter {
    index: usize,
    ledger: Vec<Status>,
    counts: HttpCounts,
    unexpected: Vec<String>,
}

impl HttpWriter {
    /// Body `k`: lines `k·L .. (k+1)·L`, two fields each.
    fn body(&self, k: u64) -> String {
        let mut body = String::new();
        for p in k * BODY_LINES..(k + 1) * BODY_LINES {
            body.push_str(&format!(
                "{HTTP_MEASUREMENT},writer={} a={:?},b={}i {}\n",
                self.index,
                float_value(p),
                integer_value(self.index, p),
                timestamp(p)
            ));
        }
        body
    }

    fn expected(&self) -> Expected<'_> {
        let w = self.index;
        let key = |field: &str| format!("{HTTP_MEASUREMENT},writer={w} {field}");
        let series: Vec<(String, ValueOf)> = vec![
            (key("a"), Box::new(|p| serde_json::Value::from(float_value(p)))),
            (key("b"), Box::new(move |p| serde_json::Value::from(integer_value(w, p)))),
        ];
        Expected { writer: format!("HTTP writer {w}"), ledger: &self.ledger, points_per_write: BODY_LINES, series }
    }

    fn run(mut self, shared: Arc<Shared>) -> HttpWriter {
        let deadline = Instant::now() + RUN_TIMEOUT;
        while !shared.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let k = self.ledger.len() as u64;
            self.ledger.push(Status::Sent);
            let body = self.body(k);
            for attempt in 1..=ATTEMPTS {
                let addr = shared.addrs().0;
                match http_request(addr, "POST", &format!("/write?db={HTTP_DATABASE}"), body.as_bytes()) {
                    Ok((204, _)) => {
                        self.ledger[k as usize] = Status::Acked;
                        shared.acks.fetch_add(1, Ordering::SeqCst);
                        self.counts.retried += u64::from(attempt > 1);
                        break;
                    }
                    Ok((status, text)) => {
                        self.unexpected.push(format!("HTTP writer {} body {k}: {status} {text}", self.index));
                        break;
                    }
                    // Killed or not started yet: InfluxDB clients retry, so does this one.
                    Err(_) => std::thread::sleep(BACKOFF * attempt),
                }
            }
        }
        self
    }
}

/// One request on a connection of its own: (status, body).
fn http_request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT)?;
    stream.set_read_timeout(Some(HTTP_TIMEOUT))?;
    stream.set_write_timeout(Some(HTTP_TIMEOUT))?;
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_reply(&raw).ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "incomplete HTTP reply"))
}

/// Status and body of an HTTP/1.1 reply (chunked or not); `None` when cut short.
fn parse_reply(raw: &[u8]) -> Option<(u16, String)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let mut body = raw[end + 4..].to_vec();
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(line_end + 2..line_end + 2 + size)?);
            rest = rest.get(line_end + 2 + size + 2..)?;
        }
        body = out;
    }
    Some((status, String::from_utf8(body).ok()?))
}

/// A running `sensordb serve`; killed (SIGKILL) when dropped.
struct Server {
    child: Option<Child>,
    http: SocketAddr,
    native: SocketAddr,
    log: PathBuf,
    /// The "opened ..." line of its start: what recovery found.
    opened: String,
}

impl Server {
    /// Starts `sensordb serve` on `data` and waits for it to listen; `Err` with its log when it
    /// exits or does not listen in time (a port taken, say).
    fn start(work: &Path, mode: &str, http: SocketAddr, native: SocketAddr, start: usize) -> Result<Server, String> {
        let log = work.join(format!("server-{start}.log"));
        let log_file = std::fs::File::create(&log).expect("server log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sensordb"))
            .arg("serve")
            .arg("--config")
            .arg(work.join("sensordb.toml"))
            .arg("--data")
            .arg(work.join("data"))
            .args(["--durability", mode, "--http", &http.to_string(), "--native", &native.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .expect("start sensordb serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = sender.send(line);
            }
        });
        let mut server = Server { child: Some(child), http, native, log, opened: String::new() };
        let deadline = Instant::now() + SERVER_TIMEOUT;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            match receiver.recv_timeout(Duration::from_millis(20)) {
                Ok(line) => {
                    if line.starts_with("sensordb: opened ") {
                        server.opened = line.clone();
                    }
                    if let Some((http, native)) = serving_addresses(&line) {
                        server.http = http;
                        server.native = native;
                        // The reader thread goes on draining stdout (its sends fail from now on),
                        // so the server never blocks on a full pipe.
                        return Ok(server);
                    }
                    seen.push(line);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Err(format!("sensordb serve did not start listening; stdout:\n{}\nlog:\n{}", seen.join("\n"), server.log_text()))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Child::kill sends SIGKILL.
            child.kill().expect("SIGKILL the server");
            child.wait().expect("reap the server");
        }
    }

    /// SIGTERM; true when it drained and closed its store cleanly in time.
    fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else { return false };
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
        // SAFETY: kill() of a child we spawned and have not waited for.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + SERVER_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The addresses of "sensordb: serving HTTP on A and the native protocol on B (...".
fn serving_addresses(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.strip_prefix("sensordb: serving HTTP on ")?;
    let (http, rest) = rest.split_once(" and the native protocol on ")?;
    let native = rest.split_whitespace().next()?;
    Some((http.parse().ok()?, native.parse().ok()?))
}

/// Points of every series of `measurement` in `db`: series key → (timestamp, value) in the
/// order returned.
fn read_back(addr: SocketAddr, db: &str, measurement: &str, context: &str) -> Vec<(String, Vec<(i64, serde_json::Value)>)> {
    let path = format!("/sensordb/points?db={db}&measurement={measurement}&limit=10000000");
    let (status, body) = http_request(addr, "GET", &path, b"").unwrap_or_else(|e| panic!("{context}: GET {path}: {e}"));
    assert_eq!(status, 200, "{context}: GET {path}: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{context}: GET {path}: not JSON ({e})"));
    assert_eq!(json["truncated"], serde_json::Value::Bool(false), "{context}: GET {path} was truncated");
    json["series"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: GET {path}: no series array"))
        .iter()
        .map(|s| {
            let key = s["key"].as_str().expect("key").to_string();
            let points =
                s["points"].as_array().expect("points").iter().map(|p| (p[0].as_i64().expect("integer timestamp"), p[1].clone())).collect();
            (key, points)
        })
        .collect()
}

/// How the writes of one kind came out.
#[derive(Debug, Default)]
struct Outcome {
    acked: u64,
    /// Never acknowledged, and every point present.
    unacked_whole: u64,
    /// Never acknowledged, and no point present.
    unacked_absent: u64,
    /// Never acknowledged, and some points present (HTTP only; a failure for transactions).
    unacked_partial: u64,
    points_read: u64,
}

/// The value of point `p` of a series.
type ValueOf = Box<dyn Fn(u64) -> serde_json::Value>;

/// What one writer wrote, for the checks.
struct Expected<'a> {
    writer: String,
    ledger: &'a [Status],
    /// Points of each series in one write.
    points_per_write: u64,
    /// Its series (keyed as `/sensordb/points` gives them), each with the value of point `p`.
    series: Vec<(String, ValueOf)>,
}

/// Checks points read back against what the writers sent: each series is one a writer wrote,
/// each point's timestamp belongs to a write that was sent, holds its value, and appears once.
/// Returns the points present per (writer, write), and their total.
fn check_points(read: &[(String, Vec<(i64, serde_json::Value)>)], writers: &[Expected<'_>], context: &str) -> (Vec<Vec<u64>>, u64) {
    let mut present: Vec<Vec<u64>> = writers.iter().map(|e| vec![0; e.ledger.len()]).collect();
    let mut total = 0;
    for (key, points) in read {
        let (w, value_of) = writers
            .iter()
            .enumerate()
            .find_map(|(w, e)| e.series.iter().find(|(k, _)| k == key).map(|(_, value_of)| (w, value_of)))
            .unwrap_or_else(|| panic!("{context}: series {key:?} was never written"));
        let writer = &writers[w];
        let mut previous: Option<i64> = None;
        for (ts, value) in points {
            assert!(
                previous.is_none_or(|prev| prev < *ts),
                "{context}: series {key:?}: timestamp {ts} after {previous:?} (twice, or out of order)"
            );
            previous = Some(*ts);
            let offset = ts - BASE_NS;
            assert!(offset >= 0 && offset % 1_000 == 0, "{context}: series {key:?}: timestamp {ts} was never written");
            let p = offset as u64 / 1_000;
            let k = p / writer.points_per_write;
            assert!(
                (k as usize) < writer.ledger.len(),
                "{context}: series {key:?}: point at {ts} belongs to write {k} of {}, which was never sent (it sent {})",
                writer.writer,
                writer.ledger.len()
            );
            assert!(*value == value_of(p), "{context}: series {key:?} at {ts} (write {k} of {}): a wrong value", writer.writer);
            present[w][k as usize] += 1;
            total += 1;
        }
    }
    (present, total)
}

/// Classifies each write of `writers` (whose points present are `present`); an acknowledged one
/// must be whole.
fn outcome(present: &[Vec<u64>], writers: &[Expected<'_>], kind: &str, context: &str) -> Outcome {
    let mut outcome = Outcome::default();
    for (writer, present) in writers.iter().zip(present) {
        let whole = writer.series.len() as u64 * writer.points_per_write;
        for (k, (status, &n)) in writer.ledger.iter().zip(present).enumerate() {
            outcome.points_read += n;
            match status {
                Status::Acked => {
                    assert_eq!(n, whole, "{context}: acknowledged {kind} {k} of {} has {n} of its {whole} points", writer.writer);
                    outcome.acked += 1;
                }
                Status::Sent if n == whole => outcome.unacked_whole += 1,
                Status::Sent if n == 0 => outcome.unacked_absent += 1,
                Status::Sent => outcome.unacked_partial += 1,
            }
        }
    }
    outcome
}

fn config_file(work: &Path) {
    // A small memtable and segment size, so flushes and segment seals happen between kills too.
    // Usage thresholds at the top: this test is about crashes, and the shared disk it runs on
    // must neither delay acknowledgements nor make reclaim evict the data it checks.
    let config = "memtable_bytes_max = 1048576\n\
                  segment_bytes_max = 1048576\n\
                  disk_target_usage = 0.97\n\
                  throttle_low_usage = 0.98\n\
                  throttle_high_usage = 0.99\n\
                  evict_oldest_when_full = false\n";
    std::fs::write(work.join("sensordb.toml"), config).expect("write config");
}

fn run_mode(mode: &str) {
    let seed = seed();
    let context = format!("durability {mode}, seed {seed} (rerun with SENSORDB_KILL_SEED={seed})");
    let started = Instant::now();
    let mut rng = Rng(seed ^ 0xC0FF_EE00);
    let mut work = tempfile::Builder::new().prefix("sensordb-server-kill-").tempdir().expect("temp dir");
    // Kept when the test fails (cleaned up at its end otherwise), for the data and server logs.
    work.disable_cleanup(true);
    let context = format!("{context}; data and server logs in {}", work.path().display());
    config_file(work.path());
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut starts = 0;
    let mut server = Server::start(work.path(), mode, any_port, any_port, starts).unwrap_or_else(|e| panic!("{context}: {e}"));
    let shared =
        Arc::new(Shared { stop: AtomicBool::new(false), acks: AtomicU64::new(0), addrs: Mutex::new((server.http, server.native)) });

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let natives: Vec<_> = (0..NATIVE_WRITERS)
        .map(|index| {
            let mut client_id = [0u8; 16];
            client_id[0] = index as u8 + 1;
            client_id[1..9].copy_from_slice(&seed.to_le_bytes());
            let payload = index == NATIVE_WRITERS - 1;
            let writer = NativeWriter {
                index,
                payload,
                client_id,
                ledger: Vec::new(),
                pending: Vec::new(),
                counts: NativeCounts::default(),
                unexpected: Vec::new(),
            };
            runtime.spawn(writer.run(shared.clone(), seed))
        })
        .collect();
    let https: Vec<_> = (0..HTTP_WRITERS)
        .map(|index| {
            let writer = HttpWriter { index, ledger: Vec::new(), counts: HttpCounts::default(), unexpected: Vec::new() };
            let shared = shared.clone();
            std::thread::spawn(move || writer.run(shared))
        })
        .collect();

    // Kill while the writers write, restart on the same directory; then let them write a little
    // on the last server (resending what failed) before they stop.
    let wait_for_ack = |since: u64, what: &str| {
        let deadline = Instant::now() + ACK_TIMEOUT;
        while shared.acks.load(Ordering::SeqCst) <= since {
            assert!(Instant::now() < deadline, "{context}: no write acknowledged within {ACK_TIMEOUT:?} {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let mut downtimes_ms = Vec::new();
    let mut recoveries = Vec::new();
    let mut port_changes = 0;
    for kill in 1..=KILLS {
        let acks = shared.acks.load(Ordering::SeqCst);
        wait_for_ack(acks, &format!("before kill {kill}"));
        std::thread::sleep(Duration::from_millis(KILL_DELAY_MS.start + rng.below(KILL_DELAY_MS.end - KILL_DELAY_MS.start)));
        let (http, native) = (server.http, server.native);
        server.kill();
        let killed = Instant::now();
        if kill % 2 == 1 {
            std::thread::sleep(Duration::from_millis(DOWNTIME_MS.start + rng.below(DOWNTIME_MS.end - DOWNTIME_MS.start)));
        }
        starts += 1;
        // The same ports when they are free, so clients in their retries find the new process.
        server = match Server::start(work.path(), mode, http, native, starts) {
            Ok(server) => server,
            Err(_) => {
                port_changes += 1;
                starts += 1;
                Server::start(work.path(), mode, any_port, any_port, starts).unwrap_or_else(|e| panic!("{context}: restart {kill}: {e}"))
            }
        };
        downtimes_ms.push(killed.elapsed().as_millis());
        recoveries.push(server.opened.clone());
        *shared.addrs.lock().expect("addresses lock") = (server.http, server.native);
    }
    let acks = shared.acks.load(Ordering::SeqCst);
    wait_for_ack(acks, "after the last restart");
    std::thread::sleep(Duration::from_millis(300));
    shared.stop.store(true, Ordering::SeqCst);
    let natives: Vec<NativeWriter> = natives.into_iter().map(|h| runtime.block_on(h).expect("native writer")).collect();
    let https: Vec<HttpWriter> = https.into_iter().map(|h| h.join().expect("HTTP writer")).collect();
    drop(runtime);
    let writing = started.elapsed();

    let context = format!("{context}; last server log {}", server.log.display());
    let unexpected: Vec<&String> = natives.iter().flat_map(|w| &w.unexpected).chain(https.iter().flat_map(|w| &w.unexpected)).collect();
    assert!(unexpected.is_empty(), "{context}: errors a kill does not explain:\n{unexpected:#?}\nserver log:\n{}", server.log_text());

    // Read back, check, and stop the last server cleanly.
    let expected: Vec<Expected<'_>> = natives.iter().map(NativeWriter::expected).collect();
    let (present, _) = check_points(&read_back(server.http, "default", NATIVE_MEASUREMENT, &context), &expected, &context);
    let numbers = outcome(&present[..NATIVE_WRITERS - 1], &expected[..NATIVE_WRITERS - 1], "transaction", &context);
    let payloads = outcome(&present[NATIVE_WRITERS - 1..], &expected[NATIVE_WRITERS - 1..], "transaction", &context);
    // PROTOCOL.md: a transaction is stored "all together, once, or not at all".
    assert_eq!(numbers.unacked_partial, 0, "{context}: transactions never acknowledged are partly present: {numbers:?}");
    assert_eq!(payloads.unacked_partial, 0, "{context}: payload transactions never acknowledged are partly present: {payloads:?}");
    let expected: Vec<Expected<'_>> = https.iter().map(HttpWriter::expected).collect();
    let (present, _) = check_points(&read_back(server.http, HTTP_DATABASE, HTTP_MEASUREMENT, &context), &expected, &context);
    let http = outcome(&present, &expected, "body", &context);
    let stopped = server.stop();
    assert!(stopped, "{context}: the last server did not stop cleanly; its log:\n{}", server.log_text());

    // Enough happened for the checks to mean something.
    let counts = |f: fn(&NativeCounts) -> u64| natives.iter().map(|w| f(&w.counts)).sum::<u64>();
    assert!(
        numbers.acked > 0 && payloads.acked > 0 && http.acked > 0,
        "{context}: nothing acknowledged: {numbers:?}, {payloads:?}, HTTP {http:?}"
    );
    assert!(counts(|c| c.lost_answer_explicit) > 0, "{context}: no explicit retry after a lost answer");
    assert!(counts(|c| c.duplicate_answers) > 0, "{context}: no retry was answered as a duplicate");
    assert!(counts(|c| c.resent_after_failure) > 0, "{context}: no failed transaction was resent after a restart");
    assert!(numbers.unacked_whole + numbers.unacked_absent > 0, "{context}: every transaction was acknowledged: {numbers:?}");
    assert!(payloads.unacked_whole + payloads.unacked_absent > 0, "{context}: every payload transaction was acknowledged: {payloads:?}");
    assert!(http.unacked_whole + http.unacked_absent + http.unacked_partial > 0, "{context}: every HTTP body was acknowledged: {http:?}");
    let _ = writeln!(
        std::io::stderr(),
        "server_kill durability {mode} seed {seed}: {KILLS} kills, down for {downtimes_ms:?} ms ({port_changes} on other ports), \
         writing {:.1} s, total {:.1} s\n  recoveries: {recoveries:#?}\n  native numbers: {numbers:?}\n  native payloads: {payloads:?}\n  native retries: by the library after a lost answer {}, at a kill {}, \
         by the writer after a lost answer {}, resent after a failure {}, duplicate answers {}, failed commits {}\n  HTTP: {http:?}, bodies retried {}",
        writing.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        counts(|c| c.lost_answer_library),
        counts(|c| c.library_retried_at_kill),
        counts(|c| c.lost_answer_explicit),
        counts(|c| c.resent_after_failure),
        counts(|c| c.duplicate_answers),
        counts(|c| c.failed_commits),
        https.iter().map(|w| w.counts.retried).sum::<u64>(),
    );
    work.disable_cleanup(false);
}
