//! The built-in graph page (`GET /`) in headless Chromium: it loads, a series is chosen through
//! its selectors, the plot draws exactly the stored values, and zooming by dragging across the
//! plot asks `/sensordb/graph` for a narrower range. Leaves a screenshot at
//! `target/graph-page.png` (the README's picture is one of these).

use crate::harness::{find, report, run, workspace_root, Sensordb, Tool};
use serde_json::Value;
use std::process::Command;

#[test]
fn graph_page_draws_the_stored_points_and_zooms() {
    let Some(playwright) = find(Tool::Browser, "graph_page_draws_the_stored_points_and_zooms") else { return };
    let server = Sensordb::start(&[]);
    // 50 points a minute apart, long ago, with a spike at minute 20: fewer points than pixel
    // columns, so M4 keeps every one of them.
    let start = 1_700_000_000i64;
    let body: String = (0..50)
        .map(|i| {
            format!("boiler,site=north temp={} {}\n", if i == 20 { 500.0 } else { 20.0 + f64::from(i) / 10.0 }, start + 60 * i64::from(i))
        })
        .collect();
    let (status, text) = server.post("/write?db=plant&precision=s", &body);
    assert_eq!(status, 204, "{text}");
    let screenshot = workspace_root().join("target/graph-page.png");
    let stdout = run(
        Command::new("node")
            .arg(workspace_root().join("crates/sensordb/tests/real_clients/graph_page.cjs"))
            .arg(&playwright)
            .arg(server.url())
            .args(["plant", "boiler", "temp"])
            .arg(&screenshot),
        "node graph_page.cjs",
    );
    let seen = report(&stdout);
    assert!(seen.get("pageError").is_none(), "the page threw: {}", seen["pageError"]);
    // The plot holds exactly the stored points (times in ms).
    let points = seen["before"]["data"]["points"][0].as_array().expect("one series drawn");
    assert_eq!(points.len(), 50, "every stored point is drawn: {points:?}");
    for (i, point) in points.iter().enumerate() {
        let expected = if i == 20 { 500.0 } else { 20.0 + i as f64 / 10.0 };
        assert_eq!(point[0].as_i64(), Some((start + 60 * i as i64) * 1000));
        assert!((point[1].as_f64().expect("number") - expected).abs() < 1e-9, "point {i}: {point}");
    }
    assert!(seen["canvas"]["width"].as_i64().unwrap_or(0) > 0, "a plot was drawn");
    // The query asked for the plot's own pixel width.
    let width = seen["before"]["query"]["width"].as_i64().expect("width");
    assert!(width > 200, "width {width}");
    // Zooming sent a narrower query inside the first one.
    let (before, after) = (&seen["before"]["query"], &seen["after"]["query"]);
    let span = |q: &Value| q["to"].as_f64().expect("to") - q["from"].as_f64().expect("from");
    assert!(span(after) < span(before) / 2.0, "zoomed from {before} to {after}");
    assert!(after["from"].as_f64() > before["from"].as_f64() && after["to"].as_f64() < before["to"].as_f64());
    assert!(seen["graphRequests"].as_array().expect("requests").len() >= 2);
    assert!(screenshot.exists());
    server.stop();
}
