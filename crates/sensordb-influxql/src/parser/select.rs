//! SELECT and its clauses, in InfluxDB 1.8's order: fields, INTO, FROM (measurements, regexes,
//! subqueries), WHERE, GROUP BY (typed here: `time(interval[, offset])`, tags, `*`, regexes),
//! `fill()`, ORDER BY, LIMIT, OFFSET, SLIMIT, SOFFSET, `tz()`. Also the measurement sources that
//! SHOW and DROP statements share.

use super::{Parser, Result};
use crate::ast::{
    Dimension, Expr, Field, Fill, Measurement, MeasurementName, SelectStatement, Source, Target, TimeOffset, VarRef, WildcardType,
};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Tok};

impl Parser<'_> {
    /// A SELECT whose `SELECT` keyword is consumed.
    pub(super) fn parse_select(&mut self) -> Result<SelectStatement> {
        let fields = self.parse_fields()?;
        let into = self.parse_target()?;
        self.expect_keyword(Keyword::From)?;
        let sources = self.parse_sources(true)?;
        let condition = self.parse_condition()?;
        let group_by = self.parse_group_by()?;
        let fill = self.parse_fill()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        let series_limit = self.parse_optional_count(Keyword::Slimit)?;
        let series_offset = self.parse_optional_count(Keyword::Soffset)?;
        let timezone = self.parse_timezone()?;
        Ok(SelectStatement {
            fields,
            into,
            sources,
            condition,
            group_by,
            fill,
            order,
            limit,
            offset,
            series_limit,
            series_offset,
            timezone,
        })
    }

    fn parse_fields(&mut self) -> Result<Vec<Field>> {
        let mut fields = Vec::new();
        loop {
            let expr = match self.parse_regex()? {
                Some(regex) => Expr::Regex(regex),
                None => {
                    let start = self.peek_start()?;
                    let expr = self.parse_expr()?;
                    if let Some(op) = super::expr::condition_operator(&expr) {
                        return Err(ParseError::at(self.source(), start, ParseErrorKind::OperatorInSelect(op.as_str())));
                    }
                    expr
                }
            };
            let alias = if self.eat_keyword(Keyword::As)? { Some(self.parse_ident()?) } else { None };
            fields.push(Field { expr, alias });
            if !self.eat(&Tok::Comma)? {
                return Ok(fields);
            }
        }
    }

    /// `INTO [db.][rp.]measurement` or `INTO db.rp.:MEASUREMENT`, if it comes next.
    fn parse_target(&mut self) -> Result<Option<Target>> {
        if !self.eat_keyword(Keyword::Into)? {
            return Ok(None);
        }
        let (_, mut idents) = self.parse_segmented_idents()?;
        if idents.len() < 3 && self.lexer.next_char_is(':') {
            self.expect(Tok::Colon, ":")?;
            self.expect_keyword(Keyword::Measurement)?;
            idents.push(None);
        }
        let mut idents = idents.into_iter();
        let (database, retention_policy, measurement) = match (idents.next(), idents.next(), idents.next()) {
            (Some(name), None, None) => (None, None, name),
            (Some(rp), Some(name), None) => (None, rp, name),
            (Some(db), Some(rp), Some(name)) => (db, rp, name),
            _ => (None, None, None),
        };
        Ok(Some(Target { database, retention_policy, measurement }))
    }

    /// Comma-separated sources; subqueries only where `subqueries` (SELECT's FROM).
    pub(super) fn parse_sources(&mut self, subqueries: bool) -> Result<Vec<Source>> {
        let mut sources = Vec::new();
        loop {
            sources.push(self.parse_source(subqueries)?);
            if !self.eat(&Tok::Comma)? {
                return Ok(sources);
            }
        }
    }

    /// Comma-separated measurements (SHOW and DROP statements: no subqueries).
    pub(super) fn parse_measurements(&mut self) -> Result<Vec<Measurement>> {
        let sources = self.parse_sources(false)?;
        Ok(sources.into_iter().filter_map(|source| if let Source::Measurement(m) = source { Some(m) } else { None }).collect())
    }

    pub(super) fn parse_measurement(&mut self) -> Result<Measurement> {
        match self.parse_source(false)? {
            Source::Measurement(measurement) => Ok(measurement),
            Source::Subquery(_) => Err(self.invalid(self.lexer.pos(), "subqueries are not allowed here")),
        }
    }

    /// `/re/`, `(SELECT ...)`, or `[db.][rp.]name` / `[db.][rp.]/re/`.
    fn parse_source(&mut self, subqueries: bool) -> Result<Source> {
        if let Some(regex) = self.parse_regex()? {
            return Ok(Source::Measurement(Measurement { database: None, retention_policy: None, name: MeasurementName::Regex(regex) }));
        }
        if subqueries {
            let token = self.peek()?;
            if token.tok == Tok::LParen {
                self.next()?;
                self.expect_keyword(Keyword::Select)?;
                self.enter(token.start)?;
                let select = self.parse_select()?;
                self.leave();
                self.expect(Tok::RParen, ")")?;
                return Ok(Source::Subquery(Box::new(select)));
            }
        }
        let (_, idents) = self.parse_segmented_idents()?;
        let regex = if idents.len() < 3 { self.parse_regex()? } else { None };
        let mut idents = idents.into_iter();
        let (first, second, third) = (idents.next().flatten(), idents.next(), idents.next());
        let measurement = match (regex, second, third) {
            (_, Some(rp), Some(name)) => Measurement { database: first, retention_policy: rp, name: name_or_empty(name) },
            (Some(regex), Some(rp), None) => Measurement { database: first, retention_policy: rp, name: MeasurementName::Regex(regex) },
            (Some(regex), None, _) => Measurement { database: None, retention_policy: first, name: MeasurementName::Regex(regex) },
            (None, Some(name), None) => Measurement { database: None, retention_policy: first, name: name_or_empty(name) },
            (None, None, _) => Measurement { database: None, retention_policy: None, name: name_or_empty(first) },
        };
        Ok(Source::Measurement(measurement))
    }

    /// `GROUP BY dimension [, dimension]*` if it comes next.
    fn parse_group_by(&mut self) -> Result<Vec<Dimension>> {
        if !self.eat_keyword(Keyword::Group)? {
            return Ok(Vec::new());
        }
        self.expect_keyword(Keyword::By)?;
        let mut dimensions = Vec::new();
        loop {
            let start = self.peek_start()?;
            let dimension = self.parse_dimension()?;
            if matches!(dimension, Dimension::Time { .. }) && dimensions.iter().any(|d| matches!(d, Dimension::Time { .. })) {
                return Err(self.invalid(start, "multiple time dimensions not allowed"));
            }
            dimensions.push(dimension);
            if !self.eat(&Tok::Comma)? {
                return Ok(dimensions);
            }
        }
    }

    /// One GROUP BY entry, read as an expression (as InfluxDB does) and then typed, with the
    /// checks InfluxDB's compiler makes.
    fn parse_dimension(&mut self) -> Result<Dimension> {
        if let Some(regex) = self.parse_regex()? {
            return Ok(Dimension::Regex(regex));
        }
        let start = self.peek_start()?;
        let invalid = |parser: &Self, message: &str| Err(parser.invalid(start, message));
        match self.parse_expr()? {
            Expr::Wildcard(None) => Ok(Dimension::Wildcard),
            Expr::VarRef(VarRef { name, .. }) if name.eq_ignore_ascii_case("time") => {
                invalid(self, "time() is a function and expects at least one argument")
            }
            Expr::VarRef(VarRef { name, data_type: None }) => Ok(Dimension::Tag(name)),
            Expr::Call(call) if call.name == "time" => {
                let mut args = call.args.into_iter();
                let (interval, offset) = match (args.next(), args.next(), args.next()) {
                    (Some(interval), offset, None) => (interval, offset),
                    _ => return invalid(self, "time dimension expected 1 or 2 arguments"),
                };
                let Expr::Duration(interval) = interval else { return invalid(self, "time dimension must have duration argument") };
                if interval.0 <= 0 {
                    return invalid(self, "time dimension must have a positive duration");
                }
                let offset = match offset {
                    None => None,
                    Some(Expr::Duration(offset)) => Some(TimeOffset::Duration(offset)),
                    Some(Expr::Call(now)) if now.name == "now" && now.args.is_empty() => Some(TimeOffset::Now),
                    Some(_) => return invalid(self, "time dimension offset must be duration or now()"),
                };
                Ok(Dimension::Time { interval, offset })
            }
            Expr::Call(_) => invalid(self, "only time() calls allowed in dimensions"),
            Expr::Wildcard(Some(WildcardType::Field | WildcardType::Tag)) | Expr::VarRef(_) => {
                invalid(self, "GROUP BY takes tag names, *, regexes and time() without type casts")
            }
            _ => invalid(self, "only time and tag dimensions allowed"),
        }
    }

    /// `fill(null | none | previous | linear | <number>)` if it comes next.
    fn parse_fill(&mut self) -> Result<Fill> {
        let token = self.peek()?;
        if !matches!(&token.tok, Tok::Ident(name) if name.eq_ignore_ascii_case("fill")) {
            return Ok(Fill::Null);
        }
        let Expr::Call(call) = self.parse_expr()? else { return Err(self.invalid(token.start, "fill must be a function call")) };
        let [arg] = call.args.as_slice() else {
            return Err(self.invalid(token.start, "fill requires an argument, e.g.: 0, null, none, previous, linear"));
        };
        match arg {
            // Case-sensitive, as in InfluxDB 1.8.
            Expr::VarRef(VarRef { name, data_type: None }) if name == "null" => Ok(Fill::Null),
            Expr::VarRef(VarRef { name, data_type: None }) if name == "none" => Ok(Fill::None),
            Expr::VarRef(VarRef { name, data_type: None }) if name == "previous" => Ok(Fill::Previous),
            Expr::VarRef(VarRef { name, data_type: None }) if name == "linear" => Ok(Fill::Linear),
            Expr::Integer(value) => Ok(Fill::Integer(*value)),
            Expr::Float(value) => Ok(Fill::Float(*value)),
            _ => Err(self.invalid(token.start, "expected number argument in fill()")),
        }
    }

    /// `tz('Zone/Name')` if it comes next.
    fn parse_timezone(&mut self) -> Result<Option<String>> {
        let token = self.peek()?;
        if !matches!(&token.tok, Tok::Ident(name) if name.eq_ignore_ascii_case("tz")) {
            return Ok(None);
        }
        self.next()?;
        let paren = self.next_raw()?;
        if paren.tok != Tok::LParen {
            return Err(self.unexpected(&paren, &["("]));
        }
        let name = self.next()?;
        let Tok::String(zone) = name.tok else { return Err(self.unexpected(&name, &["string"])) };
        self.expect(Tok::RParen, ")")?;
        Ok(Some(zone))
    }
}

fn name_or_empty(name: Option<String>) -> MeasurementName {
    MeasurementName::Name(name.unwrap_or_default())
}
