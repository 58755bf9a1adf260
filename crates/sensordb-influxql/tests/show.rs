//! SHOW, CREATE, DROP and DELETE statements: their trees and canonical renderings.

mod common;

use common::{canonical, error, statement};
use sensordb_influxql::{
    BinaryExpr, BinaryOp, CreateDatabase, Delete, DropDatabase, DropMeasurement, DropSeries, Duration, Expr, Measurement, MeasurementName,
    Regex, RetentionPolicySpec, ShowFieldKeys, ShowMeasurements, ShowRetentionPolicies, ShowSeries, ShowTagKeys, ShowTagValues, SortOrder,
    Statement, TagKeyFilter, VarRef,
};

fn m(name: &str) -> Measurement {
    Measurement { database: None, retention_policy: None, name: MeasurementName::Name(name.into()) }
}

fn eq(key: &str, value: &str) -> Expr {
    Expr::Binary(Box::new(BinaryExpr {
        op: BinaryOp::Eq,
        lhs: Expr::VarRef(VarRef { name: key.into(), data_type: None }),
        rhs: Expr::String(value.into()),
    }))
}

#[test]
fn show_databases_and_retention_policies() {
    assert_eq!(statement("show databases"), Statement::ShowDatabases);
    assert_eq!(statement("SHOW RETENTION POLICIES"), Statement::ShowRetentionPolicies(ShowRetentionPolicies { database: None }));
    assert_eq!(
        statement("SHOW RETENTION POLICIES ON \"my db\""),
        Statement::ShowRetentionPolicies(ShowRetentionPolicies { database: Some("my db".into()) })
    );
}

#[test]
fn show_measurements() {
    assert_eq!(statement("SHOW MEASUREMENTS"), Statement::ShowMeasurements(ShowMeasurements::default()));
    assert_eq!(
        statement("SHOW MEASUREMENTS WITH MEASUREMENT =~ /cpu.*/ LIMIT 100"),
        Statement::ShowMeasurements(ShowMeasurements {
            with_measurement: Some(Measurement {
                database: None,
                retention_policy: None,
                name: MeasurementName::Regex(Regex("cpu.*".into()))
            }),
            limit: Some(100),
            ..ShowMeasurements::default()
        })
    );
    assert_eq!(
        statement("SHOW MEASUREMENTS ON db WITH MEASUREMENT = cpu WHERE host = 'a' LIMIT 5 OFFSET 10"),
        Statement::ShowMeasurements(ShowMeasurements {
            database: Some("db".into()),
            with_measurement: Some(m("cpu")),
            condition: Some(eq("host", "a")),
            order: SortOrder::Ascending,
            limit: Some(5),
            offset: Some(10),
        })
    );
    assert_eq!(
        canonical("show measurements on db with measurement =~ /a\\/b/ where host = 'a' limit 5 offset 10"),
        "SHOW MEASUREMENTS ON db WITH MEASUREMENT =~ /a\\/b/ WHERE host = 'a' LIMIT 5 OFFSET 10"
    );
}

#[test]
fn show_tag_keys() {
    assert_eq!(
        statement("SHOW TAG KEYS ON db FROM cpu, \"mem\" WHERE host = 'a' LIMIT 3 OFFSET 1 SLIMIT 2 SOFFSET 4"),
        Statement::ShowTagKeys(ShowTagKeys {
            database: Some("db".into()),
            sources: vec![m("cpu"), m("mem")],
            condition: Some(eq("host", "a")),
            order: SortOrder::Ascending,
            limit: Some(3),
            offset: Some(1),
            series_limit: Some(2),
            series_offset: Some(4),
        })
    );
    assert_eq!(statement("SHOW TAG KEYS"), Statement::ShowTagKeys(ShowTagKeys::default()));
}

#[test]
fn show_tag_values() {
    let values = |text: &str| match statement(text) {
        Statement::ShowTagValues(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        values("SHOW TAG VALUES FROM \"cpu\" WITH KEY = \"host\" WHERE \"dc\" = 'x'"),
        ShowTagValues {
            database: None,
            sources: vec![m("cpu")],
            key: TagKeyFilter::Eq("host".into()),
            condition: Some(eq("dc", "x")),
            order: SortOrder::Ascending,
            limit: None,
            offset: None,
        }
    );
    assert_eq!(values("SHOW TAG VALUES WITH KEY IN (\"a\", b)").key, TagKeyFilter::In(vec!["a".into(), "b".into()]));
    assert_eq!(values("SHOW TAG VALUES WITH KEY =~ /ho.*/").key, TagKeyFilter::Regex(Regex("ho.*".into())));
    assert_eq!(values("SHOW TAG VALUES WITH KEY !~ /x/").key, TagKeyFilter::NotRegex(Regex("x".into())));
    assert_eq!(values("SHOW TAG VALUES WITH KEY != host").key, TagKeyFilter::NotEq("host".into()));
    let on_db = values("SHOW TAG VALUES ON \"telegraf\" FROM cpu WITH KEY = host LIMIT 10");
    assert_eq!((on_db.database.as_deref(), on_db.limit), (Some("telegraf"), Some(10)));
    assert_eq!(
        canonical("show tag values on db from cpu with key in (\"a\",\"key\") where x = 'y' limit 1"),
        "SHOW TAG VALUES ON db FROM cpu WITH KEY IN (a, \"key\") WHERE x = 'y' LIMIT 1"
    );
    assert!(error("SHOW TAG VALUES FROM cpu").contains("expected WITH"));
}

#[test]
fn show_field_keys_and_series() {
    assert_eq!(
        statement("SHOW FIELD KEYS ON db FROM cpu"),
        Statement::ShowFieldKeys(ShowFieldKeys { database: Some("db".into()), sources: vec![m("cpu")], ..ShowFieldKeys::default() })
    );
    assert_eq!(
        statement("SHOW SERIES ON db FROM cpu WHERE host = 'a' LIMIT 10"),
        Statement::ShowSeries(ShowSeries {
            database: Some("db".into()),
            sources: vec![m("cpu")],
            condition: Some(eq("host", "a")),
            limit: Some(10),
            ..ShowSeries::default()
        })
    );
    assert_eq!(
        canonical("show series from /c.*/ where a = 'b' order by time desc"),
        "SHOW SERIES FROM /c.*/ WHERE a = 'b' ORDER BY time DESC"
    );
}

#[test]
fn unsupported_show_forms_are_named() {
    let cases = [
        ("SHOW USERS", "SHOW USERS is not supported at line 1, char 6"),
        ("SHOW DIAGNOSTICS", "SHOW DIAGNOSTICS is not supported at line 1, char 6"),
        ("SHOW STATS", "SHOW STATS is not supported at line 1, char 6"),
        ("SHOW CONTINUOUS QUERIES", "SHOW CONTINUOUS QUERIES is not supported at line 1, char 6"),
        ("SHOW SERIES CARDINALITY", "SHOW SERIES CARDINALITY is not supported at line 1, char 13"),
        ("SHOW MEASUREMENT EXACT CARDINALITY", "SHOW MEASUREMENT CARDINALITY is not supported at line 1, char 6"),
        ("SHOW TAG VALUES EXACT CARDINALITY WITH KEY = x", "SHOW TAG VALUES CARDINALITY is not supported at line 1, char 17"),
        ("GRANT ALL TO bob", "GRANT is not supported at line 1, char 1"),
        ("DROP USER bob", "DROP USER is not supported at line 1, char 6"),
        ("CREATE RETENTION POLICY rp ON db DURATION 1d REPLICATION 1", "CREATE RETENTION POLICY is not supported at line 1, char 8"),
        ("SHOW FOO", "found FOO, expected CONTINUOUS, DATABASES, DIAGNOSTICS, FIELD, GRANTS, MEASUREMENT, MEASUREMENTS, QUERIES, RETENTION, SERIES, SHARD, SHARDS, STATS, SUBSCRIPTIONS, TAG, USERS at line 1, char 6"),
        ("SHOW", "found EOF, expected CONTINUOUS, DATABASES, DIAGNOSTICS, FIELD, GRANTS, MEASUREMENT, MEASUREMENTS, QUERIES, RETENTION, SERIES, SHARD, SHARDS, STATS, SUBSCRIPTIONS, TAG, USERS at line 1, char 6"),
    ];
    for (text, message) in cases {
        assert_eq!(error(text), message, "{text}");
    }
}

#[test]
fn create_database() {
    assert_eq!(
        statement("CREATE DATABASE mydb"),
        Statement::CreateDatabase(CreateDatabase { name: "mydb".into(), retention_policy: None })
    );
    assert_eq!(
        statement("CREATE DATABASE \"my db\" WITH DURATION 30d REPLICATION 1 SHARD DURATION 1h NAME \"rp one\""),
        Statement::CreateDatabase(CreateDatabase {
            name: "my db".into(),
            retention_policy: Some(RetentionPolicySpec {
                duration: Some(Duration(30 * Duration::DAY)),
                replication: Some(1),
                shard_duration: Some(Duration(Duration::HOUR)),
                name: Some("rp one".into()),
            }),
        })
    );
    assert_eq!(canonical("create database db with duration inf name rp"), "CREATE DATABASE db WITH DURATION INF NAME rp");
    assert_eq!(canonical("create database db with shard duration 7d"), "CREATE DATABASE db WITH SHARD DURATION 1w");
    assert_eq!(error("CREATE DATABASE db WITH"), "found EOF, expected DURATION, NAME, REPLICATION, SHARD at line 1, char 25");
    assert_eq!(error("CREATE DATABASE db WITH REPLICATION 0"), "invalid value 0: must be 1 <= n <= 2147483647 at line 1, char 37");
    assert_eq!(error("CREATE DATABASE db WITH DURATION 1x"), "invalid duration at line 1, char 34");
}

#[test]
fn drop_and_delete() {
    assert_eq!(statement("DROP DATABASE db"), Statement::DropDatabase(DropDatabase { name: "db".into() }));
    assert_eq!(statement("DROP MEASUREMENT \"cpu x\""), Statement::DropMeasurement(DropMeasurement { name: "cpu x".into() }));
    assert_eq!(statement("DROP SERIES FROM cpu"), Statement::DropSeries(DropSeries { sources: vec![m("cpu")], condition: None }));
    let both = Expr::Binary(Box::new(BinaryExpr { op: BinaryOp::And, lhs: eq("host", "a"), rhs: eq("dc", "b") }));
    assert_eq!(
        statement("DROP SERIES WHERE host = 'a' AND dc = 'b'"),
        Statement::DropSeries(DropSeries { sources: vec![], condition: Some(both.clone()) })
    );
    assert_eq!(
        statement("DELETE FROM cpu WHERE host = 'a' AND dc = 'b'"),
        Statement::Delete(Delete { sources: vec![m("cpu")], condition: Some(both) })
    );
    assert_eq!(statement("DELETE WHERE time < '2020-01-01T00:00:00Z'").to_string(), "DELETE WHERE time < '2020-01-01T00:00:00Z'");
    assert_eq!(statement("DELETE FROM cpu, /m.*/").to_string(), "DELETE FROM cpu, /m.*/");
    // InfluxDB 1.8's own test cases (parser_test.go), positions included.
    let cases = [
        ("DROP SERIES", "found EOF, expected FROM, WHERE at line 1, char 13"),
        ("DROP SERIES FROM", "found EOF, expected identifier at line 1, char 18"),
        ("DROP SERIES FROM src WHERE", "found EOF, expected identifier, string, number, bool at line 1, char 28"),
        ("DROP SERIES FROM \"foo\".myseries", "retention policy not supported at line 1, char 18"),
        ("DROP SERIES FROM foo..myseries", "database not supported at line 1, char 18"),
        ("DELETE", "found EOF, expected FROM, WHERE at line 1, char 8"),
        ("DELETE FROM", "found EOF, expected identifier at line 1, char 13"),
        ("DELETE FROM myseries WHERE", "found EOF, expected identifier, string, number, bool at line 1, char 28"),
        ("DELETE FROM \"foo\".myseries", "retention policy not supported at line 1, char 13"),
        ("DELETE FROM foo..myseries", "database not supported at line 1, char 13"),
        ("DROP MEASUREMENT", "found EOF, expected identifier at line 1, char 18"),
        ("DROP DATABASE", "found EOF, expected identifier at line 1, char 15"),
        ("DROP FOO", "found FOO, expected CONTINUOUS, MEASUREMENT, RETENTION, SERIES, SHARD, SUBSCRIPTION, USER at line 1, char 6"),
        ("CREATE FOO", "found FOO, expected CONTINUOUS, DATABASE, USER, RETENTION, SUBSCRIPTION at line 1, char 8"),
        ("CREATE DATABASE", "found EOF, expected identifier at line 1, char 17"),
        ("CREATE DATABASE \"testdb\" WITH", "found EOF, expected DURATION, NAME, REPLICATION, SHARD at line 1, char 31"),
        ("CREATE DATABASE \"testdb\" WITH DURATION", "found EOF, expected duration at line 1, char 40"),
        ("CREATE DATABASE \"testdb\" WITH REPLICATION", "found EOF, expected integer at line 1, char 43"),
        ("CREATE DATABASE \"testdb\" WITH NAME", "found EOF, expected identifier at line 1, char 36"),
        ("CREATE DATABASE \"testdb\" WITH SHARD", "found EOF, expected DURATION at line 1, char 37"),
        ("SHOW RETENTION", "found EOF, expected POLICIES at line 1, char 16"),
        ("SHOW RETENTION ON", "found ON, expected POLICIES at line 1, char 16"),
        ("SHOW RETENTION POLICIES ON", "found EOF, expected identifier at line 1, char 28"),
    ];
    for (text, message) in cases {
        assert_eq!(error(text), message, "{text}");
    }
}
