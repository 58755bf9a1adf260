//! Pieces shared by the network load-test clients ([`crate::tx_bench`], [`crate::ingest_bench`]):
//!
//! - [`raise_open_file_limit`]: many clients need many descriptors (two per client when the
//!   server runs in the same process).
//! - [`InProcessServer`]: a complete server on 127.0.0.1 with a temporary data directory, so one
//!   command is a whole benchmark; it counts what the engine stored after the run. With TLS it
//!   serves a [`SelfSignedCert`] made for the run, which the clients trust.
//! - [`Percentiles`]: p50 / p99 / max of a set of durations.
//! - [`cpu_time_of`]: the CPU time of another process (a server in a child process).

use sensordb_client::ClientTls;
use sensordb_engine::{Durability, Engine};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The process's open-file limit before and after [`raise_open_file_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLimit {
    pub wanted: u64,
    pub before: u64,
    /// Soft limit now in force.
    pub now: u64,
    pub hard: u64,
}

impl FileLimit {
    /// True when the limit now in force covers what was wanted.
    pub fn is_enough(&self) -> bool {
        self.now >= self.wanted
    }
}

impl std::fmt::Display for FileLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "open-file limit {} (was {}, hard {}, wanted {})", self.now, self.before, self.hard, self.wanted)?;
        if !self.is_enough() {
            write!(f, ": TOO LOW, connections beyond it will fail")?;
        }
        Ok(())
    }
}

/// Raises RLIMIT_NOFILE to at least `wanted` if it can: the soft limit up to the hard one, and
/// past the hard one when the process may (root, up to `fs.nr_open`). Never lowers it.
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
pub fn raise_open_file_limit(wanted: u64) -> FileLimit {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return FileLimit { wanted, before: 0, now: 0, hard: 0 };
    }
    let before = limit.rlim_cur as u64;
    let mut result = FileLimit { wanted, before, now: before, hard: limit.rlim_max as u64 };
    if before >= wanted {
        return result;
    }
    if wanted > result.hard {
        // Only a privileged process may raise the hard limit; try, then fall back.
        let raised = libc::rlimit { rlim_cur: wanted as libc::rlim_t, rlim_max: wanted as libc::rlim_t };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            result.now = wanted;
            result.hard = wanted;
            return result;
        }
    }
    let soft = wanted.min(result.hard);
    let raised = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: limit.rlim_max };
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        result.now = soft;
    }
    result
}

/// p50, p99 and maximum of a set of durations (nearest-rank).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Percentiles {
    /// Sorts `samples` in place and takes the figures; all zero for no samples.
    pub fn of(samples: &mut [Duration]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let rank = |q: f64| {
            let index = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[index]
        };
        Percentiles { p50: rank(0.50), p99: rank(0.99), max: samples[samples.len() - 1] }
    }
}

/// User + system CPU time of process `pid` so far, from `/proc/<pid>/stat` (None where there is
/// no such file).
pub fn cpu_time_of(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    // utime and stime are fields 14 and 15, in clock ticks.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|&t| t > 0)?;
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

/// Milliseconds of `d` as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A self-signed certificate for `localhost` and `127.0.0.1` with its key, as PEM files in a
/// temporary directory (removed on drop): what an in-process server started with TLS serves.
pub struct SelfSignedCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate's PEM: the CA the clients trust.
    pub pem: String,
    _dir: tempfile::TempDir,
}

impl SelfSignedCert {
    pub fn generate() -> Result<SelfSignedCert, String> {
        let dir = tempfile::Builder::new().prefix("sensordb-bench-tls-").tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let certified = rcgen::generate_simple_self_signed(names).map_err(|e| format!("certificate: {e}"))?;
        let pem = certified.cert.pem();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, &pem).map_err(|e| format!("{}: {e}", cert.display()))?;
        std::fs::write(&key, certified.key_pair.serialize_pem()).map_err(|e| format!("{}: {e}", key.display()))?;
        Ok(SelfSignedCert { cert, key, pem, _dir: dir })
    }

    /// What a client needs to trust the certificate, checking the name `localhost`.
    pub fn client_tls(&self) -> ClientTls {
        ClientTls::new(self.pem.as_bytes(), "localhost")
    }
}

/// A server on 127.0.0.1 (both listeners on port 0) over an engine in a temporary directory.
pub struct InProcessServer {
    pub server: RunningServer,
    pub engine: Arc<Engine>,
    pub config: ServerConfig,
    /// Removed on drop.
    pub dir: tempfile::TempDir,
}

impl InProcessServer {
    /// Starts the server; `max_connections` at least `connections`. Call inside a tokio runtime.
    pub async fn start(durability: Durability, connections: usize) -> Result<InProcessServer, String> {
        Self::start_with_tls(durability, connections, None).await
    }

    /// [`InProcessServer::start`], both listeners speaking TLS only with the PEM certificate
    /// chain and key `tls` = (cert, key) when given.
    pub async fn start_with_tls(
        durability: Durability,
        connections: usize,
        tls: Option<(&Path, &Path)>,
    ) -> Result<InProcessServer, String> {
        Self::start_with(durability, connections, tls, None).await
    }

    /// [`InProcessServer::start_with_tls`] with the disk usage thresholds `(disk_target_usage,
    /// throttle_low_usage, throttle_high_usage)` instead of the server's defaults: on a disk
    /// that other work fills, the defaults would delay acknowledgements (from 90%) for reasons
    /// that have nothing to do with the run.
    pub async fn start_with(
        durability: Durability,
        connections: usize,
        tls: Option<(&Path, &Path)>,
        disk_usage: Option<(f64, f64, f64)>,
    ) -> Result<InProcessServer, String> {
        let dir = tempfile::Builder::new().prefix("sensordb-bench-").tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let defaults = ServerConfig::default();
        let config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            durability,
            http_listen: loopback,
            native_listen: loopback,
            max_connections: defaults.max_connections.max(connections + 16),
            tls_cert: tls.map(|(cert, _)| cert.to_path_buf()),
            tls_key: tls.map(|(_, key)| key.to_path_buf()),
            disk_target_usage: disk_usage.map_or(defaults.disk_target_usage, |(m, _, _)| m),
            throttle_low_usage: disk_usage.map_or(defaults.throttle_low_usage, |(_, l, _)| l),
            throttle_high_usage: disk_usage.map_or(defaults.throttle_high_usage, |(_, _, h)| h),
            ..defaults
        };
        config.validate().map_err(|e| format!("server settings: {e}"))?;
        // As `sensordb serve` opens it: the server, not the engine, delays acknowledgements.
        let options = config.engine_options();
        let engine = Arc::new(Engine::open(dir.path(), options).map_err(|e| format!("opening the engine: {e}"))?);
        let server = Server::start(config.clone(), engine.clone()).await.map_err(|e| format!("starting the server: {e}"))?;
        Ok(InProcessServer { server, engine, config, dir })
    }

    pub fn native_addr(&self) -> SocketAddr {
        self.server.native_addr
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.server.http_addr
    }

    /// One line describing the server side's settings.
    pub fn describe(&self) -> String {
        let c = &self.config;
        // Measures usage when the last measurement is stale.
        let _ = self.engine.admission();
        let disk_usage = self.engine.reclaim_stats().usage.share;
        format!(
            "in-process server: native {} http {}, durability={:?}, data dir {} (temporary), max_connections={}, max_in_flight_bytes={}, max_connection_in_flight_bytes={}, max_frame_bytes={}, transaction_timeout_ms={}, idle_timeout_ms={}, disk usage thresholds {}/{}/{} (disk {:.0}% used), tokens={}, tls={}",
            self.server.native_addr,
            self.server.http_addr,
            c.durability,
            c.data_dir.display(),
            c.max_connections,
            c.max_in_flight_bytes,
            c.max_connection_in_flight_bytes,
            c.max_frame_bytes,
            c.transaction_timeout_ms,
            c.idle_timeout_ms,
            c.disk_target_usage,
            c.throttle_low_usage,
            c.throttle_high_usage,
            disk_usage * 100.0,
            if c.tokens.is_empty() { "none (open)".to_string() } else { c.tokens.len().to_string() },
            c.tls_cert.as_ref().map_or("off".to_string(), |cert| format!("on ({})", cert.display()))
        )
    }

    /// Stops the server (draining connections, at most `drain` long), flushes the engine and
    /// returns the number of points it holds, as reads see them: a point written twice (a
    /// resent body) counts once, however many blocks still hold a superseded copy.
    pub async fn shutdown(self, drain: Duration) -> Result<u64, String> {
        let InProcessServer { server, engine, dir, .. } = self;
        if tokio::time::timeout(drain, server.shutdown()).await.is_err() {
            return Err(format!("the server did not drain within {drain:?}"));
        }
        let stored = tokio::task::spawn_blocking(move || {
            engine.flush().map_err(|e| format!("flush: {e}"))?;
            let mut points = 0u64;
            for series in engine.select_series(None, None, &[]) {
                let read = engine.read(series.id, i64::MIN, i64::MAX).collect_all().map_err(|e| format!("reading {}: {e}", series.key))?;
                points += read.map_or(0, |columns| columns.timestamps.len() as u64);
            }
            Ok::<u64, String>(points)
        })
        .await
        .map_err(|e| format!("flush task: {e}"))??;
        drop(dir);
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ordered_nearest_rank() {
        let mut samples: Vec<Duration> = (1..=100u64).rev().map(Duration::from_millis).collect();
        let p = Percentiles::of(&mut samples);
        assert_eq!(p.p50, Duration::from_millis(50));
        assert_eq!(p.p99, Duration::from_millis(99));
        assert_eq!(p.max, Duration::from_millis(100));
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
        let mut one = [Duration::from_millis(7)];
        assert_eq!(Percentiles::of(&mut one).p50, Duration::from_millis(7));
    }

    #[test]
    fn cpu_time_of_this_process_grows_and_matches_getrusage() {
        let pid = std::process::id();
        let before = cpu_time_of(pid).expect("own /proc stat");
        let mut x = 0u64;
        // Spin until 60 ms of CPU time are used (not 60 ms of wall time, which a loaded machine
        // may give less than one 10 ms tick of CPU), bounded by 20 s of wall time.
        let (spin, used_before) = (std::time::Instant::now(), crate::engine_bench::process_cpu_time());
        while crate::engine_bench::process_cpu_time() < used_before + Duration::from_millis(60) && spin.elapsed() < Duration::from_secs(20)
        {
            for _ in 0..10_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
        }
        std::hint::black_box(x);
        let after = cpu_time_of(pid).expect("own /proc stat");
        assert!(after > before, "{before:?} then {after:?}");
        let rusage = crate::engine_bench::process_cpu_time();
        // Clock ticks are 10 ms; getrusage is finer.
        assert!(after <= rusage + Duration::from_millis(20), "{after:?} vs {rusage:?}");
        assert_eq!(cpu_time_of(u32::MAX), None);
    }

    #[test]
    fn the_file_limit_is_never_lowered() {
        let first = raise_open_file_limit(64);
        assert!(first.now >= first.before.min(64));
        let again = raise_open_file_limit(1);
        assert_eq!(again.now, again.before);
    }
}
