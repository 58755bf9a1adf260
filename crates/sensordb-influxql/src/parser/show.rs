//! SHOW statements: DATABASES, MEASUREMENTS, TAG KEYS, TAG VALUES, FIELD KEYS, RETENTION
//! POLICIES and SERIES, with the clauses InfluxDB 1.8 allows on each. The SHOW forms sensordb
//! does not serve (USERS, DIAGNOSTICS, the CARDINALITY ones ...) are named in a clear
//! "not supported" error rather than a grammar error.

use super::{Parser, Result};
use crate::ast::{ShowFieldKeys, ShowMeasurements, ShowRetentionPolicies, ShowSeries, ShowTagKeys, ShowTagValues, Statement, TagKeyFilter};
use crate::lexer::{Keyword, Tok};

/// What may follow SHOW, InfluxDB 1.8's list (most of them refused here as not supported).
const SHOW_KEYWORDS: &[&str] = &[
    "CONTINUOUS",
    "DATABASES",
    "DIAGNOSTICS",
    "FIELD",
    "GRANTS",
    "MEASUREMENT",
    "MEASUREMENTS",
    "QUERIES",
    "RETENTION",
    "SERIES",
    "SHARD",
    "SHARDS",
    "STATS",
    "SUBSCRIPTIONS",
    "TAG",
    "USERS",
];

impl Parser<'_> {
    /// A SHOW statement whose `SHOW` keyword is consumed.
    pub(super) fn parse_show(&mut self) -> Result<Statement> {
        let token = self.next()?;
        let Tok::Keyword(keyword) = token.tok else {
            return Err(self.unexpected(&token, SHOW_KEYWORDS));
        };
        match keyword {
            Keyword::Databases => Ok(Statement::ShowDatabases),
            Keyword::Measurements => {
                self.refuse_cardinality("SHOW MEASUREMENT")?;
                self.parse_show_measurements()
            }
            Keyword::Series => {
                self.refuse_cardinality("SHOW SERIES")?;
                self.parse_show_series()
            }
            Keyword::Tag => {
                let token = self.next()?;
                match token.tok {
                    Tok::Keyword(Keyword::Keys) => self.parse_show_tag_keys(),
                    Tok::Keyword(Keyword::Values) => {
                        self.refuse_cardinality("SHOW TAG VALUES")?;
                        self.parse_show_tag_values()
                    }
                    Tok::Keyword(Keyword::Key) => Err(self.unsupported(token.start, "SHOW TAG KEY CARDINALITY")),
                    _ => Err(self.unexpected(&token, &["KEYS", "VALUES"])),
                }
            }
            Keyword::Field => {
                let token = self.next()?;
                match token.tok {
                    Tok::Keyword(Keyword::Keys) => self.parse_show_field_keys(),
                    Tok::Keyword(Keyword::Key) => Err(self.unsupported(token.start, "SHOW FIELD KEY CARDINALITY")),
                    _ => Err(self.unexpected(&token, &["KEYS"])),
                }
            }
            Keyword::Retention => {
                self.expect_keyword(Keyword::Policies)?;
                let database = self.parse_on_database()?;
                Ok(Statement::ShowRetentionPolicies(ShowRetentionPolicies { database }))
            }
            Keyword::Measurement => Err(self.unsupported(token.start, "SHOW MEASUREMENT CARDINALITY")),
            Keyword::Continuous => Err(self.unsupported(token.start, "SHOW CONTINUOUS QUERIES")),
            Keyword::Shard => Err(self.unsupported(token.start, "SHOW SHARD GROUPS")),
            Keyword::Diagnostics
            | Keyword::Grants
            | Keyword::Queries
            | Keyword::Shards
            | Keyword::Stats
            | Keyword::Subscriptions
            | Keyword::Users => Err(self.unsupported(token.start, format!("SHOW {}", keyword.as_str()))),
            _ => Err(self.unexpected(&token, SHOW_KEYWORDS)),
        }
    }

    /// `... CARDINALITY` / `... EXACT CARDINALITY` after `what` is not served.
    fn refuse_cardinality(&mut self, what: &str) -> Result<()> {
        let token = self.peek()?;
        if token.tok.is_keyword(Keyword::Cardinality) || token.tok.is_keyword(Keyword::Exact) {
            return Err(self.unsupported(token.start, format!("{what} CARDINALITY")));
        }
        Ok(())
    }

    fn parse_show_measurements(&mut self) -> Result<Statement> {
        let database = self.parse_on_database()?;
        let mut with_measurement = None;
        if self.eat_keyword(Keyword::With)? {
            self.expect_keyword(Keyword::Measurement)?;
            let token = self.next()?;
            if !matches!(token.tok, Tok::Eq | Tok::EqRegex) {
                return Err(self.unexpected(&token, &["=", "=~"]));
            }
            with_measurement = Some(self.parse_measurement()?);
        }
        let condition = self.parse_condition()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        Ok(Statement::ShowMeasurements(ShowMeasurements { database, with_measurement, condition, order, limit, offset }))
    }

    /// `FROM sources` if it comes next.
    fn parse_optional_from(&mut self) -> Result<Vec<crate::ast::Measurement>> {
        if self.eat_keyword(Keyword::From)? {
            return self.parse_measurements();
        }
        Ok(Vec::new())
    }

    fn parse_show_tag_keys(&mut self) -> Result<Statement> {
        let database = self.parse_on_database()?;
        let sources = self.parse_optional_from()?;
        let condition = self.parse_condition()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        let series_limit = self.parse_optional_count(Keyword::Slimit)?;
        let series_offset = self.parse_optional_count(Keyword::Soffset)?;
        Ok(Statement::ShowTagKeys(ShowTagKeys { database, sources, condition, order, limit, offset, series_limit, series_offset }))
    }

    fn parse_show_tag_values(&mut self) -> Result<Statement> {
        let database = self.parse_on_database()?;
        let sources = self.parse_optional_from()?;
        let key = self.parse_tag_key_filter()?;
        let condition = self.parse_condition()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        Ok(Statement::ShowTagValues(ShowTagValues { database, sources, key, condition, order, limit, offset }))
    }

    /// `WITH KEY = k | != k | =~ /re/ | !~ /re/ | IN (k, ...)`.
    fn parse_tag_key_filter(&mut self) -> Result<TagKeyFilter> {
        self.expect_keyword(Keyword::With)?;
        self.expect_keyword(Keyword::Key)?;
        let token = self.next()?;
        match token.tok {
            Tok::Keyword(Keyword::In) => {
                self.expect(Tok::LParen, "(")?;
                let keys = self.parse_ident_list()?;
                self.expect(Tok::RParen, ")")?;
                Ok(TagKeyFilter::In(keys))
            }
            Tok::Eq => Ok(TagKeyFilter::Eq(self.parse_ident()?)),
            Tok::NotEq => Ok(TagKeyFilter::NotEq(self.parse_ident()?)),
            Tok::EqRegex => Ok(TagKeyFilter::Regex(self.expect_regex()?)),
            Tok::NotEqRegex => Ok(TagKeyFilter::NotRegex(self.expect_regex()?)),
            _ => Err(self.unexpected(&token, &["IN", "=", "=~"])),
        }
    }

    fn parse_show_field_keys(&mut self) -> Result<Statement> {
        let database = self.parse_on_database()?;
        let sources = self.parse_optional_from()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        Ok(Statement::ShowFieldKeys(ShowFieldKeys { database, sources, order, limit, offset }))
    }

    fn parse_show_series(&mut self) -> Result<Statement> {
        let database = self.parse_on_database()?;
        let sources = self.parse_optional_from()?;
        let condition = self.parse_condition()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_count(Keyword::Limit)?;
        let offset = self.parse_optional_count(Keyword::Offset)?;
        Ok(Statement::ShowSeries(ShowSeries { database, sources, condition, order, limit, offset }))
    }
}
