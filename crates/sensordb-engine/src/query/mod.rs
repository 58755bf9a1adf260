//! query (in progress)
