//! TLS on both listeners: a self-signed certificate made at test time (rcgen) into a temp dir,
//! a real `Server` on 127.0.0.1 with `tls_cert`/`tls_key`, and clients that trust that
//! certificate: raw HTTP/1.1 over a rustls stream, and `sensordb-client` with `ClientTls`.
//! Plaintext clients against the TLS ports fail, and the server keeps serving.

use sensordb_client::{Client, ClientOptions, ClientTls};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

const LIMIT: Duration = Duration::from_secs(60);

async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.expect("test finished in time")
}

/// Writes a self-signed certificate for "localhost" and its key into `dir`; returns the
/// certificate's PEM (the CA a client trusts).
fn make_cert(dir: &Path) -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let cert_pem = certified.cert.pem();
    std::fs::write(dir.join("cert.pem"), &cert_pem).expect("write cert");
    std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).expect("write key");
    cert_pem
}

async fn start(dir: &Path, tls: bool) -> (RunningServer, Arc<Engine>) {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let config = ServerConfig {
        data_dir: data.clone(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        tls_cert: tls.then(|| dir.join("cert.pem")),
        tls_key: tls.then(|| dir.join("key.pem")),
        ..ServerConfig::default()
    };
    let engine = Arc::new(Engine::open(&data, EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine opens"));
    let server = Server::start(config, engine.clone()).await.expect("server starts");
    (server, engine)
}

fn connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request (`Connection: close`) over `stream`; returns (status, body).
async fn request<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, method: &str, target: &str, body: &str) -> (u16, String) {
    let head = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).await.expect("send head");
    stream.write_all(body.as_bytes()).await.expect("send body");
    stream.flush().await.expect("flush");
    let mut reply = Vec::new();
    // A peer that closes without close_notify still leaves a complete reply behind.
    if let Err(error) = stream.read_to_end(&mut reply).await {
        assert!(!reply.is_empty(), "no reply: {error}");
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

async fn https(addr: SocketAddr, ca_pem: &str, method: &str, target: &str, body: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    let tls = connector(ca_pem).connect(name, tcp).await.expect("TLS handshake");
    request(tls, method, target, body).await
}

fn key(name: &str) -> SeriesKey {
    SeriesKey::new("readings", [("truck", name)], "velocity").expect("key")
}

fn stored(engine: &Engine, key: &SeriesKey) -> Vec<(i64, Value)> {
    let Some(id) = engine.find_series(key) else { return Vec::new() };
    engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.expect("reads")).map(|p| (p.timestamp, p.value)).collect()
}

fn tls_options(ca_pem: &str) -> ClientOptions {
    ClientOptions {
        tls: Some(ClientTls::new(ca_pem.as_bytes(), "localhost")),
        max_attempts: 1,
        reply_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_write_and_query_over_tls() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = make_cert(dir.path());
        let (server, _engine) = start(dir.path(), true).await;
        let addr = server.http_addr;
        let (status, body) = https(addr, &ca, "POST", "/write?db=tls", "cpu,host=a usage=1.5 1700000000000000001\n").await;
        assert_eq!(status, 204, "{body}");
        let (status, body) = https(addr, &ca, "GET", "/sensordb/points?measurement=cpu&field=usage", "").await;
        assert_eq!(status, 200, "{body}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
        assert_eq!(json["series"][0]["points"], serde_json::json!([[1700000000000000001i64, 1.5]]), "{body}");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_transaction_over_tls() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = make_cert(dir.path());
        let (server, engine) = start(dir.path(), true).await;
        let client = Client::connect_with(server.native_addr, tls_options(&ca)).await.expect("connects over TLS");
        let speed = client.series(&key("t"), ValueKind::F64).await.expect("series");
        let mut tx = client.transaction();
        for i in 0..100i64 {
            tx.push(&speed, i * 1000, Value::F64(i as f64)).expect("push");
        }
        tx.commit().await.expect("commits");
        let points = stored(&engine, &key("t"));
        assert_eq!(points.len(), 100);
        assert_eq!(points[7], (7000, Value::F64(7.0)));

        // A client that does not trust the certificate is refused by its own verification.
        let other_dir = dir.path().join("other");
        std::fs::create_dir_all(&other_dir).expect("dir");
        let other = make_cert(&other_dir);
        let refused = Client::connect_with(server.native_addr, tls_options(&other)).await;
        assert!(refused.is_err(), "an untrusted certificate must fail the handshake");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_clients_fail_cleanly_and_the_server_keeps_serving() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = make_cert(dir.path());
        let (server, _engine) = start(dir.path(), true).await;

        // Plain HTTP against the TLS port: no HTTP answer, the connection ends.
        let mut plain = TcpStream::connect(server.http_addr).await.expect("connect");
        plain.write_all(b"GET /ping HTTP/1.1\r\nHost: localhost\r\n\r\n").await.expect("send");
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(15), plain.read_to_end(&mut reply)).await.expect("the server closes");
        assert!(!reply.starts_with(b"HTTP/"), "no plaintext HTTP answer: {:?}", String::from_utf8_lossy(&reply));

        // The native client without TLS: an error, not a hang.
        let options = ClientOptions { max_attempts: 1, reply_timeout: Duration::from_secs(10), ..ClientOptions::default() };
        let plain_native = Client::connect_with(server.native_addr, options).await;
        assert!(plain_native.is_err(), "a plaintext native client must fail");

        // A client that connects and says nothing holds no one else up.
        let _silent = TcpStream::connect(server.native_addr).await.expect("connect");
        let _silent_http = TcpStream::connect(server.http_addr).await.expect("connect");

        // Both listeners still serve TLS clients.
        let (status, _) = https(server.http_addr, &ca, "GET", "/ping", "").await;
        assert_eq!(status, 204);
        let client = Client::connect_with(server.native_addr, tls_options(&ca)).await.expect("connects over TLS");
        let handle = client.series(&key("after"), ValueKind::I64).await.expect("series");
        let mut tx = client.transaction();
        tx.push(&handle, 1, Value::I64(1)).expect("push");
        tx.commit().await.expect("commits");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_certificate_or_key_fails_the_start() {
    bounded(async {
        let dir = tempfile::tempdir().expect("tempdir");
        make_cert(dir.path());
        let engine = Arc::new(Engine::open(dir.path().join("data"), EngineOptions::default()).expect("engine opens"));
        let config = |cert: &str, key: &str| ServerConfig {
            data_dir: dir.path().join("data"),
            http_listen: "127.0.0.1:0".parse().expect("address"),
            native_listen: "127.0.0.1:0".parse().expect("address"),
            tls_cert: Some(dir.path().join(cert)),
            tls_key: Some(dir.path().join(key)),
            ..ServerConfig::default()
        };
        std::fs::write(dir.path().join("garbage.pem"), "not a certificate").expect("write");
        for (cert, key, mention) in [
            ("missing.pem", "key.pem", "missing.pem"),
            ("cert.pem", "missing.pem", "missing.pem"),
            ("garbage.pem", "key.pem", "garbage.pem"),
            ("cert.pem", "garbage.pem", "garbage.pem"),
            ("key.pem", "cert.pem", "tls_"),
        ] {
            let error = match Server::start(config(cert, key), engine.clone()).await {
                Ok(_) => panic!("{cert}/{key}: the server must not start"),
                Err(error) => error,
            };
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{cert}/{key}: {error}");
            assert!(error.to_string().contains(mention), "{cert}/{key}: {error}");
        }
    })
    .await;
}
