//! Compares the built-in TSBS-like generator with a real TSBS IoT file (from `scripts/tsbs-data`).
//!
//!     cargo run --release -p sensordb-bench --example tsbs_compare -- \
//!         [--file target/tsbs/iot-100-1d.lp] [--scale 100] [--seed 123] [--seconds 86400]
//!
//! Reads the whole file with the line-protocol reader (any bad line is reported and counted),
//! then generates the same scale and time span, and prints the figures of both.

use sensordb_bench::line_protocol::LineProtocolReader;
use sensordb_bench::stats::StatsCollector;
use sensordb_bench::tsbs::{TsbsConfig, TsbsGenerator};
use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut file = String::from("target/tsbs/iot-100-1d.lp");
    let mut config = TsbsConfig::default();
    let mut seconds: i64 = 86_400;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--file" => file = value,
            "--scale" => config.scale = value.parse().unwrap_or(config.scale),
            "--seed" => config.seed = value.parse().unwrap_or(config.seed),
            "--seconds" => seconds = value.parse().unwrap_or(seconds),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::from(2);
            }
        }
    }
    let config = config.with_duration(seconds * 1_000_000_000);

    match File::open(&file) {
        Ok(handle) => {
            let mut collector = StatsCollector::default();
            let mut errors = 0u64;
            let mut reader = LineProtocolReader::new(BufReader::with_capacity(1 << 20, handle));
            for result in reader.by_ref() {
                match result {
                    Ok(row) => collector.add(&row),
                    Err(e) => {
                        errors += 1;
                        if errors <= 10 {
                            eprintln!("{file}: {e}");
                        }
                    }
                }
            }
            println!("== real TSBS: {file}: {} lines, {errors} errors, {} tag sets", reader.lines_read(), reader.tag_sets());
            print!("{}", collector.finish());
        }
        Err(e) => println!("== real TSBS: skipped, cannot open {file}: {e} (make it with scripts/tsbs-data)"),
    }

    let mut collector = StatsCollector::default();
    for row in TsbsGenerator::new(config.clone()) {
        collector.add(&row);
    }
    println!(
        "== generator: scale {} seed {} {} epochs, {} base entries",
        config.scale,
        config.seed,
        config.epochs(),
        config.base_entries()
    );
    print!("{}", collector.finish());
    ExitCode::SUCCESS
}
