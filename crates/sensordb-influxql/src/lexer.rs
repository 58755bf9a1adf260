//! The InfluxQL lexer: turns query text into tokens the way InfluxDB 1.8's scanner does
//! (keywords case-insensitive, bare and double-quoted identifiers, single-quoted strings with
//! `\n \\ \" \'` escapes, integers, floats, durations as one token such as `1h30m`, `--` and
//! `/* */` comments, `<>` as `!=`). Regular expressions are not tokens of their own here: a `/`
//! is division unless the parser, at a place where the grammar allows a regex, asks for one with
//! [`Lexer::scan_regex`], as InfluxDB's parser does.
//!
//! Deliberate differences from InfluxDB 1.8, each accepting only more: floats may have an
//! exponent (`1e3`, `2.5E-3`; 1.8 reads those as invalid durations), `\r` counts as whitespace,
//! and comments may stand where a regex may (1.8 reads `FROM /* c */ m` as the regex `* c *`).
//! Errors for unterminated strings, bad escapes and unterminated comments are worded plainly
//! instead of 1.8's `found <partial text>, expected ...`.

use crate::error::{ParseError, ParseErrorKind};
pub(crate) use crate::keyword::Keyword;

/// One token of query text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Eof,
    /// Whitespace or a comment; only the whitespace-sensitive scans see it.
    Trivia,
    /// A character no token starts with.
    Illegal(char),
    /// A bare identifier that is no keyword, or any double-quoted one (unescaped).
    Ident(String),
    Keyword(Keyword),
    /// A single-quoted string (unescaped).
    String(String),
    /// Digits alone.
    Integer(String),
    /// Digits with a fraction or an exponent.
    Number(String),
    /// Digits followed by letters (and maybe more digits): `10s`, `1h30m`, validated by the parser.
    Duration(String),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Ampersand,
    Pipe,
    Caret,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    EqRegex,
    NotEqRegex,
    LParen,
    RParen,
    Comma,
    Semicolon,
    Dot,
    Colon,
    DoubleColon,
}

impl Tok {
    /// The token as InfluxDB's errors name it: the literal's text, else the token's name.
    pub(crate) fn describe(&self) -> String {
        let text = match self {
            Tok::Eof => "EOF",
            Tok::Trivia => "WS",
            Tok::Illegal(c) => return c.to_string(),
            Tok::Ident(s) if s.is_empty() => "IDENT",
            Tok::String(s) if s.is_empty() => "STRING",
            Tok::Ident(s) | Tok::String(s) | Tok::Integer(s) | Tok::Number(s) | Tok::Duration(s) => return s.clone(),
            Tok::Keyword(k) => k.as_str(),
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Ampersand => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Eq => "=",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::LtEq => "<=",
            Tok::Gt => ">",
            Tok::GtEq => ">=",
            Tok::EqRegex => "=~",
            Tok::NotEqRegex => "!~",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Comma => ",",
            Tok::Semicolon => ";",
            Tok::Dot => ".",
            Tok::Colon => ":",
            Tok::DoubleColon => "::",
        };
        text.to_string()
    }

    pub(crate) fn is_keyword(&self, keyword: Keyword) -> bool {
        matches!(self, Tok::Keyword(k) if *k == keyword)
    }
}

/// A token and the byte offset it starts at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) start: usize,
    /// For [`Tok::Eof`]: whether the token before it read the end of the text without putting
    /// it back, as InfluxDB's scanner does after a bare word, whitespace or a `--` comment. Its
    /// errors then place the end one character further (`SELECT` ends at char 8, `a,` at 3).
    pub(crate) late_eof: bool,
}

/// The scanner: a position in the query text. `Copy`, so the parser looks ahead by scanning a
/// copy and commits by keeping it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lexer<'a> {
    source: &'a str,
    pos: usize,
    /// The last token scanned ended the text the way that makes InfluxDB's end "late" (see
    /// [`Token::late_eof`]).
    late_eof: bool,
}

/// Whitespace as InfluxDB counts it, plus `\r` (so CRLF text reads the same).
pub(crate) fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

pub(crate) fn is_ident_first_char(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(source: &'a str) -> Lexer<'a> {
        Lexer { source, pos: 0, late_eof: false }
    }

    pub(crate) fn source(&self) -> &'a str {
        self.source
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Whether `other` scans the same tokens from here on (same text, same place, same state).
    pub(crate) fn same_place(&self, other: &Lexer<'_>) -> bool {
        self.pos == other.pos && self.late_eof == other.late_eof && std::ptr::eq(self.source, other.source)
    }

    fn rest(&self) -> &'a str {
        &self.source[self.pos..]
    }

    fn peek_char(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek_char().is_some_and(&keep) {
            self.bump();
        }
    }

    /// [`Lexer::bump_while`] for a test that holds only for ASCII bytes, byte by byte without
    /// decoding characters (whitespace, names and digits are most of a query's text).
    fn bump_ascii_while(&mut self, keep: impl Fn(u8) -> bool) {
        let taken = self.rest().bytes().take_while(|&b| keep(b)).count();
        debug_assert!(self.source.is_char_boundary(self.pos + taken), "BUG: a non-ASCII byte kept");
        self.pos += taken;
    }

    fn error(&self, offset: usize, message: String) -> ParseError {
        ParseError::at(self.source, offset, ParseErrorKind::Invalid(message))
    }

    /// The next token, skipping whitespace and comments.
    pub(crate) fn next_token(&mut self) -> Result<Token, ParseError> {
        loop {
            let token = self.next_raw()?;
            if token.tok != Tok::Trivia {
                return Ok(token);
            }
        }
    }

    /// The next token where it stands: whitespace and comments come back as [`Tok::Trivia`].
    pub(crate) fn next_raw(&mut self) -> Result<Token, ParseError> {
        let start = self.pos;
        let Some(c) = self.bump() else { return Ok(Token { tok: Tok::Eof, start, late_eof: self.late_eof }) };
        let tok = match c {
            c if is_whitespace(c) => {
                self.bump_ascii_while(|b| is_whitespace(char::from(b)));
                Tok::Trivia
            }
            c if is_ident_first_char(c) => {
                self.bump_ascii_while(|b| is_ident_char(char::from(b)));
                let word = &self.source[start..self.pos];
                match Keyword::lookup(word) {
                    Some(keyword) => Tok::Keyword(keyword),
                    None => Tok::Ident(word.to_string()),
                }
            }
            '0'..='9' => self.number(start),
            '.' if self.peek_char().is_some_and(|c| c.is_ascii_digit()) => self.number(start),
            '"' => Tok::Ident(self.quoted(start, '"')?),
            '\'' => Tok::String(self.quoted(start, '\'')?),
            '-' if self.peek_char() == Some('-') => {
                self.bump_while(|c| c != '\n');
                Tok::Trivia
            }
            '/' if self.peek_char() == Some('*') => {
                self.bump();
                match self.rest().find("*/") {
                    Some(end) => self.pos += end + 2,
                    None => return Err(self.error(start, "unterminated comment".to_string())),
                }
                Tok::Trivia
            }
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '%' => Tok::Percent,
            '&' => Tok::Ampersand,
            '|' => Tok::Pipe,
            '^' => Tok::Caret,
            '=' => self.pick('~', Tok::EqRegex, Tok::Eq),
            '!' => match self.peek_char() {
                Some('=') => self.take(Tok::NotEq),
                Some('~') => self.take(Tok::NotEqRegex),
                _ => Tok::Illegal('!'),
            },
            '<' => match self.peek_char() {
                Some('=') => self.take(Tok::LtEq),
                Some('>') => self.take(Tok::NotEq),
                _ => Tok::Lt,
            },
            '>' => self.pick('=', Tok::GtEq, Tok::Gt),
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            ';' => Tok::Semicolon,
            '.' => Tok::Dot,
            ':' => self.pick(':', Tok::DoubleColon, Tok::Colon),
            other => Tok::Illegal(other),
        };
        // Bare words, whitespace and `--` comments are the tokens InfluxDB ends by reading past
        // the end; numbers, symbols, quoted text and `/* */` end without doing so.
        let word = matches!(tok, Tok::Keyword(_)) || (matches!(tok, Tok::Ident(_)) && c != '"');
        let trivia = tok == Tok::Trivia && !self.source[start..self.pos].ends_with("*/");
        self.late_eof = self.pos == self.source.len() && (word || trivia);
        Ok(Token { tok, start, late_eof: false })
    }

    fn take(&mut self, tok: Tok) -> Tok {
        self.bump();
        tok
    }

    fn pick(&mut self, next: char, two: Tok, one: Tok) -> Tok {
        if self.peek_char() == Some(next) {
            self.take(two)
        } else {
            one
        }
    }

    /// A number or duration whose first character (a digit, or a `.` before one) is consumed.
    fn number(&mut self, start: usize) -> Tok {
        self.bump_ascii_while(|b| b.is_ascii_digit());
        let mut fraction = self.source[start..self.pos].contains('.');
        let mut end = self.pos;
        if !fraction && self.peek_char() == Some('.') {
            self.bump();
            fraction = true;
            // InfluxDB reads `5.` as the number 5: the dot is taken, the text stops before it.
            if self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                self.bump_while(|c| c.is_ascii_digit());
                end = self.pos;
            }
        }
        let trailing_dot = end != self.pos;
        if !trailing_dot && matches!(self.peek_char(), Some('e' | 'E')) {
            let mut probe = *self;
            probe.bump();
            if matches!(probe.peek_char(), Some('+' | '-')) {
                probe.bump();
            }
            if probe.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                probe.bump_while(|c| c.is_ascii_digit());
                *self = probe;
                return Tok::Number(self.source[start..self.pos].to_string());
            }
        }
        if fraction {
            return Tok::Number(self.source[start..end].to_string());
        }
        if self.peek_char().is_some_and(|c| c.is_ascii_alphabetic() || c == 'µ') {
            self.bump_while(|c| c.is_ascii_alphanumeric() || c == 'µ');
            return Tok::Duration(self.source[start..self.pos].to_string());
        }
        Tok::Integer(self.source[start..self.pos].to_string())
    }

    /// The unescaped text of a quoted identifier or string whose opening quote is consumed.
    fn quoted(&mut self, start: usize, quote: char) -> Result<String, ParseError> {
        let what = if quote == '"' { "identifier" } else { "string" };
        // Most quoted text has no escape: up to its closing quote it is taken as it stands.
        let rest = self.rest().as_bytes();
        if let Some(end) = rest.iter().position(|&b| b == quote as u8 || b == b'\\' || b == b'\n') {
            if rest[end] == quote as u8 {
                let text = self.rest()[..end].to_string();
                self.pos += end + 1;
                return Ok(text);
            }
        }
        let mut text = String::new();
        loop {
            let here = self.pos;
            match self.bump() {
                None | Some('\n') => return Err(self.error(start, format!("unterminated quoted {what}"))),
                Some(c) if c == quote => return Ok(text),
                Some('\\') => match self.bump() {
                    Some('n') => text.push('\n'),
                    Some(c @ ('\\' | '"' | '\'')) => text.push(c),
                    Some(c) => return Err(self.error(here, format!("bad escape: \\{c}"))),
                    None => return Err(self.error(start, format!("unterminated quoted {what}"))),
                },
                Some(c) => text.push(c),
            }
        }
    }

    /// A regex literal `/.../` if, after whitespace and comments, the text continues with `/`;
    /// `None` (and nothing consumed) otherwise. Inside, `\/` is a `/` and any other `\` is kept
    /// for the regex engine, the character after it read normally. (InfluxDB skips only
    /// whitespace here, so it reads `FROM /* c */ m` as the bad regex `* c *`; no regex starts
    /// with `*`, so skipping comments accepts only more.)
    pub(crate) fn scan_regex(&mut self) -> Option<Result<(String, usize), ParseError>> {
        let mut probe = *self;
        loop {
            probe.bump_while(is_whitespace);
            let rest = probe.rest();
            if rest.starts_with("--") {
                probe.bump_while(|c| c != '\n');
            } else if rest.starts_with("/*") {
                // An unterminated comment is the ordinary scanner's error to report.
                probe.pos += rest.find("*/").map(|end| end + 2)?;
            } else {
                break;
            }
        }
        if probe.peek_char() != Some('/') {
            return None;
        }
        let start = probe.pos;
        probe.bump();
        let mut pattern = String::new();
        loop {
            match probe.bump() {
                None => return Some(Err(probe.error(start, "unterminated regex".to_string()))),
                Some('/') => break,
                Some('\\') if probe.peek_char() == Some('/') => {
                    probe.bump();
                    pattern.push('/');
                }
                Some(c) => pattern.push(c),
            }
        }
        *self = probe;
        self.late_eof = false;
        Some(Ok((pattern, start)))
    }

    /// Whether the next character (nothing skipped) is `c`.
    pub(crate) fn next_char_is(&self, c: char) -> bool {
        self.peek_char() == Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<Tok> {
        let mut lexer = Lexer::new(text);
        let mut out = Vec::new();
        loop {
            let token = lexer.next_token().expect("lexes");
            if token.tok == Tok::Eof {
                return out;
            }
            out.push(token.tok);
        }
    }

    #[test]
    fn keywords_are_case_insensitive_and_quoting_makes_an_identifier() {
        assert_eq!(
            tokens("select SeLeCt \"select\""),
            vec![Tok::Keyword(Keyword::Select), Tok::Keyword(Keyword::Select), Tok::Ident("select".into())]
        );
        assert_eq!(Keyword::lookup("measurements"), Some(Keyword::Measurements));
        assert_eq!(Keyword::lookup("time"), None);
    }

    #[test]
    fn numbers_durations_and_floats() {
        assert_eq!(
            tokens("10 1.5 .5 10s 1h30m 100ms 10µ 5ns 1e3 2.5E-3 5."),
            vec![
                Tok::Integer("10".into()),
                Tok::Number("1.5".into()),
                Tok::Number(".5".into()),
                Tok::Duration("10s".into()),
                Tok::Duration("1h30m".into()),
                Tok::Duration("100ms".into()),
                Tok::Duration("10µ".into()),
                Tok::Duration("5ns".into()),
                Tok::Number("1e3".into()),
                Tok::Number("2.5E-3".into()),
                Tok::Number("5".into()),
            ]
        );
    }

    #[test]
    fn quoted_text_unescapes_and_keeps_semicolons() {
        assert_eq!(
            tokens(r#""a;b" "with \" quote" 'it\'s' 'a\nb'"#),
            vec![Tok::Ident("a;b".into()), Tok::Ident("with \" quote".into()), Tok::String("it's".into()), Tok::String("a\nb".into()),]
        );
        assert!(Lexer::new("'abc").next_token().is_err());
        let error = Lexer::new("  'a\\qb'").next_token().expect_err("bad escape");
        assert_eq!((error.offset, error.to_string().as_str()), (4, "bad escape: \\q at line 1, char 5"));
    }

    #[test]
    fn operators_and_comments() {
        assert_eq!(
            tokens("a <> b != c =~ d !~ e -- comment ; here\n :: /* x ; */ <= >= ."),
            vec![
                Tok::Ident("a".into()),
                Tok::NotEq,
                Tok::Ident("b".into()),
                Tok::NotEq,
                Tok::Ident("c".into()),
                Tok::EqRegex,
                Tok::Ident("d".into()),
                Tok::NotEqRegex,
                Tok::Ident("e".into()),
                Tok::DoubleColon,
                Tok::LtEq,
                Tok::GtEq,
                Tok::Dot,
            ]
        );
        assert!(Lexer::new("/* open").next_token().is_err());
        assert_eq!(tokens("é"), vec![Tok::Illegal('é')]);
    }

    #[test]
    fn regex_escapes_only_the_slash() {
        let mut lexer = Lexer::new("  /a\\/b\\d;/ rest");
        let (pattern, start) = lexer.scan_regex().expect("a regex").expect("valid");
        assert_eq!((pattern.as_str(), start), ("a/b\\d;", 2));
        assert_eq!(lexer.next_token().expect("lexes").tok, Tok::Ident("rest".into()));
        assert!(Lexer::new("x /a/").scan_regex().is_none());
        assert!(Lexer::new("/abc").scan_regex().expect("starts").is_err());
    }
}
