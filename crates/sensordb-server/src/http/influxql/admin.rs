//! The statements that describe or change databases themselves: SHOW DATABASES, SHOW RETENTION
//! POLICIES, CREATE DATABASE (with its storage period), DROP SERIES/MEASUREMENT/DATABASE.

use sensordb_engine::Engine;
use sensordb_influxql::{CreateDatabase, DropSeries, MeasurementName};
use sensordb_query::{FieldValue, QueryError, ResultRow, ResultSeries};

fn engine_error(e: sensordb_engine::Error) -> QueryError {
    QueryError::Storage(e.to_string())
}

fn text(s: &str) -> FieldValue {
    FieldValue::String(s.into())
}

pub fn show_databases(engine: &Engine) -> Vec<ResultSeries> {
    let rows = engine.databases().policies.keys().map(|name| ResultRow { time: 0, values: vec![text(name)] }).collect();
    vec![ResultSeries { name: "databases".into(), columns: vec!["name".into()].into(), rows, ..ResultSeries::default() }]
}

/// A duration as Go prints it (`720h0m0s`, `0s`), which is how InfluxDB shows periods.
pub fn go_duration(d: Option<std::time::Duration>) -> String {
    let Some(d) = d else { return "0s".into() };
    let seconds = d.as_secs();
    if seconds == 0 {
        return "0s".into();
    }
    format!("{}h{}m{}s", seconds / 3600, seconds % 3600 / 60, seconds % 60)
}

pub fn show_retention_policies(engine: &Engine, database: &str) -> Result<Vec<ResultSeries>, QueryError> {
    let databases = engine.databases();
    let policy = databases.policies.get(database).ok_or_else(|| QueryError::invalid(format!("database not found: {database}")))?;
    let row = ResultRow {
        time: 0,
        values: vec![
            text("autogen"),
            text(&go_duration(policy.period)),
            text("168h0m0s"),
            FieldValue::Integer(1),
            FieldValue::Boolean(true),
        ],
    };
    Ok(vec![ResultSeries {
        columns: ["name", "duration", "shardGroupDuration", "replicaN", "default"].map(String::from).into(),
        rows: vec![row],
        ..ResultSeries::default()
    }])
}

pub fn create_database(engine: &Engine, create: &CreateDatabase) -> Result<Vec<ResultSeries>, QueryError> {
    engine.create_database(&create.name).map_err(engine_error)?;
    if let Some(duration) = create.retention_policy.as_ref().and_then(|rp| rp.duration) {
        let mut policy = engine.databases().policies.get(&create.name).cloned().unwrap_or_default();
        policy.period = (duration.nanos() > 0).then(|| std::time::Duration::from_nanos(duration.nanos() as u64));
        engine.set_database_policy(&create.name, policy).map_err(engine_error)?;
    }
    Ok(Vec::new())
}

pub fn drop_series(engine: &Engine, database: &str, drop: &DropSeries) -> Result<Vec<ResultSeries>, QueryError> {
    let tags = sensordb_query::show::tag_equalities(drop.condition.as_ref())?;
    let filter: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    if drop.sources.is_empty() {
        engine.delete_series(database, None, &filter).map_err(engine_error)?;
    }
    for source in &drop.sources {
        match &source.name {
            MeasurementName::Name(name) => {
                engine.delete_series(database, Some(name), &filter).map_err(engine_error)?;
            }
            MeasurementName::Regex(_) => {
                return Err(QueryError::invalid("DROP SERIES FROM /regex/ is not supported; name the measurement"))
            }
        }
    }
    Ok(Vec::new())
}

pub fn drop_measurement(engine: &Engine, database: &str, name: &str) -> Result<Vec<ResultSeries>, QueryError> {
    engine.delete_series(database, Some(name), &[]).map_err(engine_error)?;
    Ok(Vec::new())
}

/// Deletes every series of the database; its name and retention stay defined (the engine keeps
/// database definitions until they are removed from the configuration).
pub fn drop_database(engine: &Engine, name: &str) -> Result<Vec<ResultSeries>, QueryError> {
    engine.delete_series(name, None, &[]).map_err(engine_error)?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_print_as_go_durations() {
        assert_eq!(go_duration(None), "0s");
        assert_eq!(go_duration(Some(std::time::Duration::from_secs(30 * 86_400))), "720h0m0s");
        assert_eq!(go_duration(Some(std::time::Duration::from_secs(5400))), "1h30m0s");
    }
}
