//! `sensordb plan`: the capacity planner. From the number of sensors, their rate, the storage
//! period and the disk, it computes the live data, the segment size that keeps the store
//! planing (space always comes back by deleting a wholly dead segment, never by merging), the
//! room between the throttling thresholds, and a configuration line to paste; or it refuses the
//! plan and says what would fit. The model and its derivation: [`capacity`] and
//! docs/PLANNING.md.
//!
//! - [`units`]: parsing and printing sizes, durations and rates.
//! - [`capacity`]: the model, a pure function from [`capacity::PlanInput`] to a plan or refusal.
//! - [`report`]: the human-readable report; `--json` prints the same structures as JSON.
//!
//! Exit status: 0 for a plan that fits, 1 for a refused plan or contradictory options, 2 for a
//! value that does not parse (clap's usage error).

mod capacity;
mod report;
mod units;

use capacity::{Ingest, PlanInput, PlanRefusal, Thresholds};
use sensordb_engine::EngineOptions;
use sensordb_server::ServerConfig;
use std::io::Write;
use units::{BlockSize, Rate};

#[derive(clap::Args)]
#[command(after_help = "Example: sensordb plan --sensors 10000 --rate 1 --period 90d --disk 500GB\n\
    Sizes: 500GB, 1.5TB (powers of 1000) or 800MiB, 1TiB (powers of 1024). Durations: 3600s, 90m, 12h, 30d, 2w, 1y.\n\
    The model and its assumptions: docs/PLANNING.md.")]
pub struct PlanArgs {
    /// S: sensors, one series each (a device reporting five fields is five sensors).
    #[arg(long, value_name = "COUNT", value_parser = units::parse_count)]
    sensors: u64,
    /// A: points per second from each sensor (1, 0.1, 6/min, 1/10s), or a byte rate with a unit
    /// (2MB/s, 500KiB/s) for opaque payloads: bytes per second from all sensors together.
    #[arg(long, value_name = "RATE", value_parser = units::parse_rate)]
    rate: Rate,
    /// Y: storage period (30d, 12h, 90m, 3600s).
    #[arg(long = "period", value_name = "DURATION", value_parser = units::parse_duration_seconds)]
    period_seconds: f64,
    /// C: space sensordb may fill on the data directory's file system (500GB, 1TiB): df's Used +
    /// Avail.
    #[arg(long = "disk", value_name = "SIZE", value_parser = units::parse_bytes)]
    disk_bytes: u64,
    /// B: longest block; points per block for point rates [default: the engine's 16384], bytes
    /// per block for byte rates [default: the engine's 4MiB]. Sets the 40 B of index per block.
    #[arg(long, value_name = "POINTS|SIZE", value_parser = units::parse_block_size)]
    block: Option<BlockSize>,
    /// Disk bytes per point, everything included (point rates only) [default: 0.59, real TSBS IoT
    /// data; random 64-bit floats cost 8 to 9].
    #[arg(long, value_name = "BYTES", value_parser = units::parse_positive)]
    bytes_per_point: Option<f64>,
    /// U_m: disk usage that reclamation keeps (0.80 or 80%).
    #[arg(long, value_name = "SHARE", default_value = "0.80", value_parser = units::parse_fraction)]
    target_usage: f64,
    /// U_l: usage above which acknowledgements are delayed.
    #[arg(long, value_name = "SHARE", default_value = "0.90", value_parser = units::parse_fraction)]
    throttle_low: f64,
    /// U_h: usage at which writers wait.
    #[arg(long, value_name = "SHARE", default_value = "0.95", value_parser = units::parse_fraction)]
    throttle_high: f64,
    /// W: WAL at its largest [default: the server's memtable_bytes_max plus one WAL file,
    /// 32 MiB + 64 MiB].
    #[arg(long = "wal", value_name = "SIZE", value_parser = units::parse_bytes)]
    wal_bytes: Option<u64>,
    /// Share by which live data may exceed the estimate while the recommended size still planes
    /// (0.25 or 25%; 0 for none).
    #[arg(long, value_name = "SHARE", default_value = "0.25", value_parser = units::parse_share)]
    margin: f64,
    /// The segment_bytes_max in use now, checked besides the recommendation [default: the
    /// engine's 64MiB].
    #[arg(long = "current-segment", value_name = "SIZE", value_parser = units::parse_bytes)]
    current_segment_bytes: Option<u64>,
    /// Print the plan (or the refusal) as JSON on standard output.
    #[arg(long)]
    json: bool,
}

/// Bytes per point on real TSBS IoT data, everything on disk included (docs/BENCHMARKS.md).
const MEASURED_BYTES_PER_POINT: f64 = 0.59;

impl PlanArgs {
    /// The model's input, with the engine's and the server's defaults filled in.
    fn to_input(&self) -> Result<PlanInput, PlanRefusal> {
        let invalid = |message: &str| PlanRefusal::Invalid { message: message.to_string() };
        let engine = EngineOptions::default();
        let (ingest, block_units_max) = match self.rate {
            Rate::PointsPerSensorPerSecond(per_sensor_per_second) => {
                let block_points = match self.block {
                    None => engine.block_points_max as u64,
                    Some(BlockSize::Points(points)) => points,
                    Some(BlockSize::Bytes(_)) => {
                        return Err(invalid("--block with a byte unit is for byte rates; for a point rate give points, e.g. --block 16384"))
                    }
                };
                let bytes_per_point = self.bytes_per_point.unwrap_or(MEASURED_BYTES_PER_POINT);
                (Ingest::Points { per_sensor_per_second, bytes_per_point }, block_points)
            }
            Rate::TotalBytesPerSecond(total_bytes_per_second) => {
                if self.bytes_per_point.is_some() {
                    return Err(invalid("--bytes-per-point is for point rates; payload bytes are stored as they come"));
                }
                let block_bytes = match self.block {
                    None => engine.block_bytes_max as u64,
                    Some(BlockSize::Bytes(bytes)) => bytes,
                    Some(BlockSize::Points(_)) => return Err(invalid("--block for a byte rate needs a byte unit, e.g. --block 4MiB")),
                };
                (Ingest::Payload { total_bytes_per_second }, block_bytes)
            }
        };
        let wal_bytes = self.wal_bytes.unwrap_or(ServerConfig::default().memtable_bytes_max as u64 + engine.wal_file_bytes_max);
        Ok(PlanInput {
            sensors: self.sensors,
            ingest,
            period_seconds: self.period_seconds,
            disk_bytes: self.disk_bytes,
            block_units_max,
            wal_bytes,
            thresholds: Thresholds { target_usage: self.target_usage, throttle_low: self.throttle_low, throttle_high: self.throttle_high },
            margin: self.margin,
            current_segment_bytes: self.current_segment_bytes.unwrap_or(engine.segment_bytes_max),
        })
    }
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let input = match args.to_input() {
        Ok(input) => input,
        Err(refusal) => refuse(&refusal, None, args.json),
    };
    match capacity::plan(&input) {
        Ok(plan) if args.json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Ok(plan) => print!("{}", report::plan_text(&plan)),
        Err(refusal) => refuse(&refusal, Some(&input), args.json),
    }
    Ok(())
}

/// Prints a refusal, as JSON on standard output when asked and explained on standard error
/// always, then exits with status 1. A refusal is an answer, not a failure of the program, so
/// it goes out without anyhow's "Error:" and backtrace.
fn refuse(refusal: &PlanRefusal, input: Option<&PlanInput>, json: bool) -> ! {
    if json {
        let document = serde_json::json!({ "message": refusal.to_string(), "refusal": refusal });
        println!("{document:#}");
    }
    match input {
        Some(input) => eprintln!("{}", report::refusal_text(refusal, input)),
        None => eprintln!("cannot plan: {refusal}"),
    }
    // process::exit skips the flush that returning from main would do.
    let _ = std::io::stdout().flush();
    std::process::exit(1)
}
