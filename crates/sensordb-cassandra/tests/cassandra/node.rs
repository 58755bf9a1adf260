//! One Cassandra node for the whole test binary, started with `scripts/cassandra` on a
//! loopback address nobody answers on, and stopped by its PID when the test process exits.
//!
//! Every test asks [`store_options`] for a keyspace of its own on the shared node, so tests run
//! in parallel without seeing each other's data. The node is stopped by a watchdog started with
//! it (`scripts/cassandra stop DIR` once the test process is gone), because a test binary has no
//! hook that runs after its last test; the watchdog then deletes the node's directory.
//!
//! Without Java or the jars the tests say they are skipped, or fail under `CI=true`.

use sensordb_cassandra::CassandraOptions;
use sensordb_engine::store::GroupBuilder;
use sensordb_engine::{SeriesId, ValueColumn};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// A running node.
pub struct Node {
    pub contact_point: String,
}

static NODE: OnceLock<Result<Node, String>> = OnceLock::new();

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Node number N (address 127.0.0.N) with nothing on 127.0.0.N:9042; 1-3 are left to the
/// documented 3-node cluster.
fn free_node_number() -> Option<u32> {
    let offset = std::process::id();
    (0..200u32).map(|i| 10 + (offset + i) % 200).find(|n| {
        let address: SocketAddr = format!("127.0.0.{n}:9042").parse().expect("address");
        TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err()
    })
}

fn start() -> Result<Node, String> {
    let root = repository_root();
    let script = root.join("scripts/cassandra");
    let number = free_node_number().ok_or("no free loopback address for a Cassandra node")?;
    let dir = root.join("target/cassandra/test-nodes").join(format!("node-{}", std::process::id()));
    let output = Command::new(&script)
        .arg("start")
        .arg(&dir)
        .arg(number.to_string())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!("scripts/cassandra start failed ({})", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let pid: u32 = stdout.trim().lines().last().and_then(|l| l.trim().parse().ok()).ok_or(format!("no PID in {stdout:?}"))?;
    // Detached (setsid) so that a Ctrl-C of the test run does not take the watchdog with it.
    let watchdog = r#"while kill -0 "$1" 2>/dev/null; do sleep 0.5; done; "$2" stop "$3"; rm -rf "$3""#;
    Command::new("setsid")
        .args(["bash", "-c", watchdog, "watchdog"])
        .arg(std::process::id().to_string())
        .arg(&script)
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the watchdog: {e}"))?;
    eprintln!("Cassandra node PID {pid} on 127.0.0.{number}:9042, files in {}", dir.display());
    Ok(Node { contact_point: format!("127.0.0.{number}:9042") })
}

/// The shared node, or `None` (skipped) when it cannot be started outside CI.
pub fn node() -> Option<&'static Node> {
    match NODE.get_or_init(start) {
        Ok(node) => Some(node),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("CI=true and no Cassandra node: {why}"),
        Err(why) => {
            eprintln!("skipped: no Cassandra node ({why})");
            None
        }
    }
}

/// Options for a keyspace of its own on the shared node, with small segments so that tests
/// fill and seal several.
pub fn store_options(name: &str) -> Option<CassandraOptions> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let node = node()?;
    let keyspace = format!("t{}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed), name);
    Some(CassandraOptions {
        contact_points: vec![node.contact_point.clone()],
        keyspace,
        segment_bytes_max: 4096,
        ..CassandraOptions::default()
    })
}

/// One block of `series`: `points` integer points at `start, start + 1, ...`, each valued its
/// own timestamp.
pub fn group(series: u32, start: i64, points: i64) -> GroupBuilder {
    let mut group = GroupBuilder::new();
    let timestamps: Vec<i64> = (start..start + points).collect();
    group.add_block(SeriesId(series), &timestamps, &ValueColumn::I64(timestamps.clone()));
    group
}
