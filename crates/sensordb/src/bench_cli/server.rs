//! The server side of `bench tx` and `bench ingest`: an in-process server when the open-file
//! limit holds both ends of every connection, else `sensordb bench server-process` in a child
//! process, behind one [`BenchServer`].

use super::args::DiskUsageLimits;
use anyhow::anyhow;
use sensordb_bench::load::{raise_open_file_limit, InProcessServer};
use sensordb_engine::Durability;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The server side: the in-process one, or one in a child process.
pub(super) enum BenchServer {
    InProcess(Box<InProcessServer>),
    Child(ChildServer),
}

/// The paths of a certificate chain and its key, for a server speaking TLS.
pub(super) type TlsFiles = Option<(PathBuf, PathBuf)>;

impl BenchServer {
    /// Starts the server for `connections` clients: in this process when the open-file limit
    /// holds both ends (two descriptors per connection) and `separate` is false, else in a
    /// child process running `sensordb bench server-process`. With `tls`, both listeners speak
    /// TLS only with that certificate and key.
    pub(super) async fn start(
        durability: Durability,
        connections: usize,
        separate: bool,
        tls: TlsFiles,
        disk_usage: Option<DiskUsageLimits>,
    ) -> anyhow::Result<BenchServer> {
        let wanted = (2 * connections + 1024) as u64;
        let limit = raise_open_file_limit(wanted);
        if !separate && limit.is_enough() {
            let files = tls.as_ref().map(|(cert, key)| (cert.as_path(), key.as_path()));
            let server = InProcessServer::start_with(durability, connections, files, disk_usage).await.map_err(|e| anyhow!(e))?;
            println!("{}", server.describe());
            return Ok(BenchServer::InProcess(Box::new(server)));
        }
        if !separate {
            println!(
                "server: the open-file limit {} cannot hold both ends of {connections} connections: the server runs in a child process",
                limit.now
            );
        }
        let child = tokio::task::spawn_blocking(move || ChildServer::start(durability, connections, tls, disk_usage)).await??;
        Ok(BenchServer::Child(child))
    }

    pub(super) fn native_addr(&self) -> SocketAddr {
        match self {
            BenchServer::InProcess(s) => s.native_addr(),
            BenchServer::Child(c) => c.native_addr,
        }
    }

    /// The server's process id when it runs in a child process.
    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            BenchServer::InProcess(_) => None,
            BenchServer::Child(c) => Some(c.child.id()),
        }
    }

    pub(super) fn http_addr(&self) -> SocketAddr {
        match self {
            BenchServer::InProcess(s) => s.http_addr(),
            BenchServer::Child(c) => c.http_addr,
        }
    }

    /// Stops the server and returns the points it stored; prints why when that fails.
    pub(super) async fn shutdown(self) -> Option<u64> {
        let stored = match self {
            BenchServer::InProcess(s) => s.shutdown(Duration::from_secs(60)).await.map_err(|e| anyhow!(e)),
            BenchServer::Child(c) => tokio::task::spawn_blocking(move || c.shutdown()).await.map_err(|e| anyhow!(e)).and_then(|r| r),
        };
        match stored {
            Ok(points) => Some(points),
            Err(error) => {
                println!("server: cannot count the points stored: {error:#}");
                None
            }
        }
    }
}

/// `sensordb bench server-process` as a child: its stdin is the stop signal.
pub(super) struct ChildServer {
    child: std::process::Child,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    native_addr: SocketAddr,
    http_addr: SocketAddr,
}

impl ChildServer {
    pub(super) fn start(
        durability: Durability,
        connections: usize,
        tls: TlsFiles,
        disk_usage: Option<DiskUsageLimits>,
    ) -> anyhow::Result<ChildServer> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe()?;
        let durability_text = format!("{durability:?}").to_lowercase();
        let mut command = Command::new(exe);
        command.args(["bench", "server-process", "--durability", &durability_text, "--connections", &connections.to_string()]);
        if let Some((cert, key)) = &tls {
            command.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
        }
        if let Some((m, l, h)) = disk_usage {
            command.arg("--disk-usage-limits").arg(format!("{m},{l},{h}"));
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout of the server process"))?;
        let mut stdout = std::io::BufReader::new(stdout);
        let (mut native_addr, mut http_addr) = (None, None);
        let mut line = String::new();
        // The child prints a few lines, the last of them its addresses.
        for _ in 0..20 {
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                break;
            }
            print!("server process: {line}");
            if let Some(rest) = line.trim().strip_prefix("listening native ") {
                let mut parts = rest.split(" http ");
                native_addr = parts.next().and_then(|a| a.parse().ok());
                http_addr = parts.next().and_then(|a| a.parse().ok());
                break;
            }
        }
        match (native_addr, http_addr) {
            (Some(native_addr), Some(http_addr)) => Ok(ChildServer { child, stdout, native_addr, http_addr }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow!("the server process did not start"))
            }
        }
    }

    pub(super) fn shutdown(mut self) -> anyhow::Result<u64> {
        use std::io::BufRead;
        drop(self.child.stdin.take());
        let mut stored = None;
        let mut line = String::new();
        for _ in 0..20 {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                break;
            }
            print!("server process: {line}");
            if let Some(n) = line.trim().strip_prefix("stored ") {
                stored = n.split_whitespace().next().and_then(|n| n.parse().ok());
            }
        }
        let status = self.child.wait()?;
        stored.ok_or_else(|| anyhow!("the server process ended ({status}) without counting"))
    }
}
