//! SELECT, construct by construct: the tree each one parses to and its canonical rendering.

mod common;

use common::{canonical, round_trip, select};
use sensordb_influxql::{
    parse, BinaryExpr, BinaryOp, Call, DataType, Dimension, Duration, Expr, Field, Fill, Measurement, MeasurementName, Regex, SortOrder,
    Source, Target, TimeOffset, VarRef, WildcardType,
};

fn var(name: &str) -> Expr {
    Expr::VarRef(VarRef { name: name.into(), data_type: None })
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Call(Call { name: name.into(), args })
}

fn binary(lhs: Expr, op: BinaryOp, rhs: Expr) -> Expr {
    Expr::Binary(Box::new(BinaryExpr { op, lhs, rhs }))
}

fn field_expr(text: &str) -> Expr {
    select(&format!("SELECT {text} FROM m")).fields.remove(0).expr
}

fn condition(text: &str) -> Expr {
    select(&format!("SELECT a FROM m WHERE {text}")).condition.expect("a condition")
}

fn source(text: &str) -> Source {
    select(&format!("SELECT a FROM {text}")).sources.remove(0)
}

fn measurement(database: Option<&str>, retention_policy: Option<&str>, name: MeasurementName) -> Source {
    Source::Measurement(Measurement { database: database.map(Into::into), retention_policy: retention_policy.map(Into::into), name })
}

fn named(name: &str) -> MeasurementName {
    MeasurementName::Name(name.into())
}

#[test]
fn fields_wildcards_casts_and_aliases() {
    let s = select(r#"SELECT *, "f", f::field, t::tag, x::float, y::INTEGER, *::tag, mean("a") AS "m x" FROM m"#);
    let typed = |name: &str, data_type| Expr::VarRef(VarRef { name: name.into(), data_type: Some(data_type) });
    assert_eq!(
        s.fields,
        vec![
            Field { expr: Expr::Wildcard(None), alias: None },
            Field { expr: var("f"), alias: None },
            Field { expr: typed("f", DataType::Field), alias: None },
            Field { expr: typed("t", DataType::Tag), alias: None },
            Field { expr: typed("x", DataType::Float), alias: None },
            Field { expr: typed("y", DataType::Integer), alias: None },
            Field { expr: Expr::Wildcard(Some(WildcardType::Tag)), alias: None },
            Field { expr: call("mean", vec![var("a")]), alias: Some("m x".into()) },
        ]
    );
    assert_eq!(canonical(r#"select "f"::field as "select" from "m""#), r#"SELECT f::field AS "select" FROM m"#);
}

#[test]
fn arithmetic_precedence_and_unary_minus() {
    assert_eq!(field_expr("a + b * 2"), binary(var("a"), BinaryOp::Add, binary(var("b"), BinaryOp::Mul, Expr::Integer(2))));
    assert_eq!(field_expr("a - b - c"), binary(binary(var("a"), BinaryOp::Sub, var("b")), BinaryOp::Sub, var("c")));
    assert_eq!(
        field_expr("(a + b) * 2"),
        binary(Expr::Paren(Box::new(binary(var("a"), BinaryOp::Add, var("b")))), BinaryOp::Mul, Expr::Integer(2))
    );
    assert_eq!(field_expr("mean(\"a\") * 2"), binary(call("mean", vec![var("a")]), BinaryOp::Mul, Expr::Integer(2)));
    assert_eq!(field_expr("a % 3"), binary(var("a"), BinaryOp::Mod, Expr::Integer(3)));
    assert_eq!(field_expr("-5"), Expr::Integer(-5));
    assert_eq!(field_expr("- 2.5"), Expr::Float(-2.5));
    assert_eq!(field_expr("-a"), Expr::Negate(Box::new(var("a"))));
    assert_eq!(field_expr("+a"), var("a"));
    assert_eq!(field_expr("a / -b"), binary(var("a"), BinaryOp::Div, Expr::Negate(Box::new(var("b")))));
    assert_eq!(field_expr("-9223372036854775808"), Expr::Integer(i64::MIN));
    assert_eq!(field_expr("9223372036854775808"), Expr::Unsigned(1 << 63));
    assert_eq!(
        field_expr("a & 1 | 2 ^ 3"),
        binary(
            binary(binary(var("a"), BinaryOp::BitAnd, Expr::Integer(1)), BinaryOp::BitOr, Expr::Integer(2)),
            BinaryOp::BitXor,
            Expr::Integer(3)
        )
    );
    assert_eq!(canonical("SELECT a+-b*2,-(a) FROM m"), "SELECT a + -b * 2, -(a) FROM m");
}

#[test]
fn literals() {
    assert_eq!(field_expr("1.5"), Expr::Float(1.5));
    assert_eq!(field_expr("1e3"), Expr::Float(1000.0));
    assert_eq!(field_expr(".25"), Expr::Float(0.25));
    assert_eq!(field_expr("'it\\'s'"), Expr::String("it's".into()));
    assert_eq!(field_expr("TRUE"), Expr::Bool(true));
    assert_eq!(field_expr("false"), Expr::Bool(false));
    assert_eq!(canonical("SELECT 5.0, 1e3, 1.5e-7, 'a\\nb', 'it\\'s' FROM m"), "SELECT 5.0, 1000.0, 0.00000015, 'a\\nb', 'it\\'s' FROM m");
}

#[test]
fn durations() {
    let d = |text: &str| match field_expr(text) {
        Expr::Duration(d) => d.0,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(d("10s"), 10 * Duration::SECOND);
    assert_eq!(d("1m"), Duration::MINUTE);
    assert_eq!(d("1h"), Duration::HOUR);
    assert_eq!(d("1d"), Duration::DAY);
    assert_eq!(d("1w"), Duration::WEEK);
    assert_eq!(d("100ms"), 100 * Duration::MILLISECOND);
    assert_eq!(d("10u"), 10 * Duration::MICROSECOND);
    assert_eq!(d("10µ"), 10 * Duration::MICROSECOND);
    assert_eq!(d("5ns"), 5);
    assert_eq!(d("1h30m"), Duration::HOUR + 30 * Duration::MINUTE);
    assert_eq!(d("-15m"), -15 * Duration::MINUTE);
    assert_eq!(canonical("SELECT 1h30m, 120m, 10µ, 1500ms, 7d, 0s FROM m"), "SELECT 90m, 2h, 10u, 1500ms, 1w, 0s FROM m");
}

#[test]
fn function_calls() {
    let cases = [
        ("mean(\"f\")", call("mean", vec![var("f")])),
        ("PERCENTILE(\"f\", 95)", call("percentile", vec![var("f"), Expr::Integer(95)])),
        ("count(*)", call("count", vec![Expr::Wildcard(None)])),
        ("count(distinct(\"f\"))", call("count", vec![call("distinct", vec![var("f")])])),
        ("count(DISTINCT f)", call("count", vec![Expr::Distinct("f".into())])),
        ("derivative(mean(\"f\"), 1s)", call("derivative", vec![call("mean", vec![var("f")]), Expr::Duration(Duration(Duration::SECOND))])),
        (
            "non_negative_derivative(max(f), 10s)",
            call("non_negative_derivative", vec![call("max", vec![var("f")]), Expr::Duration(Duration(10 * Duration::SECOND))]),
        ),
        ("moving_average(mean(\"f\"), 3)", call("moving_average", vec![call("mean", vec![var("f")]), Expr::Integer(3)])),
        ("top(\"f\", 3)", call("top", vec![var("f"), Expr::Integer(3)])),
        ("top(\"f\", host, 3)", call("top", vec![var("f"), var("host"), Expr::Integer(3)])),
        ("max(/cpu_.*/)", call("max", vec![Expr::Regex(Regex("cpu_.*".into()))])),
        ("now()", call("now", vec![])),
    ];
    for (text, expected) in cases {
        assert_eq!(field_expr(text), expected, "{text}");
    }
    for name in ["difference", "cumulative_sum", "first", "last", "min", "max", "sum", "median", "spread", "stddev", "distinct"] {
        assert_eq!(field_expr(&format!("{name}(\"f\")")), call(name, vec![var("f")]));
    }
    assert_eq!(canonical("SELECT COUNT(DISTINCT(\"f\")), distinct f FROM m"), "SELECT count(distinct(f)), DISTINCT f FROM m");
}

#[test]
fn regex_field_and_call_need_their_paren_right_against_the_name() {
    assert_eq!(field_expr("/^cpu/"), Expr::Regex(Regex("^cpu".into())));
    assert!(parse("SELECT mean (x) FROM m").is_err(), "a space makes `mean` a field name");
}

#[test]
fn sources() {
    assert_eq!(source("m"), measurement(None, None, named("m")));
    assert_eq!(source("\"m x\""), measurement(None, None, named("m x")));
    assert_eq!(source("db.rp.m"), measurement(Some("db"), Some("rp"), named("m")));
    assert_eq!(source("\"db\".\"rp\".\"m\""), measurement(Some("db"), Some("rp"), named("m")));
    assert_eq!(source("db..m"), measurement(Some("db"), None, named("m")));
    assert_eq!(source("rp.m"), measurement(None, Some("rp"), named("m")));
    assert_eq!(source("/cpu.*/"), measurement(None, None, MeasurementName::Regex(Regex("cpu.*".into()))));
    assert_eq!(source("db.rp./c\\/d/"), measurement(Some("db"), Some("rp"), MeasurementName::Regex(Regex("c/d".into()))));
    let s = select("SELECT a FROM m1, \"m2\", /m3/");
    assert_eq!(s.sources.len(), 3);
    assert_eq!(canonical("SELECT a FROM \"db\"..\"m\", db.rp./a\\/b/"), "SELECT a FROM db..m, db.rp./a\\/b/");
}

#[test]
fn subqueries_nest() {
    let s = select("SELECT max(m) FROM (SELECT mean(x) AS m FROM (SELECT x FROM (SELECT x FROM cpu) WHERE x > 0) GROUP BY time(1m))");
    let Source::Subquery(one) = &s.sources[0] else { panic!() };
    let Source::Subquery(two) = &one.sources[0] else { panic!() };
    let Source::Subquery(three) = &two.sources[0] else { panic!() };
    assert_eq!(three.sources[0], measurement(None, None, named("cpu")));
    assert!(parse("SELECT a FROM (SHOW DATABASES)").is_err());
}

#[test]
fn where_conditions() {
    assert_eq!(
        condition("a = 1 OR b = 2 AND c = 3"),
        binary(
            binary(var("a"), BinaryOp::Eq, Expr::Integer(1)),
            BinaryOp::Or,
            binary(binary(var("b"), BinaryOp::Eq, Expr::Integer(2)), BinaryOp::And, binary(var("c"), BinaryOp::Eq, Expr::Integer(3)))
        )
    );
    let ops = [
        ("=", BinaryOp::Eq),
        ("!=", BinaryOp::NotEq),
        ("<>", BinaryOp::NotEq),
        ("<", BinaryOp::Lt),
        ("<=", BinaryOp::LtEq),
        (">", BinaryOp::Gt),
        (">=", BinaryOp::GtEq),
    ];
    for (text, op) in ops {
        assert_eq!(condition(&format!("a {text} 'x'")), binary(var("a"), op, Expr::String("x".into())), "{text}");
    }
    assert_eq!(condition("host =~ /^a$/"), binary(var("host"), BinaryOp::EqRegex, Expr::Regex(Regex("^a$".into()))));
    assert_eq!(
        condition("url =~ /http\\:\\/\\/www\\.example\\.com/"),
        binary(var("url"), BinaryOp::EqRegex, Expr::Regex(Regex("http\\://www\\.example\\.com".into()))),
        "InfluxDB's own test: `\\/` is a slash, other escapes stay for the regex engine"
    );
    assert_eq!(condition("host !~ /b/"), binary(var("host"), BinaryOp::NotEqRegex, Expr::Regex(Regex("b".into()))));
    assert_eq!(
        condition("\"current_load\" >= 0.9 * \"load_capacity\""),
        binary(var("current_load"), BinaryOp::GtEq, binary(Expr::Float(0.9), BinaryOp::Mul, var("load_capacity")))
    );
    assert_eq!(
        condition("time >= 1700000000000ms"),
        binary(var("time"), BinaryOp::GtEq, Expr::Duration(Duration(1_700_000_000_000_000_000)))
    );
    assert_eq!(
        condition("time > now() - 1h"),
        binary(var("time"), BinaryOp::Gt, binary(call("now", vec![]), BinaryOp::Sub, Expr::Duration(Duration(Duration::HOUR))))
    );
    assert_eq!(
        condition("time >= '2016-01-01T00:00:00Z'"),
        binary(var("time"), BinaryOp::GtEq, Expr::String("2016-01-01T00:00:00Z".into()))
    );
    assert_eq!(canonical("SELECT a FROM m WHERE (a = 1 or b = 2) and c <> 3"), "SELECT a FROM m WHERE (a = 1 OR b = 2) AND c != 3");
}

#[test]
fn group_by_fill_order_limits_and_timezone() {
    let s = select("SELECT mean(a) FROM m GROUP BY time(1h, 15m), \"t\", *, /re/ fill(previous) ORDER BY time DESC LIMIT 10 OFFSET 2 SLIMIT 3 SOFFSET 4 tz('Europe/Paris')");
    assert_eq!(
        s.group_by,
        vec![
            Dimension::Time { interval: Duration(Duration::HOUR), offset: Some(TimeOffset::Duration(Duration(15 * Duration::MINUTE))) },
            Dimension::Tag("t".into()),
            Dimension::Wildcard,
            Dimension::Regex(Regex("re".into())),
        ]
    );
    assert_eq!(
        (s.fill, s.order, s.limit, s.offset, s.series_limit, s.series_offset),
        (Fill::Previous, SortOrder::Descending, Some(10), Some(2), Some(3), Some(4))
    );
    assert_eq!(s.timezone.as_deref(), Some("Europe/Paris"));
    let offset_now = select("SELECT mean(a) FROM m GROUP BY time(10s, now())");
    assert_eq!(offset_now.group_by[0], Dimension::Time { interval: Duration(10 * Duration::SECOND), offset: Some(TimeOffset::Now) });
    let offset_negative = select("SELECT mean(a) FROM m GROUP BY time(1h, -15m)");
    assert_eq!(
        offset_negative.group_by[0],
        Dimension::Time { interval: Duration(Duration::HOUR), offset: Some(TimeOffset::Duration(Duration(-15 * Duration::MINUTE))) }
    );
    for (text, fill) in [
        ("null", Fill::Null),
        ("none", Fill::None),
        ("0", Fill::Integer(0)),
        ("previous", Fill::Previous),
        ("linear", Fill::Linear),
        ("-1.5", Fill::Float(-1.5)),
        ("42", Fill::Integer(42)),
    ] {
        assert_eq!(select(&format!("SELECT mean(a) FROM m GROUP BY time(1m) fill({text})")).fill, fill, "{text}");
    }
    assert_eq!(select("SELECT a FROM m fill(0)").fill, Fill::Integer(0), "fill without GROUP BY, as InfluxDB allows");
    assert_eq!(select("SELECT a FROM m ORDER BY time ASC").order, SortOrder::Ascending);
    assert_eq!(select("SELECT a FROM m ORDER BY \"time\" DESC").order, SortOrder::Descending);
    assert_eq!(select("SELECT a FROM m ORDER BY DESC").order, SortOrder::Descending);
    assert_eq!(select("SELECT a FROM m LIMIT 0").limit, None, "LIMIT 0 is no limit");
    assert_eq!(
        canonical(
            "select mean(a) from m group by time(1h,15m),host fill(none) order by time desc limit 5 offset 1 slimit 2 soffset 3 TZ('UTC')"
        ),
        "SELECT mean(a) FROM m GROUP BY time(1h, 15m), host fill(none) ORDER BY time DESC LIMIT 5 OFFSET 1 SLIMIT 2 SOFFSET 3 tz('UTC')"
    );
}

#[test]
fn into_targets() {
    let into = |text: &str| select(&format!("SELECT a INTO {text} FROM m")).into.expect("a target");
    let target = |database: Option<&str>, rp: Option<&str>, measurement: Option<&str>| Target {
        database: database.map(Into::into),
        retention_policy: rp.map(Into::into),
        measurement: measurement.map(Into::into),
    };
    assert_eq!(into("m2"), target(None, None, Some("m2")));
    assert_eq!(into("rp.m2"), target(None, Some("rp"), Some("m2")));
    assert_eq!(into("db.rp.m2"), target(Some("db"), Some("rp"), Some("m2")));
    assert_eq!(into("db..m2"), target(Some("db"), None, Some("m2")));
    assert_eq!(into("db.rp.:MEASUREMENT"), target(Some("db"), Some("rp"), None));
    assert_eq!(into("db..:MEASUREMENT"), target(Some("db"), None, None));
    assert_eq!(canonical("SELECT a INTO \"db\"..:measurement FROM /.*/"), "SELECT a INTO db..:MEASUREMENT FROM /.*/");
}

#[test]
fn identifiers_quote_only_when_needed() {
    let s = select(r#"SELECT "a;b", "with \" quote", "from", "time", "_x1", "1abc", "é", "" FROM "a\\b""#);
    let names: Vec<String> = s.fields.iter().map(|f| f.expr.to_string()).collect();
    assert_eq!(names, [r#""a;b""#, r#""with \" quote""#, r#""from""#, "time", "_x1", r#""1abc""#, r#""é""#, r#""""#]);
    assert_eq!(s.sources[0], measurement(None, None, named("a\\b")));
    assert_eq!(s.sources[0].to_string(), r#""a\\b""#);
}

#[test]
fn statements_split_on_semicolons_outside_quotes() {
    let query = round_trip("SELECT \"a;b\" FROM m WHERE x = 'c;d' AND y =~ /e;f/; SELECT b FROM \"n;\" ;; ");
    assert_eq!(query.statements.len(), 2);
    assert_eq!(query.to_string(), "SELECT \"a;b\" FROM m WHERE x = 'c;d' AND y =~ /e;f/; SELECT b FROM \"n;\"");
    assert_eq!(parse("").expect("empty").statements.len(), 0);
    let parsed: sensordb_influxql::Statement = "SELECT a FROM m;".parse().expect("FromStr of one statement");
    assert_eq!(parsed.to_string(), "SELECT a FROM m");
    assert!("SELECT a FROM m; SELECT b FROM m".parse::<sensordb_influxql::Statement>().is_err(), "two statements are not one");
    assert_eq!(parse(" ; ;").expect("only separators").statements.len(), 0);
}

#[test]
fn comments_are_whitespace() {
    let s = select("SELECT a -- the field\n FROM /* the measurement; */ m WHERE b = 1 -- trailing");
    assert_eq!(s.to_string(), "SELECT a FROM m WHERE b = 1");
    assert_eq!(
        select("SELECT a FROM m WHERE b = 1--2").condition,
        Some(binary(var("b"), BinaryOp::Eq, Expr::Integer(1))),
        "`--` starts a comment even after a number"
    );
}
