//! The native protocol's exact wire behaviour against docs/PROTOCOL.md, over real sockets on
//! 127.0.0.1 (issue 13, item 12): a malformed HELLO, the per-code table of what an ERROR leaves
//! of its transaction, the order of one transaction's answers, the context of a refused
//! DEFINE_SERIES, bool bytes other than 0/1, overflowing timestamp deltas, and (version 3) the
//! frame type an ERROR answers. Every test is bounded in time.

use sensordb_client::{ErrorCode, TxId};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueColumn, ValueKind};
use sensordb_protocol::frame::{read_frame, Frame, FrameType, HEADER_LEN, VERSION};
use sensordb_protocol::points::PointsEncoder;
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

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

async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.expect("test finished in time")
}

fn key(name: &str) -> SeriesKey {
    SeriesKey::new("wire", [("probe", name)], "value").expect("key")
}

fn stored(engine: &Engine, key: &SeriesKey) -> Vec<(i64, Value)> {
    let Some(id) = engine.find_series(key) else { return Vec::new() };
    engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.expect("reads")).map(|p| (p.timestamp, p.value)).collect()
}

/// A frame of `frame_type` around `body` exactly as given, with a valid checksum.
fn raw_frame(frame_type: FrameType, body: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; HEADER_LEN];
    frame[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    frame[4] = frame_type as u8;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[..8]), body);
    frame[8..12].copy_from_slice(&crc.to_le_bytes());
    frame.extend_from_slice(body);
    frame
}

/// SEND of raw `records` for `tx`.
fn send_frame(tx: TxId, records: &[u8]) -> Frame {
    Frame::Send { tx, records: bytes::Bytes::copy_from_slice(records) }
}

struct RawClient {
    stream: TcpStream,
}

impl RawClient {
    async fn connect(addr: std::net::SocketAddr, max_version: u16) -> RawClient {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        let hello = Frame::Hello { min_version: 1, max_version, client_id: [7; 16], token: String::new(), client_name: "wire".into() };
        stream.write_all(&hello.to_bytes()).await.expect("writes");
        let mut raw = RawClient { stream };
        match raw.next().await {
            Frame::HelloOk { version, .. } => assert_eq!(version, max_version.min(VERSION)),
            other => panic!("expected HELLO_OK, got {other:?}"),
        }
        raw
    }

    async fn send_all(&mut self, frames: &[Frame]) {
        let mut bytes = Vec::new();
        for frame in frames {
            frame.encode(&mut bytes);
        }
        self.stream.write_all(&bytes).await.expect("writes");
    }

    async fn next(&mut self) -> Frame {
        tokio::time::timeout(Duration::from_secs(10), read_frame(&mut self.stream, u32::MAX))
            .await
            .expect("an answer in time")
            .expect("a valid frame")
            .expect("not the end of the stream")
    }

    async fn define(&mut self, short_id: u32, kind: ValueKind, key: &SeriesKey) {
        self.send_all(&[Frame::DefineSeries { short_id, kind, key: key.canonical() }]).await;
        assert!(matches!(self.next().await, Frame::SeriesOk { short_id: s, .. } if s == short_id));
    }

    /// CREATE and a SEND of `records` that the server refuses: the answer to the SEND (CREATED
    /// checked before it).
    async fn refused_send(&mut self, tx: TxId, records: &[u8]) -> Frame {
        self.send_all(&[Frame::Create { tx }, send_frame(tx, records)]).await;
        assert!(matches!(self.next().await, Frame::Created { .. }));
        self.next().await
    }

    /// PING and its PONG: the connection still serves.
    async fn still_serves(&mut self) {
        self.send_all(&[Frame::Ping { nonce: 77 }]).await;
        assert_eq!(self.next().await, Frame::Pong { nonce: 77 });
    }
}

/// Appends `value` zigzag-mapped as an unsigned LEB128 varint (the records' encoding).
fn put_zigzag(out: &mut Vec<u8>, value: i64) {
    let mut rest = ((value << 1) ^ (value >> 63)) as u64;
    while rest >= 0x80 {
        out.push(rest as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn points(short_id: u32, timestamps: &[i64], values: ValueColumn) -> Vec<u8> {
    let mut records = Vec::new();
    PointsEncoder::points(&mut records, short_id, timestamps, &values);
    records
}

/// Found by the issue 13 review: a HELLO that did not decode was answered with a non-fatal
/// MALFORMED and the unauthenticated connection stayed open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_hello_is_refused_fatally_and_closed() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _engine) = start(dir.path()).await;
        for body in [b"XXXX\x01\x00\x02\x00".to_vec(), b"SDBN\x01\x00".to_vec()] {
            let mut stream = TcpStream::connect(server.native_addr).await.expect("connects");
            stream.write_all(&raw_frame(FrameType::Hello, &body)).await.expect("writes");
            let answer = read_frame(&mut stream, u32::MAX).await.expect("a frame").expect("an answer");
            assert!(matches!(answer, Frame::Error { code: ErrorCode::Malformed, fatal: true, .. }), "{answer:?}");
            let end = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, u32::MAX)).await.expect("closed in time");
            assert!(matches!(end, Ok(None)), "the connection is closed after the fatal ERROR: {end:?}");
        }
        server.shutdown().await;
    })
    .await
}

/// The rows of PROTOCOL.md's table that leave a transaction open: a second CREATE of an open
/// id (DUPLICATE_TRANSACTION) and COMPLETE before CONFIRM (WRONG_STATE) leave the first CREATE's
/// transaction as it was, and it completes with its points.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_create_and_early_complete_leave_the_transaction_open() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        raw.define(1, ValueKind::F64, &key("open")).await;
        let tx = TxId::from_u64(1);
        raw.send_all(&[
            Frame::Create { tx },
            send_frame(tx, &points(1, &[1], ValueColumn::F64(vec![1.0]))),
            Frame::Create { tx },
            Frame::Complete { tx },
            send_frame(tx, &points(1, &[2], ValueColumn::F64(vec![2.0]))),
            Frame::Confirm { tx },
            Frame::Complete { tx },
        ])
        .await;
        assert!(matches!(raw.next().await, Frame::Created { .. }));
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::DuplicateTransaction, fatal: false, .. }));
        assert!(matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, fatal: false, .. }));
        assert!(matches!(raw.next().await, Frame::Confirmed { points: 2, .. }), "both SENDs are in the transaction");
        assert_eq!(raw.next().await, Frame::Completed { tx, duplicate: false, points: 2 });
        assert_eq!(stored(&engine, &key("open")), vec![(1, Value::F64(1.0)), (2, Value::F64(2.0))]);
        server.shutdown().await;
    })
    .await
}

/// Found by the issue 13 review: a CANCEL pipelined behind its transaction's COMPLETE was
/// answered (WRONG_STATE) before the CREATED, CONFIRMED and COMPLETED of the frames before it.
/// The transaction is large enough to be written by a task of its own, so its COMPLETED comes
/// well after the CANCEL is handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_behind_complete_is_answered_after_the_completion() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        raw.define(1, ValueKind::F64, &key("cancel")).await;
        let tx = TxId::from_u64(2);
        let timestamps: Vec<i64> = (0..20_000).collect();
        let values = ValueColumn::F64(timestamps.iter().map(|&t| t as f64).collect());
        raw.send_all(&[
            Frame::Create { tx },
            send_frame(tx, &points(1, &timestamps, values)),
            Frame::Confirm { tx },
            Frame::Complete { tx },
            Frame::Cancel { tx },
            Frame::Create { tx },
        ])
        .await;
        let answers = [raw.next().await, raw.next().await, raw.next().await, raw.next().await, raw.next().await];
        let kinds: Vec<FrameType> = answers.iter().map(Frame::frame_type).collect();
        assert_eq!(
            kinds,
            [FrameType::Created, FrameType::Confirmed, FrameType::Completed, FrameType::Error, FrameType::Error],
            "answers of one transaction in the order of its frames: {answers:?}"
        );
        assert!(matches!(answers[3], Frame::Error { code: ErrorCode::WrongState, .. }), "CANCEL while completing: {:?}", answers[3]);
        assert!(
            matches!(answers[4], Frame::Error { code: ErrorCode::DuplicateTransaction, .. }),
            "CREATE while completing: {:?}",
            answers[4]
        );
        assert_eq!(stored(&engine, &key("cancel")).len(), 20_000, "the CANCEL did not undo the COMPLETE");
        raw.still_serves().await;
        server.shutdown().await;
    })
    .await
}

/// Found by the issue 13 review: a DEFINE_SERIES whose body does not decode (an unknown kind,
/// a key that is not UTF-8) was refused with `context` 0, so a client could not tell which of
/// its definitions failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_define_series_names_its_short_id() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        let mut unknown_kind = 41u32.to_le_bytes().to_vec();
        unknown_kind.push(9);
        unknown_kind.extend_from_slice(&3u16.to_le_bytes());
        unknown_kind.extend_from_slice(b"m f");
        let mut not_utf8 = 42u32.to_le_bytes().to_vec();
        not_utf8.push(ValueKind::F64 as u8);
        not_utf8.extend_from_slice(&3u16.to_le_bytes());
        not_utf8.extend_from_slice(b"m \xff");
        for (short_id, body) in [(41, unknown_kind), (42, not_utf8)] {
            raw.stream.write_all(&raw_frame(FrameType::DefineSeries, &body)).await.expect("writes");
            let answer = raw.next().await;
            assert!(
                matches!(answer, Frame::Error { code: ErrorCode::Malformed, fatal: false, tx: None, context, .. } if context == short_id),
                "{answer:?}"
            );
        }
        raw.define(43, ValueKind::F64, &key("fine")).await;
        server.shutdown().await;
    })
    .await
}

/// Found by the issue 13 review: bool bytes 2 and 255 were stored as true. Anything but 0 and 1
/// is MALFORMED (the transaction rolled back, the connection and server go on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bool_bytes_other_than_0_and_1_are_refused() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        raw.define(1, ValueKind::Bool, &key("flag")).await;
        for (n, byte) in [2u8, 255].into_iter().enumerate() {
            let tx = TxId::from_u64(10 + n as u64);
            let mut records = points(1, &[5, 6], ValueColumn::Bool(vec![false, false]));
            *records.last_mut().expect("a value byte") = byte;
            let refused = raw.refused_send(tx, &records).await;
            assert!(
                matches!(&refused, Frame::Error { code: ErrorCode::Malformed, fatal: false, message, .. } if message.contains("bool")),
                "{refused:?}"
            );
            raw.send_all(&[Frame::Confirm { tx }]).await;
            assert!(
                matches!(raw.next().await, Frame::Error { code: ErrorCode::WrongState, .. }),
                "rolled back: CONFIRM finds nothing open"
            );
        }
        raw.still_serves().await;
        assert!(stored(&engine, &key("flag")).is_empty());
        server.shutdown().await;
    })
    .await
}

/// Found by the issue 13 review: a timestamp delta that overflows i64 wrapped around silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_timestamp_deltas_are_refused() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        raw.define(1, ValueKind::I64, &key("overflow")).await;
        // POINTS, short id 1, 2 points: i64::MAX - 1, then a delta of +5.
        let mut records = vec![1u8, 1, 2];
        put_zigzag(&mut records, i64::MAX - 1);
        put_zigzag(&mut records, 5);
        records.extend_from_slice(&[0, 0]);
        let refused = raw.refused_send(TxId::from_u64(20), &records).await;
        assert!(
            matches!(&refused, Frame::Error { code: ErrorCode::Malformed, message, .. } if message.contains("overflow")),
            "{refused:?}"
        );
        raw.still_serves().await;
        assert!(stored(&engine, &key("overflow")).is_empty());
        server.shutdown().await;
    })
    .await
}

/// A point at `i64::MAX` was stored where no read reaches (reads end before it). Timestamps
/// outside `i64::MIN + 2 ..= i64::MAX - 1` are MALFORMED, as in the line protocol; the ends of
/// that range are stored and read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_no_read_reaches_are_refused() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, engine) = start(dir.path()).await;
        let mut raw = RawClient::connect(server.native_addr, VERSION).await;
        raw.define(1, ValueKind::I64, &key("edges")).await;
        for (n, timestamp) in [i64::MAX, i64::MIN, i64::MIN + 1].into_iter().enumerate() {
            let refused = raw.refused_send(TxId::from_u64(40 + n as u64), &points(1, &[timestamp], ValueColumn::I64(vec![1]))).await;
            assert!(
                matches!(&refused, Frame::Error { code: ErrorCode::Malformed, fatal: false, message, .. } if message.contains("out of range")),
                "{timestamp}: {refused:?}"
            );
        }
        let tx = TxId::from_u64(50);
        let edges = [i64::MIN + 2, i64::MAX - 1];
        raw.send_all(&[
            Frame::Create { tx },
            send_frame(tx, &points(1, &edges, ValueColumn::I64(vec![1, 2]))),
            Frame::Confirm { tx },
            Frame::Complete { tx },
        ])
        .await;
        assert!(matches!(raw.next().await, Frame::Created { .. }));
        assert!(matches!(raw.next().await, Frame::Confirmed { points: 2, .. }));
        assert_eq!(raw.next().await, Frame::Completed { tx, duplicate: false, points: 2 });
        assert_eq!(stored(&engine, &key("edges")), vec![(i64::MIN + 2, Value::I64(1)), (i64::MAX - 1, Value::I64(2))]);
        server.shutdown().await;
    })
    .await
}

/// Version 3: an ERROR naming a transaction carries the type of the frame it answers, so a
/// client that pipelined a transaction knows which answer is the last (PROTOCOL.md, "Answers
/// of a transaction"). Under version 2 the same ERRORs carry 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_frame_they_answer_from_version_3() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _engine) = start(dir.path()).await;
        for version in [2u16, 3] {
            let mut raw = RawClient::connect(server.native_addr, version).await;
            raw.define(1, ValueKind::F64, &key("answers")).await;
            let tx = TxId::from_u64(30);
            let good = points(1, &[1], ValueColumn::F64(vec![1.0]));
            let unknown = points(99, &[1], ValueColumn::F64(vec![1.0]));
            raw.send_all(&[
                Frame::Create { tx },
                send_frame(tx, &good),
                Frame::Complete { tx },
                send_frame(tx, &unknown),
                send_frame(tx, &good),
                Frame::Confirm { tx },
                Frame::Complete { tx },
            ])
            .await;
            assert!(matches!(raw.next().await, Frame::Created { .. }));
            let mut contexts = Vec::new();
            for _ in 0..5 {
                match raw.next().await {
                    Frame::Error { tx: Some(id), context, .. } if id == tx => contexts.push(context),
                    other => panic!("version {version}: {other:?}"),
                }
            }
            let expected: Vec<u32> = if version >= 3 {
                [FrameType::Complete, FrameType::Send, FrameType::Send, FrameType::Confirm, FrameType::Complete]
                    .iter()
                    .map(|&t| u32::from(t as u8))
                    .collect()
            } else {
                vec![0; 5]
            };
            assert_eq!(contexts, expected, "version {version}");
            raw.still_serves().await;
        }
        server.shutdown().await;
    })
    .await
}
