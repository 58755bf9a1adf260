//! block (in progress)
