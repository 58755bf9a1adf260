//! `sensordb bench …`: benchmark subcommands. Each prints its figures with the command line that
//! produced them, ready to paste into docs/BENCHMARKS.md.

use anyhow::anyhow;
use sensordb_bench::engine_bench::{self, EngineBenchConfig};
use sensordb_engine::Durability;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// In-process storage engine benchmarks on TSBS-IoT-like data.
    Engine(EngineArgs),
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

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Engine(args) => engine(args),
    }
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
