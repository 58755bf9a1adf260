//! Rendering the syntax tree back as canonical InfluxQL: keywords in capitals, single spaces,
//! identifiers quoted only when they must be (InfluxDB's `QuoteIdent`: keywords, empty names,
//! characters outside `[A-Za-z0-9_]`), strings single-quoted with `\'`, `\\` and `\n` escapes,
//! durations in their largest whole unit (`90m` is `90m`, `120m` is `2h`), floats always with a
//! `.` or an exponent so they read back as floats. Parsing the rendering of a parsed query gives
//! the same tree (tested, and fuzzed by `fuzz/fuzz_targets/influxql.rs`).

use std::fmt::{self, Display, Formatter, Write};

use crate::ast::{
    BinaryExpr, Call, CreateDatabase, DataType, Delete, Dimension, Duration, Expr, Field, Fill, Measurement, MeasurementName, Query, Regex,
    SelectStatement, ShowTagValues, SortOrder, Source, Statement, TagKeyFilter, Target, TimeOffset, VarRef, WildcardType,
};
use crate::lexer::{is_ident_char, is_ident_first_char, Keyword};

/// An identifier, double-quoted (with `\"`, `\\`, `\n` escapes) when it is not a plain name.
pub struct QuotedIdent<'a>(pub &'a str);

impl Display for QuotedIdent<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let name = self.0;
        let mut chars = name.chars();
        let plain = chars.next().is_some_and(is_ident_first_char) && chars.all(is_ident_char) && Keyword::lookup(name).is_none();
        if plain {
            return f.write_str(name);
        }
        f.write_char('"')?;
        for c in name.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// A string literal, single-quoted with `\'`, `\\`, `\n` escapes.
pub struct QuotedString<'a>(pub &'a str);

impl Display for QuotedString<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('\'')?;
        for c in self.0.chars() {
            match c {
                '\'' => f.write_str("\\'")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('\'')
    }
}

fn ident(name: &str) -> QuotedIdent<'_> {
    QuotedIdent(name)
}

/// Items separated by `, `.
fn list<T: Display>(f: &mut Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        item.fmt(f)?;
    }
    Ok(())
}

fn float(f: &mut Formatter<'_>, value: f64) -> fmt::Result {
    // `{}` on f64 is the shortest text that reads back to the same value, never in exponent
    // form; an integral value needs a `.0` to stay a float.
    let text = value.to_string();
    f.write_str(&text)?;
    if !text.contains(['.', 'e', 'E', 'i', 'N']) {
        f.write_str(".0")?;
    }
    Ok(())
}

impl Display for Duration {
    /// InfluxDB's `FormatDuration`: the largest unit that divides the duration.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            f.write_char('-')?;
        }
        let nanos = self.0.unsigned_abs();
        if nanos == 0 {
            return f.write_str("0s");
        }
        let units: [(u64, &str); 8] = [
            (Duration::WEEK as u64, "w"),
            (Duration::DAY as u64, "d"),
            (Duration::HOUR as u64, "h"),
            (Duration::MINUTE as u64, "m"),
            (Duration::SECOND as u64, "s"),
            (Duration::MILLISECOND as u64, "ms"),
            (Duration::MICROSECOND as u64, "u"),
            (1, "ns"),
        ];
        let (size, unit) = units.into_iter().find(|(size, _)| nanos.is_multiple_of(*size)).unwrap_or((1, "ns"));
        write!(f, "{}{unit}", nanos / size)
    }
}

impl Display for Regex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/", self.0.replace('/', "\\/"))
    }
}

impl Display for VarRef {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        ident(&self.name).fmt(f)?;
        let Some(data_type) = self.data_type else { return Ok(()) };
        f.write_str(match data_type {
            DataType::Float => "::float",
            DataType::Integer => "::integer",
            DataType::Unsigned => "::unsigned",
            DataType::String => "::string",
            DataType::Boolean => "::boolean",
            DataType::Field => "::field",
            DataType::Tag => "::tag",
        })
    }
}

impl Display for Call {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        // `distinct` is a keyword, but `distinct(` reads as the call.
        if self.name == "distinct" {
            f.write_str("distinct")?;
        } else {
            ident(&self.name).fmt(f)?;
        }
        f.write_char('(')?;
        list(f, &self.args)?;
        f.write_char(')')
    }
}

impl Display for BinaryExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.lhs, self.op.as_str(), self.rhs)
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::VarRef(var) => var.fmt(f),
            Expr::Call(call) => call.fmt(f),
            Expr::Binary(binary) => binary.fmt(f),
            Expr::Negate(inner) => write!(f, "-{inner}"),
            Expr::Paren(inner) => write!(f, "({inner})"),
            Expr::Integer(value) => write!(f, "{value}"),
            Expr::Unsigned(value) => write!(f, "{value}"),
            Expr::Float(value) => float(f, *value),
            Expr::String(text) => QuotedString(text).fmt(f),
            Expr::Bool(value) => write!(f, "{value}"),
            Expr::Duration(duration) => duration.fmt(f),
            Expr::Regex(regex) => regex.fmt(f),
            Expr::Wildcard(None) => f.write_char('*'),
            Expr::Wildcard(Some(WildcardType::Field)) => f.write_str("*::field"),
            Expr::Wildcard(Some(WildcardType::Tag)) => f.write_str("*::tag"),
            Expr::Distinct(name) => write!(f, "DISTINCT {}", ident(name)),
        }
    }
}

impl Display for Field {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.expr.fmt(f)?;
        match &self.alias {
            Some(alias) => write!(f, " AS {}", ident(alias)),
            None => Ok(()),
        }
    }
}

/// `db.rp.`, `db..`, `rp.` or nothing: the prefix of a measurement or target.
fn qualifier(f: &mut Formatter<'_>, database: Option<&str>, retention_policy: Option<&str>) -> fmt::Result {
    if let Some(database) = database {
        write!(f, "{}.", ident(database))?;
    }
    if let Some(retention_policy) = retention_policy {
        write!(f, "{}.", ident(retention_policy))?;
    } else if database.is_some() {
        f.write_char('.')?;
    }
    Ok(())
}

impl Display for Measurement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        qualifier(f, self.database.as_deref(), self.retention_policy.as_deref())?;
        match &self.name {
            MeasurementName::Name(name) => ident(name).fmt(f),
            MeasurementName::Regex(regex) => regex.fmt(f),
        }
    }
}

impl Display for Target {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        qualifier(f, self.database.as_deref(), self.retention_policy.as_deref())?;
        match &self.measurement {
            Some(name) => ident(name).fmt(f),
            None => f.write_str(":MEASUREMENT"),
        }
    }
}

impl Display for Source {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Source::Measurement(measurement) => measurement.fmt(f),
            Source::Subquery(select) => write!(f, "({select})"),
        }
    }
}

impl Display for Dimension {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Dimension::Time { interval, offset: None } => write!(f, "time({interval})"),
            Dimension::Time { interval, offset: Some(TimeOffset::Duration(offset)) } => write!(f, "time({interval}, {offset})"),
            Dimension::Time { interval, offset: Some(TimeOffset::Now) } => write!(f, "time({interval}, now())"),
            Dimension::Tag(name) => ident(name).fmt(f),
            Dimension::Wildcard => f.write_char('*'),
            Dimension::Regex(regex) => regex.fmt(f),
        }
    }
}

/// ` KEYWORD value` when present.
fn optional<T: Display>(f: &mut Formatter<'_>, keyword: &str, value: Option<T>) -> fmt::Result {
    match value {
        Some(value) => write!(f, " {keyword} {value}"),
        None => Ok(()),
    }
}

fn order(f: &mut Formatter<'_>, order: SortOrder) -> fmt::Result {
    match order {
        SortOrder::Ascending => Ok(()),
        SortOrder::Descending => f.write_str(" ORDER BY time DESC"),
    }
}

fn sources<T: Display>(f: &mut Formatter<'_>, keyword: &str, items: &[T]) -> fmt::Result {
    if items.is_empty() {
        return Ok(());
    }
    write!(f, " {keyword} ")?;
    list(f, items)
}

impl Display for SelectStatement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("SELECT ")?;
        list(f, &self.fields)?;
        optional(f, "INTO", self.into.as_ref())?;
        sources(f, "FROM", &self.sources)?;
        optional(f, "WHERE", self.condition.as_ref())?;
        sources(f, "GROUP BY", &self.group_by)?;
        match self.fill {
            Fill::Null => {}
            Fill::None => f.write_str(" fill(none)")?,
            Fill::Previous => f.write_str(" fill(previous)")?,
            Fill::Linear => f.write_str(" fill(linear)")?,
            Fill::Integer(value) => write!(f, " fill({value})")?,
            Fill::Float(value) => {
                f.write_str(" fill(")?;
                float(f, value)?;
                f.write_char(')')?;
            }
        }
        order(f, self.order)?;
        optional(f, "LIMIT", self.limit)?;
        optional(f, "OFFSET", self.offset)?;
        optional(f, "SLIMIT", self.series_limit)?;
        optional(f, "SOFFSET", self.series_offset)?;
        match &self.timezone {
            Some(zone) => write!(f, " tz({})", QuotedString(zone)),
            None => Ok(()),
        }
    }
}

impl Display for TagKeyFilter {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TagKeyFilter::Eq(key) => write!(f, "= {}", ident(key)),
            TagKeyFilter::NotEq(key) => write!(f, "!= {}", ident(key)),
            TagKeyFilter::Regex(regex) => write!(f, "=~ {regex}"),
            TagKeyFilter::NotRegex(regex) => write!(f, "!~ {regex}"),
            TagKeyFilter::In(keys) => {
                f.write_str("IN (")?;
                list(f, &keys.iter().map(|key| ident(key)).collect::<Vec<_>>())?;
                f.write_char(')')
            }
        }
    }
}

fn on(f: &mut Formatter<'_>, database: &Option<String>) -> fmt::Result {
    optional(f, "ON", database.as_deref().map(ident))
}

fn show_tag_values(f: &mut Formatter<'_>, s: &ShowTagValues) -> fmt::Result {
    f.write_str("SHOW TAG VALUES")?;
    on(f, &s.database)?;
    sources(f, "FROM", &s.sources)?;
    write!(f, " WITH KEY {}", s.key)?;
    optional(f, "WHERE", s.condition.as_ref())?;
    order(f, s.order)?;
    optional(f, "LIMIT", s.limit)?;
    optional(f, "OFFSET", s.offset)
}

fn create_database(f: &mut Formatter<'_>, c: &CreateDatabase) -> fmt::Result {
    write!(f, "CREATE DATABASE {}", ident(&c.name))?;
    let Some(spec) = &c.retention_policy else { return Ok(()) };
    f.write_str(" WITH")?;
    let duration = |d: Duration| if d.0 == 0 { "INF".to_string() } else { d.to_string() };
    optional(f, "DURATION", spec.duration.map(duration))?;
    optional(f, "REPLICATION", spec.replication)?;
    optional(f, "SHARD DURATION", spec.shard_duration.map(duration))?;
    optional(f, "NAME", spec.name.as_deref().map(ident))
}

fn delete(f: &mut Formatter<'_>, d: &Delete) -> fmt::Result {
    f.write_str("DELETE")?;
    sources(f, "FROM", &d.sources)?;
    optional(f, "WHERE", d.condition.as_ref())
}

impl Display for Statement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Select(select) => select.fmt(f),
            Statement::ShowDatabases => f.write_str("SHOW DATABASES"),
            Statement::ShowMeasurements(s) => {
                f.write_str("SHOW MEASUREMENTS")?;
                on(f, &s.database)?;
                match &s.with_measurement {
                    Some(m @ Measurement { name: MeasurementName::Regex(_), .. }) => write!(f, " WITH MEASUREMENT =~ {m}")?,
                    Some(m) => write!(f, " WITH MEASUREMENT = {m}")?,
                    None => {}
                }
                optional(f, "WHERE", s.condition.as_ref())?;
                order(f, s.order)?;
                optional(f, "LIMIT", s.limit)?;
                optional(f, "OFFSET", s.offset)
            }
            Statement::ShowTagKeys(s) => {
                f.write_str("SHOW TAG KEYS")?;
                on(f, &s.database)?;
                sources(f, "FROM", &s.sources)?;
                optional(f, "WHERE", s.condition.as_ref())?;
                order(f, s.order)?;
                optional(f, "LIMIT", s.limit)?;
                optional(f, "OFFSET", s.offset)?;
                optional(f, "SLIMIT", s.series_limit)?;
                optional(f, "SOFFSET", s.series_offset)
            }
            Statement::ShowTagValues(s) => show_tag_values(f, s),
            Statement::ShowFieldKeys(s) => {
                f.write_str("SHOW FIELD KEYS")?;
                on(f, &s.database)?;
                sources(f, "FROM", &s.sources)?;
                order(f, s.order)?;
                optional(f, "LIMIT", s.limit)?;
                optional(f, "OFFSET", s.offset)
            }
            Statement::ShowRetentionPolicies(s) => {
                f.write_str("SHOW RETENTION POLICIES")?;
                on(f, &s.database)
            }
            Statement::ShowSeries(s) => {
                f.write_str("SHOW SERIES")?;
                on(f, &s.database)?;
                sources(f, "FROM", &s.sources)?;
                optional(f, "WHERE", s.condition.as_ref())?;
                order(f, s.order)?;
                optional(f, "LIMIT", s.limit)?;
                optional(f, "OFFSET", s.offset)
            }
            Statement::CreateDatabase(c) => create_database(f, c),
            Statement::DropDatabase(d) => write!(f, "DROP DATABASE {}", ident(&d.name)),
            Statement::DropMeasurement(d) => write!(f, "DROP MEASUREMENT {}", ident(&d.name)),
            Statement::DropSeries(d) => {
                f.write_str("DROP SERIES")?;
                sources(f, "FROM", &d.sources)?;
                optional(f, "WHERE", d.condition.as_ref())
            }
            Statement::Delete(d) => delete(f, d),
        }
    }
}

impl Display for Query {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, statement) in self.statements.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            statement.fmt(f)?;
        }
        Ok(())
    }
}
