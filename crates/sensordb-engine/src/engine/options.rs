//! Engine settings: [`EngineOptions`] with its documented defaults, and the wall clock storage
//! periods run against.

use crate::fs::{FileSystem, RealFs};
use crate::model::Timestamp;
use crate::reclaim::ReclaimOptions;
use crate::wal::Durability;
use std::sync::Arc;
use std::time::Duration;

/// Engine settings. `Default` gives the documented defaults on the real file system.
#[derive(Clone)]
pub struct EngineOptions {
    pub durability: Durability,
    /// Memory for buffered points, active plus frozen memtable. The active memtable is flushed at
    /// half of it; writers wait while it is over half and the previous flush still runs.
    pub memtable_bytes_max: usize,
    /// A segment is sealed once it reaches this size (R).
    pub segment_bytes_max: u64,
    /// ... or once it holds this many blocks ([`crate::store::SEGMENT_BLOCKS_MAX`]):
    /// what the segment taking groups holds in memory is about 120 bytes a block.
    pub segment_blocks_max: usize,
    /// A segment is also sealed once it has been open this long (the flusher flushes the
    /// memtable into it first), so background compaction can merge its short blocks while the
    /// server runs; `None` seals by size only (then a quiet server keeps its short blocks until
    /// a restart). Default 2 minutes: a load that has ended is sealed and compacted within
    /// about 2 minutes of its first flush (the issue-14 benchmark reads the disk 5 minutes
    /// after a load), and a server fed in real time seals a segment every flush interval plus
    /// 2 minutes or so, each merged by compaction into the runs before it; shorter ages make
    /// more segment files and more rewrites for the same data.
    pub segment_seal_age: Option<Duration>,
    /// A segment is also sealed (the memtable flushed into it first) once writes have paused
    /// this long after at least [`SEAL_IDLE_POINTS_MIN`](crate::SEAL_IDLE_POINTS_MIN)
    /// points came since the engine last sealed: a load or backfill that has ended is compacted
    /// seconds after it, not `segment_seal_age` later, while a fleet writing all the time never
    /// pauses this long (and one writing in bursts seals once per million points or so). `None`:
    /// by size and age only. Default 5 s.
    pub segment_seal_idle: Option<Duration>,
    /// Most points in one block; longer runs of a series are split.
    pub block_points_max: usize,
    /// Memory for decoded blocks kept for reads that come again (0: none kept).
    pub block_cache_bytes: usize,
    /// Most payload bytes in one block of a byte series.
    pub block_bytes_max: usize,
    /// Largest accepted byte payload.
    pub payload_bytes_max: usize,
    /// A batch of only byte payloads holding at least this many bytes is written straight into
    /// a segment (one write, one fsync, group-committed with concurrent ones) instead of through
    /// the WAL and a later flush, which would write every byte twice. `usize::MAX` disables.
    pub direct_write_bytes_min: usize,
    /// Buffered points older than this are flushed even if the memtable is not full, so the WAL
    /// stays short.
    pub flush_interval: Duration,
    /// WAL file size before rotation.
    pub wal_file_bytes_max: u64,
    /// Memtable shards; more shards mean fewer writers meeting on one lock.
    pub memtable_shards: usize,
    /// Sealed segments whose blocks average fewer points than this are rewritten into long
    /// blocks (see the `compaction` module). Above `block_points_max` it is held to half of
    /// that (full blocks must not count as short).
    pub compaction_small_block_points: u64,
    /// Compact in a background thread; otherwise only [`Engine::compact`](crate::engine::Engine::compact) does.
    pub background_compaction: bool,
    /// Retention, reclaim and throttling (see the `reclaim` module).
    pub reclaim: ReclaimOptions,
    /// Reclaim in a background thread; otherwise only [`Engine::reclaim`](crate::engine::Engine::reclaim) does.
    pub background_reclaim: bool,
    /// [`Engine::write`](crate::engine::Engine::write) itself goes through the admission as the disk
    /// fills (see [`Engine::admit`](crate::engine::Engine::admit)), blocking its thread: it waits at
    /// `U_h` and delays its return between `U_l` and `U_h`. A caller that must not block there (the
    /// server, which waits asynchronously and delays each acknowledgement on its own) or that counts
    /// the waits turns this off and calls the same admission itself.
    pub throttle_writes: bool,
    /// The wall clock in nanoseconds since the epoch, against which storage periods run.
    pub clock: Clock,
    pub fs: Arc<dyn FileSystem>,
    /// Most live series one database may hold; a new series beyond fails with
    /// [`Error::SeriesLimit`](crate::Error::SeriesLimit). `usize::MAX` (the default) for no limit.
    pub series_per_database_max: usize,
}

/// A source of "now" in nanoseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    })
}

impl Default for EngineOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        EngineOptions {
            durability: Durability::Fsync,
            memtable_bytes_max: 512 << 20,
            segment_bytes_max: 64 << 20,
            segment_blocks_max: crate::store::SEGMENT_BLOCKS_MAX,
            segment_seal_age: Some(Duration::from_secs(120)),
            segment_seal_idle: Some(Duration::from_secs(5)),
            block_points_max: 16_384,
            block_cache_bytes: 32 << 20,
            block_bytes_max: 4 << 20,
            payload_bytes_max: 1 << 20,
            direct_write_bytes_min: 64 << 10,
            flush_interval: Duration::from_secs(300),
            wal_file_bytes_max: 64 << 20,
            memtable_shards: cores * 8,
            compaction_small_block_points: 2048,
            background_compaction: true,
            reclaim: ReclaimOptions::default(),
            background_reclaim: true,
            throttle_writes: true,
            clock: system_clock(),
            fs: Arc::new(RealFs),
            series_per_database_max: usize::MAX,
        }
    }
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("durability", &self.durability)
            .field("memtable_bytes_max", &self.memtable_bytes_max)
            .field("segment_bytes_max", &self.segment_bytes_max)
            .field("segment_blocks_max", &self.segment_blocks_max)
            .field("segment_seal_age", &self.segment_seal_age)
            .field("segment_seal_idle", &self.segment_seal_idle)
            .field("compaction_small_block_points", &self.compaction_small_block_points)
            .field("block_points_max", &self.block_points_max)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("payload_bytes_max", &self.payload_bytes_max)
            .field("flush_interval", &self.flush_interval)
            .field("reclaim", &self.reclaim)
            .field("series_per_database_max", &self.series_per_database_max)
            .finish_non_exhaustive()
    }
}
