//! Hostile and unlucky native clients over real sockets on 127.0.0.1: connections without a
//! token announcing huge frames, connections that never finish HELLO, and a writer the server
//! itself holds back (byte permits) longer than the idle timeout. Every test is bounded in time.

use sensordb_client::{Client, ErrorCode, TxId};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, ValueKind};
use sensordb_protocol::frame::{read_frame, Frame, FrameType, HEADER_LEN, HELLO_BODY_MAX, VERSION};
use sensordb_protocol::points::PointsEncoder;
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_secs(60);

async fn start(dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> (RunningServer, Arc<Engine>) {
    let mut config = ServerConfig {
        data_dir: dir.to_path_buf(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerConfig::default()
    };
    tweak(&mut config);
    let engine = Arc::new(Engine::open(dir, EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine opens"));
    let server = Server::start(config, engine.clone()).await.expect("server starts");
    (server, engine)
}

async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.expect("test finished in time")
}

/// A frame header announcing a body of `len` bytes of type `frame_type` (the body never comes).
fn header_only(frame_type: FrameType, len: u32) -> Vec<u8> {
    let mut header = vec![0u8; HEADER_LEN];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4] = frame_type as u8;
    header
}

fn hello(client_id: u8) -> Frame {
    Frame::Hello {
        min_version: 1,
        max_version: VERSION,
        client_id: [client_id; 16],
        token: String::new(),
        client_name: "hostile test".into(),
    }
}

fn points(short_id: u32, timestamps: &[i64]) -> bytes::Bytes {
    let mut records = Vec::new();
    let values = timestamps.iter().map(|&t| t as f64).collect();
    PointsEncoder::points(&mut records, short_id, timestamps, &sensordb_engine::ValueColumn::F64(values));
    records.into()
}

/// The next frame within `within`; `None` when none came in time. Panics at the end of the
/// stream or on a bad frame.
async fn next_within(stream: &mut TcpStream, within: Duration) -> Option<Frame> {
    let read = tokio::time::timeout(within, read_frame(stream, u32::MAX)).await.ok()?;
    Some(read.expect("a valid frame").expect("not the end of the stream"))
}

async fn send(stream: &mut TcpStream, frames: &[Frame]) {
    let mut bytes = Vec::new();
    for frame in frames {
        frame.encode(&mut bytes);
    }
    stream.write_all(&bytes).await.expect("writes");
}

/// The answers up to and including a COMPLETED or an ERROR (at most 100).
async fn answers_until_completed(stream: &mut TcpStream) -> Vec<Frame> {
    let mut answers = Vec::new();
    while answers.len() < 100 {
        let Some(frame) = next_within(stream, Duration::from_secs(10)).await else { break };
        let done = matches!(frame, Frame::Completed { .. } | Frame::Error { .. });
        answers.push(frame);
        if done {
            break;
        }
    }
    answers
}

/// A raw connection past HELLO with series 1 defined.
async fn handshaken(addr: std::net::SocketAddr, client_id: u8, key: &SeriesKey) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    send(&mut stream, &[hello(client_id), Frame::DefineSeries { short_id: 1, kind: ValueKind::F64, key: key.canonical() }]).await;
    assert!(matches!(next_within(&mut stream, Duration::from_secs(10)).await, Some(Frame::HelloOk { .. })));
    assert!(matches!(next_within(&mut stream, Duration::from_secs(10)).await, Some(Frame::SeriesOk { short_id: 1, .. })));
    stream
}

/// Issue 13, item 9: sixteen connections without a token each announce a 16 MiB frame (with
/// the default limits, all of `max_in_flight_bytes` together). Each is refused at once without
/// its body being waited for, and an authenticated writer goes on being acknowledged promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_hello_announcing_huge_frames_do_not_stall_writers() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        // Attackers holding permits would hold them until this idle timeout closes them: far
        // longer than a prompt acknowledgement.
        let (server, _engine) = start(dir.path(), |c| c.idle_timeout_ms = 5000).await;
        let addr = server.native_addr;
        assert_eq!(server.state.config.max_in_flight_bytes, 16 * server.state.config.max_frame_bytes);
        let victim = Client::connect(addr, "").await.expect("connects");
        let series = victim.series(&SeriesKey::new("victim", [("n", "1")], "v").expect("key"), ValueKind::F64).await.expect("series");
        let mut attackers = Vec::new();
        for _ in 0..16 {
            let mut stream = TcpStream::connect(addr).await.expect("connects");
            stream.write_all(&header_only(FrameType::Send, 16 << 20)).await.expect("writes");
            attackers.push(stream);
        }
        // Give the reader tasks time to take whatever permits they would take.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for round in 0..3i64 {
            let mut tx = victim.transaction();
            tx.push(&series, round, sensordb_engine::Value::F64(round as f64)).expect("push");
            let started = Instant::now();
            let stats = tokio::time::timeout(Duration::from_secs(20), tx.commit()).await.expect("acknowledged").expect("commits");
            assert_eq!(stats.points, 1);
            assert!(started.elapsed() < Duration::from_secs(2), "round {round} took {:?}", started.elapsed());
        }
        for mut attacker in attackers {
            match next_within(&mut attacker, Duration::from_secs(5)).await {
                Some(Frame::Error { code: ErrorCode::FrameTooLarge, fatal: true, message, .. }) => {
                    assert!(message.contains("before a successful HELLO"), "{message}");
                }
                other => panic!("expected a fatal FRAME_TOO_LARGE, got {other:?}"),
            }
            assert!(matches!(read_frame(&mut attacker, u32::MAX).await, Ok(None)), "closed after the error");
        }
        assert_eq!(server.state.in_flight_bytes.available_permits(), server.state.config.max_in_flight_bytes);
        server.shutdown().await;
    })
    .await
}

/// A connection that never completes HELLO is closed after `hello_timeout_ms`, whether it sends
/// nothing or stalls inside a HELLO-sized frame (whose handshake permits go back); the idle
/// timeout is far longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_successful_hello_is_closed_after_the_hello_timeout() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _engine) = start(dir.path(), |c| c.hello_timeout_ms = 400).await;
        assert_eq!(server.state.config.idle_timeout_ms, 60_000);
        let addr = server.native_addr;
        let mut silent = TcpStream::connect(addr).await.expect("connects");
        let mut stalled = TcpStream::connect(addr).await.expect("connects");
        stalled.write_all(&header_only(FrameType::Hello, HELLO_BODY_MAX)).await.expect("writes");
        stalled.write_all(b"SDBN").await.expect("writes");
        let started = Instant::now();
        for stream in [&mut silent, &mut stalled] {
            match next_within(stream, Duration::from_secs(10)).await {
                Some(Frame::Error { code: ErrorCode::IdleTimeout, fatal: true, message, .. }) => {
                    assert!(message.contains("HELLO"), "{message}")
                }
                other => panic!("expected a fatal IDLE_TIMEOUT, got {other:?}"),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5), "closed after {:?}", started.elapsed());
        assert_eq!(server.state.metrics.native_hello_timeouts.load(Ordering::Relaxed), 2);
        // The stalled frame's handshake permits are given back once its reader is gone.
        for _ in 0..100 {
            if server.state.handshake_bytes.available_permits() == sensordb_server::state::HANDSHAKE_BYTES {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(server.state.handshake_bytes.available_permits(), sensordb_server::state::HANDSHAKE_BYTES);
        assert_eq!(server.state.in_flight_bytes.available_permits(), server.state.config.max_in_flight_bytes, "never taken");
        // A client that says HELLO in time stays past the HELLO timeout.
        let mut good = handshaken(addr, 9, &SeriesKey::new("m", [("n", "1")], "v").expect("key")).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        send(&mut good, &[Frame::Ping { nonce: 5 }]).await;
        assert_eq!(next_within(&mut good, Duration::from_secs(5)).await, Some(Frame::Pong { nonce: 5 }));
        server.shutdown().await;
    })
    .await
}

/// Frames pipelined behind a good HELLO, longer than any HELLO, are read once the HELLO is
/// answered, as those of an authenticated connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_frame_pipelined_behind_a_good_hello_is_accepted() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |_| {}).await;
        let key = SeriesKey::new("m", [("n", "1")], "v").expect("key");
        let mut stream = TcpStream::connect(server.native_addr).await.expect("connects");
        let tx = TxId::from_u64(1);
        let timestamps: Vec<i64> = (0..30_000).collect();
        let records = points(1, &timestamps);
        assert!(records.len() > HELLO_BODY_MAX as usize, "{} bytes", records.len());
        send(
            &mut stream,
            &[
                hello(4),
                Frame::DefineSeries { short_id: 1, kind: ValueKind::F64, key: key.canonical() },
                Frame::Create { tx },
                Frame::Send { tx, records },
                Frame::Confirm { tx },
                Frame::Complete { tx },
            ],
        )
        .await;
        let answers = answers_until_completed(&mut stream).await;
        assert!(matches!(answers.last(), Some(Frame::Completed { points: 30_000, .. })), "{answers:?}");
        let id = engine.find_series(&key).expect("series");
        assert_eq!(engine.read(id, i64::MIN, i64::MAX).points().count(), 30_000);
        server.shutdown().await;
    })
    .await
}

/// While the server holds a writer back (its frame waits for byte permits another connection
/// holds), the writer's idle clock does not run: it is not closed with IDLE_TIMEOUT, and its
/// frame is answered once the permits come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_held_back_for_permits_is_not_idle() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _engine) = start(dir.path(), |c| {
            c.max_in_flight_bytes = 1 << 20;
            c.max_connection_in_flight_bytes = 1 << 20;
            c.max_frame_bytes = 1 << 20;
            c.idle_timeout_ms = 300;
        })
        .await;
        let addr = server.native_addr;
        let key = SeriesKey::new("m", [("n", "1")], "v").expect("key");
        let mut victim = handshaken(addr, 1, &key).await;
        // The hog holds every permit: an open transaction (so it is not idle itself) and a SEND
        // announcing 1 MiB of which only a few bytes come.
        let mut hog = handshaken(addr, 2, &key).await;
        send(&mut hog, &[Frame::Create { tx: TxId::from_u64(1) }]).await;
        assert!(matches!(next_within(&mut hog, Duration::from_secs(5)).await, Some(Frame::Created { .. })));
        hog.write_all(&header_only(FrameType::Send, 1 << 20)).await.expect("writes");
        hog.write_all(&[0u8; 100]).await.expect("writes");
        for _ in 0..100 {
            if server.state.in_flight_bytes.available_permits() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(server.state.in_flight_bytes.available_permits(), 0, "the hog holds every permit");
        // The victim's CREATE waits for permits, four idle timeouts long.
        let tx = TxId::from_u64(7);
        send(&mut victim, &[Frame::Create { tx }]).await;
        let early = next_within(&mut victim, Duration::from_millis(1200)).await;
        assert_eq!(early, None, "nothing while held back (an IDLE_TIMEOUT would be a bug)");
        drop(hog);
        assert!(matches!(next_within(&mut victim, Duration::from_secs(5)).await, Some(Frame::Created { tx: t, .. }) if t == tx));
        send(&mut victim, &[Frame::Send { tx, records: points(1, &[1, 2, 3]) }, Frame::Confirm { tx }, Frame::Complete { tx }]).await;
        let answers = answers_until_completed(&mut victim).await;
        assert!(matches!(answers.last(), Some(Frame::Completed { points: 3, .. })), "{answers:?}");
        assert_eq!(server.state.metrics.connections_closed_idle.load(Ordering::Relaxed), 0);
        server.shutdown().await;
    })
    .await
}

/// Issue 13, item 11 on the native protocol: DEFINE_SERIES of a new series in a database at
/// `max_series_per_database` is answered with a non-fatal SERIES_LIMIT_EXCEEDED naming the short
/// id; known series still define and take points, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn define_series_beyond_the_database_limit_is_refused_with_its_code() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path(), |c| c.max_series_per_database = 2).await;
        let key = |name: &str| SeriesKey::new("m", [("n", name)], "v").expect("key");
        let mut stream = handshaken(server.native_addr, 1, &key("a")).await;
        let define = |short_id: u32, name: &str| Frame::DefineSeries { short_id, kind: ValueKind::F64, key: key(name).canonical() };
        send(&mut stream, &[define(2, "b"), define(3, "c"), define(4, "a")]).await;
        assert!(matches!(next_within(&mut stream, Duration::from_secs(5)).await, Some(Frame::SeriesOk { short_id: 2, .. })));
        match next_within(&mut stream, Duration::from_secs(5)).await {
            Some(Frame::Error { code: ErrorCode::SeriesLimitExceeded, fatal: false, context: 3, message, .. }) => {
                assert!(message.contains("max-series-per-database limit exceeded: (2)"), "{message}")
            }
            other => panic!("expected SERIES_LIMIT_EXCEEDED for short id 3, got {other:?}"),
        }
        assert!(matches!(next_within(&mut stream, Duration::from_secs(5)).await, Some(Frame::SeriesOk { short_id: 4, .. })));
        let tx = TxId::from_u64(1);
        send(
            &mut stream,
            &[Frame::Create { tx }, Frame::Send { tx, records: points(2, &[1, 2]) }, Frame::Confirm { tx }, Frame::Complete { tx }],
        )
        .await;
        let answers = answers_until_completed(&mut stream).await;
        assert!(matches!(answers.last(), Some(Frame::Completed { points: 2, .. })), "{answers:?}");
        assert_eq!(engine.series_in_database(sensordb_engine::DEFAULT_DATABASE), 2);
        assert_eq!(engine.find_series(&key("c")), None);
        server.shutdown().await;
    })
    .await
}
