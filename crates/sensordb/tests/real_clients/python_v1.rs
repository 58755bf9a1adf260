//! The InfluxDB 1.x Python client `influxdb` (scripts/clients/requirements.txt pins the version)
//! against `sensordb serve`: the client side is `python_v1.py`.

use crate::harness::{assert_stored, base64, find, fixture, report, run, Sensordb, Series, Token, Tool};
use serde_json::{json, Value};
use std::process::Command;

/// Runs `python_v1.py <scenario>` against `server` and returns what the client saw.
fn drive(python: &std::path::Path, server: &Sensordb, scenario: &str, db: &str, extra: &[&str]) -> Value {
    let mut command = Command::new(python);
    command
        .arg(fixture("python_v1.py"))
        .arg(scenario)
        .args(["--host", "127.0.0.1", "--port", &server.addr.port().to_string(), "--db", db])
        .args(extra);
    report(&run(&mut command, &format!("python_v1.py {scenario}")))
}

/// The client's exception for a refused call: its status code and the server's JSON body.
fn refusal(seen: &Value, step: &str) -> (u64, Value) {
    let refused = &seen[step];
    let code = refused["code"].as_u64().unwrap_or_else(|| panic!("{step}: the client raised no InfluxDBClientError: {seen}"));
    let content = refused["content"].as_str().unwrap_or_else(|| panic!("{step}: no content: {seen}"));
    let body = serde_json::from_str(content).unwrap_or_else(|e| panic!("{step}: the error body is not JSON ({e}): {content}"));
    (code, body)
}

#[test]
fn influxdb_v1_client_writes_every_field_type_and_precision() {
    let test = "influxdb_v1_client_writes_every_field_type_and_precision";
    let Some(python) = find(Tool::Python, test) else { return };
    let server = Sensordb::start(&[]);
    let db = "py_v1";
    let seen = drive(&python, &server, "open", db, &[]);

    assert_eq!(seen["ping"], json!("1.8.10-sensordb"), "ping() returns X-Influxdb-Version");
    assert_eq!(seen["databases"], json!([{ "name": db }]), "get_list_database() after create_database()");

    let (code, body) = refusal(&seen, "bad_line");
    assert_eq!(code, 400);
    let error = body["error"].as_str().expect("error text");
    assert!(error.starts_with("partial write: line 2: ") && error.ends_with(" dropped=1"), "{body}");
    assert_eq!(body["line"], json!(2));
    let (code, body) = refusal(&seen, "type_conflict");
    assert_eq!(code, 400);
    assert!(body["error"].as_str().expect("error text").contains("field type conflict"), "{body}");
    let (code, body) = refusal(&seen, "bad_query");
    assert_eq!(code, 400);
    assert!(body["error"].as_str().expect("error text").starts_with("error parsing query: found FROMM, expected FROM"), "{body}");

    let t = 1_700_000_000_000_000_000i64;
    assert_eq!(
        seen["select"],
        json!([{"time": t + 1, "count": 7, "note": "say \"hi\" \\o/"}, {"time": t + 2, "count": -(1i64 << 62), "note": ""}]),
        "the 1.x client reads back through InfluxQL"
    );
    let key = |field: &str| format!("v1_types,host=a,region=eu\\ west {field}");
    assert_stored(
        &server,
        db,
        "v1_types",
        None,
        vec![
            Series::new(&key("count"), "integer", vec![(t + 1, json!(7)), (t + 2, json!(-(1i64 << 62)))]),
            Series::new(&key("note"), "bytes", vec![(t + 1, base64("say \"hi\" \\o/")), (t + 2, base64(""))]),
            Series::new(&key("ok"), "boolean", vec![(t + 1, json!(true)), (t + 2, json!(false))]),
            Series::new(&key("temp"), "float", vec![(t + 1, json!(21.5)), (t + 2, json!(-0.25))]),
        ],
    );
    let precision = |unit: &str, ts: i64, v: f64| Series::new(&format!("v1_precision,precision={unit} v"), "float", vec![(ts, json!(v))]);
    assert_stored(
        &server,
        db,
        "v1_precision",
        None,
        vec![
            precision("h", 472_222 * 3_600_000_000_000, 1.0),
            precision("m", 28_333_333 * 60_000_000_000, 1.0),
            precision("ms", 1_700_000_000_123_000_000, 1.0),
            precision("ms_datetime", 1_700_000_000_123_000_000, 2.0),
            precision("n", 1_700_000_000_000_000_123, 1.0),
            precision("s", 1_700_000_000_000_000_000, 1.0),
            precision("u", 1_700_000_000_000_123_000, 1.0),
        ],
    );
    assert_stored(
        &server,
        db,
        "v1_lines",
        None,
        vec![Series::new("v1_lines,host=b value", "float", vec![(t, json!(1.0)), (t + 1_000_000_000, json!(2.0))])],
    );
    assert_stored(
        &server,
        db,
        "v1_batched",
        None,
        vec![Series::new("v1_batched,site=x n", "integer", (0..5).map(|i| (t + i, json!(i))).collect())],
    );
    assert_stored(
        &server,
        db,
        "v1_gzip",
        None,
        vec![Series::new("v1_gzip v", "float", vec![(t, json!(0.0)), (t + 1, json!(0.25)), (t + 2, json!(0.5))])],
    );
    // The valid lines around the bad one are stored.
    assert_stored(
        &server,
        db,
        "v1_bad",
        None,
        vec![Series::new("v1_bad,host=c value", "float", vec![(t, json!(1.0)), (t + 2, json!(3.0))])],
    );
    server.stop();
}

#[test]
fn influxdb_v1_client_authenticates_with_username_and_password() {
    let test = "influxdb_v1_client_authenticates_with_username_and_password";
    let Some(python) = find(Tool::Python, test) else { return };
    let (writer, reader) = ("v1-writer-token", "v1-reader-token");
    let server = Sensordb::start(&[Token { token: writer, scopes: &["write", "read"] }, Token { token: reader, scopes: &["read"] }]);
    let db = "py_v1_auth";
    let seen = drive(&python, &server, "auth", db, &["--writer", writer, "--reader", reader]);

    assert_eq!(seen["anonymous_ping"], json!("1.8.10-sensordb"), "/ping needs no token");
    for (step, status) in
        [("anonymous_write", 401), ("anonymous_create", 401), ("reader_write", 403), ("wrong_write", 401), ("reader_params_write", 403)]
    {
        let (code, body) = refusal(&seen, step);
        assert_eq!(code, status, "{step}: {body}");
        assert!(body["error"].is_string(), "{step}: {body}");
    }
    assert_eq!(seen["writer_databases"], json!([{ "name": db }]));
    assert_eq!(seen["reader_databases"], json!([{ "name": db }]));

    let t = 1_700_000_000_000_000_000i64;
    let (status, body) = server.get(&format!("/sensordb/points?db={db}&measurement=v1_auth"), None);
    assert_eq!(status, 401, "reading back needs a token too: {body}");
    assert_stored(
        &server,
        db,
        "v1_auth",
        Some(reader),
        vec![
            Series::new("v1_auth,via=basic value", "integer", vec![(t + 1, json!(1)), (t + 2, json!(2))]),
            Series::new("v1_auth,via=query_params value", "integer", vec![(t + 3, json!(3))]),
        ],
    );
    server.stop();
}
