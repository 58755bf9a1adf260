//! A file system filled by another process (issue 13, items 1 and 2), through the engine's
//! `FileSystem` trait (a reported statvfs, so the host's disk does not matter): with the
//! default settings an HTTP write gets its 503 and a native COMPLETE its NO_SPACE within
//! Telegraf's 5 s timeout, `/metrics` raises the alert, and none of the stored data is deleted.

mod common;

use common::{get, post};
use sensordb_client::{Client, ClientError, ClientOptions, ErrorCode};
use sensordb_engine::test_support::fs::FaultyFs;
use sensordb_engine::{DiskSpace, Durability, Engine, RealFs, SeriesKey, Value, ValueKind};
use sensordb_server::{Server, ServerConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TELEGRAF_TIMEOUT: Duration = Duration::from_secs(5);

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing"))
        .parse()
        .expect("number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_default_settings_a_disk_filled_by_others_refuses_writes_in_time_and_deletes_nothing() {
    common::bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = FaultyFs::new(Arc::new(RealFs));
        let config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            durability: Durability::Os,
            http_listen: "127.0.0.1:0".parse().expect("address"),
            native_listen: "127.0.0.1:0".parse().expect("address"),
            ..ServerConfig::default()
        };
        assert!(Duration::from_millis(config.full_wait_max_ms) < TELEGRAF_TIMEOUT, "default {} ms", config.full_wait_max_ms);
        let mut options = config.engine_options();
        options.fs = Arc::new(disk.clone());
        // Usage as statvfs reports it, from the fault-injecting file system.
        options.reclaim.file_system_usage = true;
        disk.set_reported_space(Some(DiskSpace { total_bytes: 1 << 40, available_bytes: 1 << 39 }));
        let engine = Arc::new(Engine::open(dir.path(), options).expect("engine"));
        let server = Server::start(config, engine.clone()).await.expect("server");
        let addr = server.http_addr;
        assert_eq!(post(addr, "/write?db=d&precision=s", "m v=1 1\nm v=2 2").await.status, 204);
        engine.flush().expect("flush");

        // Another process takes every byte left.
        disk.set_reported_space(Some(DiskSpace { total_bytes: 1 << 40, available_bytes: 0 }));
        // Admission measures usage again once its last measurement is 10 ms old; the flush
        // above may just have measured it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let refused = post(addr, "/write?db=d&precision=s", "m v=3 3").await;
        let took = started.elapsed();
        assert_eq!(refused.status, 503, "{}", refused.text());
        assert!(took < TELEGRAF_TIMEOUT, "answered after {took:?}");
        assert!(refused.header("retry-after").is_some());

        // One attempt: the client retries NO_SPACE by itself, and each attempt is answered.
        let client = Client::connect_with(server.native_addr, ClientOptions { max_attempts: 1, ..ClientOptions::default() })
            .await
            .expect("connects");
        let key = SeriesKey::new("n", [("s", "1")], "v").expect("key");
        let series = client.series(&key, ValueKind::F64).await.expect("series");
        let mut transaction = client.transaction();
        transaction.push(&series, 1, Value::F64(1.0)).expect("push");
        let started = Instant::now();
        match transaction.commit().await {
            Err(ClientError::Server { code: ErrorCode::NoSpace, .. }) => {}
            other => panic!("expected NO_SPACE, got {other:?}"),
        }
        assert!(started.elapsed() < TELEGRAF_TIMEOUT, "answered after {:?}", started.elapsed());

        let metrics = get(addr, "/metrics").await.text();
        assert!(metric(&metrics, "sensordb_writes_refused_no_space_total") >= 2.0, "{metrics}");
        assert_eq!(metric(&metrics, "sensordb_disk_full_by_others"), 1.0, "{metrics}");
        assert_eq!(metric(&metrics, "sensordb_reclaim_bytes_evicted_total"), 0.0, "{metrics}");
        let points = get(addr, "/query?db=d&q=SELECT+count(v)+FROM+m").await.json();
        assert_eq!(points["results"][0]["series"][0]["values"][0][1], 2, "{points}");

        server.shutdown().await;
        let engine = Arc::try_unwrap(engine).unwrap_or_else(|_| panic!("engine still shared"));
        engine.close().expect("close");
    })
    .await;
}
