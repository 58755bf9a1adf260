//! A write refused before its body is read (no or a read-only token, no database, a bad
//! precision) still gets its answer to the client: the server reads the body before answering,
//! so the client, still sending, is not reset.
//!
//! Regression test: Telegraf's `outputs.influxdb` with a read-only token logged "write: broken
//! pipe" instead of the 403 about one run in four (found by crates/sensordb/tests/real_clients).

use sensordb_engine::{Durability, Engine, EngineOptions};
use sensordb_server::auth::{Scope, TokenConfig};
use sensordb_server::{Server, ServerConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Large enough that the server cannot have read it with the request head.
const BODY_BYTES: usize = 4 << 20;

/// Sends `path` with a `BODY_BYTES` line-protocol body after the head, then reads the answer:
/// the status, or why there was none.
async fn send_whole_body(addr: std::net::SocketAddr, path: &str, token: &str) -> Result<u16, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let head = format!("POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Token {token}\r\nContent-Length: {BODY_BYTES}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.map_err(|e| format!("sending the head: {e}"))?;
    let line = b"m v=1 1\n";
    let body: Vec<u8> = line.iter().copied().cycle().take(BODY_BYTES).collect();
    stream.write_all(&body).await.map_err(|e| format!("sending the body: {e}"))?;
    let mut reply = Vec::new();
    let mut buffer = [0u8; 4096];
    while !reply.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer).await.map_err(|e| format!("reading the answer: {e}"))?;
        if n == 0 {
            return Err(format!("closed before answering: {:?}", String::from_utf8_lossy(&reply)));
        }
        reply.extend_from_slice(&buffer[..n]);
    }
    let text = String::from_utf8_lossy(&reply);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad answer {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_answer_after_reading_the_body() {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine");
    let config = ServerConfig {
        data_dir: dir.path().to_path_buf(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("addr"),
        native_listen: "127.0.0.1:0".parse().expect("addr"),
        tokens: vec![
            TokenConfig { token: "writer".into(), scopes: vec![Scope::Write] },
            TokenConfig { token: "reader".into(), scopes: vec![Scope::Read] },
        ],
        ..Default::default()
    };
    let server = Server::start(config, Arc::new(engine)).await.expect("server starts");
    let addr = server.http_addr;
    let cases = [
        ("/write?db=d", "nobody", 401),
        ("/write?db=d", "reader", 403),
        ("/write", "writer", 400),
        ("/write?db=d&precision=fortnight", "writer", 400),
        ("/api/v2/write?bucket=b", "nobody", 401),
        ("/api/v2/write?bucket=b", "reader", 403),
        ("/api/v2/write?org=o", "writer", 400),
    ];
    for (path, token, status) in cases {
        let answer = tokio::time::timeout(Duration::from_secs(30), send_whole_body(addr, path, token)).await.expect("in time");
        assert_eq!(answer, Ok(status), "POST {path} with token {token}");
    }
    tokio::time::timeout(Duration::from_secs(10), server.shutdown()).await.expect("shutdown drains in time");
}
