//! `sensordb bench …`: benchmark subcommands. Each prints its figures with the command line that
//! produced them, ready to paste into docs/BENCHMARKS.md.
//!
//! This file runs the subcommands; `args` holds their command-line arguments, `server` the
//! server side of the network benchmarks (in process or in a child process).

mod args;
mod server;

pub use args::BenchCommand;

use anyhow::anyhow;
use args::{EngineArgs, IngestArgs, LargeStoreArgs, ReclaimArgs, ServerProcessArgs, TlsArgs, TxArgs};
use sensordb_bench::engine_bench::{self, EngineBenchConfig};
use sensordb_bench::ingest_bench::{self, IngestBenchConfig, IngestProtocol};
use sensordb_bench::load::{raise_open_file_limit, InProcessServer, SelfSignedCert};
use sensordb_bench::reclaim_bench::{self, ReclaimBenchConfig, ReclaimFigures};
use sensordb_bench::tx_bench::{self, TxBenchConfig};
use sensordb_client::ClientTls;
use sensordb_engine::Durability;
use server::{BenchServer, TlsFiles};
use std::net::SocketAddr;
use std::time::Duration;

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Engine(args) => engine(args),
        BenchCommand::Reclaim(args) => reclaim(args),
        BenchCommand::Tx(args) => tx(args),
        BenchCommand::Ingest(args) => ingest(args),
        BenchCommand::LargeStore(args) => large_store(args),
        BenchCommand::ServerProcess(args) => server_process(args),
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

/// Builds each store, measures it beside a small store of the same shape, prints a table.
fn large_store(args: LargeStoreArgs) -> anyhow::Result<()> {
    use sensordb_bench::large_store::{self, LargeStoreConfig};
    let command_line: Vec<String> = std::env::args().collect();
    println!("# {}", command_line.join(" "));
    let base = LargeStoreConfig {
        dir: args.dir.clone(),
        series: args.series,
        points_per_block: args.points_per_block,
        years: args.years,
        blocks_per_segment: args.blocks_per_segment,
        threads: args.threads,
        seed: args.seed,
        ..LargeStoreConfig::default()
    };
    let small = LargeStoreConfig {
        dir: args.dir.join("small"),
        series: args.small_series,
        blocks_per_series: args.read_blocks.saturating_mul(2).max(1),
        ..base.clone()
    };
    let mut shapes = vec![("small", small)];
    for &blocks_per_series in &args.blocks_per_series {
        shapes.push((
            "large",
            LargeStoreConfig { dir: args.dir.join(format!("large-{blocks_per_series}")), blocks_per_series, ..base.clone() },
        ));
    }
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    println!(
        "| store | series | blocks | points | segments | GiB on disk | build s | open ms (median of {}) | opens ms | RSS before MiB | RSS after open MiB | peak MiB | RSS per block B | first reads µs median / p99 ({} reads of {} blocks) | again µs median / p99 |",
        args.opens, args.reads, args.read_blocks
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    let last = shapes.len() - 1;
    for (i, (name, config)) in shapes.into_iter().enumerate() {
        let built = if args.reuse { large_store::build_or_reuse(&config) } else { large_store::build(&config) };
        let built = built.map_err(|e| anyhow!(e))?;
        let measured = large_store::measure(&config, args.opens, args.reads, args.read_blocks).map_err(|e| anyhow!(e))?;
        let opens: Vec<String> = measured.opens.iter().map(|d| format!("{:.0}", d.as_secs_f64() * 1e3)).collect();
        println!(
            "| {name} | {} | {} | {} | {} | {:.2} | {:.1} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} |",
            built.series,
            measured.blocks,
            built.points,
            measured.segments,
            built.bytes as f64 / f64::from(1u32 << 30),
            built.took.as_secs_f64(),
            measured.open_median().as_secs_f64() * 1e3,
            opens.join(", "),
            mib(measured.rss_before),
            mib(measured.rss_open),
            mib(measured.peak),
            measured.rss_open.saturating_sub(measured.rss_before) as f64 / measured.blocks.max(1) as f64,
            measured.reads.first.median.as_secs_f64() * 1e6,
            measured.reads.first.p99.as_secs_f64() * 1e6,
            measured.reads.again.median.as_secs_f64() * 1e6,
            measured.reads.again.p99.as_secs_f64() * 1e6,
        );
        let keep = args.reuse || (args.keep && i == last);
        if !keep {
            std::fs::remove_dir_all(&config.dir)?;
        }
    }
    Ok(())
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
        // The disk is not steady: dd runs right before each size, in the directory the engine
        // then writes to, and writes as many bytes as the engine will.
        let mib = args.payload_mib.max(1);
        for &size in &args.payload_sizes {
            let config = EngineBenchConfig { durability: Durability::Fsync, ..base.clone() };
            let bandwidth = engine_bench::disk_bandwidth(&engine_bench::payload_dir(&config, size), mib).map_err(|e| anyhow!(e))?;
            let rate = engine_bench::payload(&config, size).map_err(|e| anyhow!(e))?;
            println!(
                "payload fsync portion={size} B writers={}: {:.0} MB/s = {:.0}% of dd (dd bs=1M count={mib} oflag=direct conv=fdatasync just before, same directory: {:.0} MB/s)",
                config.payload_writers,
                rate / 1e6,
                100.0 * rate / bandwidth,
                bandwidth / 1e6
            );
        }
    }
    if wants("decode") {
        let (decoded, cached, points) = engine_bench::decode(&base, 101).map_err(|e| anyhow!(e))?;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "decode one series, one day at 1 Hz ({points} points) from sealed segments, block cache off: median {:.3} ms, min {:.3} ms; \
             read again from the block cache: median {:.3} ms, min {:.3} ms",
            ms(decoded.median),
            ms(decoded.min),
            ms(cached.median),
            ms(cached.min)
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
