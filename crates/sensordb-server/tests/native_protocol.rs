//! End-to-end tests of the native protocol over real sockets on 127.0.0.1: round trip and read
//! back, pipelining, idempotent retries (also across a restart and a crash), cancel, timeout rollback,
//! CONFIRM checksum mismatch, bad frames and tokens, the client's pipelined and frame-by-frame
//! commits, acknowledgements delayed by the disk-usage throttle and refused on a full disk.
//! Every test is bounded in time.

use sensordb_client::{Client, ClientError, ClientOptions, ErrorCode, TxId};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind};
use sensordb_protocol::frame::{read_frame, Frame, VERSION};
use sensordb_protocol::points::PointsEncoder;
use sensordb_server::auth::{Scope, TokenConfig};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_secs(60);

/// A test server's settings: `dir`, `os` durability, ports chosen by the system.
fn config(dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> ServerConfig {
    let mut config = ServerConfig {
        data_dir: dir.to_path_buf(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerConfig::default()
    };
    tweak(&mut config);
    config
}

async fn start(dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> (RunningServer, Arc<Engine>) {
    let config = config(dir, tweak);
    let engine = Arc::new(Engine::open(dir, EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine opens"));
    let server = Server::start(config, engine.clone()).await.expect("server starts");
    (server, engine)
}

/// Stops the server and closes the engine so the directory can be opened again.
async fn stop(server: RunningServer, engine: Arc<Engine>) {
    server.shutdown().await;
    let mut engine = engine;
    for _ in 0..200 {
        match Arc::try_unwrap(engine) {
            Ok(engine) => {
                engine.close().expect("engine closes");
                return;
            }
            Err(shared) => {
                engine = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    panic!("the engine is still shared after shutdown");
}

/// Stops the server and drops the engine the way a killed process stops: no flush, the WAL
/// holds what was not flushed.
async fn crash(server: RunningServer, engine: Arc<Engine>) {
    server.shutdown().await;
    let mut engine = engine;
    for _ in 0..200 {
        match Arc::try_unwrap(engine) {
            Ok(engine) => return engine.abandon(),
            Err(shared) => {
                engine = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    panic!("the engine is still shared after shutdown");
}

fn key(name: &str) -> SeriesKey {
    SeriesKey::new("readings", [("truck", name)], "velocity").expect("key")
}

fn stored(engine: &Engine, key: &SeriesKey) -> Vec<(i64, Value)> {
    let Some(id) = engine.find_series(key) else { return Vec::new() };
    engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.expect("reads")).map(|p| (p.timestamp, p.value)).collect()
}

fn written(server: &RunningServer) -> u64 {
    server.state.metrics.points_written.load(Ordering::Relaxed)
}

async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.expect("test finished in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_round_trips_and_reads_back() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        // Packets of 256 KiB: the 900 kB payload below travels in parts.
        let options = ClientOptions { packet_bytes: 256 << 10, ..ClientOptions::default() };
        let client = Client::connect_with(server.native_addr, options).await.expect("connects");
        let speed = client.series(&key("a"), ValueKind::F64).await.expect("series");
        let count =
            client.series(&SeriesKey::new("readings", [("truck", "a")], "count").expect("key"), ValueKind::I64).await.expect("series");
        let frame =
            client.series(&SeriesKey::new("frames", [("truck", "a")], "raw").expect("key"), ValueKind::Bytes).await.expect("series");
        let mut tx = client.transaction();
        for i in 0..5000i64 {
            tx.push(&speed, i * 1000, Value::F64(i as f64 * 0.5)).expect("push");
            tx.push(&count, i * 1000, Value::I64(-i)).expect("push");
        }
        let big = bytes::Bytes::from((0..900_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        tx.push(&frame, 42, Value::Bytes(big.clone())).expect("push");
        assert!(matches!(tx.push(&speed, 1, Value::Bool(true)), Err(ClientError::KindMismatch { .. })));
        let stats = tx.commit().await.expect("commits");
        assert_eq!((stats.points, stats.attempts, stats.duplicate), (10_001, 1, false));
        let speeds = stored(&engine, &key("a"));
        assert_eq!(speeds.len(), 5000);
        assert_eq!(speeds[10], (10_000, Value::F64(5.0)));
        let frames = stored(&engine, &SeriesKey::new("frames", [("truck", "a")], "raw").expect("key"));
        assert_eq!(frames, vec![(42, Value::Bytes(big))], "a payload larger than a packet arrives whole");
        assert_eq!(written(&server), 10_001);
        assert_eq!(server.state.metrics.native_transactions_completed.load(Ordering::Relaxed), 1);
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_pipelined_on_one_connection() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        let client = Client::connect(server.native_addr, "").await.expect("connects");
        let handle = client.series(&key("p"), ValueKind::U64).await.expect("series");
        let commits = (0..20u64).map(|t| {
            let mut tx = client.transaction();
            for i in 0..100u64 {
                tx.push(&handle, (t * 100 + i) as i64, Value::U64(t * 1000 + i)).expect("push");
            }
            tokio::spawn(tx.commit())
        });
        for commit in commits.collect::<Vec<_>>() {
            let stats = commit.await.expect("joins").expect("commits");
            assert_eq!((stats.points, stats.attempts), (100, 1));
        }
        assert_eq!(server.state.metrics.connections_accepted.load(Ordering::Relaxed), 1, "one connection carried them all");
        let points = stored(&engine, &key("p"));
        assert_eq!(points.len(), 2000);
        assert_eq!(points[1999], (1999, Value::U64(19_099)));
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_lost_complete_answer_stores_once_even_after_a_restart() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        let options = ClientOptions { client_id: [9; 16], ..ClientOptions::default() };
        let client = Client::connect_with(server.native_addr, options.clone()).await.expect("connects");
        let handle = client.series(&key("r"), ValueKind::F64).await.expect("series");
        let fill = |tx: &mut sensordb_client::Transaction| {
            for i in 0..300i64 {
                tx.push(&handle, i, Value::F64(i as f64)).expect("push");
            }
        };

        // The client closes its socket right after COMPLETE, reconnects and resends.
        client.drop_connection_before_complete_reply(1);
        let mut tx = client.transaction_with_id(TxId::from_u64(7));
        fill(&mut tx);
        let stats = tx.commit().await.expect("commits");
        assert_eq!(stats.attempts, 2);
        assert!(stats.duplicate, "the second attempt found the first completed");
        assert_eq!(written(&server), 300, "points written once");
        assert_eq!(engine.stats().memtable_points, 300);
        assert_eq!(stored(&engine, &key("r")).len(), 300);

        // Raw: the whole transaction again, then COMPLETE straight away: both answered as done.
        let mut raw = RawClient::connect(server.native_addr, [9; 16], "").await;
        raw.define(1, ValueKind::F64, &key("r")).await;
        let tx7 = TxId::from_u64(7);
        raw.send(&Frame::Create { tx: tx7 }).await;
        assert_eq!(raw.next().await, Frame::Created { tx: tx7, already_completed: true });
        raw.send(&Frame::Complete { tx: TxId::from_u64(7) }).await;
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, .. }), "COMPLETE before CONFIRM is refused");
        raw.send_points(tx7, 1, &[0, 1], &[0.0, 1.0]).await;
        raw.send(&Frame::Confirm { tx: tx7 }).await;
        assert!(matches!(raw.next().await, Frame::Confirmed { points: 2, .. }));
        raw.send(&Frame::Complete { tx: tx7 }).await;
        assert_eq!(raw.next().await, Frame::Completed { tx: tx7, duplicate: true, points: 300 });
        drop(raw);
        assert_eq!(written(&server), 300);

        // After a restart the completed-id log still answers the retry.
        drop(client);
        stop(server, engine).await;
        let (server, engine) = start(dir.path(), |_| {}).await;
        let client = Client::connect_with(server.native_addr, options).await.expect("connects");
        let handle2 = client.series(&key("r"), ValueKind::F64).await.expect("series");
        assert_eq!(handle2.kind(), handle.kind());
        let mut tx = client.transaction_with_id(TxId::from_u64(7));
        fill(&mut tx);
        let stats = tx.commit().await.expect("commits");
        assert!(stats.duplicate);
        assert_eq!(written(&server), 0, "nothing written after the restart");
        assert_eq!(engine.stats().memtable_points as u64 + engine.stats().store.points, 300);

        // Another client may use the same transaction id: ids are per client.
        let other = Client::connect(server.native_addr, "").await.expect("connects");
        let h = other.series(&key("r"), ValueKind::F64).await.expect("series");
        let mut tx = other.transaction_with_id(TxId::from_u64(7));
        tx.push(&h, 1000, Value::F64(1.5)).expect("push");
        assert!(!tx.commit().await.expect("commits").duplicate);
        assert_eq!(stored(&engine, &key("r")).len(), 301);
        stop(server, engine).await;
    })
    .await
}

/// An acknowledged COMPLETE, a crash (the engine abandoned, its WAL replayed at restart), with
/// and without a flush before it, then a retry of the same id: answered as already completed,
/// the points stored once. Without a flush the id was only in the WAL record of its points.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_transaction_is_recognised_after_a_crash_with_or_without_a_flush() {
    bounded(async {
        for flushed in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let options = ClientOptions { client_id: [6; 16], ..ClientOptions::default() };
            let commit = |client: Client| async move {
                let handle = client.series(&key("crash"), ValueKind::F64).await.expect("series");
                let mut tx = client.transaction_with_id(TxId::from_u64(11));
                for i in 0..50i64 {
                    tx.push(&handle, i, Value::F64(i as f64)).expect("push");
                }
                tx.commit().await.expect("commits")
            };
            let (server, engine) = start(dir.path(), |_| {}).await;
            let stats = commit(Client::connect_with(server.native_addr, options.clone()).await.expect("connects")).await;
            assert!(!stats.duplicate);
            assert_eq!(written(&server), 50);
            let log = dir.path().join("transactions.log");
            if flushed {
                engine.flush().expect("flushed");
                assert!(std::fs::metadata(&log).expect("log").len() > 16, "the flush checkpointed the id into the log");
            } else {
                assert_eq!(std::fs::metadata(&log).expect("log").len(), 16, "the id is in the WAL only");
            }
            crash(server, engine).await;

            let (server, engine) = start(dir.path(), |_| {}).await;
            assert_eq!(engine.recovery().marks_replayed, u64::from(!flushed), "flushed: {flushed}");
            let stats = commit(Client::connect_with(server.native_addr, options.clone()).await.expect("connects")).await;
            assert!(stats.duplicate, "flushed: {flushed}: the retry is answered as already completed");
            assert_eq!(written(&server), 0, "flushed: {flushed}: nothing written again");
            assert_eq!(stored(&engine, &key("crash")).len(), 50);
            // The replayed id is checkpointed by the next flush, and survives another crash.
            engine.flush().expect("flushed");
            crash(server, engine).await;
            let (server, engine) = start(dir.path(), |_| {}).await;
            let stats = commit(Client::connect_with(server.native_addr, options).await.expect("connects")).await;
            assert!(stats.duplicate, "flushed: {flushed}: still completed after the second crash");
            assert_eq!(written(&server), 0);
            assert_eq!(stored(&engine, &key("crash")).len(), 50);
            stop(server, engine).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_transactions_store_nothing() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |c| c.transaction_timeout_ms = 300).await;
        let mut raw = RawClient::connect(server.native_addr, [1; 16], "").await;
        raw.define(1, ValueKind::F64, &key("c")).await;
        let (a, b) = (TxId::from_u64(1), TxId::from_u64(2));
        raw.send(&Frame::Create { tx: a }).await;
        assert!(matches!(raw.next().await, Frame::Created { .. }));
        raw.send_points(a, 1, &[1, 2, 3], &[1.0, 2.0, 3.0]).await;
        raw.send(&Frame::Confirm { tx: a }).await;
        assert!(matches!(raw.next().await, Frame::Confirmed { points: 3, .. }));
        raw.send(&Frame::Cancel { tx: a }).await;
        assert_eq!(raw.next().await, Frame::Cancelled { tx: a });
        raw.send(&Frame::Complete { tx: a }).await;
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, fatal: false, .. }));

        // Half-finished: CREATE and SEND, then silence past the transaction timeout.
        raw.send(&Frame::Create { tx: b }).await;
        assert!(matches!(raw.next().await, Frame::Created { .. }));
        raw.send_points(b, 1, &[4, 5], &[4.0, 5.0]).await;
        let started = std::time::Instant::now();
        match raw.next().await {
            Frame::Error { code: ErrorCode::TransactionTimeout, tx: Some(tx), fatal: false, .. } => assert_eq!(tx, b),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(250));
        raw.send(&Frame::Confirm { tx: b }).await;
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, .. }), "rolled back");
        // The connection still works.
        raw.send(&Frame::Ping { nonce: 5 }).await;
        assert_eq!(raw.next().await, Frame::Pong { nonce: 5 });

        assert!(stored(&engine, &key("c")).is_empty());
        assert_eq!(written(&server), 0);
        assert_eq!(server.state.metrics.native_transactions_failed.load(Ordering::Relaxed), 2);
        assert_eq!(server.state.metrics.in_flight_bytes.load(Ordering::Relaxed), 0, "byte permits returned");
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_checksum_mismatch_cancels_and_resends() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        let client = Client::connect(server.native_addr, "").await.expect("connects");
        let handle = client.series(&key("m"), ValueKind::F64).await.expect("series");
        client.corrupt_next_sends(1);
        let mut tx = client.transaction();
        for i in 0..50i64 {
            tx.push(&handle, i, Value::F64(i as f64)).expect("push");
        }
        let stats = tx.commit().await.expect("commits on the second attempt");
        assert_eq!(stats.attempts, 2);
        let points = stored(&engine, &key("m"));
        assert_eq!(points.len(), 50);
        assert!(points.iter().all(|(t, v)| *v == Value::F64(*t as f64)), "no corrupted value stored");
        assert_eq!(written(&server), 50);
        assert_eq!(server.state.metrics.native_transactions_failed.load(Ordering::Relaxed), 1, "the corrupted attempt was cancelled");

        // With retries exhausted the error reaches the caller and nothing is stored.
        let strict =
            Client::connect_with(server.native_addr, ClientOptions { max_attempts: 1, ..Default::default() }).await.expect("connects");
        let h = strict.series(&key("m2"), ValueKind::F64).await.expect("series");
        strict.corrupt_next_sends(1);
        let mut tx = strict.transaction();
        tx.push(&h, 1, Value::F64(1.0)).expect("push");
        assert!(matches!(tx.commit().await, Err(ClientError::ChecksumMismatch { .. })));
        assert!(stored(&engine, &key("m2")).is_empty());
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_an_error_and_the_server_serves_others() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |c| c.max_frame_bytes = 1 << 20).await;
        let addr = server.native_addr;

        // Garbage (an HTTP request): its "length" is far beyond the limit.
        let mut s = TcpStream::connect(addr).await.expect("connects");
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("writes");
        assert!(matches!(read_frame(&mut s, u32::MAX).await, Ok(Some(Frame::Error { code: ErrorCode::FrameTooLarge, fatal: true, .. }))));
        assert!(matches!(read_frame(&mut s, u32::MAX).await, Ok(None)), "closed after the error");

        // A huge declared length.
        let mut s = TcpStream::connect(addr).await.expect("connects");
        let mut frame = Frame::Ping { nonce: 1 }.to_bytes();
        frame[..4].copy_from_slice(&(64u32 << 20).to_le_bytes());
        s.write_all(&frame).await.expect("writes");
        assert!(matches!(read_frame(&mut s, u32::MAX).await, Ok(Some(Frame::Error { code: ErrorCode::FrameTooLarge, .. }))));

        // A bad checksum after a good handshake.
        let mut raw = RawClient::connect(addr, [2; 16], "").await;
        let mut frame = Frame::Create { tx: TxId::from_u64(1) }.to_bytes();
        frame[13] ^= 0x40;
        raw.stream.write_all(&frame).await.expect("writes");
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::BadChecksum, fatal: true, .. }));
        assert!(matches!(read_frame(&mut raw.stream, u32::MAX).await, Ok(None)));

        // An unknown frame type with a valid checksum: reported, the connection goes on.
        let mut raw = RawClient::connect(addr, [3; 16], "").await;
        let mut frame = Frame::Ping { nonce: 1 }.to_bytes();
        frame[4] = 0x42;
        let mut covered = frame[..8].to_vec();
        covered.extend_from_slice(&frame[12..]);
        frame[8..12].copy_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
        raw.stream.write_all(&frame).await.expect("writes");
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::UnknownFrameType, fatal: false, .. }));
        // Wrong state: SEND for a transaction never created.
        raw.send_points(TxId::from_u64(9), 1, &[1], &[1.0]).await;
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, fatal: false, .. }));
        raw.send(&Frame::Ping { nonce: 2 }).await;
        assert_eq!(raw.next().await, Frame::Pong { nonce: 2 });

        // A frame before HELLO.
        let mut s = TcpStream::connect(addr).await.expect("connects");
        s.write_all(&Frame::Create { tx: TxId::from_u64(1) }.to_bytes()).await.expect("writes");
        assert!(matches!(read_frame(&mut s, u32::MAX).await, Ok(Some(Frame::Error { code: ErrorCode::WrongState, fatal: true, .. }))));

        // Meanwhile a well-behaved client is served.
        let client = Client::connect(addr, "").await.expect("connects");
        let handle = client.series(&key("ok"), ValueKind::F64).await.expect("series");
        let mut tx = client.transaction();
        tx.push(&handle, 1, Value::F64(1.0)).expect("push");
        tx.commit().await.expect("commits");
        assert_eq!(stored(&engine, &key("ok")).len(), 1);
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_in_the_handshake() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |c| {
            c.tokens = vec![
                TokenConfig { token: "writer".into(), scopes: vec![Scope::Write] },
                TokenConfig { token: "reader".into(), scopes: vec![Scope::Read] },
            ]
        })
        .await;
        let addr = server.native_addr;
        for (token, expected) in [("wrong", ErrorCode::Unauthenticated), ("", ErrorCode::Unauthenticated), ("reader", ErrorCode::Forbidden)]
        {
            match Client::connect(addr, token).await {
                Err(ClientError::Server { code, message }) => {
                    assert_eq!(code, expected, "{token}: {message}");
                    assert!(!message.is_empty());
                }
                Err(other) => panic!("{token}: unexpected error {other}"),
                Ok(_) => panic!("{token}: accepted"),
            }
        }
        // An unsupported version is refused with a message.
        let mut s = TcpStream::connect(addr).await.expect("connects");
        let hello = Frame::Hello {
            min_version: VERSION + 1,
            max_version: VERSION + 3,
            client_id: [0; 16],
            token: "writer".into(),
            client_name: "future".into(),
        };
        s.write_all(&hello.to_bytes()).await.expect("writes");
        assert!(matches!(read_frame(&mut s, u32::MAX).await, Ok(Some(Frame::Error { code: ErrorCode::UnsupportedVersion, .. }))));

        let client = Client::connect(addr, "writer").await.expect("the right token is accepted");
        let handle = client.series(&key("t"), ValueKind::Bool).await.expect("series");
        let mut tx = client.transaction();
        tx.push(&handle, 1, Value::Bool(true)).expect("push");
        tx.commit().await.expect("commits");
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_over_the_connection_budget_is_rolled_back() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |c| {
            c.max_connection_in_flight_bytes = 64 << 10;
            c.max_frame_bytes = 32 << 10;
        })
        .await;
        let client =
            Client::connect_with(server.native_addr, ClientOptions { max_attempts: 1, ..Default::default() }).await.expect("connects");
        let handle = client.series(&key("big"), ValueKind::F64).await.expect("series");
        let mut tx = client.transaction();
        for i in 0..20_000i64 {
            tx.push(&handle, i, Value::F64(i as f64)).expect("push");
        }
        match tx.commit().await {
            Err(ClientError::Server { code: ErrorCode::TransactionTooLarge, .. }) => {}
            other => panic!("expected TransactionTooLarge, got {other:?}"),
        }
        assert!(stored(&engine, &key("big")).is_empty());
        // Within the budget it goes through, in several packets.
        let mut tx = client.transaction();
        for i in 0..3000i64 {
            tx.push(&handle, i, Value::F64(i as f64)).expect("push");
        }
        let stats = tx.commit().await.expect("commits");
        assert!(stats.bytes > 20_000);
        assert_eq!(stored(&engine, &key("big")).len(), 3000);
        stop(server, engine).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_checked_and_frame_by_frame_commits_store_the_same_once() {
    bounded(async {
        // (pipeline, checked_complete): one, two and three round trips per commit.
        for (pipeline, checked_complete) in [(true, true), (true, false), (false, false)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let (server, engine) = start(dir.path(), |c| {
                c.max_connection_in_flight_bytes = 64 << 10;
                c.max_frame_bytes = 32 << 10;
            })
            .await;
            let options = ClientOptions { pipeline, checked_complete, client_id: [5; 16], ..ClientOptions::default() };
            let client = Client::connect_with(server.native_addr, options).await.expect("connects");
            let pipeline = (pipeline, checked_complete);
            let handle = client.series(&key("modes"), ValueKind::F64).await.expect("series");
            let commit = |first: i64, count: i64| {
                let mut tx = client.transaction();
                for i in first..first + count {
                    tx.push(&handle, i, Value::F64(i as f64)).expect("push");
                }
                tx.commit()
            };
            let stats = commit(0, 3000).await.expect("commits");
            assert_eq!((stats.attempts, stats.points, stats.duplicate), (1, 3000, false), "pipeline {pipeline:?}");
            assert!(stats.bytes > 20_000, "several packets: {}", stats.bytes);
            assert_eq!(stats.checked_complete, checked_complete, "{pipeline:?}");
            if pipeline.0 {
                assert!(stats.create <= stats.confirm, "both count from the one write: {stats:?}");
            }
            if checked_complete {
                assert!(stats.confirm <= stats.complete, "all count from the one write: {stats:?}");
            }

            // The COMPLETED answer lost: resent whole under the same id, stored once.
            client.drop_connection_before_complete_reply(1);
            let stats = commit(3000, 100).await.expect("commits");
            assert_eq!((stats.attempts, stats.duplicate), (2, true), "pipeline {pipeline:?}");

            // Records corrupted above the frame checksum: CONFIRMED differs, cancelled, resent.
            client.corrupt_next_sends(1);
            let stats = commit(3100, 100).await.expect("commits");
            assert_eq!((stats.attempts, stats.duplicate), (2, false), "pipeline {pipeline:?}");

            // Over the connection's budget: refused and rolled back (pipelined, the frames after
            // the failed SEND are refused too), and the client goes on.
            match commit(10_000, 20_000).await {
                Err(ClientError::Server { code: ErrorCode::TransactionTooLarge, .. }) => {}
                other => panic!("pipeline {pipeline:?}: expected TransactionTooLarge, got {other:?}"),
            }
            commit(3200, 100).await.expect("commits after a refusal");

            let points = stored(&engine, &key("modes"));
            assert_eq!(points.len(), 3300, "pipeline {pipeline:?}");
            assert!(points.iter().all(|(t, v)| *v == Value::F64(*t as f64)));
            assert_eq!(written(&server), 3300, "pipeline {pipeline:?}: every point written once");
            assert_eq!(server.state.metrics.in_flight_bytes.load(Ordering::Relaxed), 0, "byte permits returned");
            drop(client);
            stop(server, engine).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_checked_stores_only_what_the_client_sent() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        // The highest common version is chosen.
        let mut raw = RawClient::connect_speaking(server.native_addr, [3; 16], "", 1..=VERSION + 5, VERSION).await;
        raw.define(1, ValueKind::F64, &key("checked")).await;
        let mut records = Vec::new();
        PointsEncoder::points(&mut records, 1, &[1, 2, 3], &sensordb_engine::ValueColumn::F64(vec![1.0, 2.0, 3.0]));
        let crc = crc32c::crc32c(&records);
        let bytes = records.len() as u64;
        let transaction = |tx: TxId, crc: u32, points: u64| {
            vec![
                Frame::Create { tx },
                Frame::Send { tx, records: records.clone().into() },
                Frame::Confirm { tx },
                Frame::CompleteChecked { tx, crc, bytes, points },
            ]
        };
        let a = TxId::from_u64(1);

        // A wrong checksum, then wrong points: CONFIRMED tells the truth, the COMPLETE is
        // refused (not fatal) and nothing is stored.
        for (wrong_crc, wrong_points) in [(crc ^ 1, 3), (crc, 4)] {
            raw.send_all(&transaction(a, wrong_crc, wrong_points)).await;
            assert!(matches!(raw.next().await, Frame::Created { tx, .. } if tx == a));
            assert_eq!(raw.next().await, Frame::Confirmed { tx: a, crc, bytes, points: 3 });
            match raw.next().await {
                Frame::Error { code: ErrorCode::ChecksumMismatch, fatal: false, tx: Some(tx), message, .. } => {
                    assert_eq!(tx, a);
                    assert!(message.contains("rolled back"), "{message}");
                }
                other => panic!("expected CHECKSUM_MISMATCH, got {other:?}"),
            }
        }
        assert!(stored(&engine, &key("checked")).is_empty());
        assert_eq!(written(&server), 0);

        // The same id again, right this time: answers in order, stored once.
        raw.send_all(&transaction(a, crc, 3)).await;
        assert!(matches!(raw.next().await, Frame::Created { tx, already_completed: false } if tx == a));
        assert_eq!(raw.next().await, Frame::Confirmed { tx: a, crc, bytes, points: 3 });
        assert_eq!(raw.next().await, Frame::Completed { tx: a, duplicate: false, points: 3 });
        // Resent whole (its answer lost, say): answered from the window, nothing written.
        raw.send_all(&transaction(a, crc, 3)).await;
        assert!(matches!(raw.next().await, Frame::Created { tx, already_completed: true } if tx == a));
        assert!(matches!(raw.next().await, Frame::Confirmed { .. }));
        assert_eq!(raw.next().await, Frame::Completed { tx: a, duplicate: true, points: 3 });
        assert_eq!(stored(&engine, &key("checked")).len(), 3);
        assert_eq!(written(&server), 3);
        assert_eq!(server.state.metrics.in_flight_bytes.load(Ordering::Relaxed), 0, "byte permits returned");

        // A version-1 connection does not know COMPLETE_CHECKED; plain COMPLETE still works.
        let mut old = RawClient::connect_speaking(server.native_addr, [4; 16], "", 1..=1, 1).await;
        old.define(1, ValueKind::F64, &key("checked_v1")).await;
        let b = TxId::from_u64(2);
        old.send_all(&[Frame::Create { tx: b }, Frame::Send { tx: b, records: records.clone().into() }, Frame::Confirm { tx: b }]).await;
        assert!(matches!(old.next().await, Frame::Created { .. }));
        assert!(matches!(old.next().await, Frame::Confirmed { .. }));
        old.send(&Frame::CompleteChecked { tx: b, crc, bytes, points: 3 }).await;
        assert!(matches!(old.next().await, Frame::Error { code: ErrorCode::UnknownFrameType, fatal: false, .. }));
        old.send(&Frame::Complete { tx: b }).await;
        assert_eq!(old.next().await, Frame::Completed { tx: b, duplicate: false, points: 3 });
        assert_eq!(stored(&engine, &key("checked_v1")).len(), 3);
        stop(server, engine).await;
    })
    .await
}

/// A client speaking frames by hand.
struct RawClient {
    stream: TcpStream,
}

impl RawClient {
    async fn connect(addr: std::net::SocketAddr, client_id: [u8; 16], token: &str) -> RawClient {
        RawClient::connect_speaking(addr, client_id, token, VERSION..=VERSION, VERSION).await
    }

    /// HELLO offering `versions`; the server must choose `expected`.
    async fn connect_speaking(
        addr: std::net::SocketAddr,
        client_id: [u8; 16],
        token: &str,
        versions: std::ops::RangeInclusive<u16>,
        expected: u16,
    ) -> RawClient {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        let hello = Frame::Hello {
            min_version: *versions.start(),
            max_version: *versions.end(),
            client_id,
            token: token.into(),
            client_name: "raw".into(),
        };
        stream.write_all(&hello.to_bytes()).await.expect("writes");
        let mut raw = RawClient { stream };
        match raw.next().await {
            Frame::HelloOk { version, .. } => assert_eq!(version, expected, "offered {versions:?}"),
            other => panic!("expected HELLO_OK, got {other:?}"),
        }
        raw
    }

    /// Writes all `frames` with one write.
    async fn send_all(&mut self, frames: &[Frame]) {
        let mut bytes = Vec::new();
        for frame in frames {
            frame.encode(&mut bytes);
        }
        self.stream.write_all(&bytes).await.expect("writes");
    }

    async fn send(&mut self, frame: &Frame) {
        self.stream.write_all(&frame.to_bytes()).await.expect("writes");
    }

    async fn next(&mut self) -> Frame {
        tokio::time::timeout(Duration::from_secs(10), read_frame(&mut self.stream, u32::MAX))
            .await
            .expect("an answer in time")
            .expect("a valid frame")
            .expect("not the end of the stream")
    }

    async fn define(&mut self, short_id: u32, kind: ValueKind, key: &SeriesKey) {
        self.send(&Frame::DefineSeries { short_id, kind, key: key.canonical() }).await;
        assert!(matches!(self.next().await, Frame::SeriesOk { short_id: s, .. } if s == short_id));
    }

    async fn send_points(&mut self, tx: TxId, short_id: u32, timestamps: &[i64], values: &[f64]) {
        let mut records = Vec::new();
        PointsEncoder::points(&mut records, short_id, timestamps, &sensordb_engine::ValueColumn::F64(values.to_vec()));
        self.send(&Frame::Send { tx, records: records.into() }).await;
    }
}

/// A server whose engine follows the config's disk-usage thresholds, counting sensordb's own
/// bytes only (the host disk's must not throttle tests).
async fn start_with_disk_policy(dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> (RunningServer, Arc<Engine>) {
    let config = config(dir, tweak);
    let mut options = config.engine_options();
    options.reclaim.file_system_usage = false;
    let engine = Arc::new(Engine::open(dir, options).expect("engine opens"));
    let server = Server::start(config, engine.clone()).await.expect("server starts");
    (server, engine)
}

/// Between the throttle thresholds the committer's COMPLETED waits out the delay (on the
/// runtime, not on the committer's thread) and the transaction is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_acknowledgements_are_delayed_between_the_throttle_thresholds() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start_with_disk_policy(dir.path(), |c| {
            c.capacity_bytes = Some(1 << 20);
            c.disk_target_usage = 1e-9;
            c.throttle_low_usage = 2e-9;
            c.throttle_high_usage = 1.0;
            c.evict_oldest_when_full = false;
        })
        .await;
        let client = Client::connect(server.native_addr, "").await.expect("connects");
        let series = client.series(&key("throttled"), ValueKind::F64).await.expect("series");
        for t in 0..3 {
            let mut tx = client.transaction();
            tx.push(&series, t, Value::F64(t as f64)).expect("push");
            tx.commit().await.expect("a throttled transaction commits");
        }
        let delayed = server.state.metrics.throttle_delay_us.load(Ordering::Relaxed);
        assert!(delayed > 0, "an acknowledgement was delayed");
        assert_eq!(stored(&engine, &key("throttled")).len(), 3);
        assert_eq!(server.state.metrics.native_transactions_completed.load(Ordering::Relaxed), 3);
        stop(server, engine).await;
    })
    .await
}

/// At `U_h` a COMPLETE waits for space, then fails with NO_SPACE (nothing of it stored), and the
/// connection and the server go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_on_a_full_disk_waits_then_fails_with_no_space() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start_with_disk_policy(dir.path(), |c| {
            c.capacity_bytes = Some(4096);
            c.disk_target_usage = 0.0001;
            c.throttle_low_usage = 0.0002;
            c.throttle_high_usage = 0.0003;
            c.evict_oldest_when_full = false;
            c.full_wait_max_ms = 300;
        })
        .await;
        let client = Client::connect(server.native_addr, "").await.expect("connects");
        let series = client.series(&key("full"), ValueKind::F64).await.expect("series");
        // The first finds the store empty enough, or waits and fails: either way, once anything
        // is stored, usage is over U_h.
        let mut first = client.transaction();
        first.push(&series, 1, Value::F64(1.0)).expect("push");
        let _ = first.commit().await;
        let before = stored(&engine, &key("full")).len();
        assert!(before <= 1);
        let started = std::time::Instant::now();
        let mut refused = client.transaction();
        refused.push(&series, 2, Value::F64(2.0)).expect("push");
        match refused.commit().await {
            Err(ClientError::Server { code: ErrorCode::NoSpace, message }) => assert!(message.contains("not stored"), "{message}"),
            other => panic!("expected NO_SPACE, got {other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(300), "the COMPLETE waited for space first");
        assert_eq!(stored(&engine, &key("full")).len(), before, "nothing of the refused transaction is stored");
        // The same connection still answers.
        client.series(&key("other"), ValueKind::F64).await.expect("the connection goes on");
        stop(server, engine).await;
    })
    .await
}
