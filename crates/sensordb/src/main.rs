//! The `sensordb` binary: the server and every CLI subcommand, over the engine library.
//!
//! - `sensordb serve`: opens the data directory (recovering after a crash) and serves it over
//!   the native transactional protocol and the InfluxDB-compatible HTTP API until Ctrl-C.
//! - `sensordb inspect`: verifies every block of a data directory, reports damage with file and
//!   offset, and shows where the bytes go.
//! - `sensordb bench engine`: in-process engine benchmarks (see `sensordb_bench::engine_bench`).
//! - `sensordb bench tx`: the site-to-site style load test over the native protocol (many
//!   clients, transactions of packets, per-phase latencies, one CSV row per run).
//! - `sensordb bench ingest`: maximum sustained ingest over the native protocol or HTTP.
//! - `sensordb bench reclaim`: ingest with the store kept full (bounded, cyclic storage).
//! - `sensordb plan`: the capacity planner: live data, segment size and throttling room for a
//!   number of sensors, a rate, a storage period and a disk.

mod allocator;
mod bench_cli;
mod inspect_cli;
mod plan;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "sensordb", version, about = "A store for sensor time-series data")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open the data directory and serve it.
    Serve(serve::ServeArgs),
    /// Verify every block of a data directory and show where its bytes go.
    Inspect(inspect_cli::InspectArgs),
    /// Plan capacity: live data, segment size and throttling room for sensors, rate, period
    /// and disk.
    Plan(plan::PlanArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: bench_cli::BenchCommand,
    },
}

fn main() -> anyhow::Result<()> {
    allocator::tune();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // A log that cannot be written (stderr on a full disk) must not stop the server: the
        // subscriber would report the failure with `eprintln!`, which panics when stderr fails.
        .log_internal_errors(false)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve::run(args),
        Command::Bench { which } => bench_cli::run(which),
        Command::Inspect(args) => inspect_cli::run(args),
        Command::Plan(args) => plan::run(args),
    }
}
