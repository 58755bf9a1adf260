//! The load-test clients over TLS: an in-process server on 127.0.0.1 serving a self-signed
//! certificate made by the test (rcgen), and `bench tx`, `bench ingest --protocol native` and
//! `bench ingest --protocol http` clients that trust it. Each runs briefly; the points they were
//! acknowledged must be in the store. Every run is bounded in time.

use sensordb_bench::ingest_bench::{self, IngestBenchConfig, IngestProtocol};
use sensordb_bench::load::{InProcessServer, SelfSignedCert};
use sensordb_bench::tx_bench::{self, TxBenchConfig};
use sensordb_engine::Durability;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(120);

async fn tls_server(cert: &SelfSignedCert) -> InProcessServer {
    InProcessServer::start_with_tls(Durability::Os, 8, Some((&cert.cert, &cert.key))).await.expect("server with TLS starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_bench_over_tls_stores_every_point() {
    let cert = SelfSignedCert::generate().expect("certificate");
    let server = tls_server(&cert).await;
    let config = TxBenchConfig {
        clients: 4,
        series: 2,
        transactions: 3,
        packets: 2,
        points: 50,
        interval: Duration::from_millis(50),
        tls: Some(cert.client_tls()),
        ..TxBenchConfig::default()
    };
    let report = tokio::time::timeout(BOUND, tx_bench::run(&config, server.native_addr())).await.expect("in time");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.clients_connected, 4);
    assert_eq!((report.successful, report.failed), (12, 0));
    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    assert_eq!(stored, config.expected_points());
    assert_eq!(stored, report.points);

    // Without TLS the same clients cannot connect to that server.
    let server = tls_server(&cert).await;
    let plain = TxBenchConfig { tls: None, clients: 1, transactions: 1, ..config };
    let report = tokio::time::timeout(BOUND, tx_bench::run(&plain, server.native_addr())).await.expect("in time");
    assert_eq!(report.clients_connected, 0, "a plaintext client is refused");
    server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
}

fn ingest_config(protocol: IngestProtocol, cert: &SelfSignedCert) -> IngestBenchConfig {
    IngestBenchConfig {
        protocol,
        clients: 1,
        duration: Duration::from_millis(800),
        batch_points: 1_000,
        scale: 4,
        hours: 1,
        progress: false,
        tls: Some(cert.client_tls()),
        ..IngestBenchConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_ingest_over_tls_stores_everything_acknowledged() {
    let cert = SelfSignedCert::generate().expect("certificate");
    let server = tls_server(&cert).await;
    let config = ingest_config(IngestProtocol::Native, &cert);
    let report = tokio::time::timeout(BOUND, ingest_bench::run(&config, server.native_addr())).await.expect("in time").expect("runs");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.failed, 0);
    assert!(report.points > 0 && report.requests > 0, "{report:?}");
    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    assert_eq!(stored, report.points, "every acknowledged point is stored, none twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ingest_over_tls_stores_the_data_set() {
    let cert = SelfSignedCert::generate().expect("certificate");
    let server = tls_server(&cert).await;
    let config = ingest_config(IngestProtocol::Http, &cert);
    let report = tokio::time::timeout(BOUND, ingest_bench::run(&config, server.http_addr())).await.expect("in time").expect("runs");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.failed, 0);
    assert!(report.points > 0 && report.requests > 0 && report.bytes > 0, "{report:?}");
    let stored = server.shutdown(Duration::from_secs(30)).await.expect("shutdown");
    // Later rounds resend the same bodies, whose points the store keeps once: after a whole
    // round the store holds exactly the data set, before it exactly what was acknowledged.
    if report.rounds >= 1 {
        assert_eq!(stored, report.dataset_points, "{report:?}");
    } else {
        assert_eq!(stored, report.points, "{report:?}");
    }
}
