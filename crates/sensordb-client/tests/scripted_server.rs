//! The client against a scripted server on loopback: a version-1 server (no COMPLETE_CHECKED,
//! two round trips), answers that arrive a byte at a time (the reader reassembles frames across
//! reads), and an answer that never comes (the commit times out).

use sensordb_client::{Client, ClientError, ClientOptions};
use sensordb_model::{SeriesKey, Value, ValueKind};
use sensordb_protocol::frame::{read_frame, Frame, TxId};
use sensordb_protocol::points::{PointRecord, PointsDecoder};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

#[derive(Clone, Copy)]
struct Script {
    version: u16,
    /// Write every answer one byte at a time.
    bytewise: bool,
    /// Never answer COMPLETE or COMPLETE_CHECKED.
    silent_complete: bool,
}

/// Starts the server; returns its address and the types of the frames it received.
async fn serve(script: Script) -> (std::net::SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else { return };
        let (mut read, mut write) = stream.into_split();
        // Per transaction: CRC32C, bytes and points of its SENDs.
        let mut sums: HashMap<TxId, (u32, u64, u64)> = HashMap::new();
        while let Ok(Some(frame)) = read_frame(&mut read, u32::MAX).await {
            log.lock().expect("log").push(frame.frame_type() as u8);
            let answer = match frame {
                Frame::Hello { .. } => Some(Frame::HelloOk {
                    version: script.version,
                    max_frame_bytes: 1 << 20,
                    max_transaction_bytes: 1 << 30,
                    transaction_timeout_ms: 30_000,
                    server: "scripted".into(),
                }),
                Frame::DefineSeries { short_id, .. } => Some(Frame::SeriesOk { short_id, series_id: short_id }),
                Frame::Create { tx } => {
                    sums.insert(tx, (0, 0, 0));
                    Some(Frame::Created { tx, already_completed: false })
                }
                Frame::Send { tx, records } => {
                    let sum = sums.entry(tx).or_default();
                    sum.0 = crc32c::crc32c_append(sum.0, &records);
                    sum.1 += records.len() as u64;
                    let mut decoder = PointsDecoder::new(records);
                    while let Some(record) = decoder.next_record(|_| Some(ValueKind::F64)) {
                        if let Ok(PointRecord::Points { timestamps, .. }) = record {
                            sum.2 += timestamps.len() as u64;
                        }
                    }
                    None
                }
                Frame::Confirm { tx } => {
                    let (crc, bytes, points) = sums.get(&tx).copied().unwrap_or_default();
                    Some(Frame::Confirmed { tx, crc, bytes, points })
                }
                Frame::Complete { tx } | Frame::CompleteChecked { tx, .. } | Frame::CompleteFirst { tx, .. } if !script.silent_complete => {
                    let points = sums.get(&tx).map_or(0, |sum| sum.2);
                    Some(Frame::Completed { tx, duplicate: false, points })
                }
                _ => None,
            };
            if let Some(answer) = answer {
                let bytes = answer.to_bytes();
                if script.bytewise {
                    for byte in bytes {
                        if write.write_all(&[byte]).await.is_err() {
                            return;
                        }
                        write.flush().await.ok();
                        tokio::task::yield_now().await;
                    }
                } else if write.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        }
    });
    (addr, seen)
}

async fn commit(addr: std::net::SocketAddr, timeout: Duration) -> Result<sensordb_client::TxStats, ClientError> {
    let options = ClientOptions { max_attempts: 1, reply_timeout: timeout, ..ClientOptions::default() };
    let client = Client::connect_with(addr, options).await?;
    let key = SeriesKey::new("scripted", [("n", "1")], "value").expect("key");
    let series = client.series(&key, ValueKind::F64).await?;
    let mut tx = client.transaction();
    for i in 0..40 {
        tx.push(&series, 1_000 + i, Value::F64(i as f64))?;
    }
    tx.commit().await
}

const COMPLETE: u8 = 0x06;
const COMPLETE_CHECKED: u8 = 0x09;
const COMPLETE_FIRST: u8 = 0x0B;

#[tokio::test]
async fn a_version_1_server_gets_complete_after_confirmed() {
    let (addr, seen) = serve(Script { version: 1, bytewise: false, silent_complete: false }).await;
    let stats = commit(addr, Duration::from_secs(10)).await.expect("commit");
    assert!(!stats.checked_complete);
    assert_eq!(stats.points, 40);
    let seen = seen.lock().expect("log").clone();
    assert!(seen.contains(&COMPLETE) && !seen.contains(&COMPLETE_CHECKED), "{seen:x?}");
}

#[tokio::test]
async fn answers_arriving_a_byte_at_a_time_are_reassembled() {
    for version in [1, 2] {
        let (addr, seen) = serve(Script { version, bytewise: true, silent_complete: false }).await;
        let stats = commit(addr, Duration::from_secs(10)).await.expect("commit");
        assert_eq!(stats.checked_complete, version == 2);
        assert_eq!(stats.points, 40);
        assert_eq!(seen.lock().expect("log").contains(&COMPLETE_CHECKED), version == 2);
    }
}

#[tokio::test]
async fn an_unanswered_complete_times_out() {
    for version in [1, 2] {
        let (addr, _) = serve(Script { version, bytewise: false, silent_complete: true }).await;
        let started = std::time::Instant::now();
        let error = commit(addr, Duration::from_millis(300)).await.expect_err("no COMPLETED");
        assert!(matches!(error, ClientError::Timeout("COMPLETED")), "{error:?}");
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
}

/// The client offers protocol version 3 (ERRORs name the frame they answer) and commits with
/// COMPLETE_CHECKED under it, as under version 2 (version 4's COMPLETE_FIRST only to a version-4
/// server).
#[tokio::test]
async fn a_version_3_server_gets_complete_checked() {
    const { assert!(sensordb_protocol::frame::VERSION >= 3) };
    let (addr, seen) = serve(Script { version: 3, bytewise: false, silent_complete: false }).await;
    let stats = commit(addr, Duration::from_secs(10)).await.expect("commit");
    assert!(stats.checked_complete);
    assert_eq!(stats.points, 40);
    assert!(seen.lock().expect("log").contains(&COMPLETE_CHECKED));
}

/// Under version 4 the first attempt of a fresh transaction is COMPLETE_FIRST (no node can have
/// completed its id), not COMPLETE_CHECKED.
#[tokio::test]
async fn a_version_4_server_gets_complete_first_on_a_first_attempt() {
    assert_eq!(sensordb_protocol::frame::VERSION, 4);
    let (addr, seen) = serve(Script { version: 4, bytewise: false, silent_complete: false }).await;
    let stats = commit(addr, Duration::from_secs(10)).await.expect("commit");
    assert_eq!(stats.points, 40);
    let seen = seen.lock().expect("log").clone();
    assert!(seen.contains(&COMPLETE_FIRST) && !seen.contains(&COMPLETE_CHECKED), "{seen:x?}");
}
