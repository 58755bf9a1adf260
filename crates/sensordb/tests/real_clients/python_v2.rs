//! The InfluxDB 2.x Python client `influxdb-client` (scripts/clients/requirements.txt pins the
//! version) against `sensordb serve` with tokens: the client side is `python_v2.py`.

use crate::harness::{assert_stored, base64, find, fixture, report, run, Sensordb, Series, Token, Tool};
use serde_json::{json, Value};
use std::process::Command;

/// The status and the server's JSON error body of a refused call.
fn refusal(seen: &Value, step: &str) -> (u64, Value) {
    let refused = &seen[step];
    let status = refused["status"].as_u64().unwrap_or_else(|| panic!("{step}: the client raised no ApiException: {seen}"));
    let body = refused["body"].as_str().unwrap_or_else(|| panic!("{step}: no body: {seen}"));
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{step}: the error body is not JSON ({e}): {body}"));
    (status, body)
}

#[test]
fn influxdb_client_v2_writes_synchronously_and_in_batches() {
    let test = "influxdb_client_v2_writes_synchronously_and_in_batches";
    let Some(python) = find(Tool::Python, test) else { return };
    let (writer, reader) = ("v2-writer-token", "v2-reader-token");
    let server = Sensordb::start(&[Token { token: writer, scopes: &["write", "read"] }, Token { token: reader, scopes: &["read"] }]);
    let bucket = "py_v2";
    let mut command = Command::new(&python);
    command
        .arg(fixture("python_v2.py"))
        .args(["--url", &server.url(), "--bucket", bucket, "--org", "sensordb-org"])
        .args(["--writer", writer, "--reader", reader]);
    let seen = report(&run(&mut command, "python_v2.py"));

    assert_eq!(seen["ping"], json!(true));
    assert_eq!(seen["version"], json!("1.8.10-sensordb"));
    let (status, body) = refusal(&seen, "bad_line");
    assert_eq!(status, 400);
    let error = body["error"].as_str().expect("error text");
    assert!(error.starts_with("partial write: line 2: ") && error.ends_with(" dropped=1"), "{body}");
    assert_eq!(body["line"], json!(2));
    assert_eq!(seen["bad_line"]["message"], body["message"], "ApiException.message is the server's message");
    assert_eq!(body["message"].as_str(), Some(error));
    let (status, body) = refusal(&seen, "no_bucket");
    assert_eq!(status, 400);
    assert_eq!(body["error"], json!("bucket is required"));
    assert_eq!(refusal(&seen, "reader_write").0, 403);
    assert_eq!(refusal(&seen, "wrong_write").0, 401);

    // Batching: every line in exactly one successful batch of at most 3, in order.
    assert_eq!(seen["batch_errors"], json!([]));
    let batches: Vec<&str> = seen["batch_successes"].as_array().expect("batches").iter().map(|b| b.as_str().expect("batch text")).collect();
    assert!(batches.len() >= 3 && batches.iter().all(|b| b.lines().count() <= 3), "{batches:?}");
    let t = 1_700_000_000_000_000_000i64;
    let mut sent: Vec<String> = (0..4).map(|i| format!("v2_batched,kind=point n={i}i {}", t + i)).collect();
    sent.extend((0..3).map(|i| format!("v2_batched,kind=line n={i}i {}", t + i)));
    assert_eq!(batches.iter().flat_map(|b| b.lines()).collect::<Vec<_>>(), sent);
    let failures = seen["batch_failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["status"], json!(400));
    assert!(failures[0]["message"].as_str().expect("message").starts_with("partial write: line 2"), "{failures:?}");

    let read = Some(reader);
    let key = |field: &str| format!("v2_types,host=a,region=eu\\ west {field}");
    assert_stored(
        &server,
        bucket,
        "v2_types",
        read,
        vec![
            Series::new(&key("count"), "integer", vec![(t + 1, json!(7)), (t + 2, json!(-(1i64 << 62)))]),
            Series::new(&key("note"), "bytes", vec![(t + 1, base64("say \"hi\" \\o/")), (t + 2, base64(""))]),
            Series::new(&key("ok"), "boolean", vec![(t + 1, json!(true)), (t + 2, json!(false))]),
            Series::new(&key("temp"), "float", vec![(t + 1, json!(21.5)), (t + 2, json!(-0.25))]),
        ],
    );
    let precision = |unit: &str, ts: i64, v: f64| Series::new(&format!("v2_precision,precision={unit} v"), "float", vec![(ts, json!(v))]);
    assert_stored(
        &server,
        bucket,
        "v2_precision",
        read,
        vec![
            precision("datetime", 1_700_000_000_123_456_000, 2.0),
            precision("ms", 1_700_000_000_123_000_000, 1.0),
            precision("ns", 1_700_000_000_000_000_123, 1.0),
            precision("s", 1_700_000_000_000_000_000, 1.0),
            precision("us", 1_700_000_000_000_123_000, 1.0),
        ],
    );
    assert_stored(
        &server,
        bucket,
        "v2_lines",
        read,
        vec![Series::new("v2_lines,host=b value", "integer", (0..5).map(|i| (t + i * 1_000_000_000, json!(i + 1))).collect())],
    );
    assert_stored(
        &server,
        bucket,
        "v2_batched",
        read,
        vec![
            Series::new("v2_batched,kind=line n", "integer", (0..3).map(|i| (t + i, json!(i))).collect()),
            Series::new("v2_batched,kind=point n", "integer", (0..4).map(|i| (t + i, json!(i))).collect()),
        ],
    );
    assert_stored(
        &server,
        bucket,
        "v2_gzip",
        read,
        vec![Series::new("v2_gzip v", "float", vec![(t, json!(0.0)), (t + 1, json!(0.25)), (t + 2, json!(0.5))])],
    );
    assert_stored(&server, bucket, "v2_bad", read, vec![Series::new("v2_bad value", "float", vec![(t, json!(1.0)), (t + 2, json!(3.0))])]);
    assert_stored(&server, bucket, "v2_batched_bad", read, vec![Series::new("v2_batched_bad value", "float", vec![(t, json!(1.0))])]);
    // Nothing from the refused writes.
    assert_stored(&server, bucket, "v2_auth", read, vec![]);
    server.stop();
}
