//! `sensordb serve`: opens the store and, until the network server lands, runs a local demo
//! that writes and reads back generated sensor data.

use anyhow::Context;
use sensordb_bench::row::SeriesMap;
use sensordb_bench::tsbs::{TsbsConfig, TsbsGenerator};
use sensordb_engine::batch::WriteBatch;
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Data directory.
    #[arg(long, default_value = "./data")]
    data: PathBuf,
    /// What an acknowledged write survives: none, os (process crash) or fsync (power loss).
    #[arg(long, default_value = "fsync")]
    durability: Durability,
    /// Trucks in the demo fleet.
    #[arg(long, default_value_t = 10)]
    demo_trucks: u32,
    /// Hours of demo data written at start.
    #[arg(long, default_value_t = 1)]
    demo_hours: u32,
    /// Exit after the demo instead of waiting for Ctrl-C.
    #[arg(long)]
    exit_after_demo: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let options = EngineOptions { durability: args.durability, ..EngineOptions::default() };
    let engine = Engine::open(&args.data, options).with_context(|| format!("opening {}", args.data.display()))?;
    let recovery = engine.recovery();
    println!(
        "sensordb: opened {} in {:.1} ms ({} series, {} segments, {} WAL records replayed, {} problems repaired)",
        args.data.display(),
        started.elapsed().as_secs_f64() * 1e3,
        recovery.series,
        recovery.segments,
        recovery.wal_records_replayed,
        recovery.problems.len()
    );
    demo(&engine, &args)?;
    if !args.exit_after_demo {
        println!("sensordb: the network listeners arrive with the server work; store open, Ctrl-C to stop");
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(tokio::signal::ctrl_c())?;
    }
    engine.close().context("closing the store")?;
    println!("sensordb: closed cleanly");
    Ok(())
}

/// Writes `demo_hours` of a TSBS-IoT-like fleet (continuing after what the store already holds)
/// and reads one series back.
fn demo(engine: &Engine, args: &ServeArgs) -> anyhow::Result<()> {
    let probe_key = SeriesKey::new("readings", Vec::<(String, String)>::new(), "demo_runs")?;
    let runs = engine.find_series(&probe_key).map_or(0, |_| engine.stats().store.points as i64);
    let hour = 3_600_000_000_000i64;
    let config = TsbsConfig { scale: args.demo_trucks, ..TsbsConfig::default() };
    let start = config.start + runs.min(1_000) * i64::from(args.demo_hours) * hour;
    let config = TsbsConfig { start, ..config }.with_duration(i64::from(args.demo_hours) * hour);
    let mut ids: SeriesMap<SeriesId> = SeriesMap::new();
    let mut batch = WriteBatch::new();
    let written_at = Instant::now();
    let mut points = 0u64;
    for row in TsbsGenerator::new(config.clone()) {
        for (field, value) in &row.fields {
            let kind = value.kind();
            let id = *ids.get_or_insert_with(&row.tags, &row.measurement, field, |key| engine.series_id(&key, kind))?;
            batch.push(id, row.timestamp, value.clone())?;
            points += 1;
        }
        if batch.len() >= 10_000 {
            engine.write(&batch)?;
            batch.clear();
        }
    }
    engine.write(&batch)?;
    let elapsed = written_at.elapsed();
    println!(
        "demo: wrote {points} points of {} trucks over {} h in {:.2} s ({:.0} points/s)",
        args.demo_trucks,
        args.demo_hours,
        elapsed.as_secs_f64(),
        points as f64 / elapsed.as_secs_f64()
    );
    let key = SeriesKey::new("readings", [("name", "truck_0")], "velocity")?;
    let sample = engine.select_series(Some("readings"), &[("name", "truck_0")]);
    let velocity = sample.iter().find(|e| e.key.field() == "velocity").or(sample.first());
    if let Some(entry) = velocity {
        let read_at = Instant::now();
        let mut count = 0usize;
        let (mut first, mut last) = (None, None);
        for point in engine.read(entry.id, config.start, config.end).points() {
            let point = point?;
            first.get_or_insert(point.clone());
            last = Some(point);
            count += 1;
        }
        println!(
            "demo: read back {} ({}) : {count} points in {:.2} ms, first {:?}, last {:?}",
            entry.key,
            key.measurement(),
            read_at.elapsed().as_secs_f64() * 1e3,
            first.map(|p| (p.timestamp, p.value)),
            last.map(|p| (p.timestamp, p.value))
        );
    }
    let stats = engine.stats();
    println!(
        "demo: store holds {} series, {} points in {} blocks / {} segments ({} bytes), {} points buffered",
        stats.series, stats.store.points, stats.store.blocks, stats.store.segments, stats.store.bytes, stats.memtable_points
    );
    Ok(())
}
