//! The recursive-descent parser, shaped like InfluxDB 1.8's `parser.go`: this module owns the
//! token plumbing (look-ahead by scanning a copy of the lexer), the statement loop and dispatch,
//! and the small pieces every statement uses (identifiers, dotted names, durations, integers,
//! regexes, the shared SHOW/SELECT tails). Expressions live in `expr`, SELECT and its clauses
//! in `select`, SHOW statements in `show`, CREATE/DROP/DELETE in `ddl`.

mod ddl;
mod expr;
mod select;
mod show;

use crate::ast::{Duration, Query, Regex, SortOrder, Statement};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Lexer, Tok, Token};
use std::cell::RefCell;

pub(crate) struct Parser<'a> {
    lexer: Lexer<'a>,
    /// Parentheses, calls, negations and subqueries open at the current position.
    nesting: usize,
    /// The token [`Parser::peek`] scanned last, with the lexer it was scanned from and the
    /// lexer after it: nearly every token is peeked before it is taken (often several times),
    /// and scanning it again each time was 40 % of the parser's time.
    peeked: RefCell<Option<(Lexer<'a>, Token, Lexer<'a>)>>,
}

type Result<T> = std::result::Result<T, ParseError>;

/// Parses a whole query: statements separated by `;` (empty statements are skipped, as in
/// InfluxDB; an empty query has none).
pub fn parse(source: &str) -> Result<Query> {
    let mut parser = Parser { lexer: Lexer::new(source), nesting: 0, peeked: RefCell::new(None) };
    let mut statements = Vec::new();
    let mut after_separator = true;
    loop {
        let token = parser.peek()?;
        match token.tok {
            Tok::Eof => return Ok(Query { statements }),
            Tok::Semicolon => {
                parser.next()?;
                after_separator = true;
            }
            _ if !after_separator => return Err(parser.unexpected(&token, &[";"])),
            _ => {
                statements.push(parser.parse_statement()?);
                after_separator = false;
            }
        }
    }
}

/// Parses text holding exactly one statement (a trailing `;` is allowed).
pub fn parse_statement(source: &str) -> Result<Statement> {
    let query = parse(source)?;
    let count = query.statements.len();
    match <[Statement; 1]>::try_from(query.statements) {
        Ok([statement]) => Ok(statement),
        Err(_) => Err(ParseError::at(source, 0, ParseErrorKind::Invalid(format!("expected one statement, found {count}")))),
    }
}

/// Reads a duration literal's text as InfluxDB's `ParseDuration` does: one or more
/// `<digits><unit>` with units `ns u µ ms s m h d w`, summed; overflow is an error.
pub(crate) fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let invalid = || "invalid duration".to_string();
    let mut rest = text;
    let mut total: i64 = 0;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(invalid)?;
        if digits == 0 {
            return Err(invalid());
        }
        let count: i64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let (unit, length) = if rest.starts_with("ns") {
            (Duration::NANOSECOND, 2)
        } else if rest.starts_with("ms") {
            (Duration::MILLISECOND, 2)
        } else if rest.starts_with('u') {
            (Duration::MICROSECOND, 1)
        } else if rest.starts_with('µ') {
            (Duration::MICROSECOND, 'µ'.len_utf8())
        } else if rest.starts_with('s') {
            (Duration::SECOND, 1)
        } else if rest.starts_with('m') {
            (Duration::MINUTE, 1)
        } else if rest.starts_with('h') {
            (Duration::HOUR, 1)
        } else if rest.starts_with('d') {
            (Duration::DAY, 1)
        } else if rest.starts_with('w') {
            (Duration::WEEK, 1)
        } else {
            return Err(invalid());
        };
        rest = &rest[length..];
        total = count
            .checked_mul(unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("overflowed duration {text}: choose a smaller duration or INF"))?;
    }
    Ok(Duration(total))
}

impl<'a> Parser<'a> {
    /// The next token (whitespace and comments skipped), not consumed.
    fn peek(&self) -> Result<Token> {
        self.peek_with(Token::clone)
    }

    /// `look` of the next token, not consumed and not cloned: most peeks ask whether it is a
    /// keyword or a comma, or where it starts, and a clone of a name allocated its text.
    fn peek_with<R>(&self, look: impl FnOnce(&Token) -> R) -> Result<R> {
        if let Some((from, token, _)) = &*self.peeked.borrow() {
            if from.same_place(&self.lexer) {
                return Ok(look(token));
            }
        }
        let mut after = self.lexer;
        let token = after.next_token()?;
        let seen = look(&token);
        *self.peeked.borrow_mut() = Some((self.lexer, token, after));
        Ok(seen)
    }

    /// Where the next token starts.
    fn peek_start(&self) -> Result<usize> {
        self.peek_with(|token| token.start)
    }

    fn next(&mut self) -> Result<Token> {
        if let Some((from, token, after)) = self.peeked.get_mut().take() {
            if from.same_place(&self.lexer) {
                self.lexer = after;
                return Ok(token);
            }
        }
        self.lexer.next_token()
    }

    /// The next token where it stands (whitespace comes back as trivia), not consumed.
    fn peek_raw(&self) -> Result<Token> {
        self.lexer.clone().next_raw()
    }

    fn next_raw(&mut self) -> Result<Token> {
        self.lexer.next_raw()
    }

    fn source(&self) -> &'a str {
        self.lexer.source()
    }

    fn unexpected(&self, token: &Token, expected: &[&'static str]) -> ParseError {
        let kind = ParseErrorKind::Unexpected { found: token.tok.describe(), expected: expected.to_vec() };
        let mut error = ParseError::at(self.source(), token.start, kind);
        // Two quirks of InfluxDB's scanner, kept so that positions match its own to the
        // character: the end of the text may be "late" (see `Token::late_eof`), and a
        // single-quoted string is placed at the character before its opening quote.
        match token.tok {
            Tok::Eof if token.late_eof => error.column += 1,
            Tok::String(_) if error.column > 1 => error.column -= 1,
            _ => {}
        }
        error
    }

    fn invalid(&self, offset: usize, message: impl Into<String>) -> ParseError {
        ParseError::at(self.source(), offset, ParseErrorKind::Invalid(message.into()))
    }

    fn unsupported(&self, offset: usize, what: impl Into<String>) -> ParseError {
        ParseError::at(self.source(), offset, ParseErrorKind::Unsupported(what.into()))
    }

    /// Consumes the next token if it is `keyword`.
    fn eat_keyword(&mut self, keyword: Keyword) -> Result<bool> {
        if self.peek_with(|token| token.tok.is_keyword(keyword))? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Consumes the next token if it is `tok`.
    fn eat(&mut self, tok: &Tok) -> Result<bool> {
        if self.peek_with(|token| token.tok == *tok)? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect_keyword(&mut self, keyword: Keyword) -> Result<()> {
        let token = self.next()?;
        if token.tok.is_keyword(keyword) {
            return Ok(());
        }
        Err(self.unexpected(&token, &[keyword.as_str()]))
    }

    fn expect(&mut self, tok: Tok, name: &'static str) -> Result<Token> {
        let token = self.next()?;
        if token.tok == tok {
            return Ok(token);
        }
        Err(self.unexpected(&token, &[name]))
    }

    fn parse_ident(&mut self) -> Result<String> {
        let token = self.next()?;
        match token.tok {
            Tok::Ident(name) => Ok(name),
            _ => Err(self.unexpected(&token, &["identifier"])),
        }
    }

    /// `ident [, ident]*`.
    fn parse_ident_list(&mut self) -> Result<Vec<String>> {
        let mut idents = vec![self.parse_ident()?];
        while self.eat(&Tok::Comma)? {
            idents.push(self.parse_ident()?);
        }
        Ok(idents)
    }

    /// `ident[.ident[.ident]]`, the dots right against the names; `..` leaves the middle one
    /// out (`None`). Stops before a `/` (a regex follows: `db.rp./re/`) or a `:` (`:MEASUREMENT`)
    /// after a dot, as InfluxDB does.
    fn parse_segmented_idents(&mut self) -> Result<(usize, Vec<Option<String>>)> {
        let start = self.peek_start()?;
        let mut idents = vec![Some(self.parse_ident()?)];
        loop {
            if self.peek_raw()?.tok != Tok::Dot {
                break;
            }
            self.next_raw()?;
            if self.lexer.next_char_is('/') || self.lexer.next_char_is(':') {
                break;
            }
            if self.lexer.next_char_is('.') {
                idents.push(None);
                continue;
            }
            let token = self.next_raw()?;
            match token.tok {
                Tok::Ident(name) => idents.push(Some(name)),
                _ => return Err(self.unexpected(&token, &["identifier"])),
            }
        }
        if idents.len() > 3 {
            return Err(self.invalid(start, "too many segments in name"));
        }
        Ok((start, idents))
    }

    /// A duration literal, or `INF` (infinite: zero).
    fn parse_duration_literal(&mut self) -> Result<Duration> {
        let token = self.next()?;
        match &token.tok {
            Tok::Keyword(Keyword::Inf) => Ok(Duration(0)),
            Tok::Duration(text) => parse_duration(text).map_err(|message| self.invalid(token.start, message)),
            _ => Err(self.unexpected(&token, &["duration"])),
        }
    }

    /// A non-negative integer literal.
    fn parse_u64(&mut self) -> Result<u64> {
        let token = self.next()?;
        match &token.tok {
            Tok::Integer(text) => text.parse().map_err(|_| self.invalid(token.start, "unable to parse integer")),
            _ => Err(self.unexpected(&token, &["integer"])),
        }
    }

    /// `KEYWORD <integer>` if the keyword comes next; zero is "none", as in InfluxDB.
    fn parse_optional_count(&mut self, keyword: Keyword) -> Result<Option<u64>> {
        if !self.eat_keyword(keyword)? {
            return Ok(None);
        }
        Ok(Some(self.parse_u64()?).filter(|&n| n != 0))
    }

    /// A regex literal if one comes next, checked as a regular expression.
    fn parse_regex(&mut self) -> Result<Option<Regex>> {
        let Some(scanned) = self.lexer.scan_regex() else { return Ok(None) };
        let (pattern, start) = scanned?;
        if let Err(error) = regex_syntax::Parser::new().parse(&pattern) {
            let reason = match &error {
                regex_syntax::Error::Parse(e) => e.kind().to_string(),
                regex_syntax::Error::Translate(e) => e.kind().to_string(),
                other => other.to_string(),
            };
            return Err(self.invalid(start, format!("invalid regex: {reason}")));
        }
        Ok(Some(Regex(pattern)))
    }

    /// A regex that must come next.
    fn expect_regex(&mut self) -> Result<Regex> {
        match self.parse_regex()? {
            Some(regex) => Ok(regex),
            None => {
                let token = self.peek()?;
                Err(self.unexpected(&token, &["regex"]))
            }
        }
    }

    /// `ON db` if it comes next.
    fn parse_on_database(&mut self) -> Result<Option<String>> {
        if self.eat_keyword(Keyword::On)? {
            return Ok(Some(self.parse_ident()?));
        }
        Ok(None)
    }

    /// `WHERE expr` if it comes next.
    fn parse_condition(&mut self) -> Result<Option<crate::ast::Expr>> {
        if self.eat_keyword(Keyword::Where)? {
            return Ok(Some(self.parse_expr()?));
        }
        Ok(None)
    }

    /// `ORDER BY [time] [ASC|DESC]` if it comes next: InfluxDB sorts by time only.
    fn parse_order_by(&mut self) -> Result<SortOrder> {
        if !self.eat_keyword(Keyword::Order)? {
            return Ok(SortOrder::Ascending);
        }
        self.expect_keyword(Keyword::By)?;
        let token = self.next()?;
        let order = match &token.tok {
            Tok::Keyword(Keyword::Asc) => return Ok(SortOrder::Ascending),
            Tok::Keyword(Keyword::Desc) => return Ok(SortOrder::Descending),
            // Case-sensitive, as in InfluxDB 1.8.
            Tok::Ident(name) if name == "time" => self.parse_direction()?,
            Tok::Ident(_) => return Err(self.invalid(token.start, "only ORDER BY time supported at this time")),
            _ => return Err(self.unexpected(&token, &["identifier", "ASC", "DESC"])),
        };
        // More sort fields parse (as InfluxDB does, so `time,` wants an identifier) but are refused.
        let comma = self.peek()?;
        if comma.tok == Tok::Comma {
            self.next()?;
            self.parse_ident()?;
            return Err(self.invalid(comma.start, "only ORDER BY time supported at this time"));
        }
        Ok(order)
    }

    fn parse_direction(&mut self) -> Result<SortOrder> {
        if self.eat_keyword(Keyword::Desc)? {
            return Ok(SortOrder::Descending);
        }
        self.eat_keyword(Keyword::Asc)?;
        Ok(SortOrder::Ascending)
    }

    fn parse_statement(&mut self) -> Result<Statement> {
        let token = self.next()?;
        match &token.tok {
            Tok::Keyword(Keyword::Select) => Ok(Statement::Select(Box::new(self.parse_select()?))),
            Tok::Keyword(Keyword::Show) => self.parse_show(),
            Tok::Keyword(Keyword::Create) => self.parse_create(),
            Tok::Keyword(Keyword::Drop) => self.parse_drop(),
            Tok::Keyword(Keyword::Delete) => self.parse_delete(),
            Tok::Keyword(
                keyword @ (Keyword::Explain | Keyword::Grant | Keyword::Revoke | Keyword::Alter | Keyword::Set | Keyword::Kill),
            ) => Err(self.unsupported(token.start, keyword.as_str())),
            // InfluxDB 1.8's list, though EXPLAIN and the rest after DROP are not served.
            _ => Err(self
                .unexpected(&token, &["SELECT", "DELETE", "SHOW", "CREATE", "DROP", "EXPLAIN", "GRANT", "REVOKE", "ALTER", "SET", "KILL"])),
        }
    }
}

impl std::str::FromStr for Query {
    type Err = ParseError;

    fn from_str(source: &str) -> Result<Query> {
        parse(source)
    }
}

impl std::str::FromStr for Statement {
    type Err = ParseError;

    fn from_str(source: &str) -> Result<Statement> {
        parse_statement(source)
    }
}
