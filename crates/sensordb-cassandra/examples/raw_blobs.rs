//! The raw `scylla` driver rate that sensordb's Cassandra store is compared with (issue 15's
//! throughput benchmark, run by `scripts/cassandra-throughput`): blobs of one size written with
//! prepared INSERTs, a bounded number in flight, into a table shaped like the store's `blocks`
//! (partition (series, bucket), a clustering key, a blob; TWCS with 1-day windows), at QUORUM.
//!
//! ```text
//! cargo run --release -p sensordb-cassandra --example raw_blobs -- CONTACT KEYSPACE BLOB_BYTES MIB IN_FLIGHT [RF]
//! ```
//! Prints one line: `raw_blobs bytes=... seconds=... mib_per_s=... cpu_s=...` (this process's
//! user + system CPU over the timed part, from /proc/self/stat).

use scylla::client::session_builder::SessionBuilder;
use scylla::statement::Consistency;
use std::sync::Arc;
use std::time::Instant;

/// Series the blobs are spread over, and the bucket (1 minute, as the store's payload bucket).
const SERIES: i64 = 64;
const BUCKET_NS: i64 = 60_000_000_000;

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, contact, keyspace, blob_bytes, mib, in_flight, rest @ ..] = &args[..] else {
        return Err("usage: raw_blobs CONTACT KEYSPACE BLOB_BYTES MIB IN_FLIGHT [RF]".into());
    };
    let (blob_bytes, mib, in_flight): (usize, u64, usize) = (blob_bytes.parse()?, mib.parse()?, in_flight.parse()?);
    let rf: u32 = rest.first().map_or(Ok(1), |rf| rf.parse())?;
    let session = Arc::new(SessionBuilder::new().known_node(contact).build().await?);
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            ),
            (),
        )
        .await?;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE IF NOT EXISTS {keyspace}.raw_blobs (series bigint, bucket bigint, start bigint, block blob, \
                 PRIMARY KEY ((series, bucket), start)) WITH compaction = {{'class': 'TimeWindowCompactionStrategy', \
                 'compaction_window_unit': 'DAYS', 'compaction_window_size': 1}}"
            ),
            (),
        )
        .await?;
    let mut insert =
        session.prepare(format!("INSERT INTO {keyspace}.raw_blobs (series, bucket, start, block) VALUES (?, ?, ?, ?)")).await?;
    insert.set_consistency(Consistency::Quorum);
    let insert = Arc::new(insert);
    // Incompressible-ish bytes (Cassandra compresses SSTables, not the wire): a simple LCG.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let blob: Arc<Vec<u8>> = Arc::new(
        (0..blob_bytes)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (state >> 56) as u8
            })
            .collect(),
    );
    let blobs = (mib << 20) / blob_bytes.max(1) as u64;
    let permits = Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
    let (cpu0, started) = (cpu_seconds(), Instant::now());
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..blobs as i64 {
        let permit = permits.clone().acquire_owned().await?;
        let (session, insert, blob) = (session.clone(), insert.clone(), blob.clone());
        tasks.spawn(async move {
            let start = n * 1_000_000_000;
            let result = session.execute_unpaged(&insert, (n % SERIES, start / BUCKET_NS, start, &blob[..])).await;
            drop(permit);
            result.map(drop)
        });
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = blobs * blob_bytes as u64;
    println!(
        "raw_blobs bytes={bytes} blobs={blobs} seconds={seconds:.3} mib_per_s={:.1} cpu_s={:.2}",
        bytes as f64 / (1 << 20) as f64 / seconds,
        cpu_seconds() - cpu0
    );
    Ok(())
}
