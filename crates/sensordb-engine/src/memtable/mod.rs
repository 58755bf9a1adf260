//! memtable (in progress)
