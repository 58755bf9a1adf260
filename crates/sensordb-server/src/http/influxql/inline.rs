//! Which queries run on the thread that took their request. Handing a query to a blocking thread
//! and its answer back costs 80-140 µs of CPU (thread wake-ups on both sides), more than a
//! dashboard's lookup itself; a small query therefore runs where it arrived, within bounds that
//! keep that thread's turn short: named measurements of few series, few points read (a query
//! that reads more runs again on a blocking thread), a short answer (a long one is written on a
//! blocking thread). Queries of a shape that outgrew the bounds once go to a blocking thread
//! directly afterwards, so a large query does not pay its first points twice on every request.

use super::super::HttpState;
use sensordb_influxql::{MeasurementName, SelectStatement, Source, Statement};
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

/// Points a query run inline may read at most (a few blocks of each of a few series).
pub const POINTS_MAX: u64 = 16_384;
/// Series a measurement read by a query run inline may hold at most.
pub const SERIES_MAX: usize = 1_024;
/// Rows an answer written inline may hold at most.
pub const ROWS_MAX: usize = 4_096;
/// Shapes remembered at most; the memory starts over beyond it.
const SHAPES_MAX: usize = 4_096;

/// Whether `statements` may run on the thread that took the request: read-only SELECTs whose
/// measurements are named and hold few series, or few carrying the one tag value their WHERE
/// clause requires (their series lists kept and current: building one walks the catalog), and
/// the SHOWs that list databases and policies.
pub fn runs_inline(http: &HttpState, statements: &[Statement], database: &str) -> bool {
    statements.iter().all(|statement| match statement {
        Statement::Select(select) => !database.is_empty() && small(http, select, database),
        Statement::ShowDatabases | Statement::ShowRetentionPolicies(_) => true,
        _ => false,
    })
}

fn small(http: &HttpState, select: &SelectStatement, database: &str) -> bool {
    select.into.is_none()
        && select.sources.iter().all(|source| match source {
            Source::Subquery(inner) => small(http, inner, database),
            Source::Measurement(m) => match &m.name {
                MeasurementName::Name(name) => {
                    let database = m.database.as_deref().unwrap_or(database);
                    let engine = &http.server.engine;
                    // A condition requiring one tag value reads only the series carrying it.
                    let read = match select.condition.as_ref().and_then(sensordb_query::select::required_tag) {
                        Some(tag) => http.series_lists.current_len_with(engine, database, name, tag),
                        None => http.series_lists.current_len(engine, database, name),
                    };
                    read.is_some_and(|n| n <= SERIES_MAX)
                }
                MeasurementName::Regex(_) => false,
            },
        })
}

/// A query's text with its quoted strings and numbers left out, hashed with its database: the
/// queries a dashboard or a benchmark repeats with other tags, times and thresholds share one.
/// (Digits of bare names go too: `v2` and `v3` share a shape. A shape only steers where a query
/// runs, never its answer, so a fast hash serves: the kept bytes are hashed once, where feeding
/// SipHash a byte at a time cost 7,700 instructions a query.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape(u64);

impl Shape {
    pub fn of(text: &str, database: &str) -> Shape {
        let mut kept = Vec::with_capacity(text.len() + database.len() + 1);
        kept.extend_from_slice(database.as_bytes());
        // The database's end, so that ("ab", "c...") and ("a", "bc...") differ.
        kept.push(0);
        let mut quote: Option<u8> = None;
        let mut escaped = false;
        let mut in_number = false;
        for &byte in text.as_bytes() {
            let number_part = quote.is_none() && (byte.is_ascii_digit() || (in_number && byte == b'.'));
            in_number = number_part;
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if byte == b'\\' {
                        escaped = true;
                    } else if byte == q {
                        quote = None;
                    }
                }
                // Identifiers in double quotes stay: they name what is read.
                None if byte == b'\'' => {
                    quote = Some(byte);
                    kept.push(b'?');
                }
                None if number_part => {}
                None => kept.push(byte),
            }
        }
        let mut hasher = foldhash::quality::FixedState::default().build_hasher();
        hasher.write(&kept);
        Shape(hasher.finish())
    }
}

/// Shapes of queries that outgrew the inline bounds.
#[derive(Default)]
pub struct Misses(parking_lot::Mutex<HashSet<Shape, foldhash::fast::FixedState>>);

impl Misses {
    pub fn contains(&self, shape: Shape) -> bool {
        self.0.lock().contains(&shape)
    }

    pub fn insert(&self, shape: Shape) {
        let mut shapes = self.0.lock();
        if shapes.len() >= SHAPES_MAX {
            shapes.clear();
        }
        shapes.insert(shape);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_do_not_change_a_shape_but_names_do() {
        let db = "benchmark";
        let a = Shape::of("SELECT v FROM \"m\" WHERE \"name\" = 'truck_5' AND v > 0.5 AND time > '2016-01-01T00:00:00Z'", db);
        let b = Shape::of("SELECT v FROM \"m\" WHERE \"name\" = 'truck_17' AND v > 12 AND time > '2016-01-02T10:00:00Z'", db);
        assert_eq!(a, b);
        assert_ne!(a, Shape::of("SELECT v FROM \"n\" WHERE \"name\" = 'truck_5' AND v > 0.5 AND time > '2016-01-01T00:00:00Z'", db));
        assert_ne!(a, Shape::of("SELECT v FROM \"m\" WHERE \"name\" = 'truck_5' AND v > 0.5 AND time > '2016-01-01T00:00:00Z'", "other"));
        // A quote inside a string does not end it.
        assert_eq!(Shape::of("SELECT v FROM m WHERE t = 'a\\'b' AND u = 1", db), Shape::of("SELECT v FROM m WHERE t = 'c' AND u = 2", db));
        assert_ne!(Shape::of("SELECT v FROM m WHERE t = 'a'", db), Shape::of("SELECT v FROM m WHERE u = 'a'", db));
    }

    #[test]
    fn misses_are_bounded() {
        let misses = Misses::default();
        for i in 0..(SHAPES_MAX as u64 + 10) {
            misses.insert(Shape(i));
        }
        assert!(misses.0.lock().len() <= SHAPES_MAX);
        assert!(misses.contains(Shape(SHAPES_MAX as u64 + 9)));
    }
}
