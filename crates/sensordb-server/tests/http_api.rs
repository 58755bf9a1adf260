//! End-to-end tests of the InfluxDB-compatible HTTP API over real sockets on 127.0.0.1.
//!
//! Each test starts a real `Server` on a temporary engine (durability `os`) and talks HTTP/1.1
//! to it through a minimal client written on a `TcpStream` (one request per connection, or
//! several over one kept-alive connection), so what is tested is exactly the bytes a client sends.
//! Every test is bounded by a timeout.

mod common;

use common::{bounded, get, gzip, post, request, TestServer};
use sensordb_server::auth::{Scope, TokenConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The points of `/sensordb/points?<query>` as (key, [[ts, value]]).
async fn points(addr: SocketAddr, query: &str) -> Vec<(String, Vec<serde_json::Value>)> {
    let reply = get(addr, &format!("/sensordb/points?{query}")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["series"]
        .as_array()
        .expect("series")
        .iter()
        .map(|s| (s["key"].as_str().expect("key").to_string(), s["points"].as_array().expect("points").clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_write_then_read_back_exactly_with_precision() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        let body = "cpu,host=a,region=eu usage=1.5,count=7i,big=18446744073709551615u,up=true,note=\"hi there\" 1700000000000000001\n\
                    cpu,host=a,region=eu usage=-0.25,count=-3i,big=0u,up=F,note=\"\" 1700000000000000002\n";
        let reply = post(addr, "/write?db=telemetry", body).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        let series = points(addr, "measurement=cpu&field=usage&tag.host=a").await;
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].0, "cpu,host=a,region=eu usage");
        assert_eq!(series[0].1, vec![serde_json::json!([1700000000000000001i64, 1.5]), serde_json::json!([1700000000000000002i64, -0.25])]);
        let count = points(addr, "measurement=cpu&field=count").await;
        assert_eq!(count[0].1, vec![serde_json::json!([1700000000000000001i64, 7]), serde_json::json!([1700000000000000002i64, -3])]);
        let big = points(addr, "measurement=cpu&field=big").await;
        assert_eq!(big[0].1[0], serde_json::json!([1700000000000000001i64, u64::MAX]));
        let up = points(addr, "measurement=cpu&field=up").await;
        assert_eq!(up[0].1, vec![serde_json::json!([1700000000000000001i64, true]), serde_json::json!([1700000000000000002i64, false])]);
        let note = points(addr, "measurement=cpu&field=note").await;
        assert_eq!(note[0].1[0], serde_json::json!([1700000000000000001i64, "aGkgdGhlcmU="]), "bytes are base64");

        // Precision: the same instant written as s, ms, us, m and h.
        for (precision, ts) in [("s", "1700000000"), ("ms", "1700000000000"), ("u", "1700000000000000"), ("m", "28333333"), ("h", "472222")] {
            let reply = post(addr, &format!("/write?db=telemetry&precision={precision}"), &format!("prec,p={precision} v=1 {ts}\n")).await;
            assert_eq!(reply.status, 204, "{precision}: {}", reply.text());
        }
        let expect = |p: &str| -> i64 {
            match p {
                "s" | "ms" | "u" => 1_700_000_000_000_000_000,
                "m" => 28_333_333 * 60_000_000_000,
                _ => 472_222 * 3_600_000_000_000,
            }
        };
        for p in ["s", "ms", "u", "m", "h"] {
            let got = points(addr, &format!("measurement=prec&tag.p={p}")).await;
            assert_eq!(got[0].1[0][0].as_i64(), Some(expect(p)), "precision {p}");
        }

        // A line without a timestamp gets the server's time.
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos() as i64;
        assert_eq!(post(addr, "/write?db=telemetry", "nots v=2").await.status, 204);
        let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos() as i64;
        let got = points(addr, "measurement=nots").await;
        let ts = got[0].1[0][0].as_i64().expect("ts");
        assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");

        // Time range [from, to), RFC 3339 and CSV.
        let got = points(addr, "measurement=cpu&field=usage&from=1700000000000000002&to=2023-11-14T22:13:21Z").await;
        assert_eq!(got[0].1, vec![serde_json::json!([1700000000000000002i64, -0.25])]);
        let csv = get(addr, "/sensordb/points?measurement=cpu&field=count&format=csv").await;
        assert_eq!(csv.status, 200);
        assert_eq!(csv.text(), "series,timestamp,value\n\"cpu,host=a,region=eu count\",1700000000000000001,7\n\"cpu,host=a,region=eu count\",1700000000000000002,-3\n");
        let limited = get(addr, "/sensordb/points?measurement=cpu&field=count&limit=1").await;
        assert_eq!(limited.json()["truncated"], serde_json::json!(true));
        assert_eq!(limited.header("x-sensordb-truncated"), Some("true"));

        // The series list.
        let list = get(addr, "/sensordb/series?measurement=cpu&tag.region=eu").await;
        assert_eq!(list.status, 200);
        let list = list.json();
        let series = list["series"].as_array().expect("list");
        assert_eq!(series.len(), 5);
        assert!(series.iter().any(|s| s["field"] == "note" && s["kind"] == "bytes"), "{list}");

        // Missing db, bad precision.
        assert_eq!(post(addr, "/write", "m v=1 1").await.status, 400);
        assert_eq!(post(addr, "/write?db=x&precision=fortnights", "m v=1 1").await.status, 400);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_scopes_give_401_and_403() {
    bounded(async {
        let server = TestServer::start(|c| {
            c.tokens = vec![
                TokenConfig { token: "writer".into(), scopes: vec![Scope::Write] },
                TokenConfig { token: "reader".into(), scopes: vec![Scope::Read] },
            ]
        })
        .await;
        let addr = server.addr;
        let line = b"m,t=1 v=1 1\n";
        let v2 = "/api/v2/write?org=o&bucket=b&precision=ns";
        assert_eq!(request(addr, "POST", v2, &[], line).await.status, 401);
        assert_eq!(request(addr, "POST", v2, &[("Authorization", "Token nobody")], line).await.status, 401);
        assert_eq!(request(addr, "POST", v2, &[("Authorization", "Token reader")], line).await.status, 403);
        let ok = request(addr, "POST", v2, &[("Authorization", "Token writer")], line).await;
        assert_eq!(ok.status, 204, "{}", ok.text());
        assert_eq!(
            request(addr, "POST", "/api/v2/write?bucket=b&precision=s", &[("Authorization", "Bearer writer")], b"m,t=2 v=2 2\n")
                .await
                .status,
            204
        );
        assert_eq!(
            request(addr, "POST", "/api/v2/write?org=o", &[("Authorization", "Token writer")], line).await.status,
            400,
            "bucket is required"
        );
        // v1: the p parameter carries the token; Basic auth too.
        assert_eq!(post(addr, "/write?db=d&u=x&p=writer", "m,t=3 v=3 3").await.status, 204);
        assert_eq!(post(addr, "/write?db=d&u=x&p=reader", "m,t=3 v=3 3").await.status, 403);
        assert_eq!(post(addr, "/write?db=d", "m,t=3 v=3 3").await.status, 401);
        assert_eq!(request(addr, "POST", "/write?db=d", &[("Authorization", "Basic eDp3cml0ZXI=")], b"m,t=4 v=4 4").await.status, 204);
        // Reads need the read scope.
        assert_eq!(get(addr, "/sensordb/points?measurement=m").await.status, 401);
        assert_eq!(get(addr, "/sensordb/points?measurement=m&p=writer").await.status, 403);
        let read = request(addr, "GET", "/sensordb/points?measurement=m&tag.t=2", &[("Authorization", "Token reader")], b"").await;
        assert_eq!(read.status, 200);
        assert_eq!(read.json()["series"][0]["points"], serde_json::json!([[2_000_000_000i64, 2.0]]), "v2 precision s");
        assert_eq!(get(addr, "/sensordb/series?p=writer").await.status, 403);
        // Open endpoints stay open.
        assert_eq!(get(addr, "/ping").await.status, 204);
        assert_eq!(get(addr, "/health").await.status, 200);
        assert_eq!(get(addr, "/metrics").await.status, 200);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_bodies_and_size_limits() {
    bounded(async {
        let server = TestServer::start(|c| c.max_body_bytes = 64 << 10).await;
        let addr = server.addr;
        let mut text = String::new();
        for i in 0..500 {
            text.push_str(&format!("gz,host=h{} v={i} {}\n", i % 5, 1_000 + i));
        }
        let body = gzip(text.as_bytes());
        let reply = request(addr, "POST", "/write?db=d", &[("Content-Encoding", "gzip")], &body).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        let got = points(addr, "measurement=gz&tag.host=h3").await;
        assert_eq!(got[0].1.len(), 100);
        assert_eq!(got[0].1[0], serde_json::json!([1003, 3.0]));

        // Plain body over the limit.
        let big = "big v=1 1\n".repeat(7_000);
        let reply = post(addr, "/write?db=d", &big).await;
        assert_eq!(reply.status, 413, "{}", reply.text());
        // A gzip bomb: small on the wire, far over the limit once inflated.
        let bomb = gzip(&vec![b'a'; 64 << 20]);
        assert!(bomb.len() < 64 << 10, "the bomb itself is small: {}", bomb.len());
        let reply = request(addr, "POST", "/write?db=d", &[("Content-Encoding", "gzip")], &bomb).await;
        assert_eq!(reply.status, 413, "{}", reply.text());
        // Not gzip at all.
        let reply = request(addr, "POST", "/write?db=d", &[("Content-Encoding", "gzip")], b"plain text").await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert_eq!(request(addr, "POST", "/write?db=d", &[("Content-Encoding", "br")], b"x v=1").await.status, 415);
        // Nothing of the refused bodies was stored and the server still serves.
        assert_eq!(get(addr, "/sensordb/series?measurement=big").await.json()["series"], serde_json::json!([]));
        assert_eq!(get(addr, "/ping").await.status, 204);
        assert_eq!(post(addr, "/write?db=d", "after v=1 1").await.status, 204);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lines_are_partial_writes_and_type_conflicts_are_400() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        let body = "pw,s=1 v=1 10\n# a comment\npw,s=1 v= 20\npw,s=1 v=3 30\npw,s=1 v=4 nope\npw,s=1,s=2 v=9 40\npw,s=1 v=5 50\n";
        let reply = post(addr, "/write?db=d", body).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        let json = reply.json();
        assert_eq!(json["line"], 3, "{json}");
        let error = json["error"].as_str().expect("error");
        assert!(error.starts_with("partial write: line 3:"), "{error}");
        assert!(error.ends_with("dropped=3"), "{error}");
        let got = points(addr, "measurement=pw").await;
        assert_eq!(got[0].1, vec![serde_json::json!([10, 1.0]), serde_json::json!([30, 3.0]), serde_json::json!([50, 5.0])]);

        // Field type conflict, against the store and within one body.
        assert_eq!(post(addr, "/write?db=d", "tc v=1 1").await.status, 204);
        let reply = post(addr, "/write?db=d", "tc v=2i 2\ntc w=1i 3\n").await;
        assert_eq!(reply.status, 400);
        let json = reply.json();
        assert!(json["error"].as_str().expect("error").contains("field type conflict"), "{json}");
        assert_eq!(json["line"], 1);
        let reply = post(addr, "/write?db=d", "tc2 v=1 1\ntc2 v=\"s\" 2\n").await;
        assert_eq!(reply.status, 400);
        assert!(reply.text().contains("field type conflict"), "{}", reply.text());
        assert_eq!(points(addr, "measurement=tc&field=w").await[0].1, vec![serde_json::json!([3, 1])]);
        assert_eq!(points(addr, "measurement=tc&field=v").await[0].1, vec![serde_json::json!([1, 1.0])]);

        // Garbage and invalid UTF-8; the server keeps serving.
        let reply = request(addr, "POST", "/write?db=d", &[], b"ok v=1 1\nbad \xff\xfe v=1 2\nok v=3 3\n").await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.json()["line"], 2);
        assert_eq!(points(addr, "measurement=ok").await[0].1, vec![serde_json::json!([1, 1.0])]);
        let raw = {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(b"THIS IS NOT HTTP\r\n\r\n").await.expect("send");
            let mut raw = Vec::new();
            let _ = stream.read_to_end(&mut raw).await;
            raw
        };
        assert!(raw.is_empty() || raw.starts_with(b"HTTP/1.1 400"), "{:?}", String::from_utf8_lossy(&raw));
        assert_eq!(get(addr, "/ping").await.status, 204);
        assert_eq!(post(addr, "/write?db=d", "still v=1 1").await.status, 204);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn influxql_subset_ping_health_and_metrics() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        let reply = post(addr, "/query?q=CREATE+DATABASE+benchmark", "").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json(), serde_json::json!({"results":[{"statement_id":0}]}));
        // As a form body, the way the Python client may send it, with a quoted name.
        let reply = request(addr, "POST", "/query", &[("Content-Type", "application/x-www-form-urlencoded")], b"q=CREATE%20DATABASE%20%22other%22").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let reply = get(addr, "/query?q=SHOW%20DATABASES").await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.json(),
            serde_json::json!({"results":[{"statement_id":0,"series":[{"name":"databases","columns":["name"],"values":[["benchmark"],["other"]]}]}]})
        );
        // A statement that fails is reported inside its result, as InfluxDB does.
        let reply = get(addr, "/query?q=SELECT%20*%20FROM%20cpu").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.json(), serde_json::json!({"results":[{"statement_id":0,"error":"database name required"}]}));
        // A query that does not parse is refused whole, with the position of the problem.
        let reply = get(addr, "/query?db=benchmark&q=SELECT%20*%20FROMM%20cpu").await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.json()["error"], "error parsing query: found FROMM, expected FROM at line 1, char 10");
        assert_eq!(get(addr, "/query").await.status, 400);

        let ping = get(addr, "/ping").await;
        assert_eq!(ping.status, 204);
        assert!(ping.header("x-influxdb-version").is_some());
        assert_eq!(request(addr, "HEAD", "/ping", &[], b"").await.status, 204);
        let health = get(addr, "/health").await;
        assert_eq!(health.status, 200);
        assert_eq!(health.json()["status"], "pass");

        assert_eq!(post(addr, "/write?db=benchmark", "mx,a=1 x=1,y=2i 1\nmx,a=2 x=1 1\n").await.status, 204);
        assert_eq!(post(addr, "/write?db=benchmark", "mx,a=1 x=2 2\nmx,a=1 x= 3\n").await.status, 400);
        let metrics = get(addr, "/metrics").await;
        assert_eq!(metrics.status, 200);
        assert_eq!(metrics.header("content-type"), Some("text/plain; version=0.0.4"));
        let text = metrics.text();
        assert!(text.lines().any(|l| l == "sensordb_points_written_total 4"), "{text}");
        assert!(text.lines().any(|l| l == "sensordb_series 3"), "{text}");
        assert!(text.lines().any(|l| l == "sensordb_in_flight_bytes 0"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("sensordb_http_errors_total ") && l != "sensordb_http_errors_total 0"), "{text}");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_clients_are_all_stored_exactly_once() {
    bounded(async {
        // A small in-flight budget, so some writers have to wait for others to become durable.
        let server = TestServer::start(|c| {
            c.max_in_flight_bytes = 64 << 10;
            c.max_connection_in_flight_bytes = 64 << 10;
            c.max_connections = 64;
        })
        .await;
        let addr = server.addr;
        let clients = 200;
        let lines_per_request = 50;
        let mut tasks = Vec::new();
        for client in 0..clients {
            tasks.push(tokio::spawn(async move {
                let mut body = String::new();
                for i in 0..lines_per_request {
                    body.push_str(&format!("conc,client=c{client} v={i}i,w={}i {}\n", client * 1000 + i, 1_000_000 + i));
                }
                let reply = post(addr, "/write?db=d", &body).await;
                assert_eq!(reply.status, 204, "client {client}: {}", reply.text());
            }));
        }
        for task in tasks {
            task.await.expect("client task");
        }
        let reply = get(addr, "/sensordb/points?measurement=conc&field=w").await;
        let json = reply.json();
        let series = json["series"].as_array().expect("series");
        assert_eq!(series.len(), clients);
        let mut total = 0;
        for s in series {
            let points = s["points"].as_array().expect("points");
            assert_eq!(points.len(), lines_per_request);
            let client: i64 =
                s["key"].as_str().expect("key").trim_start_matches("conc,client=c").trim_end_matches(" w").parse().expect("client");
            for (i, p) in points.iter().enumerate() {
                assert_eq!(p, &serde_json::json!([1_000_000 + i as i64, client * 1000 + i as i64]));
            }
            total += points.len();
        }
        assert_eq!(total, clients * lines_per_request);
        let metrics = get(addr, "/metrics").await.text();
        let expected = format!("sensordb_points_written_total {}", clients * lines_per_request * 2);
        assert!(metrics.lines().any(|l| l == expected), "{metrics}");
        server.stop().await;
    })
    .await;
}

/// Writers remember series between bodies (and field layouts between lines): lines that leave
/// fields out, reorder them or add new ones, over several bodies, store every value in its own
/// series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_left_out_reordered_or_added_across_bodies_land_in_their_series() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        let bodies = [
            "r,t=1 a=1,b=2 10\nr,t=1 b=3 20\nr,t=2 a=5 10\n",
            "r,t=1 b=4,a=6 30\nr,t=1 a=7,c=8i 40\nr,t=2 a=9,b=10 20\n",
            "r,t=1 c=11i,a=12,b=13 50\nr,t=1 a=14,b=15 60\n",
        ];
        for body in bodies {
            assert_eq!(post(addr, "/write?db=d", body).await.status, 204, "{body}");
        }
        let values = |got: Vec<(String, Vec<serde_json::Value>)>| got.into_iter().map(|(_, v)| v).next().unwrap_or_default();
        let p = |t: i64, v: serde_json::Value| serde_json::json!([t, v]);
        assert_eq!(
            values(points(addr, "measurement=r&tag.t=1&field=a").await),
            vec![p(10, 1.0.into()), p(30, 6.0.into()), p(40, 7.0.into()), p(50, 12.0.into()), p(60, 14.0.into())]
        );
        assert_eq!(
            values(points(addr, "measurement=r&tag.t=1&field=b").await),
            vec![p(10, 2.0.into()), p(20, 3.0.into()), p(30, 4.0.into()), p(50, 13.0.into()), p(60, 15.0.into())]
        );
        assert_eq!(values(points(addr, "measurement=r&tag.t=1&field=c").await), vec![p(40, 8.into()), p(50, 11.into())]);
        assert_eq!(values(points(addr, "measurement=r&tag.t=2&field=a").await), vec![p(10, 5.0.into()), p(20, 9.0.into())]);
        assert_eq!(values(points(addr, "measurement=r&tag.t=2&field=b").await), vec![p(20, 10.0.into())]);
        // A conflict with a field known from an earlier body drops only its line.
        let reply = post(addr, "/write?db=d", "r,t=1 a=1i 70\nr,t=1 a=16 80\n").await;
        assert_eq!(reply.status, 400);
        assert!(reply.text().contains("field type conflict"), "{}", reply.text());
        assert_eq!(values(points(addr, "measurement=r&tag.t=1&field=a").await).last(), Some(&p(80, 16.0.into())));
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_are_namespaces_and_drop_series_deletes_durably() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        for db in ["east", "west"] {
            assert_eq!(post(addr, &format!("/write?db={db}&precision=s"), "m,host=x v=1i 100\nm,host=y v=2i 100").await.status, 204);
        }
        assert_eq!(points(addr, "db=east&measurement=m").await.len(), 2, "each database holds its own series");
        assert_eq!(points(addr, "measurement=m").await.len(), 4, "without db: every database");
        let dropped = post(addr, "/query?db=east", "").await;
        assert_eq!(dropped.status, 400, "q is required");
        let dropped = post(addr, "/query?db=east&q=DROP+SERIES+FROM+m+WHERE+host%3D%27x%27", "").await;
        assert_eq!(dropped.status, 200, "{}", dropped.text());
        let east = points(addr, "db=east&measurement=m").await;
        assert_eq!(east.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), vec!["m,host=y v"]);
        assert_eq!(points(addr, "db=west&measurement=m").await.len(), 2, "the other database is untouched");
        // The key is free again: a new write starts a new series with only the new point.
        assert_eq!(post(addr, "/write?db=east&precision=s", "m,host=x v=3i 200").await.status, 204);
        let east = points(addr, "db=east&measurement=m&tag.host=x").await;
        assert_eq!(east[0].1, vec![serde_json::json!([200_000_000_000i64, 3])]);
        let created = post(addr, "/query?q=CREATE+DATABASE+north+WITH+DURATION+30d", "").await;
        assert_eq!(created.status, 200, "{}", created.text());
        let shown = get(addr, "/query?q=SHOW+DATABASES").await.json();
        assert_eq!(shown["results"][0]["series"][0]["values"], serde_json::json!([["east"], ["north"], ["west"]]));
        server.stop().await;
    })
    .await;
}

/// Usage over `U_h` (forced with tiny thresholds against a 4 KiB capacity): a write waits for
/// reclaim, and with nothing to reclaim and eviction off it fails cleanly after the wait limit
/// with 503 and Retry-After; the server keeps serving, and `/metrics` shows the usage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_over_the_high_threshold_makes_writes_wait_then_refuse_cleanly() {
    bounded(async {
        let server = TestServer::start(|c| {
            c.capacity_bytes = Some(4096);
            c.disk_target_usage = 0.0001;
            c.throttle_low_usage = 0.0002;
            c.throttle_high_usage = 0.0003;
            c.evict_oldest_when_full = false;
            c.full_wait_max_ms = 300;
        })
        .await;
        let addr = server.addr;
        // The first write finds the store empty enough, or waits and fails: either way, once
        // something is stored, usage is over U_h and the next write must wait and refuse.
        let _ = post(addr, "/write?db=d&precision=s", "m v=1 1").await;
        let started = std::time::Instant::now();
        let refused = post(addr, "/write?db=d&precision=s", "m v=2 2").await;
        assert_eq!(refused.status, 503, "{}", refused.text());
        assert!(started.elapsed() >= Duration::from_millis(300), "the write waited for space first");
        assert!(refused.header("retry-after").is_some());
        assert!(refused.text().contains("disk full"), "{}", refused.text());
        let metrics = get(addr, "/metrics").await.text();
        let usage: f64 =
            metrics.lines().find_map(|l| l.strip_prefix("sensordb_disk_usage_ratio ")).expect("usage metric").parse().expect("number");
        assert!(usage >= 0.0003, "{usage}");
        assert_eq!(get(addr, "/ping").await.status, 204, "the server keeps serving");
        server.stop().await;
    })
    .await;
}

/// Between `U_l` and `U_h` a write is stored and acknowledged after the delay T.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_are_delayed_between_the_throttle_thresholds() {
    bounded(async {
        let server = TestServer::start(|c| {
            // Usage = sensordb's bytes over 1 MiB: a few hundred bytes delay by ~0.2 ms.
            c.capacity_bytes = Some(1 << 20);
            c.disk_target_usage = 1e-9;
            c.throttle_low_usage = 2e-9;
            c.throttle_high_usage = 1.0;
            c.evict_oldest_when_full = false;
        })
        .await;
        let addr = server.addr;
        assert_eq!(post(addr, "/write?db=d&precision=s", "m v=1 1").await.status, 204);
        assert_eq!(post(addr, "/write?db=d&precision=s", "m v=2 2").await.status, 204);
        let metrics = get(addr, "/metrics").await.text();
        let delayed: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("sensordb_throttle_delay_seconds_total "))
            .expect("delay metric")
            .parse()
            .expect("number");
        assert!(delayed > 0.0, "a delay was imposed:\n{metrics}");
        assert_eq!(points(addr, "db=d&measurement=m").await[0].1.len(), 2, "throttled writes are stored");
        server.stop().await;
    })
    .await;
}
