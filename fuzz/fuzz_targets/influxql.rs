//! Fuzzes the InfluxQL parser of `sensordb-influxql` (`parse`: lexer, recursive-descent parser,
//! typed tree) and its rendering (`Display`). The input, made UTF-8 (lossily), is a query text.
//!
//! Asserts: no panic (nor stack overflow: nesting is bounded by the parser); for an accepted
//! query, its rendering parses to the same tree and renders to the same text (the canonical form
//! is a fixed point), statement by statement as well; for a refused one, the error points into
//! the input (a char boundary at most at its end) and its line and character agree with that
//! byte offset (the character within one of it: InfluxDB's scanner places an unexpected end of
//! text one later and a string literal one earlier, and the parser keeps those quirks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_influxql::{parse, parse_statement};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;
    match parse(text) {
        Ok(query) => {
            let rendered = query.to_string();
            let again = parse(&rendered).unwrap_or_else(|e| panic!("rendering {rendered:?} of {text:?} does not parse: {e}"));
            assert_eq!(again, query, "rendering {rendered:?} of {text:?} parses to another tree");
            assert_eq!(again.to_string(), rendered, "rendering of {text:?} is not a fixed point");
            for statement in &query.statements {
                let alone = statement.to_string();
                let reparsed = parse_statement(&alone).unwrap_or_else(|e| panic!("statement {alone:?} does not parse alone: {e}"));
                assert_eq!(&reparsed, statement, "statement {alone:?} parses alone to another tree");
            }
        }
        Err(error) => {
            assert!(error.offset <= text.len() && text.is_char_boundary(error.offset), "error offset {} out of {text:?}", error.offset);
            let before = &text[..error.offset];
            let line = 1 + before.matches('\n').count();
            let column = 1 + before.rsplit('\n').next().map_or(0, |l| l.chars().count());
            assert_eq!(error.line, line, "error line of {text:?}: {error}");
            assert!(
                error.column.abs_diff(column) <= 1 && error.column >= 1,
                "error character of {text:?}: {error}, expected about {column}"
            );
            assert!(!error.to_string().is_empty());
        }
    }
});
