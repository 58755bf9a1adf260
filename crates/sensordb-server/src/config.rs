//! Server settings: a TOML file (every key optional) overridden by command-line flags.
//!
//! ```toml
//! data_dir = "./data"
//! durability = "fsync"            # none | os | fsync
//! http_listen = "127.0.0.1:8086"  # InfluxDB's port, so clients work unchanged
//! native_listen = "127.0.0.1:7070"
//! max_connections = 10000
//! listen_backlog = 4096          # connections the kernel queues before accept (capped by net.core.somaxconn)
//! max_in_flight_bytes = 268435456 # all connections together
//! max_connection_in_flight_bytes = 16777216
//! max_frame_bytes = 16777216
//! max_body_bytes = 67108864
//! max_line_bytes = 1048576
//! max_series_per_database = 1000000 # live series one database may hold (InfluxDB's max-series-per-database)
//! max_new_series_per_request = 100000 # new series one HTTP write body may create
//! idle_timeout_ms = 60000        # a connection with nothing in progress is closed after it
//! transaction_timeout_ms = 30000
//! hello_timeout_ms = 10000       # a native connection must complete HELLO within this
//! http_header_read_timeout_ms = 20000
//! http_body_read_timeout_ms = 20000
//! http_body_min_bytes_per_second = 500
//! memtable_bytes_max = 33554432   # points buffered in memory before flushing, active + frozen
//! block_cache_bytes = 33554432    # decoded blocks kept for reads that come again (0: none)
//! segment_seal_age_ms = 120000   # seal the open segment after this long, for background compaction (0: by size only)
//! segment_seal_idle_ms = 5000    # ... or once writes pause this long after a load of a million points or more (0: never)
//! segment_blocks_max = 262144     # ... or once it holds this many blocks (each ~120 bytes of memory while open)
//! query_concurrency = 4          # /query statements running at once; more wait their turn
//! query_timeout_ms = 60000       # a query running longer is answered with an error
//! query_points_scanned_max = 100000000  # points one query may read
//! query_buckets_max = 1000000    # GROUP BY time buckets per series
//! [[tokens]]
//! token = "secret"
//! scopes = ["write", "read"]
//! [cassandra]                     # sealed blocks in Cassandra instead of segment files
//! contact_points = ["127.0.0.1:9042"]
//! keyspace = "sensordb"
//! replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
//! consistency = "quorum"          # one | two | three | quorum | all | local_quorum | each_quorum | local_one
//! requests_in_flight_per_node = 32
//! node_id = 1                     # several sensordb nodes on one keyspace: unique, 0-32767 (unset: this process alone)
//! visibility_ms = 1000            # with node_id: other nodes' flushed points are readable here this long after their flush
//! ack = "local"                   # with node_id: "cassandra" acknowledges writes once they are in Cassandra at `consistency`
//! dead_after_ms = 10000           # with ack = "cassandra": a node silent this long has its unflushed writes adopted
//! wal_ttl_s = 86400               # with ack = "cassandra": how long acknowledged-write rows live in Cassandra
//! commit_groups_in_flight = 8     # with ack = "cassandra": native commit groups waiting for Cassandra at once
//! advertise = "10.0.0.5:7070"     # with ack = "cassandra": the native address told to clients asking for peers
//! ```
//! With no `[[tokens]]` the server accepts every request (a local development default, logged
//! as a warning at start). Without `[cassandra]` sealed blocks stay in segment files under
//! `data_dir`; with it they go to the keyspace (docs/CASSANDRA.md), while the WAL and the series
//! catalog stay in `data_dir`.

use crate::auth::TokenConfig;
use sensordb_engine::Durability;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    #[serde(deserialize_with = "durability_from_text")]
    pub durability: Durability,
    pub http_listen: SocketAddr,
    pub native_listen: SocketAddr,
    /// Connections over all listeners; more wait in the accept queue.
    pub max_connections: usize,
    /// Connections the kernel completes and queues for `accept` on each listener (the kernel
    /// caps it at `net.core.somaxconn`). Beyond it a connecting client's SYN is dropped and
    /// retried a second later: with the usual 128, a few hundred sources reconnecting at once
    /// (a server restart) wait seconds.
    pub listen_backlog: u32,
    /// Bytes received but not yet durable, over all connections; senders wait beyond it.
    pub max_in_flight_bytes: usize,
    pub max_connection_in_flight_bytes: usize,
    pub max_frame_bytes: usize,
    pub max_body_bytes: usize,
    pub max_line_bytes: usize,
    /// Live series one database may hold (InfluxDB's `max-series-per-database`; a sensordb
    /// series is one field of a measurement + tag set). A write that needs a new series beyond
    /// it is refused for that line or series: HTTP 400 `partial write:
    /// max-series-per-database limit exceeded: (N) dropped=K` (the other lines stored),
    /// native SERIES_LIMIT_EXCEEDED for DEFINE_SERIES.
    pub max_series_per_database: usize,
    /// New series one HTTP write body (or `SELECT ... INTO`) may create; lines needing more are
    /// dropped as for `max_series_per_database`. Each series costs about 2 KB of memory, so a
    /// body of a million new series would cost 2 GB at once.
    pub max_new_series_per_request: usize,
    /// A connection with nothing in progress this long is closed: a native one without frames
    /// and open transactions, an HTTP one between the end of a response and the first byte of
    /// the next request.
    pub idle_timeout_ms: u64,
    pub transaction_timeout_ms: u64,
    /// Native: a connection that has not completed a successful HELLO this long after it was
    /// accepted is closed (fatal IDLE_TIMEOUT), whatever it sends meanwhile.
    pub hello_timeout_ms: u64,
    /// HTTP: longest time from a request's first byte to the end of its headers (slowloris).
    pub http_header_read_timeout_ms: u64,
    /// HTTP: longest wait for more body bytes while a handler reads the body; also the grace
    /// before `http_body_min_bytes_per_second` applies.
    pub http_body_read_timeout_ms: u64,
    /// HTTP: after the grace, a body must have arrived at least this fast on average (0: any).
    pub http_body_min_bytes_per_second: u64,
    /// Memory for buffered points (the engine's memtables, active plus frozen). The main lever
    /// on the server's resident memory; smaller values flush more often, and background
    /// compaction merges the resulting short blocks.
    pub memtable_bytes_max: usize,
    /// Memory for decoded blocks kept for reads that come again (dashboards refreshing the same
    /// hours, lookups of the newest points); 0 keeps none.
    pub block_cache_bytes: usize,
    /// Queries (`/query` requests) running at once; more wait for a turn, so reads never take
    /// every thread from ingest.
    pub query_concurrency: usize,
    /// A query still running after this long is answered with an error (its work stops at the
    /// next series it reads).
    pub query_timeout_ms: u64,
    /// Points one query may read from storage before it fails with a clear error.
    pub query_points_scanned_max: u64,
    /// `GROUP BY time` buckets one series of a result may have.
    pub query_buckets_max: usize,
    pub tokens: Vec<TokenConfig>,
    /// TLS certificate chain and private key (PEM); both or neither.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// A segment file is sealed at this size (R; see `sensordb plan`).
    pub segment_bytes_max: u64,
    /// A segment file is also sealed once it has been open this long, so background compaction
    /// merges its short blocks while the server runs (0: sealed by size only, and short blocks
    /// wait for a restart). Default 120000 (2 minutes; see `EngineOptions::segment_seal_age`).
    pub segment_seal_age_ms: u64,
    /// A segment file is also sealed once writes have paused this long after a load of at
    /// least `SEAL_IDLE_POINTS_MIN` points (0: never), so a load that has ended is compacted
    /// within seconds. Default 5000 (see `EngineOptions::segment_seal_idle`).
    pub segment_seal_idle_ms: u64,
    /// A segment file is also sealed once it holds this many blocks: the segment taking groups
    /// holds each of its blocks in memory (about 120 bytes), sealed ones under a byte a series
    /// (their series directories stay in the files).
    /// Default 262144 (`EngineOptions::segment_blocks_max`).
    pub segment_blocks_max: usize,
    /// Bytes sensordb may use on its file system; unset for the whole file system. Only
    /// sensordb's own files over this evict live data (`evict_oldest_when_full`); other
    /// processes filling the file system make writers wait and be refused. Set it on a shared
    /// disk.
    pub capacity_bytes: Option<u64>,
    /// `U_m`: disk usage that reclaim holds the disk at.
    pub disk_target_usage: f64,
    /// `U_l`: acknowledgements are delayed above this usage.
    pub throttle_low_usage: f64,
    /// `U_h`: writers wait for reclaim at this usage.
    pub throttle_high_usage: f64,
    /// Merge I/O (reads plus writes) per second; 0 for no limit. Background compaction keeps
    /// to it only while writes came in the last 2 s: with no writer waiting on the disk it runs
    /// unpaced.
    pub merge_bytes_per_second: u64,
    /// Evict the oldest data when sensordb's own files fill `capacity_bytes` with live data (a
    /// cyclic store); otherwise writers wait at `U_h` until data expires.
    pub evict_oldest_when_full: bool,
    /// How long a write waits for space (at `U_h` or after ENOSPC) before it fails (HTTP 503,
    /// native `NO_SPACE`). Default 4 s, under common clients' timeouts (Telegraf 5 s,
    /// influxdb-client 10 s).
    pub full_wait_max_ms: u64,
    /// Databases and their retention, applied at start (`[[databases]]` tables).
    pub databases: Vec<DatabaseConfig>,
    /// Where sealed blocks go when not in local segment files (`[cassandra]`).
    pub cassandra: Option<CassandraConfig>,
}

/// The `[cassandra]` table: a Cassandra (or ScyllaDB) keyspace for sealed blocks.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CassandraConfig {
    /// `host:port` of nodes to connect to first.
    pub contact_points: Vec<String>,
    pub keyspace: String,
    /// The CQL replication map the keyspace is created with.
    pub replication: String,
    /// Consistency of every read and write, by its CQL name (case-insensitive).
    pub consistency: String,
    pub requests_in_flight_per_node: usize,
    /// This node among the sensordb nodes sharing the keyspace (unique, at most
    /// [`CASSANDRA_NODE_ID_MAX`]); unset, the keyspace belongs to this process alone.
    pub node_id: Option<u16>,
    /// With `node_id`: how often the other nodes' segments are read (ms).
    pub visibility_ms: u64,
    /// When a write is acknowledged: `local` (under `durability`, as without Cassandra) or
    /// `cassandra` (also in Cassandra's `wal` table at `consistency`: losing this node and its
    /// disk loses nothing acknowledged; needs `node_id`). A setting of its own rather than a
    /// fourth `durability`: the local WAL keeps its mode (restarts replay it without Cassandra),
    /// the Cassandra row is what survives the node.
    pub ack: String,
    /// With `ack = "cassandra"`: a node whose heartbeat is older than this (ms) is dead, and
    /// its unflushed acknowledged writes are adopted by a live node.
    pub dead_after_ms: u64,
    /// With `ack = "cassandra"`: how long acknowledged-write and transaction rows live (s).
    pub wal_ttl_s: u64,
    /// With `ack = "cassandra"`: native commit groups written at once (each waits for its
    /// `wal` row in Cassandra; see the committer). Without it groups are written one at a time.
    pub commit_groups_in_flight: usize,
    /// With `ack = "cassandra"`: `host:port` clients reach this node's native listener at, told
    /// to clients that ask a node for its peers (protocol version 4, PEERS). Unset: the
    /// `native_listen` address when it names one host and port (not 0.0.0.0, not port 0).
    pub advertise: Option<String>,
}

/// The largest `[cassandra] node_id` (segment ids carry it in their top bits).
pub const CASSANDRA_NODE_ID_MAX: u16 = 32_767;

impl Default for CassandraConfig {
    fn default() -> Self {
        CassandraConfig {
            contact_points: vec!["127.0.0.1:9042".to_string()],
            keyspace: "sensordb".to_string(),
            replication: "{'class': 'SimpleStrategy', 'replication_factor': 1}".to_string(),
            consistency: "quorum".to_string(),
            requests_in_flight_per_node: 32,
            node_id: None,
            visibility_ms: 1_000,
            ack: "local".to_string(),
            dead_after_ms: 10_000,
            wal_ttl_s: 86_400,
            commit_groups_in_flight: 8,
            advertise: None,
        }
    }
}

impl CassandraConfig {
    /// Whether acknowledgements wait for Cassandra (`ack = "cassandra"`).
    pub fn acks_in_cassandra(&self) -> bool {
        self.ack == "cassandra"
    }

    /// The native address told to clients: `advertise`, else `native_listen` when it names one
    /// host and port.
    pub fn advertised_address(&self, native_listen: std::net::SocketAddr) -> Option<String> {
        match &self.advertise {
            Some(address) => Some(address.clone()),
            None if native_listen.ip().is_unspecified() || native_listen.port() == 0 => None,
            None => Some(native_listen.to_string()),
        }
    }
}

/// The consistency names `[cassandra] consistency` takes.
pub const CASSANDRA_CONSISTENCIES: [&str; 8] = ["one", "two", "three", "quorum", "all", "local_quorum", "each_quorum", "local_one"];

impl CassandraConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |what: String| Err(ConfigError::Invalid(format!("[cassandra] {what}")));
        if self.contact_points.is_empty() {
            return invalid("contact_points is empty".into());
        }
        let name_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        if self.keyspace.is_empty() || self.keyspace.len() > 48 || !self.keyspace.chars().all(name_ok) {
            return invalid(format!("keyspace {:?}: use 1 to 48 lower-case letters, digits and _", self.keyspace));
        }
        if !CASSANDRA_CONSISTENCIES.contains(&self.consistency.to_ascii_lowercase().as_str()) {
            return invalid(format!("consistency {:?}: one of {}", self.consistency, CASSANDRA_CONSISTENCIES.join(", ")));
        }
        if self.requests_in_flight_per_node == 0 {
            return invalid("requests_in_flight_per_node must be at least 1".into());
        }
        if self.node_id.is_some_and(|n| n > CASSANDRA_NODE_ID_MAX) {
            return invalid(format!("node_id must be at most {CASSANDRA_NODE_ID_MAX}"));
        }
        if self.visibility_ms == 0 {
            return invalid("visibility_ms must be at least 1".into());
        }
        if let Some(address) = &self.advertise {
            let (host, port) = address.rsplit_once(':').unwrap_or((address.as_str(), ""));
            if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
                return invalid(format!("advertise {address:?}: host:port"));
            }
        }
        if self.commit_groups_in_flight == 0 || self.commit_groups_in_flight > 256 {
            return invalid("commit_groups_in_flight must be 1 to 256".into());
        }
        match self.ack.as_str() {
            "local" => {}
            "cassandra" if self.node_id.is_none() => return invalid("ack = \"cassandra\" needs a node_id".into()),
            "cassandra" if self.dead_after_ms == 0 || self.wal_ttl_s == 0 => {
                return invalid("dead_after_ms and wal_ttl_s must be at least 1".into());
            }
            "cassandra" => {}
            other => return invalid(format!("ack {other:?}: \"local\" or \"cassandra\"")),
        }
        Ok(())
    }
}

/// One `[[databases]]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub name: String,
    /// Storage period such as `30d`, `12h`, `90m`, `3600s`, `2w`.
    pub period: Option<String>,
    pub capacity_bytes: Option<u64>,
    #[serde(default)]
    pub overrides: Vec<PeriodOverrideConfig>,
}

/// A per-series storage period: the series of `measurement` (any when unset) carrying every
/// tag of `tags`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeriodOverrideConfig {
    pub measurement: Option<String>,
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
    pub period: String,
}

/// `30d`, `12h`, `90m`, `3600s`, `2w`.
pub fn parse_period(text: &str) -> Option<std::time::Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let seconds: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(number.checked_mul(seconds)?))
}

impl DatabaseConfig {
    pub fn policy(&self) -> Result<sensordb_engine::DatabasePolicy, ConfigError> {
        let period = |text: &str| {
            parse_period(text)
                .ok_or_else(|| ConfigError::Invalid(format!("database {:?}: bad period {text:?} (use e.g. 30d, 12h, 90m)", self.name)))
        };
        let mut overrides = Vec::new();
        for o in &self.overrides {
            overrides.push(sensordb_engine::PeriodOverride {
                measurement: o.measurement.clone(),
                tags: o.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                period: period(&o.period)?,
            });
        }
        Ok(sensordb_engine::DatabasePolicy {
            period: self.period.as_deref().map(period).transpose()?,
            capacity_bytes: self.capacity_bytes,
            overrides,
        })
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("./data"),
            durability: Durability::Fsync,
            http_listen: SocketAddr::from(([127, 0, 0, 1], 8086)),
            native_listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            max_connections: 10_000,
            listen_backlog: 4096,
            max_in_flight_bytes: 256 << 20,
            max_connection_in_flight_bytes: 16 << 20,
            max_frame_bytes: 16 << 20,
            max_body_bytes: 64 << 20,
            max_line_bytes: 1 << 20,
            max_series_per_database: 1_000_000,
            max_new_series_per_request: 100_000,
            idle_timeout_ms: 60_000,
            transaction_timeout_ms: 30_000,
            hello_timeout_ms: 10_000,
            http_header_read_timeout_ms: 20_000,
            http_body_read_timeout_ms: 20_000,
            http_body_min_bytes_per_second: 500,
            memtable_bytes_max: 32 << 20,
            block_cache_bytes: 32 << 20,
            query_concurrency: 4,
            query_timeout_ms: 60_000,
            query_points_scanned_max: 100_000_000,
            query_buckets_max: 1_000_000,
            tokens: Vec::new(),
            tls_cert: None,
            tls_key: None,
            segment_bytes_max: 64 << 20,
            segment_seal_age_ms: 120_000,
            segment_seal_idle_ms: 5_000,
            segment_blocks_max: sensordb_engine::EngineOptions::default().segment_blocks_max,
            capacity_bytes: None,
            disk_target_usage: 0.80,
            throttle_low_usage: 0.90,
            throttle_high_usage: 0.95,
            merge_bytes_per_second: 64 << 20,
            evict_oldest_when_full: true,
            full_wait_max_ms: 4_000,
            databases: Vec::new(),
            cassandra: None,
        }
    }
}

fn durability_from_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Durability, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid setting: {0}")]
    Invalid(String),
}

impl ServerConfig {
    pub fn from_file(path: &Path) -> Result<ServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.into(), message },
            other => other,
        })
    }

    pub fn from_toml(text: &str) -> Result<ServerConfig, ConfigError> {
        let config: ServerConfig =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: PathBuf::from("<config>"), message: e.to_string() })?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.query_concurrency == 0 {
            return Err(ConfigError::Invalid("query_concurrency must be at least 1".into()));
        }
        if self.memtable_bytes_max < 1 << 20 {
            return Err(ConfigError::Invalid("memtable_bytes_max must be at least 1 MiB".into()));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::Invalid("max_connections must be at least 1".into()));
        }
        if self.listen_backlog == 0 {
            return Err(ConfigError::Invalid("listen_backlog must be at least 1".into()));
        }
        if self.max_connection_in_flight_bytes > self.max_in_flight_bytes {
            return Err(ConfigError::Invalid("max_connection_in_flight_bytes exceeds max_in_flight_bytes".into()));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(ConfigError::Invalid("tls_cert and tls_key go together".into()));
        }
        if self.segment_bytes_max < 1 << 20 {
            return Err(ConfigError::Invalid("segment_bytes_max must be at least 1 MiB".into()));
        }
        if self.segment_blocks_max < 1024 {
            return Err(ConfigError::Invalid("segment_blocks_max must be at least 1024".into()));
        }
        self.engine_options().reclaim.validate().map_err(ConfigError::Invalid)?;
        for database in &self.databases {
            database.policy()?;
        }
        if let Some(cassandra) = &self.cassandra {
            cassandra.validate()?;
        }
        Ok(())
    }

    /// The engine options these settings call for. Acknowledgement delays are the server's job
    /// (asynchronous), so the engine does not throttle inside `write`.
    pub fn engine_options(&self) -> sensordb_engine::EngineOptions {
        let mut options = sensordb_engine::EngineOptions {
            durability: self.durability,
            memtable_bytes_max: self.memtable_bytes_max,
            block_cache_bytes: self.block_cache_bytes,
            segment_bytes_max: self.segment_bytes_max,
            segment_blocks_max: self.segment_blocks_max,
            segment_seal_age: (self.segment_seal_age_ms > 0).then(|| std::time::Duration::from_millis(self.segment_seal_age_ms)),
            segment_seal_idle: (self.segment_seal_idle_ms > 0).then(|| std::time::Duration::from_millis(self.segment_seal_idle_ms)),
            throttle_writes: false,
            series_per_database_max: self.max_series_per_database,
            ..sensordb_engine::EngineOptions::default()
        };
        options.reclaim.capacity_bytes = self.capacity_bytes;
        options.reclaim.target_usage = self.disk_target_usage;
        options.reclaim.throttle_low = self.throttle_low_usage;
        options.reclaim.throttle_high = self.throttle_high_usage;
        options.reclaim.merge_bytes_per_second = self.merge_bytes_per_second;
        options.reclaim.evict_oldest_when_full = self.evict_oldest_when_full;
        options.reclaim.full_wait_max = std::time::Duration::from_millis(self.full_wait_max_ms);
        options
    }

    /// A warning when the databases' capacities add up to more than the disk target
    /// `U_m × C` (C: `capacity_bytes`, else `disk_bytes`, the data file system's size): such a
    /// node fills past its thresholds with live data and evicts the oldest of it before its
    /// storage period ends. `None` when they fit or nothing is known to compare.
    pub fn capacity_warning(&self, disk_bytes: Option<u64>) -> Option<String> {
        let node = self.capacity_bytes.or(disk_bytes)?;
        let promised: u64 = self.databases.iter().filter_map(|d| d.capacity_bytes).sum();
        let room = self.disk_target_usage * node as f64;
        (promised as f64 > room).then(|| {
            format!(
                "the databases' capacities add up to {promised} bytes, more than disk_target_usage ({}) × {node} bytes = {room:.0}: \
                 once they fill, the oldest data is evicted before its storage period ends (see `sensordb plan`)",
                self.disk_target_usage
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_capacities_beyond_the_disk_target_are_warned_about() {
        let config = |text: &str| ServerConfig::from_toml(text).expect("valid");
        let two = "[[databases]]\nname = \"a\"\ncapacity_bytes = 400\n\n[[databases]]\nname = \"b\"\ncapacity_bytes = 400\n";
        // 800 ≤ 0.8 × 1000: fits.
        assert_eq!(config(&format!("capacity_bytes = 1000\n{two}")).capacity_warning(None), None);
        // 800 > 0.8 × 999.
        let warning = config(&format!("capacity_bytes = 999\n{two}")).capacity_warning(Some(1 << 40)).expect("warned");
        assert!(warning.contains("800 bytes"), "{warning}");
        // Without capacity_bytes the file system's size counts.
        assert!(config(two).capacity_warning(Some(900)).is_some());
        assert_eq!(config(two).capacity_warning(Some(1 << 40)), None);
        assert_eq!(config(two).capacity_warning(None), None, "nothing to compare");
    }

    #[test]
    fn retention_settings_and_databases_are_read_and_checked() {
        let config = ServerConfig::from_toml(
            "capacity_bytes = 1000000000\ndisk_target_usage = 0.7\n\n[[databases]]\nname = \"plant\"\nperiod = \"30d\"\ncapacity_bytes = 5000\n\n[[databases.overrides]]\nmeasurement = \"debug\"\ntags = { line = \"a\" }\nperiod = \"12h\"\n",
        )
        .expect("valid");
        let options = config.engine_options();
        assert_eq!(options.reclaim.capacity_bytes, Some(1_000_000_000));
        assert_eq!(options.reclaim.target_usage, 0.7);
        assert!(!options.throttle_writes, "the server delays acknowledgements itself");
        let policy = config.databases[0].policy().expect("policy");
        assert_eq!(policy.period, Some(std::time::Duration::from_secs(30 * 86_400)));
        assert_eq!(policy.overrides[0].period, std::time::Duration::from_secs(12 * 3600));
        assert_eq!(policy.overrides[0].tags, vec![("line".to_string(), "a".to_string())]);
        assert!(ServerConfig::from_toml("throttle_low_usage = 0.99\n").is_err(), "U_l above U_h");
        assert!(ServerConfig::from_toml("[[databases]]\nname = \"x\"\nperiod = \"5y\"\n").is_err(), "bad period");
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let config = ServerConfig::from_toml("").expect("valid");
        assert_eq!(config.max_connections, 10_000);
        assert_eq!(config.durability, Durability::Fsync);
    }

    #[test]
    fn the_seal_age_reaches_the_engine_and_zero_seals_by_size_only() {
        let seal_age = |text: &str| ServerConfig::from_toml(text).expect("valid").engine_options().segment_seal_age;
        assert_eq!(seal_age(""), Some(std::time::Duration::from_secs(120)), "the default");
        assert_eq!(seal_age("segment_seal_age_ms = 30000\n"), Some(std::time::Duration::from_secs(30)));
        assert_eq!(seal_age("segment_seal_age_ms = 0\n"), None);
        let seal_idle = |text: &str| ServerConfig::from_toml(text).expect("valid").engine_options().segment_seal_idle;
        assert_eq!(seal_idle(""), Some(std::time::Duration::from_secs(5)), "the default");
        assert_eq!(seal_idle("segment_seal_idle_ms = 20000\n"), Some(std::time::Duration::from_secs(20)));
        assert_eq!(seal_idle("segment_seal_idle_ms = 0\n"), None);
    }

    #[test]
    fn the_block_limit_of_a_segment_reaches_the_engine_and_a_tiny_one_is_refused() {
        let blocks = |text: &str| ServerConfig::from_toml(text).map(|c| c.engine_options().segment_blocks_max);
        assert_eq!(blocks("").expect("valid"), 1 << 18, "the default");
        assert_eq!(blocks("segment_blocks_max = 5000\n").expect("valid"), 5000);
        assert!(blocks("segment_blocks_max = 10\n").is_err());
    }

    #[test]
    fn settings_and_tokens_are_read() {
        let config = ServerConfig::from_toml(
            "durability = \"os\"\nhttp_listen = \"127.0.0.1:0\"\n[[tokens]]\ntoken = \"t1\"\nscopes = [\"write\"]\n",
        )
        .expect("valid");
        assert_eq!(config.durability, Durability::Os);
        assert_eq!(config.tokens.len(), 1);
    }

    #[test]
    fn the_cassandra_section_is_read_with_defaults_and_checked() {
        assert_eq!(ServerConfig::from_toml("").expect("valid").cassandra, None, "segment files unless asked");
        let config = ServerConfig::from_toml("[cassandra]\nkeyspace = \"plant\"\nconsistency = \"LOCAL_QUORUM\"\n").expect("valid");
        let cassandra = config.cassandra.expect("section");
        assert_eq!(cassandra.keyspace, "plant");
        assert_eq!(cassandra.contact_points, vec!["127.0.0.1:9042".to_string()]);
        assert_eq!(cassandra.requests_in_flight_per_node, 32);
        assert!(ServerConfig::from_toml("[cassandra]\nconsistency = \"most\"\n").is_err());
        assert!(ServerConfig::from_toml("[cassandra]\nkeyspace = \"Bad-Name\"\n").is_err());
        assert!(ServerConfig::from_toml("[cassandra]\ncontact_points = []\n").is_err());
        assert!(ServerConfig::from_toml("[cassandra]\nkeyspaces = \"x\"\n").is_err(), "typo caught");
        assert_eq!((cassandra.node_id, cassandra.visibility_ms), (None, 1_000), "one process alone unless told");
        let shared = ServerConfig::from_toml("[cassandra]\nnode_id = 3\nvisibility_ms = 250\n").expect("valid").cassandra.expect("section");
        assert_eq!((shared.node_id, shared.visibility_ms), (Some(3), 250));
        assert!(ServerConfig::from_toml("[cassandra]\nnode_id = 40000\n").is_err());
        assert!(ServerConfig::from_toml("[cassandra]\nvisibility_ms = 0\n").is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(ServerConfig::from_toml("max_conections = 5").is_err(), "typo caught");
        assert!(ServerConfig::from_toml("durability = \"sometimes\"").is_err());
        assert!(ServerConfig::from_toml("max_connections = 0").is_err());
    }
}
