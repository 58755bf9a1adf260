//! Workload generators and benchmark inputs for sensordb.
//!
//! - [`row`]: the neutral [`row::Row`] form every source yields, and [`row::SeriesMap`], the
//!   per-series cache that turns rows into `(series, timestamp, value)` triples.
//! - [`tsbs`]: a seeded generator modelled on the TSBS IoT use case (a fleet of trucks), and a
//!   waveform payload generator.
//! - [`line_protocol`]: a reader of InfluxDB line protocol (e.g. real TSBS files) into rows.
//! - [`stats`]: summary figures of a row stream, to compare generated with real TSBS data.
//! - [`engine_bench`]: in-process engine benchmarks (`sensordb bench engine`).
//! - [`tx_bench`]: the site-to-site style transaction load test (`sensordb bench tx`).
//! - [`ingest_bench`]: maximum sustained ingest over native or HTTP (`sensordb bench ingest`).
//! - [`reclaim_bench`]: sustained ingest with the store kept full (`sensordb bench reclaim`).
//! - [`large_store`]: stores of many series and blocks over years, built directly as segment
//!   files, for start-up and memory figures (`sensordb bench large-store`).
//! - [`load`]: what the network load tests share (open-file limit, in-process server).
//!
//! Real TSBS data comes from `scripts/tsbs-data`.

pub mod engine_bench;
pub mod ingest_bench;
pub mod large_store;
pub mod line_protocol;
pub mod load;
pub mod reclaim_bench;
pub mod row;
pub mod stats;
pub mod tsbs;
pub mod tx_bench;

pub use line_protocol::{LineProtocolError, LineProtocolReader, Precision, ReaderOptions};
pub use row::{Row, SeriesMap, TagSet};
pub use tsbs::{CapacityEncoding, Disorder, PayloadConfig, PayloadGenerator, TsbsConfig, TsbsGenerator};
