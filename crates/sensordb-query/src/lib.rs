//! sensordb's query execution: the computations behind InfluxQL's `SELECT`, independent of where
//! the points come from.
//!
//! # Layout
//! - [`value`]: values and typed columns of points.
//! - [`window`]: `GROUP BY time(...)` buckets.
//! - [`reduce`]: aggregates and selectors over one bucket (`mean`, `percentile`, `last`, ...).
//! - [`transform`]: functions over a series of results (`derivative`, `moving_average`, ...).
//! - [`fill`]: what empty buckets show.

pub mod fill;
pub mod reduce;
pub mod transform;
pub mod value;
pub mod window;

pub use value::{Column, ColumnSlice, FieldValue};
pub mod error;
pub mod eval;
pub mod storage;
pub mod time;
