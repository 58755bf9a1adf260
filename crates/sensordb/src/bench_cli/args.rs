//! The command-line arguments of `sensordb bench …`: one clap struct per subcommand, with the
//! parsing of their compound values (disk-usage limits, TLS options).

use anyhow::anyhow;
use sensordb_bench::ingest_bench::IngestProtocol;
use sensordb_bench::load::SelfSignedCert;
use sensordb_client::ClientTls;
use sensordb_engine::Durability;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// Builds stores of many series and blocks over years of simulated time (segment files
    /// written directly) and measures open time, resident memory after open and one-series
    /// range reads beside a small store (issue 14).
    LargeStore(LargeStoreArgs),
    /// Internal: the server side of `bench tx`/`bench ingest` in a process of its own (used when
    /// one process cannot hold both ends' descriptors). Prints its addresses, serves until its
    /// standard input closes, then prints the points stored.
    #[command(hide = true)]
    ServerProcess(ServerProcessArgs),
}

#[derive(clap::Args)]
pub struct ServerProcessArgs {
    #[arg(long, default_value = "fsync")]
    pub(super) durability: Durability,
    #[arg(long, default_value_t = 10_000)]
    pub(super) connections: usize,
    /// Serve TLS with this certificate chain (PEM) and `--tls-key`.
    #[arg(long, requires = "tls_key")]
    pub(super) tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    pub(super) tls_key: Option<PathBuf>,
    #[arg(long, value_parser = parse_disk_usage)]
    pub(super) disk_usage_limits: Option<DiskUsageLimits>,
}

/// `disk_target_usage`, `throttle_low_usage`, `throttle_high_usage` of an in-process server.
pub(super) type DiskUsageLimits = (f64, f64, f64);

pub(super) fn parse_disk_usage(text: &str) -> Result<DiskUsageLimits, String> {
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
    pub(super) tls: bool,
    /// PEM file of the CA certificate(s) the clients trust (a self-signed server certificate
    /// will do); implies --tls. Only with --addr.
    #[arg(long, requires = "addr")]
    pub(super) tls_ca: Option<PathBuf>,
    /// Name the server's certificate must carry (default: the IP address of --addr; localhost
    /// for the in-process server).
    #[arg(long)]
    pub(super) tls_server_name: Option<String>,
}

impl TlsArgs {
    pub(super) fn enabled(&self) -> bool {
        self.tls || self.tls_ca.is_some()
    }

    /// The clients' TLS settings for a server at `addr` (given by --addr), or for the
    /// in-process server's certificate `cert`.
    pub(super) fn client_tls(&self, addr: Option<SocketAddr>, cert: Option<&SelfSignedCert>) -> anyhow::Result<Option<ClientTls>> {
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
    pub(super) addr: Option<SocketAddr>,
    /// Access token.
    #[arg(long, default_value = "")]
    pub(super) token: String,
    /// Durability of the in-process server: fsync, os or none.
    #[arg(long, default_value = "fsync")]
    pub(super) durability: Durability,
    /// Concurrent clients, each with its own connection.
    #[arg(long, default_value_t = 10)]
    pub(super) clients: usize,
    /// Series written; client n writes series n % series (0: one per client).
    #[arg(long, default_value_t = 100)]
    pub(super) series: usize,
    /// Run the server side in a child process even when one process could hold both ends'
    /// descriptors (it does so by itself when it cannot).
    #[arg(long)]
    pub(super) server_process: bool,
    /// Transactions per client.
    #[arg(long, default_value_t = 10)]
    pub(super) transactions: u64,
    /// Packets (SEND frames) per transaction.
    #[arg(long, default_value_t = 5)]
    pub(super) packets: u64,
    /// Float points per packet.
    #[arg(long, default_value_t = 100, conflicts_with = "payload_bytes")]
    pub(super) points: u64,
    /// Instead of points: one bytes value of this size per packet.
    #[arg(long)]
    pub(super) payload_bytes: Option<usize>,
    /// Between the starts of a client's transactions; clients start spread over one interval.
    #[arg(long, default_value_t = 1000)]
    pub(super) interval_ms: u64,
    /// Stop starting transactions after this many seconds (the run also ends when every
    /// transaction is done).
    #[arg(long)]
    pub(super) duration_s: Option<f64>,
    /// Connections opened at once while connecting.
    #[arg(long, default_value_t = 250)]
    pub(super) connect_wave: usize,
    /// Commit attempts per transaction (1: every error counts as a failure).
    #[arg(long, default_value_t = 1)]
    pub(super) max_attempts: u32,
    /// Longest wait for one answer, ms.
    #[arg(long, default_value_t = 30_000)]
    pub(super) timeout_ms: u64,
    /// Pipelined commits: CREATE, SENDs and CONFIRM in one write, COMPLETE once CONFIRMED's
    /// checksum matched (two round trips). false: each frame waits for the answer before it
    /// (three round trips and a write per frame).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) pipeline: bool,
    /// With --pipeline true: COMPLETE_CHECKED (the client's checksum) in the same write, and
    /// the server compares before storing: one round trip per commit. false: COMPLETE waits for
    /// CONFIRMED (two round trips).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) checked_complete: bool,
    /// Disk usage thresholds of the in-process server, M,L,H: disk_target_usage,
    /// throttle_low_usage, throttle_high_usage (default the server's 0.8,0.9,0.95). On a disk
    /// that other work fills, raise them (say 0.97,0.98,0.99) or the server delays
    /// acknowledgements from 90% usage, as a real one would.
    #[arg(long, value_parser = parse_disk_usage)]
    pub(super) disk_usage_limits: Option<DiskUsageLimits>,
    /// Append one CSV row with every parameter and result (header when the file is new).
    #[arg(long)]
    pub(super) csv: Option<PathBuf>,
    /// Write every successful transaction as a CSV row (start ms since the timed phase began,
    /// complete ms, whole commit ms): shows when in the run the slow transactions were.
    #[arg(long)]
    pub(super) timeline_csv: Option<PathBuf>,
    #[command(flatten)]
    pub(super) tls: TlsArgs,
}

#[derive(clap::Args)]
pub struct IngestArgs {
    /// native or http.
    #[arg(long, default_value = "native")]
    pub(super) protocol: IngestProtocol,
    /// The server's listener for the protocol; without it an in-process server is started on
    /// 127.0.0.1 with a temporary data directory.
    #[arg(long)]
    pub(super) addr: Option<SocketAddr>,
    #[arg(long, default_value = "")]
    pub(super) token: String,
    /// Durability of the in-process server: fsync, os or none.
    #[arg(long, default_value = "fsync")]
    pub(super) durability: Durability,
    /// Concurrent connections.
    #[arg(long, default_value_t = 2)]
    pub(super) clients: usize,
    /// Seconds during which requests start.
    #[arg(long, default_value_t = 10)]
    pub(super) seconds: u64,
    /// Points per transaction or HTTP body.
    #[arg(long, default_value_t = 10_000)]
    pub(super) batch_points: usize,
    /// Trucks of the generated TSBS fleet.
    #[arg(long, default_value_t = 100)]
    pub(super) scale: u32,
    /// Hours of generated data (one round; later rounds repeat it).
    #[arg(long, default_value_t = 6)]
    pub(super) hours: u32,
    #[arg(long, default_value_t = 123)]
    pub(super) seed: u64,
    /// Line protocol to send instead of generated rows.
    #[arg(long)]
    pub(super) file: Option<PathBuf>,
    /// Database named in HTTP writes.
    #[arg(long, default_value = "sensordb")]
    pub(super) db: String,
    /// No progress bar.
    #[arg(long)]
    pub(super) no_progress: bool,
    #[command(flatten)]
    pub(super) tls: TlsArgs,
}

#[derive(clap::Args)]
pub struct EngineArgs {
    /// Parts to run, comma separated: ingest, payload, decode, startup.
    #[arg(long, default_value = "ingest,payload,decode,startup", value_delimiter = ',')]
    pub(super) parts: Vec<String>,
    /// Scratch directory (removed and recreated per part).
    #[arg(long, default_value = "target/bench-engine")]
    pub(super) dir: PathBuf,
    /// Durability modes for the ingest part, comma separated.
    #[arg(long, default_value = "fsync,none", value_delimiter = ',')]
    pub(super) durability: Vec<Durability>,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub(super) threads: usize,
    /// Trucks in the TSBS fleet.
    #[arg(long, default_value_t = 100)]
    pub(super) scale: u32,
    /// Hours of data.
    #[arg(long, default_value_t = 24)]
    pub(super) hours: u32,
    #[arg(long, default_value_t = 123)]
    pub(super) seed: u64,
    /// Points per write batch.
    #[arg(long, default_value_t = 10_000)]
    pub(super) batch_points: usize,
    /// Payload portion sizes in bytes, comma separated.
    #[arg(long, default_value = "4096,65536,1048576", value_delimiter = ',')]
    pub(super) payload_sizes: Vec<usize>,
    /// Concurrent writers in the payload part.
    #[arg(long, default_value_t = 8)]
    pub(super) payload_writers: usize,
    /// MiB written per payload size.
    #[arg(long, default_value_t = 2048)]
    pub(super) payload_mib: u64,
    /// Load this line-protocol file (e.g. from scripts/tsbs-data) in the ingest part instead of
    /// generating rows.
    #[arg(long)]
    pub(super) file: Option<PathBuf>,
    /// Flush after every this many points per writer (simulates time-driven flushes).
    #[arg(long)]
    pub(super) flush_every_points: Option<usize>,
    /// GiB of data for the start-up measurement.
    #[arg(long, default_value_t = 10.0)]
    pub(super) startup_gib: f64,
}

#[derive(clap::Args)]
pub struct LargeStoreArgs {
    /// Scratch directory: holds the store being measured, removed after each size unless --keep.
    #[arg(long, default_value = "target/bench-large-store")]
    pub(super) dir: PathBuf,
    #[arg(long, default_value_t = 10_000)]
    pub(super) series: u32,
    /// Blocks per series, comma separated: one store per value, measured in turn.
    #[arg(long, default_value = "100", value_delimiter = ',')]
    pub(super) blocks_per_series: Vec<u32>,
    #[arg(long, default_value_t = 32)]
    pub(super) points_per_block: u32,
    /// Simulated years the blocks of a series cover.
    #[arg(long, default_value_t = 3.0)]
    pub(super) years: f64,
    /// Blocks per segment file at most.
    #[arg(long, default_value_t = 500_000)]
    pub(super) blocks_per_segment: u64,
    /// Threads writing segments.
    #[arg(long, default_value_t = 2)]
    pub(super) threads: usize,
    /// Opens per store (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(super) opens: usize,
    /// One-series range reads per store.
    #[arg(long, default_value_t = 1000)]
    pub(super) reads: usize,
    /// Consecutive blocks each read covers.
    #[arg(long, default_value_t = 8)]
    pub(super) read_blocks: u32,
    /// Series of the small store the reads are compared with (its blocks per series: twice
    /// --read-blocks).
    #[arg(long, default_value_t = 1000)]
    pub(super) small_series: u32,
    #[arg(long, default_value_t = 123)]
    pub(super) seed: u64,
    /// Keep the last store built instead of removing it.
    #[arg(long)]
    pub(super) keep: bool,
    /// Measure a store of the same shape already in the directory (built with --keep or
    /// --reuse) instead of building it again; keeps every store.
    #[arg(long)]
    pub(super) reuse: bool,
}

#[derive(clap::Args)]
pub struct ReclaimArgs {
    /// Live-data shares V to run, comma separated (the database's capacity is V·C); the
    /// empty-store baseline runs besides them unless --no-baseline.
    #[arg(long, default_value = "0.2,0.5,0.8", value_delimiter = ',')]
    pub(super) live_shares: Vec<f64>,
    #[arg(long)]
    pub(super) no_baseline: bool,
    /// The node's own-byte capacity C, MiB.
    #[arg(long, default_value_t = 256)]
    pub(super) capacity_mib: u64,
    /// Runs of each configuration, interleaved (baseline, V1, V2, ..., baseline, ...).
    #[arg(long, default_value_t = 3)]
    pub(super) repeats: usize,
    /// Scratch directory.
    #[arg(long, default_value = "target/bench-reclaim")]
    pub(super) dir: PathBuf,
    /// fsync, os or none.
    #[arg(long, default_value = "fsync")]
    pub(super) durability: Durability,
    #[arg(long, default_value_t = 2)]
    pub(super) writers: usize,
    /// Series, each a random walk at 1 Hz of data time.
    #[arg(long, default_value_t = 1000)]
    pub(super) sensors: u32,
    #[arg(long, default_value_t = 10_000)]
    pub(super) batch_points: usize,
    #[arg(long, default_value_t = 123)]
    pub(super) seed: u64,
    /// segment_bytes_max, MiB.
    #[arg(long, default_value_t = 4)]
    pub(super) segment_mib: u64,
    /// memtable_bytes_max, MiB.
    #[arg(long, default_value_t = 16)]
    pub(super) memtable_mib: usize,
    /// Pause between reclaim cycles, ms (a flush starts one sooner).
    #[arg(long, default_value_t = 200)]
    pub(super) reclaim_interval_ms: u64,
    /// Merge reads plus writes, MiB/s (0: no limit).
    #[arg(long, default_value_t = 64)]
    pub(super) merge_mib_per_second: u64,
    /// Run background compaction (off: only reclaim rewrites data).
    #[arg(long)]
    pub(super) compaction: bool,
    /// Bytes stored before the measurement, in units of C.
    #[arg(long, default_value_t = 2.0)]
    pub(super) fill: f64,
    /// Bytes stored during the measurement, in units of C.
    #[arg(long, default_value_t = 2.0)]
    pub(super) measure: f64,
    /// Share of the series given a short storage period (partly dead segments, merged by the
    /// Fisherman); 0 for none.
    #[arg(long, default_value_t = 0.0)]
    pub(super) short_share: f64,
    /// The short period as a share of the capacity horizon (the data time V·C holds).
    #[arg(long, default_value_t = 0.25)]
    pub(super) short_period_share: f64,
    /// Disk usage thresholds M,L,H: the Fisherman's target U_m and the throttle's U_l and U_h
    /// (default the server's 0.8,0.9,0.95; the Riak study ran 0.8,0.95,1).
    #[arg(long, value_parser = parse_disk_usage, default_value = "0.8,0.9,0.95")]
    pub(super) disk_usage_limits: DiskUsageLimits,
}
