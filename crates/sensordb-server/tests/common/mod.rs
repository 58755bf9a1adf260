//! A minimal HTTP/1.1 client on a `TcpStream` and a real server on a temporary engine, shared
//! by the HTTP API tests: what is tested is exactly the bytes a client sends.
#![allow(dead_code)] // each test file uses its own part of the harness

use sensordb_engine::{Durability, Engine};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

pub struct TestServer {
    server: Option<RunningServer>,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            durability: Durability::Os,
            http_listen: "127.0.0.1:0".parse().expect("addr"),
            native_listen: "127.0.0.1:0".parse().expect("addr"),
            ..Default::default()
        };
        adjust(&mut config);
        let mut options = config.engine_options();
        // Usage counts sensordb's own bytes only: the host disk's must not throttle tests.
        options.reclaim.file_system_usage = false;
        let engine = Engine::open(dir.path(), options).expect("engine");
        let server = Server::start(config, Arc::new(engine)).await.expect("server starts");
        let addr = server.http_addr;
        TestServer { server: Some(server), addr, _dir: dir }
    }

    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            tokio::time::timeout(Duration::from_secs(10), server.shutdown()).await.expect("shutdown drains in time");
        }
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One request on a fresh connection (`Connection: close`).
pub async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("send head");
    // The server may answer (413) before taking the whole body: ignore write errors.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    parse_reply(&raw).unwrap_or_else(|| panic!("bad reply: {:?}", String::from_utf8_lossy(&raw)))
}

pub fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest = &rest[line_end + 2 + size + 2..];
        }
        body = out;
    }
    Some(Reply { status, headers, body })
}

pub async fn post(addr: SocketAddr, path: &str, body: &str) -> Reply {
    request(addr, "POST", path, &[], body.as_bytes()).await
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], b"").await
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

pub async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f).await.expect("test finished in time")
}
