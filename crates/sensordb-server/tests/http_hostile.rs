//! Hostile HTTP writers on 127.0.0.1: many concurrent bodies without `Content-Length`
//! (chunked) must stay within `max_in_flight_bytes` while they are read. Every test and loop is
//! bounded.

mod common;

use common::{bounded, get, parse_reply, post, TestServer};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The `sensordb_in_flight_bytes` gauge from `/metrics`.
async fn in_flight_bytes(addr: std::net::SocketAddr) -> i64 {
    let reply = get(addr, "/metrics").await;
    let text = reply.text();
    text.lines()
        .find_map(|line| line.strip_prefix("sensordb_in_flight_bytes "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no in-flight gauge in {text}"))
}

/// One chunk of chunked transfer coding.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// `lines` lines of line protocol for series `m,w=<writer>`, numbered from 1 (timestamps).
fn lines(writer: usize, lines: usize) -> Vec<u8> {
    (1..=lines).flat_map(|i| format!("m,w={writer} v={i} {i}\n").into_bytes()).collect()
}

/// Issue 13, item 10: bodies without `Content-Length` are counted against `max_in_flight_bytes`
/// while they are read, not only once they are whole: with eight writers each halfway through a
/// 1.1 MiB chunked body and an 8 MiB bound, the gauge shows the bodies being read (it was 0,
/// with every byte already buffered), never more than the bound; every body is stored once the
/// writers finish, and a later write succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_without_length_are_counted_against_the_in_flight_bound_as_they_are_read() {
    bounded(async {
        const BOUND: i64 = 8 << 20;
        let server = TestServer::start(|c| {
            c.max_in_flight_bytes = BOUND as usize;
            c.max_connection_in_flight_bytes = 1 << 20;
            c.max_frame_bytes = 1 << 20;
            c.max_body_bytes = 4 << 20;
        })
        .await;
        let addr = server.addr;
        const WRITERS: usize = 8;
        const LINES: usize = 60_000;
        let mut streams = Vec::new();
        let mut rests = Vec::new();
        for writer in 0..WRITERS {
            let body = lines(writer, LINES);
            assert!(body.len() > 1 << 20, "{} bytes", body.len());
            let (first, rest) = body.split_at(body.len() / 2);
            let mut stream = TcpStream::connect(addr).await.expect("connects");
            let head = "POST /write?db=d HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await.expect("head");
            // Socket buffers take what the server does not read yet: written from a task.
            let first = chunk(first);
            let sender = tokio::spawn(async move {
                stream.write_all(&first).await.expect("first half");
                stream
            });
            streams.push(sender);
            rests.push(rest.to_vec());
        }
        // The bodies being read hold permits: at most the bound, and not nothing.
        let mut seen_max = 0;
        for _ in 0..100 {
            let now = in_flight_bytes(addr).await;
            assert!(now <= BOUND, "{now} bytes in flight, bound {BOUND}");
            seen_max = seen_max.max(now);
            if seen_max == BOUND {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen_max, BOUND, "two bodies read at once, each holding max_body_bytes (4 MiB); the others wait");
        // The writers finish; every body is stored, while the bound keeps holding.
        let mut answers = Vec::new();
        for (sender, rest) in streams.into_iter().zip(rests) {
            answers.push(tokio::spawn(async move {
                let mut stream = sender.await.expect("first half sent");
                let mut tail = chunk(&rest);
                tail.extend_from_slice(b"0\r\n\r\n");
                stream.write_all(&tail).await.expect("second half");
                let mut raw = Vec::new();
                stream.read_to_end(&mut raw).await.expect("answer");
                parse_reply(&raw).expect("a reply").status
            }));
        }
        for _ in 0..20 {
            assert!(in_flight_bytes(addr).await <= BOUND);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for answer in answers {
            assert_eq!(answer.await.expect("joins"), 204);
        }
        let count = get(addr, "/query?db=d&q=SELECT%20count(v)%20FROM%20m").await;
        assert!(count.text().contains(&format!("{}", WRITERS * LINES)), "{}", count.text());
        assert_eq!(in_flight_bytes(addr).await, 0, "every permit given back");
        assert_eq!(post(addr, "/write?db=d", "m,w=late v=1 1\n").await.status, 204);
        server.stop().await;
    })
    .await
}

/// Series of measurement `m` in database `db`, as `SHOW SERIES` lists them.
async fn series_of_m(addr: std::net::SocketAddr, db: &str) -> usize {
    let reply = get(addr, &format!("/query?db={db}&q=SHOW%20SERIES%20FROM%20m")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.text().matches("m,w=").count()
}

fn body_of_new_series(from: usize, to: usize) -> String {
    (from..to).map(|w| format!("m,w={w} v=1 1\n")).collect()
}

/// Issue 13, item 11: a database holds at most `max_series_per_database` series. A body needing
/// more is answered as InfluxDB answers it (400, `partial write: max-series-per-database limit
/// exceeded: (N) dropped=K`), its other lines stored; known series go on being written, other
/// databases have their own count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_beyond_the_database_limit_are_dropped_as_a_partial_write() {
    bounded(async {
        let server = TestServer::start(|c| c.max_series_per_database = 5).await;
        let addr = server.addr;
        let reply = post(addr, "/write?db=d", &body_of_new_series(0, 8)).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert_eq!(reply.json()["error"], "partial write: max-series-per-database limit exceeded: (5) dropped=3");
        assert_eq!(series_of_m(addr, "d").await, 5);
        // Known series are written; a new one is refused again; a bad line is named as well.
        assert_eq!(post(addr, "/write?db=d", "m,w=0 v=2 2\nm,w=4 v=2 2\n").await.status, 204);
        let reply = post(addr, "/write?db=d", "m,w=1 v=3 3\nm,w=new v=3 3\nbad line\n").await;
        assert_eq!(reply.status, 400);
        let error = reply.json()["error"].as_str().expect("error text").to_string();
        assert!(error.starts_with("partial write: line 3: "), "{error}");
        assert!(error.ends_with("; max-series-per-database limit exceeded: (5) dropped=2"), "{error}");
        assert_eq!(series_of_m(addr, "d").await, 5);
        let count = get(addr, "/query?db=d&q=SELECT%20count(v)%20FROM%20m%20WHERE%20w%3D%271%27").await;
        assert!(count.text().contains(",2]"), "the line of a known series was stored: {}", count.text());
        // Another database has its own count.
        assert_eq!(post(addr, "/write?db=other", &body_of_new_series(0, 5)).await.status, 204);
        assert_eq!(series_of_m(addr, "other").await, 5);
        server.stop().await;
    })
    .await
}

/// One body may create at most `max_new_series_per_request` series: the lines beyond are
/// dropped (400 naming the limit) and leave nothing behind; the next body may create more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_body_creates_at_most_max_new_series_per_request() {
    bounded(async {
        let server = TestServer::start(|c| c.max_new_series_per_request = 3).await;
        let addr = server.addr;
        let mut body = body_of_new_series(0, 5);
        body.push_str("m,w=0 v=2 2\n");
        let reply = post(addr, "/write?db=d", &body).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert_eq!(reply.json()["error"], "partial write: max-new-series-per-request limit exceeded: (3) dropped=2");
        assert_eq!(series_of_m(addr, "d").await, 3);
        let count = get(addr, "/query?db=d&q=SELECT%20count(v)%20FROM%20m%20WHERE%20w%3D%270%27").await;
        assert!(count.text().contains(",2]"), "later lines of a created series are stored: {}", count.text());
        // The dropped series come with the next bodies, three at a time.
        assert_eq!(post(addr, "/write?db=d", &body_of_new_series(3, 5)).await.status, 204);
        assert_eq!(series_of_m(addr, "d").await, 5);
        server.stop().await;
    })
    .await
}
