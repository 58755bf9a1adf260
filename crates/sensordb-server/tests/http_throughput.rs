//! Write throughput over HTTP, with the client in the same process (so on the same cores).
//!
//! Ignored by default (a measurement, not a check); run it in release:
//! `cargo test --release -p sensordb-server --test http_throughput -- --ignored --nocapture`.
//! Four kept-alive connections send TSBS-IoT-like line protocol (10 fields a line, 5,000 lines a
//! body) to `/write` until 20 million points are written or 60 seconds pass; it prints points/s
//! and the process CPU seconds per million points (server and client together).

use sensordb_engine::{Durability, Engine, EngineOptions};
use sensordb_server::{Server, ServerConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNECTIONS: usize = 4;
const LINES_PER_BODY: usize = 5_000;
const FIELDS_PER_LINE: usize = 10;
const TARGET_POINTS: u64 = 20_000_000;

fn cpu_seconds() -> f64 {
    // utime and stime, fields 14 and 15 of /proc/self/stat, in clock ticks (100 per second here).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn body(connection: usize, round: u64) -> Vec<u8> {
    let mut out = String::with_capacity(LINES_PER_BODY * 260);
    let base = 1_451_606_400_000_000_000i64 + round as i64 * 10_000_000_000;
    for i in 0..LINES_PER_BODY {
        let truck = connection * 1000 + i % 1000;
        let ts = base + (i / 1000) as i64 * 1_000_000_000;
        out.push_str(&format!(
            "readings,name=truck_{truck},fleet=South,driver=Trish,model=H-2,device_version=v2.3 latitude={}.{},longitude=4.72037,elevation={}i,velocity={},heading=221,grade=0,fuel_consumption=25.5,load_capacity=1500,fuel_capacity=150,nominal_fuel_consumption=12 {ts}\n",
            50 + i % 7,
            i,
            i % 300,
            i % 90
        ));
    }
    out.into_bytes()
}

async fn send(stream: &mut TcpStream, body: &[u8], buf: &mut Vec<u8>) -> u16 {
    let head = format!("POST /write?db=bench HTTP/1.1\r\nHost: bench\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(body).await.expect("body");
    buf.clear();
    loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize =
                head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.expect("read");
                assert!(n > 0, "server closed");
                buf.extend_from_slice(&chunk[..n]);
            }
            return head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run in release with --ignored --nocapture"]
async fn write_throughput() {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine");
    let config = ServerConfig {
        http_listen: "127.0.0.1:0".parse().expect("addr"),
        native_listen: "127.0.0.1:0".parse().expect("addr"),
        durability: Durability::Os,
        ..Default::default()
    };
    let server = Server::start(config, Arc::new(engine)).await.expect("server");
    let addr: SocketAddr = server.http_addr;
    let bodies: Vec<Vec<Vec<u8>>> = (0..CONNECTIONS).map(|c| (0..4).map(|r| body(c, r)).collect()).collect();
    let written = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, bodies) in bodies.into_iter().enumerate() {
        let written = written.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let mut buf = Vec::new();
            let mut round = 0u64;
            while written.load(Ordering::Relaxed) < TARGET_POINTS && Instant::now() < deadline {
                // The same bodies again overwrite the same points: the load is the same.
                let status = send(&mut stream, &bodies[(round % 4) as usize], &mut buf).await;
                assert_eq!(status, 204, "connection {c}");
                written.fetch_add((LINES_PER_BODY * FIELDS_PER_LINE) as u64, Ordering::Relaxed);
                round += 1;
            }
        }));
    }
    for task in tasks {
        task.await.expect("client");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let points = written.load(Ordering::Relaxed) as f64;
    println!(
        "HTTP write: {points} points in {elapsed:.2} s = {:.0} points/s; {cpu:.2} CPU-s (server + client) = {:.3} CPU-s per million points",
        points / elapsed,
        cpu / (points / 1e6)
    );
    server.shutdown().await;
}
