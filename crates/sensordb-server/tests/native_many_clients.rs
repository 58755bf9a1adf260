//! 1,000 clients at once against one server over 127.0.0.1, each committing one small
//! transaction on its own connection; bounded in time. Raises the process's open-file limit
//! (each client costs two descriptors in this process: its socket and the server's).

use sensordb_client::{Client, ClientOptions};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind};
use sensordb_server::{Server, ServerConfig};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 1000;

/// Raises the soft open-file limit to the hard one; returns the new soft limit.
fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    limit.rlim_cur
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_clients_each_commit_a_transaction() {
    let limit = raise_open_file_limit();
    let clients = if limit >= (2 * CLIENTS + 200) as u64 { CLIENTS } else { 500 };
    eprintln!("open-file limit {limit}: {clients} clients");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ServerConfig {
        data_dir: dir.path().to_path_buf(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerConfig::default()
    };
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine"));
    let server = Server::start(config, engine.clone()).await.expect("server");
    let addr = server.native_addr;
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            tokio::spawn(async move {
                let options = ClientOptions { reply_timeout: Duration::from_secs(60), ..Default::default() };
                let client = Client::connect_with(addr, options).await.expect("connects");
                let key = SeriesKey::new("fleet", [("client", n.to_string())], "value").expect("key");
                let handle = client.series(&key, ValueKind::I64).await.expect("series");
                let mut tx = client.transaction();
                for i in 0..10i64 {
                    tx.push(&handle, i, Value::I64(n as i64 * 100 + i)).expect("push");
                }
                tx.commit().await.expect("commits");
                client
            })
        })
        .collect();
    let mut kept = Vec::with_capacity(clients);
    for task in tasks {
        kept.push(tokio::time::timeout(Duration::from_secs(120), task).await.expect("in time").expect("joins"));
    }
    let elapsed = started.elapsed();
    eprintln!("{clients} clients committed in {elapsed:?}");
    assert!(server.state.metrics.connections_open.load(Ordering::Relaxed) >= clients as i64 - 1, "all connected at once");
    assert_eq!(server.state.metrics.points_written.load(Ordering::Relaxed), clients as u64 * 10);
    assert_eq!(server.state.metrics.native_transactions_completed.load(Ordering::Relaxed), clients as u64);
    let sample = SeriesKey::new("fleet", [("client", "7")], "value").expect("key");
    let id = engine.find_series(&sample).expect("series exists");
    let points: Vec<_> = engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.expect("reads").value).collect();
    assert_eq!(points.len(), 10);
    assert_eq!(points[3], Value::I64(703));
    drop(kept);
    tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await.expect("shuts down in time");
}
