//! Counters and gauges of the server, rendered in the Prometheus text exposition format.
//!
//! Plain atomics: every update is one relaxed add, cheap enough for the per-request path.

use sensordb_engine::Engine;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    pub points_written: AtomicU64,
    pub bytes_received: AtomicU64,
    pub http_requests: AtomicU64,
    pub http_errors: AtomicU64,
    pub native_transactions_completed: AtomicU64,
    pub native_transactions_failed: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_accepted: AtomicU64,
    /// Connections the server closed after `idle_timeout_ms` with nothing in progress.
    pub connections_closed_idle: AtomicU64,
    /// Native connections closed for not completing HELLO within `hello_timeout_ms`.
    pub native_hello_timeouts: AtomicU64,
    /// HTTP connections closed because a request's headers took over `http_header_read_timeout_ms`.
    pub http_header_timeouts: AtomicU64,
    /// HTTP request bodies given up on as stalled or slower than the minimum rate.
    pub http_body_timeouts: AtomicU64,
    pub in_flight_bytes: AtomicI64,
    /// Sum and count of engine write latencies (time from batch ready to durable), microseconds.
    pub write_latency_us_sum: AtomicU64,
    pub write_latency_count: AtomicU64,
    /// Total delay imposed on writers by throttling, microseconds.
    pub throttle_delay_us: AtomicU64,
    /// Damaged blocks left out of read answers (each named in its answer).
    pub damaged_blocks_skipped: AtomicU64,
    /// `/query` requests run on the thread that took them (small queries).
    pub queries_inline: AtomicU64,
    /// Of those, the ones that outgrew the inline bounds and ran again on a blocking thread.
    pub queries_inline_retried: AtomicU64,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn record_write_latency(&self, elapsed: std::time::Duration) {
        Self::add(&self.write_latency_us_sum, elapsed.as_micros() as u64);
        Self::add(&self.write_latency_count, 1);
    }

    /// The exposition text, engine figures included.
    pub fn render(&self, engine: &Engine) -> String {
        let mut out = String::with_capacity(2048);
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        metric("sensordb_points_written_total", "counter", "Points acknowledged as durable.", load(&self.points_written));
        metric("sensordb_bytes_received_total", "counter", "Request and frame bytes received.", load(&self.bytes_received));
        metric("sensordb_http_requests_total", "counter", "HTTP requests served.", load(&self.http_requests));
        metric("sensordb_http_errors_total", "counter", "HTTP requests answered with an error.", load(&self.http_errors));
        metric(
            "sensordb_native_transactions_completed_total",
            "counter",
            "Native transactions completed.",
            load(&self.native_transactions_completed),
        );
        metric(
            "sensordb_native_transactions_failed_total",
            "counter",
            "Native transactions cancelled, timed out or failed.",
            load(&self.native_transactions_failed),
        );
        metric("sensordb_connections_accepted_total", "counter", "Connections accepted.", load(&self.connections_accepted));
        metric(
            "sensordb_connections_closed_idle_total",
            "counter",
            "Connections closed by the server after idle_timeout_ms with nothing in progress (both listeners).",
            load(&self.connections_closed_idle),
        );
        metric(
            "sensordb_native_hello_timeouts_total",
            "counter",
            "Native connections closed for not completing HELLO within hello_timeout_ms.",
            load(&self.native_hello_timeouts),
        );
        metric(
            "sensordb_http_header_timeouts_total",
            "counter",
            "HTTP connections closed because request headers took too long.",
            load(&self.http_header_timeouts),
        );
        metric(
            "sensordb_http_body_timeouts_total",
            "counter",
            "HTTP request bodies that stalled or came slower than the minimum rate.",
            load(&self.http_body_timeouts),
        );
        metric("sensordb_connections_open", "gauge", "Connections open now.", self.connections_open.load(Ordering::Relaxed).to_string());
        metric(
            "sensordb_in_flight_bytes",
            "gauge",
            "Bytes received and not yet durable.",
            self.in_flight_bytes.load(Ordering::Relaxed).to_string(),
        );
        metric(
            "sensordb_write_latency_seconds_sum",
            "counter",
            "Total time from a batch being ready to it being durable.",
            format!("{:.6}", self.write_latency_us_sum.load(Ordering::Relaxed) as f64 / 1e6),
        );
        metric("sensordb_write_latency_seconds_count", "counter", "Batches written.", load(&self.write_latency_count));
        metric(
            "sensordb_throttle_delay_seconds_total",
            "counter",
            "Delay imposed on writers by disk-pressure throttling.",
            format!("{:.6}", self.throttle_delay_us.load(Ordering::Relaxed) as f64 / 1e6),
        );
        let stats = engine.stats();
        metric("sensordb_series", "gauge", "Series in the catalog.", stats.series.to_string());
        metric("sensordb_buffered_points", "gauge", "Points in memtables, not yet in segments.", stats.memtable_points.to_string());
        metric("sensordb_stored_points", "gauge", "Points in sealed blocks.", stats.store.points.to_string());
        metric("sensordb_segments", "gauge", "Segment files.", stats.store.segments.to_string());
        metric(
            "sensordb_disk_bytes",
            "gauge",
            "Bytes of segment files and the catalog.",
            (stats.store.bytes + stats.catalog_bytes).to_string(),
        );
        metric("sensordb_flushes_total", "counter", "Memtable flushes.", stats.flushes.to_string());
        metric(
            "sensordb_flush_failures_total",
            "counter",
            "Flush attempts that failed (a full disk, say); retried with a growing pause.",
            stats.flush_failures.to_string(),
        );
        metric(
            "sensordb_compaction_failures_total",
            "counter",
            "Compaction attempts that failed; retried with a growing pause.",
            stats.compaction_failures.to_string(),
        );
        // Damage: what start-up set aside (still there until the operator removes it), what it
        // repaired, and what reads stepped over.
        let quarantined = engine.quarantined_files().unwrap_or_default();
        metric(
            "sensordb_quarantined_files",
            "gauge",
            "Files in <data>/quarantine: damaged files and cut-off bytes set aside by start-up (sensordb inspect lists them).",
            quarantined.len().to_string(),
        );
        metric(
            "sensordb_quarantined_bytes",
            "gauge",
            "Bytes in <data>/quarantine.",
            quarantined.iter().map(|(_, bytes)| bytes).sum::<u64>().to_string(),
        );
        metric(
            "sensordb_recovery_problems",
            "gauge",
            "Damaged spots the last start found and worked around (each logged with file and offset).",
            engine.recovery().problems.len().to_string(),
        );
        metric(
            "sensordb_damaged_blocks_skipped_total",
            "counter",
            "Damaged blocks left out of read answers (each answer names what it left out).",
            load(&self.damaged_blocks_skipped),
        );
        metric(
            "sensordb_queries_inline_total",
            "counter",
            "Queries run on the thread that took their request (small ones: no hand-over to a blocking thread).",
            load(&self.queries_inline),
        );
        metric(
            "sensordb_queries_inline_retried_total",
            "counter",
            "Queries run inline that outgrew its bounds and ran again on a blocking thread.",
            load(&self.queries_inline_retried),
        );
        let reclaim = engine.reclaim_stats();
        let f = |x: f64| if x.is_finite() { format!("{x:.6}") } else { "+Inf".to_string() };
        metric(
            "sensordb_disk_usage_ratio",
            "gauge",
            "Disk usage U: the larger of the file system's used share and sensordb's bytes over its capacity.",
            f(reclaim.usage.share),
        );
        metric(
            "sensordb_disk_file_system_usage_ratio",
            "gauge",
            "Used share of the data file system (statvfs).",
            f(reclaim.usage.file_system_share),
        );
        metric(
            "sensordb_disk_own_usage_ratio",
            "gauge",
            "sensordb's own files over its capacity: the only usage that evicts live data.",
            f(reclaim.usage.own_share),
        );
        metric(
            "sensordb_disk_full_by_others",
            "gauge",
            "1 while the file system is at the high threshold with sensordb's own files under the low one: writers wait and are refused, nothing live is deleted.",
            u8::from(reclaim.full_by_others).to_string(),
        );
        metric(
            "sensordb_writes_refused_no_space_total",
            "counter",
            "Writes refused for lack of space after waiting full_wait_max_ms.",
            reclaim.writes_refused_no_space.to_string(),
        );
        metric(
            "sensordb_disk_capacity_bytes",
            "gauge",
            "Capacity C that disk usage is relative to.",
            reclaim.usage.capacity_bytes.to_string(),
        );
        metric(
            "sensordb_reclaim_hunger",
            "gauge",
            "Fisherman hunger H = (U - U_m)/(U_l - U_m); 1 and above: every segment with dead data is merged.",
            f(reclaim.hunger),
        );
        metric("sensordb_reclaim_dead_share_threshold", "gauge", "Fisherman take threshold D_m.", f(reclaim.dead_share_threshold));
        metric(
            "sensordb_throttle_delay_seconds",
            "gauge",
            "Current acknowledgement delay T (+Inf while writers wait for space).",
            f(reclaim.throttle_seconds),
        );
        metric("sensordb_dead_bytes", "gauge", "Dead bytes still on disk.", reclaim.dead_bytes.to_string());
        metric(
            "sensordb_reclaim_segments_removed_total",
            "counter",
            "Whole dead segments removed without reading.",
            reclaim.segments_removed.to_string(),
        );
        metric(
            "sensordb_reclaim_bytes_removed_total",
            "counter",
            "Bytes of whole dead segments removed.",
            reclaim.bytes_removed.to_string(),
        );
        metric("sensordb_reclaim_segments_merged_total", "counter", "Partly dead segments merged.", reclaim.segments_merged.to_string());
        metric(
            "sensordb_reclaim_merge_bytes_read_total",
            "counter",
            "Live block bytes read by merges.",
            reclaim.merge_bytes_read.to_string(),
        );
        metric(
            "sensordb_reclaim_merge_bytes_written_total",
            "counter",
            "Bytes written by merges.",
            reclaim.merge_bytes_written.to_string(),
        );
        metric(
            "sensordb_reclaim_bytes_evicted_total",
            "counter",
            "Live bytes evicted because the disk was full of live data.",
            reclaim.bytes_evicted.to_string(),
        );
        out
    }
}
