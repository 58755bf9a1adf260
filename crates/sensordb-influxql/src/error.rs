//! The parse error: what went wrong, and where (byte offset, 1-based line and character), worded
//! as InfluxDB 1.8 words it (`found FROMM, expected FROM at line 1, char 10`). The HTTP layer
//! prefixes `error parsing query: ` as InfluxDB's `/query` handler does.

use std::fmt;

/// A query that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at line {line}, char {column}")]
pub struct ParseError {
    /// What is wrong.
    pub kind: ParseErrorKind,
    /// Byte offset of the offending token in the query text.
    pub offset: usize,
    /// 1-based line of `offset`.
    pub line: usize,
    /// 1-based character (Unicode scalar value, not byte) within the line of `offset`.
    pub column: usize,
}

/// What is wrong with a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A token that the grammar does not allow where it stands.
    Unexpected {
        /// The token as InfluxDB names it: its text, or for keywords and symbols their name.
        found: String,
        /// What the grammar allows there.
        expected: Vec<&'static str>,
    },
    /// A token of the right kind with a wrong value (a bad duration, escape, regex, number ...).
    Invalid(String),
    /// A statement InfluxQL has that sensordb does not serve (`SHOW USERS`, `GRANT` ...).
    Unsupported(String),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Unexpected { found, expected } => write!(f, "found {found}, expected {}", expected.join(", ")),
            ParseErrorKind::Invalid(message) => f.write_str(message),
            ParseErrorKind::Unsupported(what) => write!(f, "{what} is not supported"),
        }
    }
}

impl ParseError {
    /// An error at byte `offset` of `source`, with its line and character computed.
    pub(crate) fn at(source: &str, offset: usize, kind: ParseErrorKind) -> ParseError {
        let offset = offset.min(source.len());
        // `offset` is always a token start, so a char boundary; stay safe if it is not.
        let before = source.get(..offset).unwrap_or(source);
        let line = 1 + before.matches('\n').count();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = 1 + before[line_start..].chars().count();
        ParseError { kind, offset, line, column }
    }
}
