//! What every real-client test needs: finding the clients `scripts/install-clients` installed,
//! starting the real `sensordb serve` binary, running a client under a time limit, and reading
//! points back through sensordb's own `GET /sensordb/points`.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one client run (a Python script, `telegraf --once`) may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the server may take to start listening, and to stop after SIGTERM.
const SERVER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one read-back request may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// A client installed by `scripts/install-clients`.
#[derive(Clone, Copy, Debug)]
pub enum Tool {
    /// The venv's Python, with `influxdb` and `influxdb-client`.
    Python,
    /// The Telegraf binary with the file input and the two InfluxDB outputs.
    Telegraf,
    /// playwright-core (its package directory), which drives Debian's chromium.
    Browser,
}

impl Tool {
    fn relative_path(self) -> &'static str {
        match self {
            Tool::Python => "venv/bin/python",
            Tool::Telegraf => "bin/telegraf",
            Tool::Browser => "browser/node_modules/playwright-core",
        }
    }
}

/// The workspace root (where `scripts/` is).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `SENSORDB_CLIENTS_DIR` (relative to the workspace root unless absolute), else
/// `target/clients`, as in `scripts/install-clients`.
fn clients_dir() -> PathBuf {
    match std::env::var_os("SENSORDB_CLIENTS_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target/clients"),
    }
}

/// The files of this test target (Python scripts, line-protocol inputs).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real_clients").join(name)
}

/// The path of `tool`, or `None` after a loud notice when it is not installed. With
/// `SENSORDB_REQUIRE_CLIENTS=1` (as `scripts/test` sets it) or `CI=true` a missing tool fails the
/// test instead.
pub fn find(tool: Tool, test: &str) -> Option<PathBuf> {
    let path = clients_dir().join(tool.relative_path());
    let installed = match tool {
        Tool::Browser => path.join("package.json").is_file() && Path::new("/usr/bin/chromium").is_file(),
        _ => path.is_file(),
    };
    if installed {
        return Some(path);
    }
    let why = format!("{tool:?} is not installed at {}; run scripts/install-clients", path.display());
    if std::env::var("SENSORDB_REQUIRE_CLIENTS").as_deref() == Ok("1") || std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: {why} (SENSORDB_REQUIRE_CLIENTS=1 makes a missing client a failure)");
    }
    // Straight to stderr: the test harness captures eprintln! of passing tests, and a skip must
    // be seen.
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {test}: {why} ***\n");
    None
}

/// One `[[tokens]]` entry of the server's configuration.
pub struct Token {
    pub token: &'static str,
    pub scopes: &'static [&'static str],
}

/// A running `sensordb serve` on 127.0.0.1 with a port of its own and a temporary data
/// directory, stopped (SIGTERM, then a check that it closed cleanly) by [`Sensordb::stop`].
pub struct Sensordb {
    child: Option<Child>,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Sensordb {
    pub fn start(tokens: &[Token]) -> Sensordb {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = String::from("durability = \"os\"\n");
        for token in tokens {
            let scopes: Vec<String> = token.scopes.iter().map(|s| format!("\"{s}\"")).collect();
            config.push_str(&format!("[[tokens]]\ntoken = \"{}\"\nscopes = [{}]\n", token.token, scopes.join(", ")));
        }
        let config_path = dir.path().join("sensordb.toml");
        std::fs::write(&config_path, config).expect("write config");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("server log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sensordb"))
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--data")
            .arg(dir.path().join("data"))
            .args(["--http", "127.0.0.1:0", "--native", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start sensordb serve");
        // The server prints the address it bound; read it, then keep draining stdout.
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("sensordb: serving HTTP on ") {
                    let addr = rest.split_whitespace().next().and_then(|a| a.parse::<SocketAddr>().ok());
                    let _ = sender.send(addr);
                }
            }
        });
        let mut server = Sensordb { child: Some(child), addr: SocketAddr::from(([127, 0, 0, 1], 0)), dir };
        match receiver.recv_timeout(SERVER_TIMEOUT) {
            Ok(Some(addr)) => server.addr = addr,
            _ => panic!("sensordb serve did not start listening within {SERVER_TIMEOUT:?}; its log:\n{}", server.log()),
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// A scratch directory that lives as long as the server.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// SIGTERM, then asserts the server drained and closed its store cleanly.
    pub fn stop(mut self) {
        let mut child = self.child.take().expect("running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
        // SAFETY: kill() with a pid we spawned and still own (not yet waited for).
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let status = wait_until(&mut child, Instant::now() + SERVER_TIMEOUT);
        assert!(status.is_some_and(|s| s.success()), "sensordb serve did not stop cleanly ({status:?}); its log:\n{}", self.log());
    }

    /// `POST path` with `body`, no token: (status, body).
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect_timeout(&self.addr, HTTP_TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(HTTP_TIMEOUT)).expect("read timeout");
        let head = format!("POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", self.addr, body.len());
        stream.write_all(head.as_bytes()).expect("send request");
        stream.write_all(body.as_bytes()).expect("send body");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read reply");
        parse_reply(&raw).unwrap_or_else(|| panic!("bad HTTP reply: {:?}", String::from_utf8_lossy(&raw)))
    }

    /// `GET path` with an optional token: (status, body).
    pub fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut stream = TcpStream::connect_timeout(&self.addr, HTTP_TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(HTTP_TIMEOUT)).expect("read timeout");
        let auth = token.map(|t| format!("Authorization: Token {t}\r\n")).unwrap_or_default();
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}\r\n", self.addr);
        stream.write_all(head.as_bytes()).expect("send request");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read reply");
        parse_reply(&raw).unwrap_or_else(|| panic!("bad HTTP reply: {:?}", String::from_utf8_lossy(&raw)))
    }

    /// Every series of `measurement` in database `db`, with its points, as `/sensordb/points`
    /// returns them (series sorted by key, points by time).
    pub fn read(&self, db: &str, measurement: &str, token: Option<&str>) -> Vec<Series> {
        let path = format!("/sensordb/points?db={}&measurement={}", encode(db), encode(measurement));
        let (status, body) = self.get(&path, token);
        assert_eq!(status, 200, "GET {path}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"));
        assert_eq!(json["truncated"], serde_json::Value::Bool(false), "GET {path}: {body}");
        json["series"]
            .as_array()
            .unwrap_or_else(|| panic!("GET {path}: no series array: {body}"))
            .iter()
            .map(|s| Series {
                key: s["key"].as_str().expect("key").to_string(),
                kind: s["kind"].as_str().expect("kind").to_string(),
                points: s["points"]
                    .as_array()
                    .expect("points")
                    .iter()
                    .map(|p| (p[0].as_i64().expect("integer timestamp"), p[1].clone()))
                    .collect(),
            })
            .collect()
    }
}

impl Drop for Sensordb {
    fn drop(&mut self) {
        // Only when a test failed before stop(): do not leave a server behind.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = writeln!(std::io::stderr(), "sensordb serve log:\n{}", self.log());
        }
    }
}

/// One series as read back: canonical key, kind, and (timestamp ns, value) points. Byte values
/// are base64 strings, as `/sensordb/points` gives them.
#[derive(Debug, PartialEq)]
pub struct Series {
    pub key: String,
    pub kind: String,
    pub points: Vec<(i64, serde_json::Value)>,
}

impl Series {
    pub fn new(key: &str, kind: &str, points: Vec<(i64, serde_json::Value)>) -> Series {
        Series { key: key.to_string(), kind: kind.to_string(), points }
    }
}

/// Asserts that `measurement` of `db` holds exactly `expected`: the same series, and in each the
/// same timestamps and values, none missing and none twice.
pub fn assert_stored(server: &Sensordb, db: &str, measurement: &str, token: Option<&str>, expected: Vec<Series>) {
    let actual = server.read(db, measurement, token);
    assert_eq!(actual, expected, "points of measurement {measurement:?} in database {db:?}");
}

/// Base64 of a string, for expected byte values.
pub fn base64(text: &str) -> serde_json::Value {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    serde_json::Value::from(out)
}

/// Runs `command` to its end (at most [`CLIENT_TIMEOUT`]) and returns its stdout; panics with
/// both outputs when it fails.
pub fn run(command: &mut Command, what: &str) -> String {
    let (status, stdout, stderr) = run_to_end(command, what);
    if !status.success() {
        panic!("{what} failed ({status}).\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}");
    }
    stdout
}

/// Runs `command` to its end (at most [`CLIENT_TIMEOUT`]): its exit status, stdout and stderr.
pub fn run_to_end(command: &mut Command, what: &str) -> (ExitStatus, String, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let status = wait_until(&mut child, Instant::now() + CLIENT_TIMEOUT);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) => (status, stdout, stderr),
        None => panic!("{what} did not finish within {CLIENT_TIMEOUT:?}.\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}"),
    }
}

fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Percent-encodes a query-string value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn parse_reply(raw: &[u8]) -> Option<(u16, String)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let mut body = raw[end + 4..].to_vec();
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(line_end + 2..line_end + 2 + size)?);
            rest = rest.get(line_end + 2 + size + 2..)?;
        }
        body = out;
    }
    Some((status, String::from_utf8(body).ok()?))
}

/// The last line of a client script's stdout: one JSON object of what the client saw.
pub fn report(stdout: &str) -> serde_json::Value {
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("the client script's last line is not JSON ({e}):\n{stdout}"))
}
