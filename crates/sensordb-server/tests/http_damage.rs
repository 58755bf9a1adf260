//! A damaged block in a segment: the raw-points and graph APIs answer 200 with every other
//! point and name what is missing (`damage` in the JSON, the `X-Sensordb-Damage` header),
//! instead of failing the whole measurement with 500. Real sockets on 127.0.0.1, bounded.

mod common;

use common::{bounded, get, TestServer};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch, DEFAULT_DATABASE};
use std::path::{Path, PathBuf};

/// Two sensors of 2,000 points in blocks of 500, then one byte flipped in the first block
/// (page 2 of the segment, just past its block header). Returns the damaged segment.
fn damage(dir: &Path) -> PathBuf {
    let options = EngineOptions { durability: Durability::Fsync, block_points_max: 500, ..EngineOptions::default() };
    let engine = Engine::open(dir, options).expect("open");
    let ids: Vec<SeriesId> = (0..2)
        .map(|s| engine.series_id(&SeriesKey::new("m", [("sensor", format!("s{s}"))], "v").expect("key"), ValueKind::F64).expect("id"))
        .collect();
    let mut batch = WriteBatch::new();
    for t in 0..2_000 {
        for &id in &ids {
            batch.push(id, t, Value::F64(t as f64)).expect("push");
        }
    }
    engine.write(&batch).expect("write");
    engine.close().expect("close");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("segments")).expect("dir").map(|e| e.expect("entry").path()).collect();
    segments.sort();
    let segment = segments.pop().expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    bytes[8192 + 62] ^= 0x5a;
    std::fs::write(&segment, bytes).expect("write");
    segment
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_and_graph_answer_without_a_damaged_block_and_name_it() {
    bounded(async {
        let mut segment = PathBuf::new();
        let server = TestServer::start(|config| segment = damage(&config.data_dir)).await;
        let addr = server.addr;
        let named = |text: &str| text.contains(&segment.display().to_string()) && text.contains("offset 8192");

        let reply = get(addr, "/sensordb/points?measurement=m").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let json = reply.json();
        let total: usize = json["series"].as_array().expect("series").iter().map(|s| s["points"].as_array().expect("points").len()).sum();
        assert_eq!(total, 4_000 - 500, "one block of 500 points left out, the rest answered");
        let messages = json["damage"].as_array().expect("damage named in the body");
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(named(messages[0].as_str().expect("text")), "{messages:?}");
        assert!(named(reply.header("x-sensordb-damage").expect("damage header")));

        let csv = get(addr, "/sensordb/points?measurement=m&format=csv").await;
        assert_eq!(csv.status, 200, "{}", csv.text());
        assert_eq!(csv.text().lines().count(), 1 + 3_500);
        assert!(named(csv.header("x-sensordb-damage").expect("damage header")));

        let graph = get(addr, &format!("/sensordb/graph?db={DEFAULT_DATABASE}&measurement=m&field=v&from=0&to=1999&width=10")).await;
        assert_eq!(graph.status, 200, "{}", graph.text());
        let json = graph.json();
        let series = json["series"].as_array().expect("series");
        assert_eq!(series.len(), 2);
        assert!(series.iter().all(|s| !s["points"].as_array().expect("points").is_empty()), "{series:?}");
        assert!(named(json["damage"][0].as_str().expect("damage named in the body")));
        assert!(graph.header("x-sensordb-damage").is_some());

        // An undamaged series answers as before: no damage field, no header.
        let clean = get(addr, "/sensordb/points?measurement=m&tag.sensor=s1&from=600").await;
        assert_eq!(clean.status, 200);
        assert!(clean.json().get("damage").is_none() && clean.header("x-sensordb-damage").is_none());
        let metrics = get(addr, "/metrics").await.text();
        assert!(metrics.contains("\nsensordb_damaged_blocks_skipped_total 3\n"), "{metrics}");
        assert!(metrics.contains("\nsensordb_quarantined_files 0\n"), "{metrics}");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_with_a_damaged_header_is_set_aside_and_counted_while_the_rest_serves() {
    bounded(async {
        let server = TestServer::start(|config| {
            let options = EngineOptions { durability: Durability::Fsync, segment_bytes_max: 1, ..EngineOptions::default() };
            let engine = Engine::open(&config.data_dir, options).expect("open");
            let id = engine.series_id(&SeriesKey::new("m", [("sensor", "s0")], "v").expect("key"), ValueKind::F64).expect("id");
            for from in [0, 100] {
                let mut batch = WriteBatch::new();
                for t in from..from + 100 {
                    batch.push(id, t, Value::F64(t as f64)).expect("push");
                }
                engine.write(&batch).expect("write");
                engine.flush().expect("one segment per flush");
            }
            engine.close().expect("close");
            let first = config.data_dir.join("segments").join(format!("{:020}.seg", 1));
            let mut bytes = std::fs::read(&first).expect("read");
            bytes[8] ^= 0x01;
            std::fs::write(&first, bytes).expect("write");
        })
        .await;
        let reply = get(server.addr, "/sensordb/points?measurement=m").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["series"][0]["points"].as_array().expect("points").len(), 100, "the other segment serves");
        let metrics = get(server.addr, "/metrics").await.text();
        assert!(metrics.contains("\nsensordb_quarantined_files 1\n"), "{metrics}");
        assert!(metrics.contains("\nsensordb_recovery_problems 1\n"), "{metrics}");
        server.stop().await;
    })
    .await;
}
