//! `sensordb serve`: opens the store (recovering after a crash) and serves it over the native
//! transactional protocol and the InfluxDB-compatible HTTP API until Ctrl-C or SIGTERM, then
//! drains the connections and closes the store cleanly.
//!
//! Settings come from `--config FILE` (TOML, see `sensordb_server::config`), then the flags.
//! `--demo` writes an hour of generated TSBS-IoT-like fleet data at start, to have something
//! to query.

use anyhow::Context;
use sensordb_bench::row::SeriesMap;
use sensordb_bench::tsbs::{TsbsConfig, TsbsGenerator};
use sensordb_engine::{Durability, Engine, SeriesId, WriteBatch};
use sensordb_server::{Server, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Prints a line to stdout, ignoring failure: a server whose stdout is gone (a closed pipe, a
/// full disk) keeps serving, where `println!` would panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file; flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory (default ./data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// What an acknowledged write survives: none, os (process crash) or fsync (power loss).
    #[arg(long)]
    durability: Option<Durability>,
    /// HTTP listen address (default 127.0.0.1:8086).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Native protocol listen address (default 127.0.0.1:7070).
    #[arg(long)]
    native: Option<SocketAddr>,
    /// Close a connection with nothing in progress after this long (default 60000): a native
    /// one without frames and open transactions, an HTTP one between requests.
    #[arg(long)]
    idle_timeout_ms: Option<u64>,
    /// HTTP: longest time from a request's first byte to the end of its headers (default 20000).
    #[arg(long)]
    http_header_read_timeout_ms: Option<u64>,
    /// HTTP: longest wait for more bytes of a request body (default 20000).
    #[arg(long)]
    http_body_read_timeout_ms: Option<u64>,
    /// Write an hour of generated fleet data (10 trucks) at start.
    #[arg(long)]
    demo: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => ServerConfig::from_file(path)?,
        None => ServerConfig::default(),
    };
    if let Some(data) = args.data.clone() {
        config.data_dir = data;
    }
    if let Some(durability) = args.durability {
        config.durability = durability;
    }
    if let Some(http) = args.http {
        config.http_listen = http;
    }
    if let Some(native) = args.native {
        config.native_listen = native;
    }
    if let Some(ms) = args.idle_timeout_ms {
        config.idle_timeout_ms = ms;
    }
    if let Some(ms) = args.http_header_read_timeout_ms {
        config.http_header_read_timeout_ms = ms;
    }
    if let Some(ms) = args.http_body_read_timeout_ms {
        config.http_body_read_timeout_ms = ms;
    }
    config.validate()?;
    raise_open_file_limit(config.max_connections);
    limit_malloc_arenas();

    let started = Instant::now();
    let options = config.engine_options();
    let mut cassandra_store = None;
    let engine = match &config.cassandra {
        None => Engine::open(&config.data_dir, options),
        Some(cassandra) => {
            let store = open_cassandra(cassandra, config.native_listen)?;
            cassandra_store = Some(store.clone());
            Engine::open_with_store(&config.data_dir, options, store)
        }
    };
    let engine = Arc::new(engine.with_context(|| format!("opening {}", config.data_dir.display()))?);
    for database in &config.databases {
        let policy = database.policy()?;
        engine.set_database_policy(&database.name, policy).with_context(|| format!("applying database {:?}", database.name))?;
    }
    if let (Some(store), Some(_)) = (&cassandra_store, config.cassandra.as_ref().and_then(|c| c.node_id)) {
        // Nodes sharing the keyspace apply the same database definitions (the keyspace's win
        // over this node's [[databases]] at start; docs/CASSANDRA.md).
        sensordb_cassandra::CassandraStore::share_databases(store, &engine).context("starting the database definition merge")?;
        // Before serving: this node's acknowledged writes that its disk may have lost.
        let replayed = sensordb_cassandra::CassandraStore::acknowledge_writes(store, &engine)
            .context("replaying this node's acknowledged writes from Cassandra")?;
        if replayed.rows > 0 {
            say!("sensordb: replayed {} acknowledged writes ({} points) of this node from Cassandra", replayed.rows, replayed.points);
        }
    }
    let disk_bytes = sensordb_engine::FileSystem::space(&sensordb_engine::RealFs, &config.data_dir).ok().map(|s| s.total_bytes);
    if let Some(warning) = config.capacity_warning(disk_bytes) {
        tracing::warn!("{warning}");
    }
    let recovery = engine.recovery();
    say!(
        "sensordb: opened {} in {:.1} ms ({} series, {} segments, {} WAL records replayed, {} problems repaired)",
        config.data_dir.display(),
        started.elapsed().as_secs_f64() * 1e3,
        recovery.series,
        recovery.segments,
        recovery.wal_records_replayed,
        recovery.problems.len()
    );
    for (file, offset, what) in &recovery.problems {
        say!("sensordb: repaired {} at offset {offset}: {what}", file.display());
    }
    let quarantined = engine.quarantined_files().unwrap_or_default();
    if !quarantined.is_empty() {
        say!(
            "sensordb: {} files in {}: damage set aside by this or an earlier start; `sensordb inspect` lists them, remove them once looked at",
            quarantined.len(),
            sensordb_engine::quarantine::quarantine_dir(&config.data_dir).display()
        );
    }
    if args.demo {
        demo(&engine)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let server = Server::start(config.clone(), engine.clone()).await.context("starting the listeners")?;
        say!(
            "sensordb: serving HTTP on {} and the native protocol on {} (durability {:?}); Ctrl-C to stop",
            server.http_addr,
            server.native_addr,
            config.durability
        );
        shutdown_signal().await;
        say!("sensordb: stopping");
        server.shutdown().await;
        anyhow::Ok(())
    })?;
    drop(runtime);
    let engine = Arc::try_unwrap(engine).map_err(|_| anyhow::anyhow!("the store is still in use after shutdown"))?;
    engine.close().context("closing the store")?;
    say!("sensordb: closed cleanly");
    Ok(())
}

/// The Cassandra store `[cassandra]` asks for (connects, and creates the keyspace if missing).
fn open_cassandra(
    config: &sensordb_server::config::CassandraConfig,
    native_listen: std::net::SocketAddr,
) -> anyhow::Result<Arc<sensordb_cassandra::CassandraStore>> {
    let consistency = sensordb_cassandra::consistency_from_name(&config.consistency)
        .with_context(|| format!("[cassandra] consistency {:?}", config.consistency))?;
    let options = sensordb_cassandra::CassandraOptions {
        contact_points: config.contact_points.clone(),
        keyspace: config.keyspace.clone(),
        replication: config.replication.clone(),
        consistency,
        requests_in_flight_per_node: config.requests_in_flight_per_node,
        node_id: config.node_id,
        visibility: std::time::Duration::from_millis(config.visibility_ms),
        ack_writes: config.acks_in_cassandra(),
        dead_after: std::time::Duration::from_millis(config.dead_after_ms),
        wal_ttl: std::time::Duration::from_secs(config.wal_ttl_s),
        advertise: config.advertised_address(native_listen),
        ..sensordb_cassandra::CassandraOptions::default()
    };
    let store = sensordb_cassandra::CassandraStore::open(options)
        .with_context(|| format!("opening keyspace {:?} at {}", config.keyspace, config.contact_points.join(",")))?;
    let store = Arc::new(store);
    if config.node_id.is_some() {
        // Reads here cover the other nodes' flushed data from the first poll on.
        sensordb_cassandra::CassandraStore::watch_other_nodes(&store).context("starting the thread that reads other nodes' segments")?;
    }
    tracing::info!(keyspace = %config.keyspace, contact_points = %config.contact_points.join(","), node_id = ?config.node_id, "sealed blocks go to Cassandra");
    Ok(store)
}

async fn shutdown_signal() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// Raises the soft open-file limit to the hard limit, so `max_connections` sockets fit; warns
/// when even the hard limit is too low.
fn raise_open_file_limit(max_connections: usize) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit write and read the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    let needed = max_connections as u64 + 256;
    if limit.rlim_cur < needed {
        tracing::warn!(
            open_files = limit.rlim_cur,
            needed,
            "the open-file limit is below max_connections; connections beyond it will wait"
        );
    }
}

/// Caps glibc's malloc arenas at one (unless `MALLOC_ARENA_MAX` is set). By default each thread
/// that meets a busy arena gets its own, up to 8 per core, and memory freed on another thread (a
/// request body decoded on one blocking thread, parsed on another; a memtable filled by writers,
/// freed by the flusher) stays in the arena it came from: a TSBS load over HTTP peaked at
/// 123-158 MiB resident with the default and 90-111 MiB with two arenas, at the same CPU time.
/// Each arena keeps the free memory of its own high-water mark, so two arenas hold two of them:
/// once the paced flush kept the frozen memtable alive longer, two arenas peaked at 92-131 MiB
/// (the second holding ~31 MB free of its 42 MB at the end of a load) and one arena at 89-90 MiB
/// (docs/BENCHMARKS.md).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // Small allocations go through glibc's per-thread caches without the arena lock; the
        // single arena cost no measurable CPU on the 2-core machines we size for.
        const ARENAS_MAX: i32 = 1;
        // SAFETY: mallopt only sets a malloc tunable; called before the server's threads start.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS_MAX);
        }
    }
}

/// Writes an hour of a 10-truck TSBS-IoT-like fleet through the engine, into database `demo`.
fn demo(engine: &Engine) -> anyhow::Result<()> {
    engine.create_database("demo")?;
    let config = TsbsConfig { scale: 10, ..TsbsConfig::default() }.with_duration(3_600_000_000_000);
    let mut ids: SeriesMap<SeriesId> = SeriesMap::new();
    let mut batch = WriteBatch::new();
    let written_at = Instant::now();
    let mut points = 0u64;
    for row in TsbsGenerator::new(config) {
        for (field, value) in &row.fields {
            let kind = value.kind();
            let id = *ids.get_or_insert_with(&row.tags, &row.measurement, field, |key| {
                let key = key.in_database("demo")?;
                engine.series_id(&key, kind)
            })?;
            batch.push(id, row.timestamp, value.clone())?;
            points += 1;
        }
        if batch.len() >= 10_000 {
            engine.write(&batch)?;
            batch.clear();
        }
    }
    engine.write(&batch)?;
    say!(
        "demo: wrote {points} points of 10 trucks over one hour (2016-01-01) into database demo into database demo in {:.2} s",
        written_at.elapsed().as_secs_f64()
    );
    Ok(())
}
