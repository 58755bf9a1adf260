//! `/query` end to end: line protocol written over HTTP, read back with InfluxQL the way Grafana
//! and TSBS send it, answers compared with InfluxDB 1.x's result JSON worked out by hand.

mod common;

use common::{bounded, get, post, request, TestServer};
use serde_json::json;

/// `q` percent-encoded for a URL.
fn url(db: &str, q: &str, extra: &str) -> String {
    let encoded: String = serde_urlencoded::to_string([("q", q)]).expect("encodes");
    format!("/query?db={db}&{encoded}{extra}")
}

/// Two hosts of one measurement at 10 s spacing, seconds 1,700,000,000 to 1,700,000,030.
const DATA: &str = "cpu,host=a,dc=x usage=1,n=1i 1700000000\n\
cpu,host=a,dc=x usage=2,n=2i 1700000010\n\
cpu,host=a,dc=x usage=4 1700000020\n\
cpu,host=a,dc=x usage=8 1700000030\n\
cpu,host=b,dc=y usage=10 1700000000\n\
cpu,host=b,dc=y usage=30 1700000020\n\
mem,host=a free=100i 1700000005\n";

async fn loaded() -> TestServer {
    let server = TestServer::start(|_| {}).await;
    let reply = post(server.addr, "/write?db=telegraf&precision=s", DATA).await;
    assert_eq!(reply.status, 204, "{}", reply.text());
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grafana_graph_query_with_time_buckets_per_tag() {
    bounded(async {
        let server = loaded().await;
        let q = "SELECT mean(\"usage\") FROM \"cpu\" WHERE (\"dc\" =~ /^(x|y)$/) AND time >= 1700000000000ms and time <= 1700000039999ms GROUP BY time(20s), \"host\" fill(null)";
        let reply = get(server.addr, &url("telegraf", q, "&epoch=ms")).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(
            reply.json(),
            json!({"results":[{"statement_id":0,"series":[
                {"name":"cpu","tags":{"host":"a"},"columns":["time","mean"],"values":[[1700000000000i64,1.5],[1700000020000i64,6]]},
                {"name":"cpu","tags":{"host":"b"},"columns":["time","mean"],"values":[[1700000000000i64,10],[1700000020000i64,30]]}
            ]}]})
        );
        // Without epoch, times are RFC 3339; fill(0) fills the empty 10 s bucket of host b.
        let q = "SELECT max(usage) FROM cpu WHERE host = 'b' AND time >= '2023-11-14T22:13:20Z' AND time < '2023-11-14T22:13:40Z' GROUP BY time(10s) fill(0)";
        let reply = get(server.addr, &url("telegraf", q, "")).await;
        assert_eq!(
            reply.json()["results"][0]["series"][0]["values"],
            json!([["2023-11-14T22:13:20Z", 10], ["2023-11-14T22:13:30Z", 0]])
        );
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_exploration_as_grafana_sends_it() {
    bounded(async {
        let server = loaded().await;
        let addr = server.addr;
        let measurements = get(addr, &url("telegraf", "SHOW MEASUREMENTS", "")).await.json();
        assert_eq!(
            measurements,
            json!({"results":[{"statement_id":0,"series":[{"name":"measurements","columns":["name"],"values":[["cpu"],["mem"]]}]}]})
        );
        let values = get(addr, &url("telegraf", "SHOW TAG VALUES FROM \"cpu\" WITH KEY = \"host\" WHERE \"dc\" = 'y'", "")).await.json();
        assert_eq!(values["results"][0]["series"][0]["values"], json!([["host", "b"]]));
        let fields = get(addr, &url("telegraf", "SHOW FIELD KEYS FROM cpu", "")).await.json();
        assert_eq!(fields["results"][0]["series"][0]["values"], json!([["n", "integer"], ["usage", "float"]]));
        let keys = get(addr, &url("telegraf", "SHOW TAG KEYS", "")).await.json();
        assert_eq!(keys["results"][0]["series"][0], json!({"name":"cpu","columns":["tagKey"],"values":[["dc"],["host"]]}));
        let policies = get(addr, &url("", "SHOW RETENTION POLICIES ON telegraf", "")).await.json();
        assert_eq!(
            policies["results"][0]["series"][0],
            json!({"columns":["name","duration","shardGroupDuration","replicaN","default"],"values":[["autogen","0s","168h0m0s",1,true]]})
        );
        // Two statements, two results.
        let both = get(addr, &url("telegraf", "SHOW MEASUREMENTS LIMIT 1; SHOW SERIES FROM mem", "")).await.json();
        assert_eq!(both["results"][1], json!({"statement_id":1,"series":[{"columns":["key"],"values":[["mem,host=a"]]}]}));
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tsbs_shapes_subqueries_field_conditions_and_last_points() {
    bounded(async {
        let server = loaded().await;
        let addr = server.addr;
        // low-fuel's shape: tags of the series whose mean is under a bound.
        let q = "SELECT \"host\" FROM (SELECT mean(\"usage\") AS \"m\" FROM \"cpu\" WHERE time >= '2023-11-14T22:13:20Z' GROUP BY \"host\") WHERE \"m\" <= 5";
        let reply = get(addr, &url("telegraf", q, "&epoch=s")).await.json();
        assert_eq!(reply["results"][0]["series"][0]["values"], json!([[1700000000i64, "a"]]));
        // last-loc's shape: the newest row of each host.
        let q = "SELECT \"usage\" FROM \"cpu\" GROUP BY \"host\" ORDER BY time DESC LIMIT 1";
        let reply = get(addr, &url("telegraf", q, "&epoch=s")).await.json();
        let series = &reply["results"][0]["series"];
        // With ORDER BY time DESC, InfluxDB also walks the series backwards: host b first.
        assert_eq!(series[0]["tags"], json!({"host": "b"}));
        assert_eq!(series[0]["values"], json!([[1700000020i64, 30]]));
        assert_eq!(series[1]["values"], json!([[1700000030i64, 8]]));
        // count(*) over a subquery names its columns after the subquery's fields.
        let q = "SELECT count(*) FROM (SELECT mean(usage) AS mv FROM cpu WHERE time >= 1700000000s AND time < 1700000040s GROUP BY time(20s), host)";
        let reply = get(addr, &url("telegraf", q, "")).await.json();
        assert_eq!(reply["results"][0]["series"][0]["columns"], json!(["time", "count_mv"]));
        assert_eq!(reply["results"][0]["series"][0]["values"][0][1], json!(4));
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quoted_names_chunks_and_errors() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        // A `;` and a space inside quotes belong to the name.
        let created = post(addr, &url("", "CREATE DATABASE \"a;b c\"", ""), "").await;
        assert_eq!(created.json(), json!({"results":[{"statement_id":0}]}));
        let shown = get(addr, &url("", "SHOW DATABASES", "")).await.json();
        assert_eq!(shown["results"][0]["series"][0]["values"], json!([["a;b c"]]));
        assert_eq!(
            post(addr, "/write?db=d&precision=s", "m\\ x,t=1 v=1 1\nm\\ x,t=1 v=2 2\nm\\ x,t=1 v=3 3\nkeep v=1 1").await.status,
            204
        );
        // chunked=true: one JSON object per line, partial on all but the last.
        let reply = get(addr, &url("d", "SELECT v FROM \"m x\"", "&chunked=true&chunk_size=2&epoch=s")).await;
        let lines: Vec<serde_json::Value> = reply.text().lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["results"][0]["partial"], json!(true));
        assert_eq!(lines[0]["results"][0]["series"][0]["values"], json!([[1, 1], [2, 2]]));
        assert_eq!(lines[1]["results"][0]["series"][0]["values"], json!([[3, 3]]));
        assert!(lines[1]["results"][0].get("partial").is_none());
        // DROP MEASUREMENT with a quoted name deletes that measurement only.
        let dropped = post(addr, &url("d", "DROP MEASUREMENT \"m x\"", ""), "").await;
        assert_eq!(dropped.json(), json!({"results":[{"statement_id":0}]}));
        let left = get(addr, &url("d", "SHOW MEASUREMENTS", "")).await.json();
        assert_eq!(left["results"][0]["series"][0]["values"], json!([["keep"]]));
        // A failing statement reports its error and the ones after it are not run.
        let reply = get(addr, &url("d", "SELECT nosuch(v) FROM keep; SHOW MEASUREMENTS", "")).await.json();
        assert_eq!(reply, json!({"results":[{"statement_id":0,"error":"undefined function nosuch()"}]}));
        // Reading needs the read scope only; a form body works like the URL.
        let form = request(
            addr,
            "POST",
            "/query?db=d",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            b"q=SELECT+last%28v%29+FROM+keep&epoch=s",
        )
        .await;
        assert_eq!(form.json()["results"][0]["series"][0]["values"], json!([[1, 1]]));
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_gets_m4_points_per_pixel_and_keeps_spikes() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let addr = server.addr;
        // 1,000 points at 1 s, a ramp with one spike at second 437.
        let body: String =
            (0..1000).map(|i| format!("plant,line=a temp={} {}\n", if i == 437 { 1e6 } else { f64::from(i) }, 1_700_000_000 + i)).collect();
        assert_eq!(post(addr, "/write?db=p&precision=s", &body).await.status, 204);
        let path = "/sensordb/graph?db=p&measurement=plant&field=temp&tag.line=a&from=1700000000000000000&to=1700000999999999999&width=10";
        let reply = get(addr, path).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let json = reply.json();
        let series = json["series"].as_array().expect("series");
        assert_eq!(series.len(), 1);
        assert_eq!(series[0]["tags"], json!({"line": "a"}));
        assert_eq!(series[0]["key"], json!("p plant,line=a temp"));
        let points = series[0]["points"].as_array().expect("points");
        assert!(points.len() <= 40, "at most 4 points per pixel, got {}", points.len());
        assert!(points.contains(&json!([1_700_000_437_000i64, 1e6])), "the spike survives");
        assert_eq!(points[0], json!([1_700_000_000_000i64, 0.0]));
        assert_eq!(points.last(), Some(&json!([1_700_000_999_000i64, 999.0])));
        // Bad parameters are 400 with a reason.
        assert_eq!(get(addr, "/sensordb/graph?db=p&measurement=plant&field=temp&width=0").await.status, 400);
        assert_eq!(get(addr, "/sensordb/graph?db=p&field=temp").await.status, 400);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_see_series_created_and_dropped_after_an_earlier_query() {
    bounded(async {
        let server = loaded().await;
        let newest = |reply: common::Reply| -> Vec<String> {
            let json = reply.json();
            let series = json["results"][0]["series"].as_array().cloned().unwrap_or_default();
            series.iter().map(|s| s["tags"]["host"].as_str().unwrap_or_default().to_string()).collect()
        };
        let q = "SELECT usage FROM cpu GROUP BY host ORDER BY time DESC LIMIT 1";
        assert_eq!(newest(get(server.addr, &url("telegraf", q, "")).await), vec!["b", "a"]);
        // A new tag set written after that query is found by the next one.
        let reply = post(server.addr, "/write?db=telegraf&precision=s", "cpu,host=c,dc=z usage=5 1700000040\n").await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        assert_eq!(newest(get(server.addr, &url("telegraf", q, "")).await), vec!["c", "b", "a"]);
        // A dropped one is gone from the next.
        let reply = get(server.addr, &url("telegraf", "DROP SERIES FROM cpu WHERE host = 'b'", "")).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(newest(get(server.addr, &url("telegraf", q, "")).await), vec!["c", "a"]);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tz_writes_times_in_the_zone() {
    bounded(async {
        let server = loaded().await;
        let q = "SELECT mean(usage) FROM cpu WHERE host = 'a' AND time >= '2023-11-14T22:13:20Z' AND time < '2023-11-14T22:14:00Z' GROUP BY time(20s) tz('America/Chicago')";
        let reply = get(server.addr, &url("telegraf", q, "")).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(
            reply.json()["results"][0]["series"][0]["values"],
            json!([["2023-11-14T16:13:20-06:00", 1.5], ["2023-11-14T16:13:40-06:00", 6]])
        );
        // With epoch, times stay integers.
        let reply = get(server.addr, &url("telegraf", q, "&epoch=s")).await;
        assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][0], json!(1700000000));
        let reply = get(server.addr, &url("telegraf", "SELECT usage FROM cpu tz('Nowhere/Atlantis')", "")).await;
        assert!(reply.json()["results"][0]["error"].as_str().is_some_and(|e| e.contains("unable to find time zone")), "{}", reply.text());
        server.stop().await;
    })
    .await;
}

/// Small queries run on the thread that took the request, within bounds (points read, series,
/// rows answered); one that outgrows them runs again on a blocking thread and answers in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_beyond_the_inline_bounds_answer_in_full() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let lines: String = (0..20_000).map(|i| format!("big,host=a v={i} {}\n", 1_700_000_000 + i)).collect();
        let reply = post(server.addr, "/write?db=telegraf&precision=s", &lines).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        // The first query builds the measurement's series list; the later ones run inline first.
        for _ in 0..3 {
            let reply = get(server.addr, &url("telegraf", "SELECT count(v), sum(v) FROM big", "")).await;
            assert_eq!(reply.status, 200, "{}", reply.text());
            assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(20_000), "{}", reply.text());
            assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][2], json!(199_990_000), "{}", reply.text());
            // A condition on the field: every point is read, beyond the inline bound.
            let reply = get(server.addr, &url("telegraf", "SELECT max(v) FROM big WHERE v < 19999", "")).await;
            assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(19_998), "{}", reply.text());
            // Many rows: read inline, written on a blocking thread.
            let reply = get(server.addr, &url("telegraf", "SELECT v FROM big WHERE time >= 1700005000s LIMIT 6000", "&epoch=s")).await;
            assert_eq!(reply.status, 200, "{}", reply.text());
            let values = reply.json()["results"][0]["series"][0]["values"].as_array().cloned().unwrap_or_default();
            assert_eq!(values.len(), 6_000);
            assert_eq!(values[5_999], json!([1_700_010_999i64, 10_999]));
            // Few points, a short answer: all inline.
            let reply = get(server.addr, &url("telegraf", "SELECT count(v) FROM big WHERE time >= 1700019000s", "")).await;
            assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(1_000), "{}", reply.text());
        }
        let metrics = get(server.addr, "/metrics").await.text();
        let counter = |name: &str| -> u64 {
            let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {metrics}"));
            line[name.len() + 1..].parse().expect("a count")
        };
        // The first query built the series list on a blocking thread. Of the two that read all
        // 20,000 points, each ran inline once, ran again, and went to a blocking thread directly
        // afterwards; the two small ones ran inline every time.
        assert_eq!(counter("sensordb_queries_inline_total"), 3 + 3 + 2, "{metrics}");
        assert_eq!(counter("sensordb_queries_inline_retried_total"), 2, "{metrics}");
        server.stop().await;
        // A server's own limit below the inline bound is reported as before.
        let server = TestServer::start(|config| config.query_points_scanned_max = 1_000).await;
        let lines: String = (0..2_000).map(|i| format!("big,host=a v={i} {}\n", 1_700_000_000 + i)).collect();
        let reply = post(server.addr, "/write?db=telegraf&precision=s", &lines).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        for _ in 0..2 {
            let reply = get(server.addr, &url("telegraf", "SELECT count(v) FROM big", "")).await;
            let error = reply.json()["results"][0]["error"].as_str().unwrap_or_default().to_string();
            assert!(error.contains("max_points_scanned"), "{}", reply.text());
        }
        server.stop().await;
    })
    .await;
}

/// A measurement only ever read by tag value (TSBS high-load asks for one of five fleets)
/// has no whole series list kept: the list of that value's series, kept after the first
/// lookup, lets the next lookups of the value run inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_lookup_by_tag_value_runs_inline_without_the_whole_list() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let lines: String = (0..50).map(|i| format!("diag,fleet=f{},truck=t{i} load={i} 1700000000\n", i % 5)).collect();
        let reply = post(server.addr, "/write?db=telegraf&precision=s", &lines).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        let inline = || async {
            let metrics = get(server.addr, "/metrics").await.text();
            let name = "sensordb_queries_inline_total";
            let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {metrics}"));
            line[name.len() + 1..].parse::<u64>().expect("a count")
        };
        let q = "SELECT count(load) FROM diag WHERE fleet = 'f3'";
        let before = inline().await;
        for round in 0..3 {
            let reply = get(server.addr, &url("telegraf", q, "")).await;
            assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(10), "{}", reply.text());
            // The first lookup builds the value's list on a blocking thread; the next run inline.
            assert_eq!(inline().await, before + round, "round {round}");
        }
        server.stop().await;
    })
    .await;
}

/// A measurement of more series than a query run inline may read (1,024) still answers a
/// lookup of one tag value inline: the condition requires it, so only its series are read.
/// A query over the whole measurement goes to a blocking thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_by_tag_value_in_a_large_measurement_runs_inline() {
    bounded(async {
        let server = TestServer::start(|_| {}).await;
        let lines: String = (0..1_500).map(|i| format!("fleet,truck=t{i} v={i} 1700000000\n")).collect();
        let reply = post(server.addr, "/write?db=telegraf&precision=s", &lines).await;
        assert_eq!(reply.status, 204, "{}", reply.text());
        let metrics = || async { get(server.addr, "/metrics").await.text() };
        let inline = |metrics: &str| -> u64 {
            let name = "sensordb_queries_inline_total";
            let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {metrics}"));
            line[name.len() + 1..].parse().expect("a count")
        };
        // The first query builds the measurement's list on a blocking thread.
        let whole = "SELECT count(v) FROM fleet";
        let reply = get(server.addr, &url("telegraf", whole, "")).await;
        assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(1_500), "{}", reply.text());
        let before = inline(&metrics().await);
        for i in [7, 1_234] {
            let q = format!("SELECT v FROM fleet WHERE truck = 't{i}' ORDER BY time DESC LIMIT 1");
            let reply = get(server.addr, &url("telegraf", &q, "&epoch=s")).await;
            assert_eq!(reply.json()["results"][0]["series"][0]["values"], json!([[1_700_000_000i64, i]]), "{}", reply.text());
        }
        assert_eq!(inline(&metrics().await), before + 2);
        // 1,500 series: not inline.
        let reply = get(server.addr, &url("telegraf", whole, "")).await;
        assert_eq!(reply.json()["results"][0]["series"][0]["values"][0][1], json!(1_500), "{}", reply.text());
        assert_eq!(inline(&metrics().await), before + 2);
        server.stop().await;
    })
    .await;
}
