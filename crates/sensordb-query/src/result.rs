//! What a statement returns: series of rows in InfluxDB 1.x's result model (a name, the tags
//! the rows were grouped by, column names with `time` first, and rows of values).

use crate::value::FieldValue;
use std::sync::Arc;

/// Tag keys and values, sorted by key; shared by the series and results of one tag set (an
/// answer of 10,000 series would otherwise copy 10,000 tag sets, and free them again).
pub type TagSet = Arc<[(String, String)]>;

/// One row: its time (nanoseconds) and one value per column after `time`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultRow {
    pub time: i64,
    pub values: Vec<FieldValue>,
}

/// The columns of a series whose rows carry times: `time`, then `names`.
pub(crate) fn time_and(names: impl IntoIterator<Item = String>) -> Arc<[String]> {
    std::iter::once("time".to_string()).chain(names).collect()
}

/// One series of a statement's result.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResultSeries {
    pub name: Arc<str>,
    /// The GROUP BY tags and their values, sorted by key; empty without GROUP BY tags.
    pub tags: TagSet,
    /// Column names; `time` first when the rows carry times. Shared by the series of one
    /// statement.
    pub columns: Arc<[String]>,
    pub rows: Vec<ResultRow>,
    /// Whether the rows have a time column (SHOW statements' rows have none).
    pub has_time: bool,
}

/// The result of one statement: its series, or an error message (InfluxDB reports a failed
/// statement inside the result, beside the others).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StatementResult {
    pub series: Vec<ResultSeries>,
    pub error: Option<String>,
    /// Set when a limit cut the result short (points returned).
    pub partial: bool,
    /// Warnings beside the answer (InfluxDB's `messages`): damaged data that was left out.
    pub warnings: Vec<String>,
    /// The statement's `tz()`: RFC 3339 times are written in its local time.
    pub time_zone: Option<jiff::tz::TimeZone>,
}
