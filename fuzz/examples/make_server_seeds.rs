//! Writes the seed corpora of the server targets in `fuzz/seeds/<target>/`: frames and point
//! records made with `sensordb-protocol`'s own encoders (`Frame::encode`, `PointsEncoder`), and
//! line-protocol bodies written by hand, so the fuzzer starts from valid inputs.
//!
//! Run from the repository root (stable is fine):
//! `cargo run --manifest-path fuzz/Cargo.toml --example make_server_seeds`

use bytes::Bytes;
use sensordb_model::{ValueColumn, ValueKind};
use sensordb_protocol::frame::{ErrorCode, Frame, TxId, HEADER_LEN, VERSION};
use sensordb_protocol::points::PointsEncoder;
use std::path::Path;

fn write(root: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

/// A SEND body: POINTS records for short ids 0–4 (f64, i64, u64, bool, bytes in the
/// `native_points` target's definitions) and a value sent as two payload parts.
fn records() -> Vec<u8> {
    let t = [1_700_000_000_000_000_000, 1_700_000_000_010_000_000, 1_700_000_000_005_000_000];
    let mut out = Vec::new();
    PointsEncoder::points(&mut out, 0, &t, &ValueColumn::F64(vec![20.5, -0.25, f64::NAN]));
    PointsEncoder::points(&mut out, 1, &t, &ValueColumn::I64(vec![-3, 0, i64::MAX]));
    PointsEncoder::points(&mut out, 2, &t[..1], &ValueColumn::U64(vec![u64::MAX]));
    PointsEncoder::points(&mut out, 3, &t, &ValueColumn::Bool(vec![true, false, true]));
    PointsEncoder::points(&mut out, 4, &t[..2], &ValueColumn::Bytes(vec![Bytes::from_static(b"hello"), Bytes::new()]));
    PointsEncoder::payload_part(&mut out, 4, t[2], false, b"first part, ");
    PointsEncoder::payload_part(&mut out, 4, t[2], true, b"last part");
    out
}

fn frame_seeds(root: &Path) {
    let tx = TxId::from_u64(42);
    let frames = [
        (
            "hello",
            Frame::Hello { min_version: 1, max_version: VERSION, client_id: [7; 16], token: "secret".into(), client_name: "fuzz".into() },
        ),
        ("define-f64", Frame::DefineSeries { short_id: 0, kind: ValueKind::F64, key: "cpu,host=a usage".into() }),
        ("define-bytes", Frame::DefineSeries { short_id: 4, kind: ValueKind::Bytes, key: "log,host=a line".into() }),
        ("create", Frame::Create { tx }),
        ("send", Frame::Send { tx, records: Bytes::from(records()) }),
        ("confirm", Frame::Confirm { tx }),
        ("complete", Frame::Complete { tx }),
        ("complete-checked", Frame::CompleteChecked { tx, crc: 0xDEAD_BEEF, bytes: 120, points: 12 }),
        ("cancel", Frame::Cancel { tx }),
        ("ping", Frame::Ping { nonce: 9 }),
        (
            "hello-ok",
            Frame::HelloOk {
                version: VERSION,
                max_frame_bytes: 1 << 20,
                max_transaction_bytes: 1 << 30,
                transaction_timeout_ms: 30_000,
                server: "sensordb".into(),
            },
        ),
        ("series-ok", Frame::SeriesOk { short_id: 4, series_id: 17 }),
        ("created", Frame::Created { tx, already_completed: true }),
        ("confirmed", Frame::Confirmed { tx, crc: 1, bytes: 2, points: 3 }),
        ("completed", Frame::Completed { tx, duplicate: false, points: 12 }),
        ("cancelled", Frame::Cancelled { tx }),
        ("pong", Frame::Pong { nonce: 9 }),
        (
            "error-tx",
            Frame::Error { code: ErrorCode::KindMismatch, fatal: false, tx: Some(tx), context: 4, message: "kind mismatch".into() },
        ),
        ("error-fatal", Frame::Error { code: ErrorCode::Unauthenticated, fatal: true, tx: None, context: 0, message: "bad token".into() }),
    ];
    let mut session = Vec::new();
    for (name, frame) in &frames {
        let bytes = frame.to_bytes();
        write(root, "native_frame", name, &bytes);
        // The body mode: the type byte, then the body.
        let mut body = vec![bytes[4]];
        body.extend_from_slice(&bytes[HEADER_LEN..]);
        write(root, "native_frame", &format!("body-{name}"), &body);
        if frame.frame_type() as u8 & 0x80 == 0 {
            session.extend_from_slice(&bytes);
        }
    }
    // A client's frames back to back, as one connection reads them.
    write(root, "native_frame", "session", &session);
}

fn points_seeds(root: &Path) {
    write(root, "native_points", "all-kinds", &records());
    let t = [5, 6];
    let mut out = Vec::new();
    PointsEncoder::points(&mut out, 5, &t, &ValueColumn::F64(vec![1.0, 2.0]));
    write(root, "native_points", "second-definition", &out);
    // Short id 10 holds f64 values for the i64 series of short id 1: the second record conflicts.
    let mut out = Vec::new();
    PointsEncoder::points(&mut out, 1, &t, &ValueColumn::I64(vec![1, 2]));
    PointsEncoder::points(&mut out, 10, &t, &ValueColumn::F64(vec![1.0, 2.0]));
    write(root, "native_points", "kind-conflict", &out);
    let mut out = Vec::new();
    PointsEncoder::payload_part(&mut out, 9, -1, true, &[0xAB; 40]);
    write(root, "native_points", "payload-part", &out);
    // A record cut short after a valid one.
    let mut out = records();
    out.truncate(out.len() - 4);
    write(root, "native_points", "cut", &out);
}

fn line_protocol_seeds(root: &Path) {
    // First byte: the options (precision index in the low bits; bit 7 a 32-byte line limit).
    let bodies: [(&str, u8, &str); 8] = [
        ("telegraf", 0, "cpu,host=server01,region=us-west usage_idle=98.5,usage_user=1.2 1700000000000000000\nmem,host=server01 used=1234567i,free=42u,ok=true 1700000000000000000\n"),
        ("no-timestamp", 0, "weather,city=Zürich temperature=21.5,humidity=60i\nweather,city=Berlin temperature=-3e2\n"),
        ("escapes", 0, "m\\ x\\,y,t\\=k=v\\ a\\,b f\\ g=1e5,s=\"quote \\\" and \\\\ backslash\" -5\n"),
        ("quoted-newline", 0, "# comment\n\nlog,app=web msg=\"first line\nsecond line\",level=3i 17\r\nlog msg=\"\" 18\r\n"),
        ("errors", 0, "m f=1 1\nm f= 2\nm f=12x 3\nm f=1 4 extra\nm,t=a,t=b f=1 5\nm f=1 6\n"),
        ("seconds", 3, "readings,name=truck_1,fleet=South latitude=50.12,longitude=4.72037,elevation=12i,heading=221 1451606400\nm f=1 9223372036854775807\n"),
        ("hours", 5, "m f=TRUE,g=False,h=-0,i=9223372036854775807i,u=18446744073709551615u 2\n"),
        ("line-limit", 0x80, "short f=1\na_much_longer_measurement_name,with=tags value=1.5 1700000000000000000\n"),
    ];
    for (name, options, body) in bodies {
        let mut bytes = vec![options];
        bytes.extend_from_slice(body.as_bytes());
        write(root, "line_protocol", name, &bytes);
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    frame_seeds(&root);
    points_seeds(&root);
    line_protocol_seeds(&root);
    println!("seeds written under {}", root.display());
}
