//! sensordb's query execution: InfluxQL statements run over a [`storage::Storage`], with the
//! results InfluxDB 1.x gives.
//!
//! # Layout
//! - [`value`]: values and typed columns of points.
//! - [`storage`]: what a query reads through (the engine in the server, [`memory`] in tests).
//! - [`time`]: time literals, WHERE time ranges, timestamps as InfluxDB renders them.
//! - [`eval`]: expressions and conditions over rows, tag-only verdicts.
//! - [`window`]: `GROUP BY time(...)` buckets.
//! - [`runs`]: kernels over runs of sorted points (extremes, bucket edges).
//! - [`reduce`]: aggregates and selectors over one bucket (`mean`, `percentile`, `last`, ...).
//! - [`transform`]: functions over a series of results (`derivative`, `moving_average`, ...).
//! - [`fill`]: what empty buckets show.
//! - [`select`]: SELECT statements: sources, grouping, raw and aggregate queries, subqueries.
//! - [`result`]: series of rows, InfluxDB's result model.

pub(crate) mod bound;
pub mod error;
pub mod eval;
pub mod fill;
pub mod memory;
pub mod reduce;
pub mod result;
pub mod runs;
pub mod select;
pub mod series_list;
pub mod storage;
pub mod time;
pub mod transform;
pub mod value;
pub mod window;

pub use error::QueryError;
pub use result::{ResultRow, ResultSeries, StatementResult, TagSet};
pub use select::{Context, Limits};
pub use series_list::SeriesList;
pub use storage::{FieldKind, ScanOrder, Storage, StorageError, StoredSeries};
pub use value::{Column, ColumnSlice, FieldValue};
pub mod m4;
pub mod show;
