//! Telegraf (built by scripts/install-clients with the file input, the influx parser and the
//! two InfluxDB outputs) against `sensordb serve`: `telegraf --once` reads
//! `telegraf_input.lp` and writes it through `outputs.influxdb` (1.x API) or
//! `outputs.influxdb_v2` (2.x API), in batches of 4 metrics.

use crate::harness::{assert_stored, base64, find, fixture, run_to_end, Sensordb, Series, Token, Tool};
use serde_json::json;
use std::path::Path;
use std::process::Command;

const WRITER: &str = "telegraf-writer-token";
const READER: &str = "telegraf-reader-token";
const TOKENS: &[Token] = &[Token { token: WRITER, scopes: &["write", "read"] }, Token { token: READER, scopes: &["read"] }];

/// An `outputs.influxdb` section writing database `db` with `token` as the password.
fn output_v1(server: &Sensordb, db: &str, token: &str) -> String {
    format!(
        "[[outputs.influxdb]]\n  urls = [\"{}\"]\n  database = \"{db}\"\n  username = \"telegraf\"\n  password = \"{token}\"\n  \
         content_encoding = \"gzip\"\n  influx_uint_support = true\n  timeout = \"10s\"\n",
        server.url()
    )
}

/// An `outputs.influxdb_v2` section writing bucket `bucket` with `token`.
fn output_v2(server: &Sensordb, bucket: &str, token: &str) -> String {
    format!(
        "[[outputs.influxdb_v2]]\n  urls = [\"{}\"]\n  token = \"{token}\"\n  organization = \"sensordb-org\"\n  bucket = \"{bucket}\"\n  \
         influx_uint_support = true\n  timeout = \"10s\"\n",
        server.url()
    )
}

/// Runs `telegraf --once` with the file input and `output`: (succeeded, everything it logged).
fn run_once(telegraf: &Path, server: &Sensordb, output: &str) -> (bool, String) {
    // precision 1ns keeps the file's nanosecond timestamps (by default Telegraf rounds them to the
    // collection interval's order, 1 s); no host tag, so the series are the file's.
    let config = format!(
        "[agent]\n  omit_hostname = true\n  precision = \"1ns\"\n  metric_batch_size = 4\n  debug = true\n\n\
         [[inputs.file]]\n  files = ['{}']\n  data_format = \"influx\"\n\n{output}",
        fixture("telegraf_input.lp").display()
    );
    let config_path = server.scratch().join("telegraf.conf");
    std::fs::write(&config_path, config).expect("write telegraf.conf");
    let mut command = Command::new(telegraf);
    command.arg("--once").arg("--config").arg(&config_path);
    let (status, stdout, stderr) = run_to_end(&mut command, "telegraf --once");
    (status.success(), format!("{stdout}{stderr}"))
}

/// What `telegraf_input.lp` holds, as sensordb reads it back.
fn assert_file_stored(server: &Sensordb, db: &str) {
    let t = 1_700_000_000_000_000_000i64;
    let key = |field: &str| format!("tg_types,host=a,region=eu\\ west {field}");
    assert_stored(
        server,
        db,
        "tg_types",
        Some(READER),
        vec![
            Series::new(&key("big"), "unsigned", vec![(t + 1, json!(u64::MAX)), (t + 2, json!(0))]),
            Series::new(&key("count"), "integer", vec![(t + 1, json!(7)), (t + 2, json!(-3))]),
            Series::new(&key("note"), "bytes", vec![(t + 1, base64("say \"hi\" \\o/")), (t + 2, base64(""))]),
            Series::new(&key("ok"), "boolean", vec![(t + 1, json!(true)), (t + 2, json!(false))]),
            Series::new(&key("temp"), "float", vec![(t + 1, json!(21.5)), (t + 2, json!(-0.25))]),
        ],
    );
    let points = |sensor: i64| -> Vec<(i64, serde_json::Value)> {
        (0..10).filter(|i| (i / 2) % 2 == sensor).map(|i| (t + i, json!(i as f64))).collect()
    };
    assert_stored(
        server,
        db,
        "tg_many",
        Some(READER),
        vec![Series::new("tg_many,sensor=s0 v", "float", points(0)), Series::new("tg_many,sensor=s1 v", "float", points(1))],
    );
}

fn assert_no_errors(succeeded: bool, log: &str) {
    assert!(succeeded && !log.contains(" E! "), "telegraf reported errors:\n{log}");
}

#[test]
fn telegraf_output_influxdb_v1_writes_a_file_unchanged() {
    let Some(telegraf) = find(Tool::Telegraf, "telegraf_output_influxdb_v1_writes_a_file_unchanged") else { return };
    let server = Sensordb::start(TOKENS);
    let (succeeded, log) = run_once(&telegraf, &server, &output_v1(&server, "tg_v1", WRITER));
    assert_no_errors(succeeded, &log);
    assert!(log.contains("[outputs.influxdb] Wrote batch of 4 metrics"), "{log}");
    // Its CREATE DATABASE at connect is answered; a failure would only be a warning.
    assert!(!log.contains("creation failed"), "{log}");
    assert_file_stored(&server, "tg_v1");
    server.stop();
}

#[test]
fn telegraf_output_influxdb_v2_writes_a_file_unchanged() {
    let Some(telegraf) = find(Tool::Telegraf, "telegraf_output_influxdb_v2_writes_a_file_unchanged") else { return };
    let server = Sensordb::start(TOKENS);
    let (succeeded, log) = run_once(&telegraf, &server, &output_v2(&server, "tg_v2", WRITER));
    assert_no_errors(succeeded, &log);
    assert!(log.contains("[outputs.influxdb_v2] Wrote batch of 4 metrics"), "{log}");
    assert_file_stored(&server, "tg_v2");
    server.stop();
}

/// A token without the write scope: both outputs log the server's 403 and its message (not a
/// broken connection), Telegraf fails, and nothing is stored.
#[test]
fn telegraf_reports_the_servers_refusal() {
    let Some(telegraf) = find(Tool::Telegraf, "telegraf_reports_the_servers_refusal") else { return };
    let server = Sensordb::start(TOKENS);
    let outputs = format!("{}\n{}", output_v1(&server, "tg_refused", READER), output_v2(&server, "tg_refused", READER));
    let (succeeded, log) = run_once(&telegraf, &server, &outputs);
    assert!(!succeeded, "telegraf --once succeeded with a read-only token:\n{log}");
    assert!(log.contains("403 Forbidden): token lacks the write scope"), "outputs.influxdb shows the server's answer:\n{log}");
    assert!(
        log.contains("[outputs.influxdb_v2] failed to write metrics to tg_refused (403 Forbidden): forbidden: token lacks the write scope"),
        "outputs.influxdb_v2 shows the server's answer:\n{log}"
    );
    assert!(!log.contains("broken pipe") && !log.contains("connection reset"), "the server closed the connection on the client:\n{log}");
    assert_stored(&server, "tg_refused", "tg_types", Some(READER), vec![]);
    assert_stored(&server, "tg_refused", "tg_many", Some(READER), vec![]);
    server.stop();
}
