//! catalog (in progress)
