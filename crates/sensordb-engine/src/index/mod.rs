//! index (in progress)
