//! What a Cassandra store is opened with: where the cluster is, the keyspace and its
//! replication, the consistency of every request, the sizes that shape rows and partitions, and
//! the node's place among the sensordb nodes sharing the keyspace.

use crate::error::CassandraError;
pub use scylla::statement::Consistency;
use std::time::Duration;

/// Nanoseconds in a day and a minute, for bucket sizes.
const DAY_NS: i64 = 86_400_000_000_000;
const MINUTE_NS: i64 = 60_000_000_000;

/// How to reach and shape a Cassandra store.
#[derive(Clone, Debug)]
pub struct CassandraOptions {
    /// `host:port` of nodes to connect to first; the driver finds the rest of the cluster.
    pub contact_points: Vec<String>,
    /// The keyspace: one store's alone, or shared by the stores of several nodes (`node_id`).
    pub keyspace: String,
    /// The CQL replication map the keyspace is created with (ignored when it exists).
    pub replication: String,
    /// Consistency of every read and write (QUORUM: an acknowledged group is on a majority of
    /// replicas, and a QUORUM read sees it).
    pub consistency: Consistency,
    /// Requests in flight at once, per contact point.
    pub requests_in_flight_per_node: usize,
    /// Worker threads of the store's tokio runtime.
    pub runtime_threads: usize,
    /// A segment stops taking groups once it holds this many bytes of blocks.
    pub segment_bytes_max: u64,
    /// Partition bucket of number and boolean series, ns (fixed when the keyspace is made).
    pub bucket_ns: i64,
    /// Partition bucket of payload (bytes) series, ns (fixed when the keyspace is made).
    pub payload_bucket_ns: i64,
    /// Added to every block row's TTL beyond its series' storage period: Cassandra counts a
    /// TTL by its own clock, and one running ahead of sensordb's would drop rows the engine
    /// still reads. Rows whose TTL runs out within it are no longer listed.
    pub ttl_slack: Duration,
    /// This process's number among the sensordb nodes sharing the keyspace (unique among
    /// them): its segment ids are `node_id << 48 | n`, its segments and series are published
    /// under it, and it reads the other nodes' flushed data (see `cluster`). `None`: the
    /// keyspace belongs to this process alone (its segments are node 0's, nothing is polled).
    pub node_id: Option<u16>,
    /// With `node_id`: how often the other nodes' segments are polled, so their flushed points
    /// are readable here at most this long (plus one poll) after their flush.
    pub visibility: Duration,
    /// With `node_id`: how long a removed segment's rows outlive its removal, so that a read
    /// on another node that listed the segment before its next poll can finish.
    pub removal_grace: Duration,
    /// With `node_id`: every acknowledged write is also a `wal` row at `consistency` before the
    /// engine's write returns, and completion marks go to `transactions` (see `wal`).
    pub ack_writes: bool,
    /// With `ack_writes`: how long `wal` and `transactions` rows live. A node's unflushed
    /// writes must be adopted within it: far above `flush_interval`.
    pub wal_ttl: Duration,
    /// With `ack_writes`: a node whose heartbeat is older than this is adopted by a live one.
    pub dead_after: Duration,
    /// With `ack_writes`: `host:port` of this node's native listener as clients reach it,
    /// written to `node_addresses` so that other nodes list it among their peers (see `peers`).
    /// `None`: not listed.
    pub advertise: Option<String>,
}

impl Default for CassandraOptions {
    fn default() -> Self {
        CassandraOptions {
            contact_points: vec!["127.0.0.1:9042".to_string()],
            keyspace: "sensordb".to_string(),
            replication: "{'class': 'SimpleStrategy', 'replication_factor': 1}".to_string(),
            consistency: Consistency::Quorum,
            requests_in_flight_per_node: 32,
            runtime_threads: 2,
            segment_bytes_max: 64 << 20,
            bucket_ns: DAY_NS,
            payload_bucket_ns: MINUTE_NS,
            ttl_slack: Duration::from_secs(60),
            node_id: None,
            visibility: Duration::from_secs(1),
            removal_grace: Duration::from_secs(60),
            ack_writes: false,
            wal_ttl: Duration::from_secs(86_400),
            dead_after: Duration::from_secs(10),
            advertise: None,
        }
    }
}

/// The consistency level of a CQL name (`quorum`, `LOCAL_QUORUM`, ...), for configuration files.
pub fn consistency_from_name(name: &str) -> Option<Consistency> {
    Some(match name.to_ascii_lowercase().as_str() {
        "any" => Consistency::Any,
        "one" => Consistency::One,
        "two" => Consistency::Two,
        "three" => Consistency::Three,
        "quorum" => Consistency::Quorum,
        "all" => Consistency::All,
        "local_quorum" => Consistency::LocalQuorum,
        "each_quorum" => Consistency::EachQuorum,
        "local_one" => Consistency::LocalOne,
        _ => return None,
    })
}

impl CassandraOptions {
    pub(crate) fn validate(&self) -> Result<(), CassandraError> {
        let invalid = |what: String| Err(CassandraError::InvalidOptions(what));
        let name_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        if self.keyspace.is_empty() || self.keyspace.len() > 48 || !self.keyspace.chars().all(name_ok) {
            return invalid(format!("keyspace {:?}: use 1 to 48 lower-case letters, digits and _", self.keyspace));
        }
        if self.contact_points.is_empty() {
            return invalid("no contact points".to_string());
        }
        if self.bucket_ns <= 0 || self.payload_bucket_ns <= 0 {
            return invalid("bucket sizes must be positive".to_string());
        }
        if self.requests_in_flight_per_node == 0 {
            return invalid("requests_in_flight_per_node must be positive".to_string());
        }
        if self.node_id.is_some_and(|n| n > crate::cluster::NODE_ID_MAX) {
            return invalid(format!("node_id must be at most {}", crate::cluster::NODE_ID_MAX));
        }
        if self.ack_writes && self.node_id.is_none() {
            return invalid("ack_writes needs a node_id".to_string());
        }
        if self.ack_writes && (self.wal_ttl.as_secs() == 0 || self.dead_after.is_zero()) {
            return invalid("wal_ttl (at least a second) and dead_after must be positive".to_string());
        }
        if self.visibility.is_zero() {
            return invalid("visibility must be positive".to_string());
        }
        Ok(())
    }

    /// The bound on requests in flight at once.
    pub(crate) fn requests_in_flight_max(&self) -> usize {
        self.requests_in_flight_per_node.saturating_mul(self.contact_points.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_names_that_cql_would_need_quoted_are_refused() {
        assert!(CassandraOptions::default().validate().is_ok());
        for bad in ["", "Sensor", "a-b", "a;DROP", &"k".repeat(49)] {
            let options = CassandraOptions { keyspace: bad.to_string(), ..CassandraOptions::default() };
            assert!(options.validate().is_err(), "{bad:?}");
        }
        let none = CassandraOptions { contact_points: Vec::new(), ..CassandraOptions::default() };
        assert!(none.validate().is_err());
        assert_eq!(CassandraOptions::default().requests_in_flight_max(), 32);
    }

    #[test]
    fn consistency_names_are_read_in_any_case() {
        assert_eq!(consistency_from_name("quorum"), Some(Consistency::Quorum));
        assert_eq!(consistency_from_name("LOCAL_QUORUM"), Some(Consistency::LocalQuorum));
        assert_eq!(consistency_from_name("most"), None);
    }
}
