//! InfluxQL, the query language of InfluxDB 1.x: a hand-written lexer and recursive-descent
//! parser modelled on InfluxDB 1.8's own (`influxql` package), a typed syntax tree for an
//! executor to work from, and a `Display` that renders any parsed statement back as canonical
//! InfluxQL that parses to the same tree.
//!
//! ```
//! use sensordb_influxql::{parse, Statement};
//!
//! let query = parse(r#"SELECT mean("value") FROM "cpu" WHERE time > now() - 1h GROUP BY time(10s), "host" fill(none)"#).unwrap();
//! let Statement::Select(select) = &query.statements[0] else { panic!() };
//! assert_eq!(select.group_by.len(), 2);
//! assert_eq!(query.to_string(), r#"SELECT mean(value) FROM cpu WHERE time > now() - 1h GROUP BY time(10s), host fill(none)"#);
//!
//! let error = parse("SELECT * FROMM m").unwrap_err();
//! assert_eq!(error.to_string(), "found FROMM, expected FROM at line 1, char 10");
//! ```
//!
//! Parsing only: no name resolution, no type checking beyond what InfluxDB's parser (and, for
//! GROUP BY, its compiler) refuses, no evaluation. Time conditions keep their literals as
//! written (`'2016-01-01T00:00:00Z'`, `1700000000000ms`, `now() - 1h`) for the executor, and
//! `tz('...')` keeps the zone name; regexes are checked (with `regex-syntax`) but not compiled.
//!
//! Errors read as InfluxDB 1.8's, to the character where it gives a position
//! (`found X, expected Y at line L, char C`); the `/query` handler prefixes
//! `error parsing query: ` as InfluxDB's does. Where this parser differs from 1.8 it accepts
//! more, never less, except for nesting limits that keep hostile input from exhausting the stack:
//! floats with exponents, `\r` as whitespace, comments before a regex, and the statements
//! sensordb does not serve (users, retention policies, continuous queries, `SHOW STATS` ...),
//! which are refused by name (`SHOW USERS is not supported`). GROUP BY is typed here, so the
//! checks InfluxDB makes when compiling it (`time()` arguments, one time dimension) are parse
//! errors, with a position.

pub mod ast;
mod display;
mod error;
mod keyword;
mod lexer;
mod parser;

pub use ast::*;
pub use display::{QuotedIdent, QuotedString};
pub use error::{ParseError, ParseErrorKind};
pub use parser::{parse, parse_statement};
