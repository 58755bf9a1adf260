//! CREATE DATABASE, DROP DATABASE / SERIES / MEASUREMENT and DELETE, as InfluxDB 1.8 reads
//! them; the CREATE and DROP forms sensordb does not serve (users, retention policies,
//! continuous queries ...) are named in a clear "not supported" error.

use super::{Parser, Result};
use crate::ast::{CreateDatabase, Delete, DropDatabase, DropMeasurement, DropSeries, Measurement, RetentionPolicySpec, Statement};
use crate::lexer::{Keyword, Tok};

impl Parser<'_> {
    /// A CREATE statement whose `CREATE` keyword is consumed.
    pub(super) fn parse_create(&mut self) -> Result<Statement> {
        let token = self.next()?;
        match token.tok {
            Tok::Keyword(Keyword::Database) => self.parse_create_database(),
            Tok::Keyword(Keyword::Continuous) => Err(self.unsupported(token.start, "CREATE CONTINUOUS QUERY")),
            Tok::Keyword(Keyword::Retention) => Err(self.unsupported(token.start, "CREATE RETENTION POLICY")),
            Tok::Keyword(Keyword::Subscription) => Err(self.unsupported(token.start, "CREATE SUBSCRIPTION")),
            Tok::Keyword(Keyword::User) => Err(self.unsupported(token.start, "CREATE USER")),
            // InfluxDB 1.8's list, though only DATABASE is served.
            _ => Err(self.unexpected(&token, &["CONTINUOUS", "DATABASE", "USER", "RETENTION", "SUBSCRIPTION"])),
        }
    }

    /// `name [WITH [DURATION d] [REPLICATION n] [SHARD DURATION d] [NAME rp]]`, at least one
    /// option after WITH, in this order.
    fn parse_create_database(&mut self) -> Result<Statement> {
        let name = self.parse_ident()?;
        if !self.eat_keyword(Keyword::With)? {
            return Ok(Statement::CreateDatabase(CreateDatabase { name, retention_policy: None }));
        }
        let token = self.peek()?;
        let options = [Keyword::Duration, Keyword::Replication, Keyword::Shard, Keyword::Name];
        if !options.iter().any(|&keyword| token.tok.is_keyword(keyword)) {
            return Err(self.unexpected(&token, &["DURATION", "NAME", "REPLICATION", "SHARD"]));
        }
        let mut spec = RetentionPolicySpec::default();
        if self.eat_keyword(Keyword::Duration)? {
            spec.duration = Some(self.parse_duration_literal()?);
        }
        if self.eat_keyword(Keyword::Replication)? {
            let start = self.peek_start()?;
            let replication = self.parse_u64()?;
            match u32::try_from(replication) {
                Ok(n) if (1..=i32::MAX as u32).contains(&n) => spec.replication = Some(n),
                _ => return Err(self.invalid(start, format!("invalid value {replication}: must be 1 <= n <= {}", i32::MAX))),
            }
        }
        if self.eat_keyword(Keyword::Shard)? {
            self.expect_keyword(Keyword::Duration)?;
            spec.shard_duration = Some(self.parse_duration_literal()?);
        }
        if self.eat_keyword(Keyword::Name)? {
            spec.name = Some(self.parse_ident()?);
        }
        Ok(Statement::CreateDatabase(CreateDatabase { name, retention_policy: Some(spec) }))
    }

    /// A DROP statement whose `DROP` keyword is consumed.
    pub(super) fn parse_drop(&mut self) -> Result<Statement> {
        let token = self.next()?;
        match token.tok {
            Tok::Keyword(Keyword::Database) => Ok(Statement::DropDatabase(DropDatabase { name: self.parse_ident()? })),
            Tok::Keyword(Keyword::Measurement) => Ok(Statement::DropMeasurement(DropMeasurement { name: self.parse_ident()? })),
            Tok::Keyword(Keyword::Series) => {
                let next = self.peek()?;
                let sources = self.parse_series_sources()?;
                let condition = self.parse_condition()?;
                if sources.is_empty() && condition.is_none() {
                    return Err(self.unexpected(&next, &["FROM", "WHERE"]));
                }
                Ok(Statement::DropSeries(DropSeries { sources, condition }))
            }
            Tok::Keyword(Keyword::Continuous) => Err(self.unsupported(token.start, "DROP CONTINUOUS QUERY")),
            Tok::Keyword(Keyword::Retention) => Err(self.unsupported(token.start, "DROP RETENTION POLICY")),
            Tok::Keyword(Keyword::Shard) => Err(self.unsupported(token.start, "DROP SHARD")),
            Tok::Keyword(Keyword::Subscription) => Err(self.unsupported(token.start, "DROP SUBSCRIPTION")),
            Tok::Keyword(Keyword::User) => Err(self.unsupported(token.start, "DROP USER")),
            // InfluxDB 1.8's list (DATABASE is missing from it there too).
            _ => Err(self.unexpected(&token, &["CONTINUOUS", "MEASUREMENT", "RETENTION", "SERIES", "SHARD", "SUBSCRIPTION", "USER"])),
        }
    }

    /// `DELETE [FROM source] [WHERE cond]` whose `DELETE` is consumed; at least one clause.
    pub(super) fn parse_delete(&mut self) -> Result<Statement> {
        let next = self.peek()?;
        let sources = self.parse_series_sources()?;
        let condition = self.parse_condition()?;
        if sources.is_empty() && condition.is_none() {
            return Err(self.unexpected(&next, &["FROM", "WHERE"]));
        }
        Ok(Statement::Delete(Delete { sources, condition }))
    }

    /// `FROM measurements` of DROP SERIES and DELETE, if it comes next: InfluxDB refuses a
    /// database or retention policy there (the retention policy check wins when both are given).
    fn parse_series_sources(&mut self) -> Result<Vec<Measurement>> {
        if !self.eat_keyword(Keyword::From)? {
            return Ok(Vec::new());
        }
        let start = self.peek_start()?;
        let sources = self.parse_measurements()?;
        for source in &sources {
            if source.retention_policy.is_some() {
                return Err(self.invalid(start, "retention policy not supported"));
            }
            if source.database.is_some() {
                return Err(self.invalid(start, "database not supported"));
            }
        }
        Ok(sources)
    }
}
