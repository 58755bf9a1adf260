//! `sensordb plan` as a user runs it: the report and its snippet, JSON for machines, refusals
//! with exit status 1 and suggestions that themselves plan, and usage errors with status 2.

use std::process::{Command, Output};

fn sensordb_plan(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sensordb")).arg("plan").args(arguments).env_remove("RUST_BACKTRACE").output().expect("run sensordb")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

const FLEET: [&str; 8] = ["--sensors", "10000", "--rate", "1", "--period", "90d", "--disk", "500GB"];

#[test]
fn a_plan_that_fits_prints_the_report_and_the_snippet() {
    let output = sensordb_plan(&FLEET);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", text(&output.stderr));
    for expected in ["V = 9.21% of the disk", "R ≤ 85.6 GB", "planing at 64 MiB", "segment_bytes_max = 1073741824  # 1 GiB"] {
        assert!(stdout.contains(expected), "missing {expected:?} in\n{stdout}");
    }
}

#[test]
fn the_example_in_planning_md_is_what_the_command_prints() {
    let document = include_str!("../../../docs/PLANNING.md");
    let example = document.split("```text\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a text block");
    let output = sensordb_plan(&FLEET);
    assert_eq!(text(&output.stdout), example, "docs/PLANNING.md shows an outdated report");
}

#[test]
fn json_carries_the_same_plan() {
    let mut arguments = FLEET.to_vec();
    arguments.push("--json");
    let output = sensordb_plan(&arguments);
    assert_eq!(output.status.code(), Some(0));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(plan["segment_bytes"], 1_073_741_824u64);
    assert_eq!(plan["segment_limit"], "maximum");
    assert_eq!(plan["segments_at_target"], 372);
    assert_eq!(plan["recommended"]["holds_with_margin"], true);
    assert_eq!(plan["input"]["ingest"]["kind"], "points");
}

#[test]
fn a_refused_plan_exits_1_and_its_suggestions_plan() {
    let too_many = ["--sensors", "1000000", "--rate", "1", "--period", "90d", "--disk", "500GB"];
    let output = sensordb_plan(&too_many);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(stderr.starts_with("cannot plan: live data alone, 4.77 TB"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    // Each suggested value, substituted into the same command, gives a plan.
    let suggestion = |flag: &str| {
        let line = stderr.lines().find(|line| line.trim_start().starts_with(flag)).expect("a suggestion");
        line.split_whitespace().nth(1).expect("a value").to_string()
    };
    for (flag, position) in [("--period", 5), ("--disk", 7)] {
        let value = suggestion(flag);
        let mut arguments = too_many;
        arguments[position] = &value;
        let output = sensordb_plan(&arguments);
        assert_eq!(output.status.code(), Some(0), "{flag} {value}: {}", text(&output.stderr));
    }
}

#[test]
fn a_refusal_in_json_names_its_kind() {
    let output = sensordb_plan(&["--sensors", "1000000", "--rate", "1", "--period", "90d", "--disk", "500GB", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let refusal: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(refusal["refusal"]["refusal"], "live_data_above_target");
    assert!(refusal["refusal"]["fit"]["min_disk_bytes"].as_u64().expect("bytes") > 7_000_000_000_000);
    assert!(refusal["message"].as_str().expect("message").contains("4.77 TB"));
}

#[test]
fn contradictory_options_exit_1() {
    let output = sensordb_plan(&["--sensors", "64", "--rate", "2MB/s", "--period", "7d", "--disk", "4TB", "--bytes-per-point", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("--bytes-per-point is for point rates"));
    let output = sensordb_plan(&["--sensors", "10", "--rate", "1", "--period", "1d", "--disk", "1TB", "--target-usage", "0.95"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("thresholds must rise"));
}

#[test]
fn values_that_do_not_parse_exit_2() {
    for (flag, value, expected) in [
        ("--disk", "500G", "unknown unit 'G'"),
        ("--period", "3600", "needs a unit"),
        ("--sensors", "0", "must be greater than zero"),
        ("--rate", "2MB", "a byte rate needs a time unit"),
    ] {
        let mut arguments = FLEET.to_vec();
        let position = arguments.iter().position(|argument| *argument == flag).expect("flag") + 1;
        arguments[position] = value;
        let output = sensordb_plan(&arguments);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(expected), "{flag} {value}: {stderr}");
    }
}
