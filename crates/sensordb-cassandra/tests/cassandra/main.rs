//! The Cassandra store against a real Cassandra 5.0 node (`scripts/cassandra`): the store-level
//! checks of the `BlockStore` trait (`store_checks`), the engine running over it
//! (`engine_checks`), rows expiring by TTL (`ttl_checks`), and two nodes on one keyspace
//! (`cluster_checks`). One node serves the whole binary; each test has its own keyspace.
//!
//! Ignored by default, as they start a JVM (~1 GiB of memory, ~15-45 s): run them with
//! `cargo test -p sensordb-cassandra -- --include-ignored`.

mod ack_checks;
mod cluster_checks;
mod engine_checks;
mod node;
mod store_checks;
mod ttl_checks;
