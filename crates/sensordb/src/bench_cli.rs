//! `sensordb bench …`: benchmark subcommands. Each prints its figures with the command line that
//! produced them, ready to paste into docs/BENCHMARKS.md.

use anyhow::anyhow;
use sensordb_bench::engine_bench::{self, EngineBenchConfig};
use sensordb_bench::ingest_bench::{self, IngestBenchConfig, IngestProtocol};
use sensordb_bench::load::{raise_open_file_limit, InProcessServer, SelfSignedCert};
use sensordb_bench::reclaim_bench::{self, ReclaimBenchConfig, ReclaimFigures};
use sensordb_bench::tx_bench::{self, TxBenchConfig};
use sensordb_client::ClientTls;
use sensordb_engine::Durability;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// In-process storage engine benchmarks on TSBS-IoT-like data.
    Engine(EngineArgs),
    /// Site-to-site style load test of the native protocol: many clients, each committing
    /// transactions of packets at an interval (NiFi's site-to-site load test figures).
    Tx(TxArgs),
    /// Sustained ingest with the store kept full at live-data shares V of its capacity, against
    /// the same stream on an empty store; reclaim's work and write amplification (issue 4).
    Reclaim(ReclaimArgs),
    /// Maximum sustained ingest over the network (native transactions or HTTP line protocol)
    /// for a bounded time.
    Ingest(IngestArgs),
    /// Internal: the server side of `bench tx`/`bench ingest` in a process of its own (used when
    /// one process cannot hold both ends' descriptors). Prints its addresses, serves until its
    /// standard input closes, then prints the points stored.
    #[command(hide = true)]
    ServerProcess(ServerProcessArgs),
}

#[derive(clap::Args)]
pub struct ServerProcessArgs {
    #[arg(long, default_value = "fsync")]
    durability: Durability,
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Serve TLS with this certificate chain (PEM) and `--tls-key`.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[arg(long, value_parser = parse_disk_usage)]
    disk_usage_limits: Option<DiskUsageLimits>,
}

/// `disk_target_usage`, `throttle_low_usage`, `throttle_high_usage` of an in-process server.
type DiskUsageLimits = (f64, f64, f64);

fn parse_disk_usage(text: &str) -> Result<DiskUsageLimits, String> {
    let shares: Vec<f64> = text.split(',').map(|s| s.trim().parse::<f64>().map_err(|e| format!("{s:?}: {e}"))).collect::<Result<_, _>>()?;
    match shares[..] {
        [m, l, h] if 0.0 < m && m < l && l < h && h <= 1.0 => Ok((m, l, h)),
        _ => Err("three shares M,L,H with 0 < M < L < H ≤ 1".into()),
    }
}

/// TLS options of `bench tx` and `bench ingest`, for the client library's `ClientTls`.
#[derive(clap::Args, Clone, Debug)]
pub struct TlsArgs {
    /// Speak TLS. Without --addr the in-process server serves a self-signed certificate made for
    /// the run (for localhost and 127.0.0.1), which the clients trust; with --addr give --tls-ca.
    #[arg(long)]
    tls: bool,
    /// PEM file of the CA certificate(s) the clients trust (a self-signed server certificate
    /// will do); implies --tls. Only with --addr.
    #[arg(long, requires = "addr")]
    tls_ca: Option<PathBuf>,
    /// Name the server's certificate must carry (default: the IP address of --addr; localhost
    /// for the in-process server).
    #[arg(long)]
    tls_server_name: Option<String>,
}

impl TlsArgs {
    fn enabled(&self) -> bool {
        self.tls || self.tls_ca.is_some()
    }

    /// The clients' TLS settings for a server at `addr` (given by --addr), or for the
    /// in-process server's certificate `cert`.
    fn client_tls(&self, addr: Option<SocketAddr>, cert: Option<&SelfSignedCert>) -> anyhow::Result<Option<ClientTls>> {
        if !self.enabled() {
            return Ok(None);
        }
        let mut tls = match (cert, &self.tls_ca, addr) {
            (Some(cert), _, _) => cert.client_tls(),
            (None, Some(ca), Some(addr)) => {
                ClientTls::from_ca_file(ca, addr.ip().to_string()).map_err(|e| anyhow!("--tls-ca {}: {e}", ca.display()))?
            }
            (None, _, _) => return Err(anyhow!("--tls with --addr needs --tls-ca (the CA certificate that signed the server's)")),
        };
        if let Some(name) = &self.tls_server_name {
            tls.server_name = name.clone();
        }
        Ok(Some(tls))
    }
}

#[derive(clap::Args)]
pub struct TxArgs {
    /// Native listener of a running server; without it an in-process server is started on
    /// 127.0.0.1 with a temporary data directory.
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Access token.
    #[arg(long, default_value = "")]
    token: String,
    /// Durability of the in-process server: fsync, os or none.
    #[arg(long, default_value = "fsync")]
    durability: Durability,
    /// Concurrent clients, each with its own connection.
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// Series written; client n writes series n % series (0: one per client).
    #[arg(long, default_value_t = 100)]
    series: usize,
    /// Run the server side in a child process even when one process could hold both ends'
    /// descriptors (it does so by itself when it cannot).
    #[arg(long)]
    server_process: bool,
    /// Transactions per client.
    #[arg(long, default_value_t = 10)]
    transactions: u64,
    /// Packets (SEND frames) per transaction.
    #[arg(long, default_value_t = 5)]
    packets: u64,
    /// Float points per packet.
    #[arg(long, default_value_t = 100, conflicts_with = "payload_bytes")]
    points: u64,
    /// Instead of points: one bytes value of this size per packet.
    #[arg(long)]
    payload_bytes: Option<usize>,
    /// Between the starts of a client's transactions; clients start spread over one interval.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Stop starting transactions after this many seconds (the run also ends when every
    /// transaction is done).
    #[arg(long)]
    duration_s: Option<f64>,
    /// Connections opened at once while connecting.
    #[arg(long, default_value_t = 250)]
    connect_wave: usize,
    /// Commit attempts per transaction (1: every error counts as a failure).
    #[arg(long, default_value_t = 1)]
    max_attempts: u32,
    /// Longest wait for one answer, ms.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Pipelined commits: CREATE, SENDs and CONFIRM in one write, COMPLETE once CONFIRMED's
    /// checksum matched (two round trips). false: each frame waits for the answer before it
    /// (three round trips and a write per frame).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pipeline: bool,
    /// With --pipeline true: COMPLETE_CHECKED (the client's checksum) in the same write, and
    /// the server compares before storing: one round trip per commit. false: COMPLETE waits for
    /// CONFIRMED (two round trips).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    checked_complete: bool,
    /// Disk usage thresholds of the in-process server, M,L,H: disk_target_usage,
    /// throttle_low_usage, throttle_high_usage (default the server's 0.8,0.9,0.95). On a disk
    /// that other work fills, raise them (say 0.97,0.98,0.99) or the server delays
    /// acknowledgements from 90% usage, as a real one would.
    #[arg(long, value_parser = parse_disk_usage)]
    disk_usage_limits: Option<DiskUsageLimits>,
    /// Append one CSV row with every parameter and result (header when the file is new).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write every successful transaction as a CSV row (start ms since the timed phase began,
    /// complete ms, whole commit ms): shows when in the run the slow transactions were.
    #[arg(long)]
    timeline_csv: Option<PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(clap::Args)]
pub struct IngestArgs {
    /// native or http.
    #[arg(long, default_value = "native")]
    protocol: IngestProtocol,
    /// The server's listener for the protocol; without it an in-process server is started on
    /// 127.0.0.1 with a temporary data directory.
    #[arg(long)]
    addr: Option<SocketAddr>,
    #[arg(long, default_value = "")]
    token: String,
    /// Durability of the in-process server: fsync, os or none.
    #[arg(long, default_value = "fsync")]
    durability: Durability,
    /// Concurrent connections.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Seconds during which requests start.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Points per transaction or HTTP body.
    #[arg(long, default_value_t = 10_000)]
    batch_points: usize,
    /// Trucks of the generated TSBS fleet.
    #[arg(long, default_value_t = 100)]
    scale: u32,
    /// Hours of generated data (one round; later rounds repeat it).
    #[arg(long, default_value_t = 6)]
    hours: u32,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Line protocol to send instead of generated rows.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Database named in HTTP writes.
    #[arg(long, default_value = "sensordb")]
    db: String,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(clap::Args)]
pub struct EngineArgs {
    /// Parts to run, comma separated: ingest, payload, decode, startup.
    #[arg(long, default_value = "ingest,payload,decode,startup", value_delimiter = ',')]
    parts: Vec<String>,
    /// Scratch directory (removed and recreated per part).
    #[arg(long, default_value = "target/bench-engine")]
    dir: PathBuf,
    /// Durability modes for the ingest part, comma separated.
    #[arg(long, default_value = "fsync,none", value_delimiter = ',')]
    durability: Vec<Durability>,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Trucks in the TSBS fleet.
    #[arg(long, default_value_t = 100)]
    scale: u32,
    /// Hours of data.
    #[arg(long, default_value_t = 24)]
    hours: u32,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Points per write batch.
    #[arg(long, default_value_t = 10_000)]
    batch_points: usize,
    /// Payload portion sizes in bytes, comma separated.
    #[arg(long, default_value = "4096,65536,1048576", value_delimiter = ',')]
    payload_sizes: Vec<usize>,
    /// Concurrent writers in the payload part.
    #[arg(long, default_value_t = 8)]
    payload_writers: usize,
    /// MiB written per payload size.
    #[arg(long, default_value_t = 2048)]
    payload_mib: u64,
    /// Load this line-protocol file (e.g. from scripts/tsbs-data) in the ingest part instead of
    /// generating rows.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Flush after every this many points per writer (simulates time-driven flushes).
    #[arg(long)]
    flush_every_points: Option<usize>,
    /// GiB of data for the start-up measurement.
    #[arg(long, default_value_t = 10.0)]
    startup_gib: f64,
}

#[derive(clap::Args)]
pub struct ReclaimArgs {
    /// Live-data shares V to run, comma separated (the database's capacity is V·C); the
    /// empty-store baseline runs besides them unless --no-baseline.
    #[arg(long, default_value = "0.2,0.5,0.8", value_delimiter = ',')]
    live_shares: Vec<f64>,
    #[arg(long)]
    no_baseline: bool,
    /// The node's own-byte capacity C, MiB.
    #[arg(long, default_value_t = 256)]
    capacity_mib: u64,
    /// Runs of each configuration, interleaved (baseline, V1, V2, ..., baseline, ...).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Scratch directory.
    #[arg(long, default_value = "target/bench-reclaim")]
    dir: PathBuf,
    /// fsync, os or none.
    #[arg(long, default_value = "fsync")]
    durability: Durability,
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Series, each a random walk at 1 Hz of data time.
    #[arg(long, default_value_t = 1000)]
    sensors: u32,
    #[arg(long, default_value_t = 10_000)]
    batch_points: usize,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// segment_bytes_max, MiB.
    #[arg(long, default_value_t = 4)]
    segment_mib: u64,
    /// memtable_bytes_max, MiB.
    #[arg(long, default_value_t = 16)]
    memtable_mib: usize,
    /// Pause between reclaim cycles, ms (a flush starts one sooner).
    #[arg(long, default_value_t = 200)]
    reclaim_interval_ms: u64,
    /// Merge reads plus writes, MiB/s (0: no limit).
    #[arg(long, default_value_t = 64)]
    merge_mib_per_second: u64,
    /// Run background compaction (off: only reclaim rewrites data).
    #[arg(long)]
    compaction: bool,
    /// Bytes stored before the measurement, in units of C.
    #[arg(long, default_value_t = 2.0)]
    fill: f64,
    /// Bytes stored during the measurement, in units of C.
    #[arg(long, default_value_t = 2.0)]
    measure: f64,
    /// Share of the series given a short storage period (partly dead segments, merged by the
    /// Fisherman); 0 for none.
    #[arg(long, default_value_t = 0.0)]
    short_share: f64,
    /// The short period as a share of the capacity horizon (the data time V·C holds).
    #[arg(long, default_value_t = 0.25)]
    short_period_share: f64,
    /// Disk usage thresholds M,L,H: the Fisherman's target U_m and the throttle's U_l and U_h
    /// (default the server's 0.8,0.9,0.95; the Riak study ran 0.8,0.95,1).
    #[arg(long, value_parser = parse_disk_usage, default_value = "0.8,0.9,0.95")]
    disk_usage_limits: DiskUsageLimits,
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Engine(args) => engine(args),
        BenchCommand::Reclaim(args) => reclaim(args),
        BenchCommand::Tx(args) => tx(args),
        BenchCommand::Ingest(args) => ingest(args),
        BenchCommand::ServerProcess(args) => server_process(args),
    }
}

/// The server side: the in-process one, or one in a child process.
enum BenchServer {
    InProcess(Box<InProcessServer>),
    Child(ChildServer),
}

/// The paths of a certificate chain and its key, for a server speaking TLS.
type TlsFiles = Option<(PathBuf, PathBuf)>;

impl BenchServer {
    /// Starts the server for `connections` clients: in this process when the open-file limit
    /// holds both ends (two descriptors per connection) and `separate` is false, else in a
    /// child process running `sensordb bench server-process`. With `tls`, both listeners speak
    /// TLS only with that certificate and key.
    async fn start(
        durability: Durability,
        connections: usize,
        separate: bool,
        tls: TlsFiles,
        disk_usage: Option<DiskUsageLimits>,
    ) -> anyhow::Result<BenchServer> {
        let wanted = (2 * connections + 1024) as u64;
        let limit = raise_open_file_limit(wanted);
        if !separate && limit.is_enough() {
            let files = tls.as_ref().map(|(cert, key)| (cert.as_path(), key.as_path()));
            let server = InProcessServer::start_with(durability, connections, files, disk_usage).await.map_err(|e| anyhow!(e))?;
            println!("{}", server.describe());
            return Ok(BenchServer::InProcess(Box::new(server)));
        }
        if !separate {
            println!(
                "server: the open-file limit {} cannot hold both ends of {connections} connections: the server runs in a child process",
                limit.now
            );
        }
        let child = tokio::task::spawn_blocking(move || ChildServer::start(durability, connections, tls, disk_usage)).await??;
        Ok(BenchServer::Child(child))
    }

    fn native_addr(&self) -> SocketAddr {
        match self {
            BenchServer::InProcess(s) => s.native_addr(),
            BenchServer::Child(c) => c.native_addr,
        }
    }

    /// The server's process id when it runs in a child process.
    fn pid(&self) -> Option<u32> {
        match self {
            BenchServer::InProcess(_) => None,
            BenchServer::Child(c) => Some(c.child.id()),
        }
    }

    fn http_addr(&self) -> SocketAddr {
        match self {
            BenchServer::InProcess(s) => s.http_addr(),
            BenchServer::Child(c) => c.http_addr,
        }
    }

    /// Stops the server and returns the points it stored; prints why when that fails.
    async fn shutdown(self) -> Option<u64> {
        let stored = match self {
            BenchServer::InProcess(s) => s.shutdown(Duration::from_secs(60)).await.map_err(|e| anyhow!(e)),
            BenchServer::Child(c) => tokio::task::spawn_blocking(move || c.shutdown()).await.map_err(|e| anyhow!(e)).and_then(|r| r),
        };
        match stored {
            Ok(points) => Some(points),
            Err(error) => {
                println!("server: cannot count the points stored: {error:#}");
                None
            }
        }
    }
}

/// `sensordb bench server-process` as a child: its stdin is the stop signal.
struct ChildServer {
    child: std::process::Child,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    native_addr: SocketAddr,
    http_addr: SocketAddr,
}

impl ChildServer {
    fn start(
        durability: Durability,
        connections: usize,
        tls: TlsFiles,
        disk_usage: Option<DiskUsageLimits>,
    ) -> anyhow::Result<ChildServer> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe()?;
        let durability_text = format!("{durability:?}").to_lowercase();
        let mut command = Command::new(exe);
        command.args(["bench", "server-process", "--durability", &durability_text, "--connections", &connections.to_string()]);
        if let Some((cert, key)) = &tls {
            command.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
        }
        if let Some((m, l, h)) = disk_usage {
            command.arg("--disk-usage-limits").arg(format!("{m},{l},{h}"));
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout of the server process"))?;
        let mut stdout = std::io::BufReader::new(stdout);
        let (mut native_addr, mut http_addr) = (None, None);
        let mut line = String::new();
        // The child prints a few lines, the last of them its addresses.
        for _ in 0..20 {
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                break;
            }
            print!("server process: {line}");
            if let Some(rest) = line.trim().strip_prefix("listening native ") {
                let mut parts = rest.split(" http ");
                native_addr = parts.next().and_then(|a| a.parse().ok());
                http_addr = parts.next().and_then(|a| a.parse().ok());
                break;
            }
        }
        match (native_addr, http_addr) {
            (Some(native_addr), Some(http_addr)) => Ok(ChildServer { child, stdout, native_addr, http_addr }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow!("the server process did not start"))
            }
        }
    }

    fn shutdown(mut self) -> anyhow::Result<u64> {
        use std::io::BufRead;
        drop(self.child.stdin.take());
        let mut stored = None;
        let mut line = String::new();
        for _ in 0..20 {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                break;
            }
            print!("server process: {line}");
            if let Some(n) = line.trim().strip_prefix("stored ") {
                stored = n.split_whitespace().next().and_then(|n| n.parse().ok());
            }
        }
        let status = self.child.wait()?;
        stored.ok_or_else(|| anyhow!("the server process ended ({status}) without counting"))
    }
}

fn server_process(args: ServerProcessArgs) -> anyhow::Result<()> {
    let limit = raise_open_file_limit((args.connections + 1024) as u64);
    println!("{limit}");
    runtime()?.block_on(async {
        let tls = args.tls_cert.as_deref().zip(args.tls_key.as_deref());
        let server =
            InProcessServer::start_with(args.durability, args.connections, tls, args.disk_usage_limits).await.map_err(|e| anyhow!(e))?;
        println!("{}", server.describe());
        println!("listening native {} http {}", server.native_addr(), server.http_addr());
        // Serve until the parent closes our stdin (or dies).
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        })
        .await?;
        match server.shutdown(Duration::from_secs(60)).await {
            Ok(stored) => println!("stored {stored} points"),
            Err(error) => println!("cannot count the points stored: {error}"),
        }
        Ok(())
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Raises the open-file limit for `connections` (twice that with an in-process server) and
/// prints what it is.
fn file_limit(connections: usize, in_process: bool) {
    let per_connection = if in_process { 2 } else { 1 };
    let limit = raise_open_file_limit((connections * per_connection + 1024) as u64);
    println!("client: {limit}");
    if !limit.is_enough() {
        eprintln!("warning: cannot raise the open-file limit to {}: {limit}", limit.wanted);
    }
}

fn tx(args: TxArgs) -> anyhow::Result<()> {
    let command_line: Vec<String> = std::env::args().collect();
    println!("# {}", command_line.join(" "));
    let config = TxBenchConfig {
        token: args.token.clone(),
        clients: args.clients,
        series: args.series,
        transactions: args.transactions,
        packets: args.packets,
        points: args.points,
        payload_bytes: args.payload_bytes,
        interval: Duration::from_millis(args.interval_ms),
        duration: args.duration_s.map(Duration::from_secs_f64),
        connect_wave: args.connect_wave,
        max_attempts: args.max_attempts,
        reply_timeout: Duration::from_millis(args.timeout_ms),
        pipeline: args.pipeline,
        checked_complete: args.checked_complete,
        ..TxBenchConfig::default()
    };
    let cert = in_process_cert(&args.tls, args.addr)?;
    let config = TxBenchConfig { tls: args.tls.client_tls(args.addr, cert.as_ref())?, ..config };
    runtime()?.block_on(async {
        let server = match args.addr {
            Some(_) => None,
            None => Some(
                BenchServer::start(args.durability, args.clients, args.server_process, tls_files(cert.as_ref()), args.disk_usage_limits)
                    .await?,
            ),
        };
        let same_process = matches!(server, Some(BenchServer::InProcess(_)));
        file_limit(args.clients, same_process);
        let addr = match (&server, args.addr) {
            (Some(server), _) => server.native_addr(),
            (None, Some(addr)) => addr,
            (None, None) => return Err(anyhow!("no server address")),
        };
        let config = TxBenchConfig { server_pid: server.as_ref().and_then(BenchServer::pid), ..config };
        println!(
            "client: native {addr}{}, {} worker threads",
            describe_tls(config.tls.as_ref()),
            tokio::runtime::Handle::current().metrics().num_workers()
        );
        let report = tx_bench::run(&config, addr).await;
        for line in tx_bench::format_report(&config, &report) {
            println!("{line}");
        }
        let durability = if server.is_some() { format!("{:?}", args.durability).to_lowercase() } else { String::new() };
        let stored = match server {
            Some(server) => {
                let stored = server.shutdown().await;
                if let Some(stored) = stored {
                    println!(
                        "server stored {stored} points (acknowledged {}){}",
                        report.points,
                        if stored == report.points { "" } else { ": MISMATCH" }
                    );
                }
                stored
            }
            None => None,
        };
        if let Some(path) = &args.csv {
            tx_bench::append_csv(path, &config, &report, &durability, stored)?;
            println!("csv: appended a row to {}", path.display());
        }
        if let Some(path) = &args.timeline_csv {
            tx_bench::write_timeline(path, &report)?;
            let zero = report.started_at.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
            println!(
                "timeline: {} transactions written to {} (start_ms 0 is Unix time {:.6} s)",
                report.timeline.len(),
                path.display(),
                zero.as_secs_f64()
            );
        }
        Ok(())
    })
}

fn ingest(args: IngestArgs) -> anyhow::Result<()> {
    let command_line: Vec<String> = std::env::args().collect();
    println!("# {}", command_line.join(" "));
    file_limit(args.clients, args.addr.is_none());
    let config = IngestBenchConfig {
        protocol: args.protocol,
        token: args.token.clone(),
        clients: args.clients,
        duration: Duration::from_secs(args.seconds),
        batch_points: args.batch_points,
        scale: args.scale,
        hours: args.hours,
        seed: args.seed,
        file: args.file.clone(),
        db: args.db.clone(),
        progress: !args.no_progress,
        ..IngestBenchConfig::default()
    };
    let cert = in_process_cert(&args.tls, args.addr)?;
    let config = IngestBenchConfig { tls: args.tls.client_tls(args.addr, cert.as_ref())?, ..config };
    runtime()?.block_on(async {
        let server = match args.addr {
            Some(_) => None,
            None => Some(BenchServer::start(args.durability, args.clients, false, tls_files(cert.as_ref()), None).await?),
        };
        let addr = match (&server, args.addr, args.protocol) {
            (Some(server), _, IngestProtocol::Native) => server.native_addr(),
            (Some(server), _, IngestProtocol::Http) => server.http_addr(),
            (None, Some(addr), _) => addr,
            (None, None, _) => return Err(anyhow!("no server address")),
        };
        println!("client: {} {addr}{}", args.protocol, describe_tls(config.tls.as_ref()));
        let report = ingest_bench::run(&config, addr).await.map_err(|e| anyhow!(e))?;
        for line in ingest_bench::format_report(&config, &report) {
            println!("{line}");
        }
        if let Some(server) = server {
            if let Some(stored) = server.shutdown().await {
                let note = match args.protocol {
                    IngestProtocol::Native if stored != report.points => ": MISMATCH",
                    _ => "",
                };
                println!("server stored {stored} points (acknowledged {}){note}", report.points);
            }
        }
        Ok(())
    })
}

/// The certificate for an in-process server with `--tls` (none for a server given by --addr).
fn in_process_cert(tls: &TlsArgs, addr: Option<SocketAddr>) -> anyhow::Result<Option<SelfSignedCert>> {
    if !tls.enabled() || addr.is_some() {
        return Ok(None);
    }
    Ok(Some(SelfSignedCert::generate().map_err(|e| anyhow!(e))?))
}

fn tls_files(cert: Option<&SelfSignedCert>) -> TlsFiles {
    cert.map(|c| (c.cert.clone(), c.key.clone()))
}

fn describe_tls(tls: Option<&ClientTls>) -> String {
    tls.map_or(String::new(), |t| format!(" over TLS (server name {})", t.server_name))
}

fn engine(args: EngineArgs) -> anyhow::Result<()> {
    let command_line: Vec<String> = std::env::args().collect();
    println!("# {}", command_line.join(" "));
    let base = EngineBenchConfig {
        dir: args.dir.clone(),
        threads: args.threads,
        scale: args.scale,
        hours: args.hours,
        seed: args.seed,
        batch_points: args.batch_points,
        payload_sizes: args.payload_sizes.clone(),
        payload_total_bytes: args.payload_mib << 20,
        payload_writers: args.payload_writers,
        startup_gib: args.startup_gib,
        input_file: args.file.clone(),
        flush_every_points: args.flush_every_points,
        ..EngineBenchConfig::default()
    };
    let wants = |part: &str| args.parts.iter().any(|p| p == part);
    if wants("ingest") {
        for &durability in &args.durability {
            let config = EngineBenchConfig { durability, ..base.clone() };
            let f = engine_bench::ingest(&config).map_err(|e| anyhow!(e))?;
            println!(
                "ingest durability={durability:?} threads={} source={}: {} points, {} series, {:.2} s wall, {:.2} s CPU, {:.0} points/s, {:.0} points per CPU-second, {} bytes on disk = {:.3} bytes/value ({} blocks, {} segments)",
                config.threads,
                config.input_file.as_ref().map_or_else(|| format!("generated scale={} hours={}", config.scale, config.hours), |f| f.display().to_string()),
                f.points, f.series, f.wall.as_secs_f64(), f.cpu.as_secs_f64(),
                f.points_per_second, f.points_per_cpu_second, f.bytes_on_disk, f.bytes_per_value, f.stats.store.blocks, f.stats.store.segments
            );
            if let Some((bytes, took)) = f.before_compaction {
                println!(
                    "  flushing every {} points: {bytes} bytes = {:.3} bytes/value before compaction; compaction took {:.2} s",
                    config.flush_every_points.unwrap_or(0),
                    bytes as f64 / f.points as f64,
                    took.as_secs_f64()
                );
            }
        }
    }
    if wants("payload") {
        let bandwidth = engine_bench::disk_bandwidth(&base.dir, 1024).map_err(|e| anyhow!(e))?;
        println!("disk: dd bs=1M count=1024 oflag=direct: {:.0} MB/s", bandwidth / 1e6);
        for &size in &args.payload_sizes {
            let config = EngineBenchConfig { durability: Durability::Fsync, ..base.clone() };
            let rate = engine_bench::payload(&config, size).map_err(|e| anyhow!(e))?;
            println!(
                "payload fsync portion={size} B writers={}: {:.0} MB/s = {:.0}% of dd",
                config.payload_writers,
                rate / 1e6,
                100.0 * rate / bandwidth
            );
        }
    }
    if wants("decode") {
        let (median, min, points) = engine_bench::decode(&base, 101).map_err(|e| anyhow!(e))?;
        println!(
            "decode one series, one day at 1 Hz ({points} points) from sealed segments: median {:.3} ms, min {:.3} ms",
            median.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3
        );
    }
    if wants("startup") {
        let (median, bytes, blocks) = engine_bench::startup(&base).map_err(|e| anyhow!(e))?;
        println!(
            "startup with {:.2} GiB ({blocks} blocks): median of 3 opens {:.1} ms",
            bytes as f64 / f64::from(1u32 << 30),
            median.as_secs_f64() * 1e3
        );
        let ingest_dir = base.dir.join("ingest");
        if ingest_dir.exists() {
            let (median, blocks) = engine_bench::open_time(&ingest_dir, Durability::None).map_err(|e| anyhow!(e))?;
            println!(
                "startup of the ingest part's store ({:.1} MiB, {blocks} blocks): median of 3 opens {:.1} ms",
                engine_bench::directory_bytes(&ingest_dir) as f64 / f64::from(1u32 << 20),
                median.as_secs_f64() * 1e3
            );
        }
    }
    Ok(())
}

fn reclaim(args: ReclaimArgs) -> anyhow::Result<()> {
    let command_line: Vec<String> = std::env::args().collect();
    println!("# {}", command_line.join(" "));
    let base = ReclaimBenchConfig {
        dir: args.dir.clone(),
        durability: args.durability,
        writers: args.writers,
        sensors: args.sensors,
        batch_points: args.batch_points,
        seed: args.seed,
        capacity_bytes: args.capacity_mib << 20,
        live_share: None,
        segment_bytes_max: args.segment_mib << 20,
        memtable_bytes_max: args.memtable_mib << 20,
        reclaim_interval: Duration::from_millis(args.reclaim_interval_ms),
        merge_bytes_per_second: args.merge_mib_per_second << 20,
        background_compaction: args.compaction,
        fill_capacities: args.fill,
        measure_capacities: args.measure,
        short_share: args.short_share,
        short_period_share: args.short_period_share,
        disk_usage_limits: args.disk_usage_limits,
    };
    let mut shares: Vec<Option<f64>> = Vec::new();
    if !args.no_baseline {
        shares.push(None);
    }
    shares.extend(args.live_shares.iter().map(|&v| Some(v)));
    let mut results: Vec<Vec<ReclaimFigures>> = vec![Vec::new(); shares.len()];
    for repeat in 1..=args.repeats.max(1) {
        for (index, &live_share) in shares.iter().enumerate() {
            let config = ReclaimBenchConfig { live_share, ..base.clone() };
            let f = reclaim_bench::run(&config).map_err(|e| anyhow!(e))?;
            println!("run {repeat} {}: {}", describe_share(live_share), describe_reclaim_run(&f));
            results[index].push(f);
        }
    }
    let empty_rate = results.first().filter(|_| !args.no_baseline).map(|runs| median_of(runs, |f| f.points_per_second));
    println!();
    println!("medians of {} runs, C = {} MiB:", args.repeats.max(1), args.capacity_mib);
    let empty_cpu_rate = results.first().filter(|_| !args.no_baseline).map(|runs| median_of(runs, |f| f.points_per_cpu_second));
    println!("| store | points/s | MB/s stored | / empty | points per CPU-s | / empty | U end | U max (reclaim) | U max (directory) | segments removed | segments merged | merge written / ingested | evicted MB | throttle s | waited s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (live_share, runs) in shares.iter().zip(&results) {
        let rate = median_of(runs, |f| f.points_per_second);
        let ratio = empty_rate.map_or_else(|| "-".to_string(), |empty| format!("{:.2}", rate / empty));
        let cpu_rate = median_of(runs, |f| f.points_per_cpu_second);
        let cpu_ratio = empty_cpu_rate.map_or_else(|| "-".to_string(), |empty| format!("{:.2}", cpu_rate / empty));
        println!(
            "| {} | {:.2} M | {:.1} | {ratio} | {:.2} M | {cpu_ratio} | {:.3} | {:.3} | {:.3} | {:.0} | {:.0} | {:.3} | {:.1} | {:.2} | {:.2} |",
            describe_share(*live_share),
            rate / 1e6,
            median_of(runs, ReclaimFigures::stored_bytes_per_second) / 1e6,
            cpu_rate / 1e6,
            median_of(runs, |f| f.usage_end),
            median_of(runs, |f| f.usage_max),
            median_of(runs, |f| f.directory_share_max),
            median_of(runs, |f| f.segments_removed as f64),
            median_of(runs, |f| f.segments_merged as f64),
            median_of(runs, ReclaimFigures::write_amplification),
            median_of(runs, |f| f.bytes_evicted as f64) / 1e6,
            median_of(runs, |f| f.throttle_delay.as_secs_f64()),
            median_of(runs, |f| f.space_wait.as_secs_f64()),
        );
    }
    Ok(())
}

fn describe_share(live_share: Option<f64>) -> String {
    live_share.map_or_else(|| "empty".to_string(), |v| format!("V={v}"))
}

fn describe_reclaim_run(f: &ReclaimFigures) -> String {
    let short = f.short_period.map_or_else(String::new, |p| format!(", short period {} s", p.as_secs()));
    format!(
        "{} points in {:.2} s = {:.0} points/s, {:.0} per CPU-second ({:.1} MB/s at {:.2} bytes/point); U end {:.3}, max {:.3} (directory {:.3}); {} cycles, {} segments removed, {} merged (read {:.1} MB, wrote {:.1} MB = {:.3} of {:.1} MB ingested), {:.1} MB evicted; throttled {:.2} s, waited {:.2} s; {} segments at the end; horizon {:.0} s{short}",
        f.points,
        f.wall.as_secs_f64(),
        f.points_per_second,
        f.points_per_cpu_second,
        f.stored_bytes_per_second() / 1e6,
        f.bytes_per_point,
        f.usage_end,
        f.usage_max,
        f.directory_share_max,
        f.cycles,
        f.segments_removed,
        f.segments_merged,
        f.merge_bytes_read as f64 / 1e6,
        f.merge_bytes_written as f64 / 1e6,
        f.write_amplification(),
        f.bytes_ingested as f64 / 1e6,
        f.bytes_evicted as f64 / 1e6,
        f.throttle_delay.as_secs_f64(),
        f.space_wait.as_secs_f64(),
        f.segments_end,
        f.horizon_seconds,
    )
}

fn median_of(runs: &[ReclaimFigures], figure: impl Fn(&ReclaimFigures) -> f64) -> f64 {
    reclaim_bench::median(&runs.iter().map(figure).collect::<Vec<_>>())
}
