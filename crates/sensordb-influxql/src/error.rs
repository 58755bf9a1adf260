//! The parse error: what went wrong, and where (byte offset, 1-based line and character), worded
//! as InfluxDB 1.8 words it (`found FROMM, expected FROM at line 1, char 10`). The HTTP layer
//! prefixes `error parsing query: ` as InfluxDB's `/query` handler does.

use std::fmt;

/// A query that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(kind, *line, *column))]
pub struct ParseError {
    /// What is wrong.
    pub kind: ParseErrorKind,
    /// Byte offset of the offending token in the query text.
    pub offset: usize,
    /// 1-based line of `offset`.
    pub line: usize,
    /// 1-based character (Unicode scalar value, not byte) within the line of `offset`, as
    /// InfluxDB counts it: for an unexpected end of text or string literal it can be one more
    /// or one less than `offset` alone gives (quirks of InfluxDB's scanner, kept so that the
    /// messages match InfluxDB's to the character).
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
    /// A comparison or logical operator in the SELECT list (InfluxDB words this one with the
    /// position in the middle).
    OperatorInSelect(&'static str),
}

fn render(kind: &ParseErrorKind, line: usize, column: usize) -> String {
    match kind {
        ParseErrorKind::OperatorInSelect(op) => {
            format!("invalid operator {op} in SELECT clause at line {line}, char {column}; operator is intended for WHERE clause")
        }
        kind => format!("{kind} at line {line}, char {column}"),
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Unexpected { found, expected } => write!(f, "found {found}, expected {}", expected.join(", ")),
            ParseErrorKind::Invalid(message) => f.write_str(message),
            ParseErrorKind::Unsupported(what) => write!(f, "{what} is not supported"),
            ParseErrorKind::OperatorInSelect(op) => {
                write!(f, "invalid operator {op} in SELECT clause; operator is intended for WHERE clause")
            }
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
