//! sensordb's network server over the embedded engine.
//!
//! # Layout
//! - [`config`]: settings from a TOML file and flags, with documented defaults.
//! - [`auth`]: access tokens with read and write scopes.
//! - [`metrics`]: counters and gauges, rendered in the Prometheus text format.
//! - [`server`]: starts the listeners on one engine and stops them with a drain.
//! - [`state`]: what every connection handler shares, and the shutdown signal.
//! - [`http`]: the InfluxDB-compatible HTTP API (line-protocol writes, queries, metrics).
//! - [`native`]: the native protocol's listener, connections, transactions and the log of
//!   completed transaction ids; its wire format (frames, point records) is the
//!   `sensordb-protocol` crate's, shared with the client.
//! - [`tls`]: optional TLS (rustls) for both listeners.
//!
//! Data flows listener → connection → parser → write batch → engine (whose `write` returns once
//! the batch is durable under the configured durability) → acknowledgement.

pub mod auth;
pub mod config;
pub mod http;
pub mod metrics;
pub mod native;
pub mod server;
pub mod state;
pub mod tls;

pub use config::ServerConfig;
pub use server::{RunningServer, Server};
