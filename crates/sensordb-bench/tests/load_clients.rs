//! The network load-test clients against an in-process server (native protocol) and a small
//! mock of the HTTP write endpoint, over 127.0.0.1 only, each bounded in time.

use bytes::Bytes;
use sensordb_bench::ingest_bench::{self, render_row, render_rows, IngestBenchConfig, IngestProtocol};
use sensordb_bench::line_protocol::parse_str;
use sensordb_bench::load::InProcessServer;
use sensordb_bench::row::{Row, TagSet};
use sensordb_bench::tsbs::{TsbsConfig, TsbsGenerator};
use sensordb_bench::tx_bench::{self, TxBenchConfig};
use sensordb_engine::{Durability, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const BOUND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_bench_stores_every_point_and_reports_sane_figures() {
    let server = InProcessServer::start(Durability::Fsync, 50).await.expect("server");
    let config = TxBenchConfig {
        clients: 50,
        series: 7,
        transactions: 3,
        packets: 2,
        points: 100,
        interval: Duration::from_millis(100),
        connect_wave: 16,
        ..TxBenchConfig::default()
    };
    let report = tokio::time::timeout(BOUND, tx_bench::run(&config, server.native_addr())).await.expect("in time");
    assert_eq!(report.errors.len(), 0, "errors: {:?}", report.errors);
    assert_eq!(report.failed, 0);
    assert_eq!(report.not_started, 0);
    assert_eq!(report.clients_connected, 50);
    assert_eq!(report.successful, 150);
    assert_eq!(report.points, 50 * 3 * 2 * 100);
    assert!(report.bytes > report.points, "record bytes {}", report.bytes);
    for p in [report.complete, report.transaction] {
        assert!(p.p50 <= p.p99 && p.p99 <= p.max, "{p:?}");
        assert!(p.max > Duration::ZERO);
    }
    assert!(report.transaction.max >= report.complete.max, "a transaction includes its COMPLETE");
    assert!(report.avg_complete_ms > 0.0 && report.avg_create_ms > 0.0);
    assert!(report.points_per_second > 0.0 && report.mb_per_second > 0.0);
    // Three transactions 100 ms apart, clients spread over one interval: at least 200 ms.
    assert!(report.wall >= Duration::from_millis(200), "wall {:?}", report.wall);
    let lines = tx_bench::format_report(&config, &report);
    assert!(lines[0].contains("totalSuccessfulTx=150, totalFailureTx=0"), "{}", lines[0]);
    // The timeline: one entry per transaction, by start; the last starts ≥ 200 ms in.
    assert_eq!(report.timeline.len(), 150);
    assert!(report.timeline.windows(2).all(|w| w[0].0 <= w[1].0), "ordered by start");
    assert!(report.timeline.last().expect("entries").0 >= Duration::from_millis(200));
    assert!(report.timeline.iter().all(|(_, complete, whole)| complete <= whole));
    assert_eq!(report.timeline.iter().map(|t| t.1).max(), Some(report.complete.max));

    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    assert_eq!(stored, config.expected_points());

    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("runs.csv");
    tx_bench::append_csv(&csv, &config, &report, "fsync", Some(stored)).expect("csv");
    tx_bench::append_csv(&csv, &config, &report, "fsync", Some(stored)).expect("csv again");
    let text = std::fs::read_to_string(&csv).expect("read csv");
    let timeline = dir.path().join("timeline.csv");
    tx_bench::write_timeline(&timeline, &report).expect("timeline");
    let rows: Vec<String> = std::fs::read_to_string(&timeline).expect("read timeline").lines().map(String::from).collect();
    assert_eq!(rows[0], "start_ms,complete_ms,transaction_ms");
    assert_eq!(rows.len(), 151);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "one header, two rows: {text}");
    assert_eq!(lines[0], tx_bench::csv_header());
    let header: Vec<&str> = lines[0].split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).expect("column");
    for row in &lines[1..] {
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields.len(), header.len(), "{row}");
        assert!(row.contains(",50,7,3,2,100,,100,"), "{row}");
        assert_eq!(fields[column("server_points_stored")], "30000", "{row}");
        assert_eq!(fields[column("pipeline")], "true", "{row}");
        // An in-process server: its CPU is the client process's.
        assert_eq!(fields[column("server_cpu_s")], "", "{row}");
        assert!(fields[column("client_cpu_s")].parse::<f64>().is_ok_and(|cpu| cpu > 0.0), "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_bench_payload_packets_and_duration_bound() {
    let server = InProcessServer::start(Durability::Os, 8).await.expect("server");
    let payload = TxBenchConfig {
        clients: 4,
        series: 0,
        transactions: 2,
        packets: 3,
        payload_bytes: Some(20_000),
        interval: Duration::from_millis(20),
        ..TxBenchConfig::default()
    };
    let report = tokio::time::timeout(BOUND, tx_bench::run(&payload, server.native_addr())).await.expect("in time");
    assert_eq!((report.successful, report.failed), (8, 0), "{:?}", report.errors);
    assert_eq!(report.points, 4 * 2 * 3);
    assert!(report.bytes >= 4 * 2 * 3 * 20_000);

    // Far more transactions than the duration allows: the run stops starting them.
    let bounded = TxBenchConfig {
        clients: 4,
        transactions: 1_000,
        packets: 1,
        points: 10,
        interval: Duration::from_millis(50),
        duration: Some(Duration::from_millis(300)),
        ..TxBenchConfig::default()
    };
    let started = Instant::now();
    let report = tokio::time::timeout(BOUND, tx_bench::run(&bounded, server.native_addr())).await.expect("in time");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(report.failed, 0, "{:?}", report.errors);
    assert!(report.successful > 0 && report.not_started > 0);
    assert_eq!(report.successful + report.not_started, 4_000);
    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    assert_eq!(stored, 4 * 2 * 3 + report.points);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_ingest_for_a_second_stores_everything_acknowledged() {
    let server = InProcessServer::start(Durability::Os, 2).await.expect("server");
    let config = IngestBenchConfig {
        protocol: IngestProtocol::Native,
        clients: 2,
        duration: Duration::from_secs(1),
        batch_points: 2_000,
        scale: 10,
        hours: 1,
        progress: false,
        ..IngestBenchConfig::default()
    };
    let report = tokio::time::timeout(BOUND, ingest_bench::run(&config, server.native_addr())).await.expect("in time").expect("runs");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.failed, 0);
    assert!(report.points > 0 && report.requests > 0 && report.bytes > 0);
    assert!(report.dataset_points > 0 && report.series > 0);
    assert!(report.points_per_second > 0.0);
    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    assert_eq!(stored, report.points, "every acknowledged point is stored, none twice");
}

fn row(measurement: &str, tags: &[(&str, &str)], fields: Vec<(&str, Value)>, timestamp: i64) -> Row {
    Row {
        measurement: measurement.into(),
        tags: Arc::new(TagSet { id: 0, tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }),
        fields: fields.into_iter().map(|(k, v)| (Arc::from(k), v)).collect(),
        timestamp,
    }
}

fn flatten(rows: &[Row]) -> Vec<(String, i64, Value)> {
    rows.iter().flat_map(|r| r.flatten().expect("keys")).map(|(key, ts, value)| (key.canonical(), ts, value)).collect()
}

#[test]
fn rendered_line_protocol_parses_back_into_the_same_points() {
    // TSBS rows with its defects (dropped tags, zero fields, disorder).
    let config = TsbsConfig { scale: 20, ..TsbsConfig::default() }.with_duration(600 * 1_000_000_000);
    let mut rows: Vec<Row> = TsbsGenerator::new(config).collect();
    assert!(!rows.is_empty());
    // And the awkward cases: escapes, every value kind, integral and tiny floats.
    rows.push(row(
        "we ird,m",
        &[("tag key", "a=b,c d"), ("empty", ""), ("k", "v")],
        vec![
            ("f 1", Value::F64(3.0)),
            ("f,2", Value::F64(-1.25e-7)),
            ("i", Value::I64(-42)),
            ("u", Value::U64(u64::MAX)),
            ("b", Value::Bool(true)),
            ("s", Value::Bytes(Bytes::from_static(b"say \"hi\" \\ back, slash = x"))),
        ],
        -5,
    ));
    let text = render_rows(&rows);
    let parsed = parse_str(std::str::from_utf8(&text).expect("UTF-8")).expect("parses back");
    assert_eq!(parsed.len(), rows.len());
    assert_eq!(flatten(&parsed), flatten(&rows));
    let mut one = Vec::new();
    render_row(&rows[0], &mut one);
    assert_eq!(one.iter().filter(|&&b| b == b'\n').count(), 1);
}

/// A mock of `POST /write`: answers 204 (or `status`), parses each body and counts its points.
async fn mock_write_endpoint(status: u16) -> (std::net::SocketAddr, Arc<AtomicU64>, Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let points = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let (p, r) = (points.clone(), requests.clone());
    let task = tokio::spawn(async move {
        for _ in 0..64 {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let (points, requests) = (p.clone(), r.clone());
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                for _ in 0..1_000_000 {
                    let head_end = loop {
                        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at;
                        }
                        let mut chunk = [0u8; 8192];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
                    assert!(head.starts_with("POST /write?db=benchdb&precision=ns HTTP/1.1\r\n"), "{head}");
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .expect("Content-Length");
                    buffer.drain(..head_end + 4);
                    while buffer.len() < length {
                        let mut chunk = [0u8; 65536];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Vec<u8> = buffer.drain(..length).collect();
                    let answer: &[u8] = if status == 204 {
                        let rows = parse_str(std::str::from_utf8(&body).expect("UTF-8")).expect("valid line protocol");
                        points.fetch_add(rows.iter().map(|r| r.fields.len() as u64).sum(), Ordering::Relaxed);
                        requests.fetch_add(1, Ordering::Relaxed);
                        b"HTTP/1.1 204 No Content\r\n\r\n"
                    } else {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"
                    };
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, points, requests, task)
}

fn http_config() -> IngestBenchConfig {
    IngestBenchConfig {
        protocol: IngestProtocol::Http,
        clients: 2,
        duration: Duration::from_millis(700),
        batch_points: 1_000,
        scale: 10,
        hours: 1,
        db: "benchdb".to_string(),
        progress: false,
        ..IngestBenchConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ingest_against_a_mock_write_endpoint() {
    let (addr, points, requests, task) = mock_write_endpoint(204).await;
    let config = http_config();
    let report = tokio::time::timeout(BOUND, ingest_bench::run(&config, addr)).await.expect("in time").expect("runs");
    task.abort();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.failed, 0);
    assert!(report.requests > 0);
    assert_eq!(report.requests, requests.load(Ordering::Relaxed));
    assert_eq!(report.points, points.load(Ordering::Relaxed), "the points acknowledged are the points the mock read");
    assert!(report.mb_per_second > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ingest_stops_at_once_when_there_is_no_write_endpoint() {
    let (addr, _, _, task) = mock_write_endpoint(404).await;
    let config = IngestBenchConfig { duration: Duration::from_secs(30), ..http_config() };
    let started = Instant::now();
    let report = tokio::time::timeout(BOUND, ingest_bench::run(&config, addr)).await.expect("in time").expect("runs");
    task.abort();
    assert!(started.elapsed() < Duration::from_secs(20), "gave up without waiting for the duration");
    assert_eq!(report.points, 0);
    assert_eq!(report.failed, 2, "one failure per client, then it stops");
    assert!(report.errors.keys().any(|m| m.starts_with("HTTP 404")), "{:?}", report.errors);
}

#[test]
fn error_kinds_hide_transaction_ids() {
    assert_eq!(
        tx_bench::error_kind("server error Storage: transaction 00036d424a362297bce4c17ca139a254 not stored: log file 2 failed"),
        "server error Storage: transaction … not stored: log file 2 failed"
    );
    assert_eq!(tx_bench::error_kind("timed out waiting for CREATED"), "timed out waiting for CREATED");
}
