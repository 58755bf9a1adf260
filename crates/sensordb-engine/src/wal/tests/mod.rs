//! Tests of the write-ahead log.
