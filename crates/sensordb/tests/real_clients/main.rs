//! Real InfluxDB clients, unchanged, against the real `sensordb serve` binary.
//!
//! Each test starts `sensordb serve` on 127.0.0.1 (a port of its own, a temporary data directory,
//! durability `os`), drives one client the way its users do, then reads every point back
//! through sensordb's own `GET /sensordb/points` (always naming the database written) and compares
//! series, timestamps and values exactly, so a point lost or stored twice fails the test.
//!
//! - `python_v1`: the InfluxDB 1.x Python client `influxdb` (`/write`, `/query`, `/ping`), on an
//!   open server and with tokens (username/password and the `u`/`p` parameters).
//! - `python_v2`: the InfluxDB 2.x Python client `influxdb-client` (`/api/v2/write`), synchronous
//!   and batching writes, with tokens.
//! - `telegraf`: `telegraf --once` reading a line-protocol file into `outputs.influxdb` and
//!   `outputs.influxdb_v2`.
//! - `graph_page`: the built-in graph page in headless Chromium (playwright-core).
//!
//! The clients come from `scripts/install-clients` (into `target/clients/`). A test whose client
//! is not installed says so loudly and passes, unless `SENSORDB_REQUIRE_CLIENTS=1` (set by
//! `scripts/test`), where it fails.

mod graph_page;
mod harness;
mod python_v1;
mod python_v2;
mod telegraf;
