//! Every InfluxQL query template of TSBS's query generator (`tsbs_generate_queries
//! --format=influx`, `cmd/tsbs_generate_queries/databases/influx/{iot,devops}.go`), filled in
//! the way the generator fills it (fleets, truck and host names, RFC 3339 times, the same
//! newlines and tabs), plus the examples of the brief. Each must parse, round-trip through the
//! rendering, and have the structure the executor will rely on.

mod common;

use common::{round_trip, select};
use sensordb_influxql::{
    BinaryOp, Dimension, Duration, Expr, Fill, MeasurementName, SelectStatement, SortOrder, Source, Statement, Target,
};

const START: &str = "2016-01-01T00:00:00Z";
const END: &str = "2016-01-02T00:00:00Z";

fn fill(template: &str) -> String {
    template.replace("{start}", START).replace("{end}", END)
}

/// The subquery of the single FROM source.
fn inner(select: &SelectStatement) -> &SelectStatement {
    match select.sources.as_slice() {
        [Source::Subquery(inner)] => inner,
        other => panic!("expected one subquery source, got {other:?}"),
    }
}

fn tags(select: &SelectStatement) -> Vec<&str> {
    select.group_by.iter().filter_map(|d| if let Dimension::Tag(t) = d { Some(t.as_str()) } else { None }).collect()
}

fn measurement(select: &SelectStatement) -> &str {
    match select.sources.as_slice() {
        [Source::Measurement(m)] => match &m.name {
            MeasurementName::Name(name) => name,
            MeasurementName::Regex(_) => panic!("regex source"),
        },
        other => panic!("expected one measurement, got {other:?}"),
    }
}

const TEN_MINUTES: Dimension = Dimension::Time { interval: Duration(10 * Duration::MINUTE), offset: None };
const ONE_DAY: Dimension = Dimension::Time { interval: Duration(Duration::DAY), offset: None };

#[test]
fn iot_last_loc() {
    let s = select("SELECT \"latitude\", \"longitude\" \n\t\tFROM \"readings\" \n\t\tWHERE \"fleet\"='South' \n\t\tGROUP BY \"name\",\"driver\" \n\t\tORDER BY \"time\" \n\t\tLIMIT 1");
    assert_eq!((measurement(&s), tags(&s), s.order, s.limit), ("readings", vec!["name", "driver"], SortOrder::Ascending, Some(1)));
    let s = select("SELECT \"name\", \"driver\", \"latitude\", \"longitude\" \n\t\tFROM \"readings\" \n\t\tWHERE (\"name\" = 'truck_9' or \"name\" = 'truck_3' or \"name\" = 'truck_5') \n\t\tORDER BY \"time\" \n\t\tLIMIT 1");
    let Some(Expr::Paren(inner)) = &s.condition else { panic!("{:?}", s.condition) };
    let Expr::Binary(or) = inner.as_ref() else { panic!() };
    assert_eq!(or.op, BinaryOp::Or);
    assert_eq!(s.fields.len(), 4);
}

#[test]
fn iot_low_fuel_and_high_load() {
    let s = select("SELECT \"name\", \"driver\", \"fuel_state\" \n\t\tFROM \"diagnostics\" \n\t\tWHERE \"fuel_state\" <= 0.1 AND \"fleet\" = 'South' \n\t\tGROUP BY \"name\" \n\t\tORDER BY \"time\" DESC \n\t\tLIMIT 1");
    assert_eq!((s.order, s.limit, tags(&s)), (SortOrder::Descending, Some(1), vec!["name"]));
    let s = select("SELECT \"name\", \"driver\", \"current_load\", \"load_capacity\" \n\t\tFROM (SELECT  \"current_load\", \"load_capacity\" \n\t\t FROM \"diagnostics\" WHERE fleet = 'South' \n\t\t GROUP BY \"name\",\"driver\" \n\t\t ORDER BY \"time\" DESC \n\t\t LIMIT 1) \n\t\tWHERE \"current_load\" >= 0.9 * \"load_capacity\" \n\t\tGROUP BY \"name\" \n\t\tORDER BY \"time\" DESC");
    assert_eq!(inner(&s).limit, Some(1));
    assert_eq!(
        s.condition.as_ref().map(ToString::to_string).as_deref(),
        Some("current_load >= 0.9 * load_capacity"),
        "* binds tighter than >="
    );
}

#[test]
fn iot_stationary_trucks_subtracts_a_duration_from_a_time_string() {
    let s = select(&fill("SELECT \"name\", \"driver\" \n\t\tFROM(SELECT mean(\"velocity\") as mean_velocity \n\t\t FROM \"readings\" \n\t\t WHERE time > '{end}' - 10m AND time <= '{end}' \n\t\t GROUP BY time(10m),\"name\",\"driver\",\"fleet\"  \n\t\t LIMIT 1) \n\t\tWHERE \"fleet\" = 'West' AND \"mean_velocity\" < 1 \n\t\tGROUP BY \"name\""));
    let sub = inner(&s);
    assert_eq!(sub.fields[0].alias.as_deref(), Some("mean_velocity"));
    assert_eq!(sub.group_by[0], TEN_MINUTES);
    assert_eq!(sub.condition.as_ref().map(ToString::to_string), Some(format!("time > '{END}' - 10m AND time <= '{END}'")));
}

#[test]
fn iot_long_sessions_nest_two_subqueries() {
    for hours in [22, 60] {
        let s = select(&fill(&format!("SELECT \"name\",\"driver\" \n\t\tFROM(SELECT count(*) AS ten_min \n\t\t FROM(SELECT mean(\"velocity\") AS mean_velocity \n\t\t  FROM readings \n\t\t  WHERE \"fleet\" = 'West' AND time > '{{start}}' AND time <= '{{end}}' \n\t\t  GROUP BY time(10m),\"name\",\"driver\") \n\t\t WHERE \"mean_velocity\" > 1 \n\t\t GROUP BY \"name\",\"driver\") \n\t\tWHERE ten_min_mean_velocity > {hours}")));
        let middle = inner(&s);
        assert_eq!(middle.fields[0].expr, Expr::Call(sensordb_influxql::Call { name: "count".into(), args: vec![Expr::Wildcard(None)] }));
        let innermost = inner(middle);
        assert_eq!((measurement(innermost), innermost.group_by.len()), ("readings", 3));
    }
}

#[test]
fn iot_fuel_consumption_and_driving_duration() {
    let s = select("SELECT mean(\"fuel_consumption\") AS \"mean_fuel_consumption\", mean(\"nominal_fuel_consumption\") AS \"nominal_fuel_consumption\" \n\t\tFROM \"readings\" \n\t\tWHERE \"velocity\" > 1 \n\t\tGROUP BY \"fleet\"");
    assert_eq!(s.fields.len(), 2);
    let s = select(&fill("SELECT count(\"mv\")/6 as \"hours driven\" \n\t\tFROM (SELECT mean(\"velocity\") as \"mv\" \n\t\t FROM \"readings\" \n\t\t WHERE time > '{start}' AND time < '{end}' \n\t\t GROUP BY time(10m),\"fleet\", \"name\", \"driver\") \n\t\tWHERE time > '{start}' AND time < '{end}' \n\t\tGROUP BY time(1d),\"fleet\", \"name\", \"driver\""));
    assert_eq!(s.fields[0].alias.as_deref(), Some("hours driven"));
    assert_eq!(s.fields[0].to_string(), "count(mv) / 6 AS \"hours driven\"");
    assert_eq!((s.group_by[0].clone(), tags(&s)), (ONE_DAY, vec!["fleet", "name", "driver"]));
}

#[test]
fn iot_driving_session_is_two_statements_with_into_and_four_levels() {
    let query = round_trip(&fill("SELECT \"elapsed\" \n\t\tINTO \"random_measure2_1\" \n\t\tFROM (SELECT difference(\"difka\"), elapsed(\"difka\", 1m) \n\t\t FROM (SELECT \"difka\" \n\t\t  FROM (SELECT difference(\"mv\") AS difka \n\t\t   FROM (SELECT floor(mean(\"velocity\")/10)/floor(mean(\"velocity\")/10) AS \"mv\" \n\t\t    FROM \"readings\" \n\t\t    WHERE \"name\"!='' AND time > '{start}' AND time < '{end}' \n\t\t    GROUP BY time(10m), \"name\" fill(0)) \n\t\t   GROUP BY \"name\") \n\t\t  WHERE \"difka\"!=0 \n\t\t  GROUP BY \"name\") \n\t\t GROUP BY \"name\") \n\t\tWHERE \"difference\" = -2 \n\t\tGROUP BY \"name\"; \n\t\tSELECT mean(\"elapsed\") \n\t\tFROM \"random_measure2_1\" \n\t\tWHERE time > '{start}' AND time < '{end}' \n\t\tGROUP BY time(1d),\"name\""));
    let [Statement::Select(first), Statement::Select(second)] = query.statements.as_slice() else { panic!("{query:?}") };
    assert_eq!(first.into, Some(Target { database: None, retention_policy: None, measurement: Some("random_measure2_1".into()) }));
    assert_eq!(measurement(second), "random_measure2_1");
    let deepest = inner(inner(inner(inner(first))));
    assert_eq!(deepest.fill, Fill::Integer(0));
    assert_eq!(deepest.fields[0].to_string(), "floor(mean(velocity) / 10) / floor(mean(velocity) / 10) AS mv");
    assert_eq!(first.condition.as_ref().map(ToString::to_string).as_deref(), Some("difference = -2"));
}

#[test]
fn iot_load_activity_and_breakdowns() {
    let s = select("SELECT mean(\"ml\") AS mean_load_percentage \n\t\tFROM (SELECT \"current_load\"/\"load_capacity\" AS \"ml\" \n\t\t FROM \"diagnostics\" \n\t\t GROUP BY \"name\", \"fleet\", \"model\") \n\t\tGROUP BY \"fleet\", \"model\"");
    assert_eq!(tags(inner(&s)), vec!["name", "fleet", "model"]);
    let s = select(&fill("SELECT count(\"ms\")/144 \n\t\tFROM (SELECT mean(\"status\") AS ms \n\t\t FROM \"diagnostics\" \n\t\t WHERE time >= '{start}' AND time < '{end}' \n\t\t GROUP BY time(10m), \"model\", \"fleet\") \n\t\tWHERE time >= '{start}' AND time < '{end}' AND \"ms\"<1 \n\t\tGROUP BY time(1d), \"model\", \"fleet\""));
    assert_eq!(s.group_by[0], ONE_DAY);
    let s = select(&fill("SELECT count(\"state_changed\") \n\t\tFROM (SELECT difference(\"broken_down\") AS \"state_changed\" \n\t\t FROM (SELECT floor(2*(sum(\"nzs\")/count(\"nzs\")))/floor(2*(sum(\"nzs\")/count(\"nzs\"))) AS \"broken_down\" \n\t\t  FROM (SELECT \"model\", \"status\"/\"status\" AS nzs \n\t\t   FROM \"diagnostics\" \n\t\t   WHERE time >= '{start}' AND time < '{end}') \n\t\t  WHERE time >= '{start}' AND time < '{end}' \n\t\t  GROUP BY time(10m),\"model\") \n\t\t GROUP BY \"model\") \n\t\tWHERE \"state_changed\" = 1 \n\t\tGROUP BY \"model\""));
    assert_eq!(measurement(inner(inner(inner(&s)))), "diagnostics");
}

#[test]
fn brief_examples() {
    let s = select("SELECT \"name\", \"driver\", \"latitude\", \"longitude\" FROM \"readings\" WHERE \"fleet\" = 'South' AND time >= '2016-01-01T00:00:00Z' AND time < '2016-01-01T12:00:00Z' AND \"name\" = 'truck_1' ORDER BY time DESC LIMIT 1");
    assert_eq!((s.order, s.limit), (SortOrder::Descending, Some(1)));
    let s = select("SELECT \"name\", \"driver\" FROM (SELECT mean(\"fuel_state\") AS \"fuel_state\" FROM \"diagnostics\" WHERE time >= '2016-01-01T00:00:00Z' GROUP BY \"name\",\"driver\" ) WHERE \"fuel_state\" <= 0.1");
    assert_eq!(tags(inner(&s)), vec!["name", "driver"]);
    let s = select("SELECT count(\"mean_load\") FROM (SELECT mean(\"current_load\") AS \"mean_load\" FROM \"diagnostics\" WHERE time >= now() - 12h GROUP BY time(10m),\"name\",\"fleet\",\"model\",\"load_capacity\" fill(none)) WHERE \"mean_load\" >= 0.9 * \"load_capacity\" GROUP BY \"fleet\",\"model\"");
    assert_eq!(inner(&s).fill, Fill::None);
    assert_eq!(inner(&s).condition.as_ref().map(ToString::to_string).as_deref(), Some("time >= now() - 12h"));
    let s = select("SELECT count(*) FROM (SELECT mean(\"velocity\") AS mv FROM readings GROUP BY time(10m), \"name\")");
    assert_eq!(s.fields[0].to_string(), "count(*)");
}

#[test]
fn devops_templates() {
    let hosts = "(hostname = 'host_9' or hostname = 'host_5' or hostname = 'host_1' or hostname = 'host_7' or hostname = 'host_2')";
    let queries = [
        format!("SELECT max(usage_user), max(usage_system) from cpu where {hosts} and time >= '{START}' and time < '{END}' group by time(1m)"),
        format!("SELECT max(usage_user) from cpu WHERE time < '{END}' group by time(1m) limit 5"),
        format!("SELECT mean(usage_user), mean(usage_system), mean(usage_idle), mean(usage_nice), mean(usage_iowait) from cpu where time >= '{START}' and time < '{END}' group by time(1h),hostname"),
        format!("SELECT max(usage_user),max(usage_system),max(usage_idle),max(usage_nice),max(usage_iowait),max(usage_irq),max(usage_softirq),max(usage_steal),max(usage_guest),max(usage_guest_nice) from cpu where {hosts} and time >= '{START}' and time < '{END}' group by time(1m)"),
        "SELECT * from cpu group by \"hostname\" order by time desc limit 1".to_string(),
        format!("SELECT * from cpu where usage_user > 90.0  and time >= '{START}' and time < '{END}'"),
        format!("SELECT * from cpu where usage_user > 90.0 and {hosts} and time >= '{START}' and time < '{END}'"),
    ];
    for text in &queries {
        let s = select(text);
        assert_eq!(measurement(&s), "cpu", "{text}");
    }
    let last_point = select(&queries[4]);
    assert_eq!((last_point.fields[0].expr.clone(), last_point.order), (Expr::Wildcard(None), SortOrder::Descending));
    let mean = select(&queries[2]);
    assert_eq!(
        mean.group_by,
        vec![Dimension::Time { interval: Duration(Duration::HOUR), offset: None }, Dimension::Tag("hostname".into())]
    );
}

#[test]
fn grafana_queries() {
    let s = select("SELECT mean(\"value\") FROM \"m\" WHERE (\"host\" = 'a' AND \"dc\" =~ /^x$/) AND time >= 1700000000000ms and time <= 1700003600000ms GROUP BY time(10s), \"host\" fill(null)");
    assert_eq!(s.fill, Fill::Null);
    assert_eq!(
        s.condition.as_ref().map(ToString::to_string).as_deref(),
        Some("(host = 'a' AND dc =~ /^x$/) AND time >= 1700000000s AND time <= 1700003600s"),
        "durations render in their largest whole unit"
    );
    let Some(Expr::Binary(and)) = &s.condition else { panic!() };
    let Expr::Binary(time_upper) = &and.rhs else { panic!() };
    assert_eq!(time_upper.rhs, Expr::Duration(Duration(1_700_003_600_000 * Duration::MILLISECOND)));
}
