//! Helpers shared by the integration tests: parsing with the round-trip check built in.

#![allow(dead_code)]

use sensordb_influxql::{parse, Query, SelectStatement, Statement};

/// Parses `text`, and checks that its rendering parses to the same tree and renders the same.
pub fn round_trip(text: &str) -> Query {
    let query = parse(text).unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"));
    let rendered = query.to_string();
    let again = parse(&rendered).unwrap_or_else(|e| panic!("rendering {rendered:?} of {text:?} does not parse: {e}"));
    assert_eq!(again, query, "rendering {rendered:?} of {text:?} parses to another tree");
    assert_eq!(again.to_string(), rendered, "rendering of {text:?} is not canonical");
    query
}

/// The one statement of `text` (round-tripped).
pub fn statement(text: &str) -> Statement {
    let mut query = round_trip(text);
    assert_eq!(query.statements.len(), 1, "{text:?}");
    query.statements.remove(0)
}

/// The one SELECT of `text` (round-tripped).
pub fn select(text: &str) -> SelectStatement {
    match statement(text) {
        Statement::Select(select) => *select,
        other => panic!("{text:?} is not a SELECT: {other:?}"),
    }
}

/// The canonical rendering of `text`.
pub fn canonical(text: &str) -> String {
    round_trip(text).to_string()
}

/// The error message of `text`, which must not parse.
pub fn error(text: &str) -> String {
    match parse(text) {
        Ok(query) => panic!("{text:?} parses: {query:?}"),
        Err(e) => e.to_string(),
    }
}
