//! A native client given several nodes (`Client::connect_to_any`, issue 15 item 6): it starts
//! on the node its client id picks, and when that node dies its transactions go to the next
//! one, under the same ids. Two local servers on 127.0.0.1, no Cassandra: one is stopped.

use sensordb_client::{Client, ClientOptions, TxId};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

async fn start(dir: &Path) -> (RunningServer, Arc<Engine>) {
    let config = ServerConfig {
        data_dir: dir.to_path_buf(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerConfig::default()
    };
    let engine = Arc::new(Engine::open(dir, EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine opens"));
    let server = Server::start(config, engine.clone()).await.expect("server starts");
    (server, engine)
}

fn key() -> SeriesKey {
    SeriesKey::new("readings", [("truck", "failover")], "velocity").expect("key")
}

fn stored(engine: &Engine) -> Vec<i64> {
    let Some(id) = engine.find_series(&key()) else { return Vec::new() };
    engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.expect("reads").timestamp).collect()
}

async fn commit(client: &Client, id: u64, timestamps: std::ops::Range<i64>) -> sensordb_client::TxStats {
    let series = client.series(&key(), ValueKind::F64).await.expect("series");
    let mut tx = client.transaction_with_id(TxId::from_u64(id));
    for t in timestamps {
        tx.push(&series, t, Value::F64(t as f64)).expect("push");
    }
    tx.commit().await.expect("commits")
}

#[tokio::test]
async fn a_client_of_two_nodes_fails_over_when_one_dies() {
    tokio::time::timeout(LIMIT, async {
        let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let (server_a, engine_a) = start(dir_a.path()).await;
        let (server_b, engine_b) = start(dir_b.path()).await;
        let (a, b) = (server_a.native_addr, server_b.native_addr);
        // Client id byte 0 = 0: starts on the first node; 1: on the second (clients spread).
        let options = |first: u8| ClientOptions {
            client_id: [first; 16],
            max_attempts: 5,
            retry_backoff: Duration::from_millis(10),
            reply_timeout: Duration::from_secs(5),
            ..ClientOptions::default()
        };
        let other = Client::connect_to_any(&[a, b], options(1)).await.expect("connects");
        assert_eq!(other.current_address(), b, "another client id starts on another node");
        drop(other);
        let client = Client::connect_to_any(&[a, b], options(0)).await.expect("connects");
        assert_eq!(client.current_address(), a);
        let stats = commit(&client, 1, 0..10).await;
        assert_eq!(stats.attempts, 1);
        assert_eq!(stored(&engine_a), (0..10).collect::<Vec<_>>());

        // Node A goes away (its connections closed, its port refusing): the next transaction's
        // connection skips A and goes to B.
        server_a.shutdown().await;
        drop(engine_a);
        let stats = commit(&client, 2, 10..20).await;
        assert!(!stats.duplicate, "{stats:?}");
        assert_eq!(client.current_address(), b);
        assert_eq!(stored(&engine_b), (10..20).collect::<Vec<_>>(), "stored on the live node");

        // A transaction whose COMPLETED answer is lost: the retry tries A (refused), then B,
        // under the same id, and B answers it as already completed: stored once.
        client.drop_connection_before_complete_reply(1);
        let stats = commit(&client, 3, 20..30).await;
        assert!(stats.duplicate, "the retry found the first attempt completed: {stats:?}");
        assert_eq!(stored(&engine_b), (10..30).collect::<Vec<_>>());
        server_b.shutdown().await;
    })
    .await
    .expect("bounded");
}
