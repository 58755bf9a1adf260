//! Round trip over generated queries: a generator writes valid InfluxQL from the grammar
//! (random clauses, nesting, literals of every kind, identifiers that need quoting, every
//! spelling of keywords and operators); each text must parse, and its rendering must parse to
//! the same tree and render the same.

mod common;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

/// Names that are plain identifiers (no keyword, no `time`, no `fill`/`tz` surprises).
const PLAIN: &[&str] = &["cpu", "host", "value", "usage_user", "_x", "a1", "Load", "fleet"];

fn quote(name: &str, quote: char) -> String {
    let mut out = String::from(quote);
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// An identifier as written: plain, or double-quoted with any content.
fn ident() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(PLAIN).prop_map(str::to_string),
        1 => prop_oneof![
            Just("select".to_string()),
            Just("time x".to_string()),
            Just("a;b".to_string()),
            Just("with \" quote".to_string()),
            Just("back\\slash".to_string()),
            Just("new\nline".to_string()),
            Just(String::new()),
            Just("é".to_string()),
            "[a-z;\" \\\\/.*'é]{0,6}",
        ]
        .prop_map(|name| quote(&name, '"')),
    ]
    .boxed()
}

fn keyword(word: &'static str) -> BoxedStrategy<String> {
    prop_oneof![Just(word.to_string()), Just(word.to_lowercase()), Just(format!("{}{}", &word[..1], word[1..].to_lowercase()))].boxed()
}

fn number() -> BoxedStrategy<String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u32..1000).prop_map(|n| n.to_string()),
        (0.0f64..1e12).prop_map(|f| format!("{f}")),
        (0.0f64..1e300).prop_map(|f| format!("{f:e}")),
        Just(".5".to_string()),
        Just("7.".to_string()),
    ]
    .boxed()
}

fn duration() -> BoxedStrategy<String> {
    let unit = prop::sample::select(&["ns", "u", "µ", "ms", "s", "m", "h", "d", "w"][..]);
    prop::collection::vec((1u32..1000, unit), 1..3).prop_map(|parts| parts.iter().map(|(n, u)| format!("{n}{u}")).collect()).boxed()
}

fn string() -> BoxedStrategy<String> {
    prop_oneof![Just("2016-01-01T00:00:00Z".to_string()), "[a-z;'\"\\\\\n /é]{0,8}"].prop_map(|s| quote(&s, '\'')).boxed()
}

fn regex() -> BoxedStrategy<String> {
    prop::sample::select(&["/^x$/", "/cpu.*/", "/a\\/b/", "/\\d+/", "/;/", "/(a|b)[0-9]{2}/", "/a\\\\b/"][..])
        .prop_map(str::to_string)
        .boxed()
}

/// An operand that may follow a unary minus.
fn signable(expr: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![
        (0u64..=i64::MAX as u64).prop_map(|n| n.to_string()),
        (0.0f64..1e9).prop_map(|f| format!("{f}")),
        duration(),
        ident(),
        expr.prop_map(|e| format!("({e})")),
    ]
    .boxed()
}

/// An arithmetic expression (allowed in the SELECT list).
fn arithmetic() -> BoxedStrategy<String> {
    let leaf = prop_oneof![number(), duration(), string(), ident(), Just("true".to_string()), Just("FALSE".to_string())];
    leaf.prop_recursive(4, 24, 3, |inner| {
        let op = prop::sample::select(&["+", "-", "*", "/", "%", "&", "|", "^"][..]);
        let tight_op = prop::sample::select(&["+", "*", "/", "%", "&", "|", "^"][..]);
        let name = prop_oneof![prop::sample::select(&["mean", "MAX", "derivative", "top", "now"][..]).prop_map(str::to_string), ident()];
        let cast = prop::sample::select(&["::field", "::tag", "::float", "::INTEGER", "::string"][..]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            // No `-` here: `a--5` starts a comment.
            (inner.clone(), tight_op, inner.clone()).prop_map(|(a, op, b)| format!("{a}{op}{b}")),
            inner.clone().prop_map(|e| format!("( {e} )")),
            signable(inner.clone()).prop_map(|e| format!("-{e}")),
            signable(inner.clone()).prop_map(|e| format!("+ {e}")),
            (name, prop::collection::vec(inner.clone(), 0..3)).prop_map(|(n, args)| format!("{n}({})", args.join(", "))),
            (ident(), cast).prop_map(|(i, c)| format!("{i}{c}")),
            inner.prop_map(|e| format!("count(distinct({e}))")),
        ]
    })
    .boxed()
}

/// A condition (WHERE).
fn condition() -> BoxedStrategy<String> {
    let comparison = prop_oneof![
        (arithmetic(), prop::sample::select(&["=", "!=", "<>", "<", "<=", ">", ">="][..]), arithmetic())
            .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (ident(), prop::sample::select(&["=~", "!~"][..]), regex()).prop_map(|(a, op, r)| format!("{a} {op} {r}")),
        Just("time > now() - 1h".to_string()),
        Just("time >= 1700000000000ms".to_string()),
    ];
    comparison
        .prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                (inner.clone(), keyword("AND"), inner.clone()).prop_map(|(a, k, b)| format!("{a} {k} {b}")),
                (inner.clone(), keyword("OR"), inner.clone()).prop_map(|(a, k, b)| format!("{a} {k} {b}")),
                inner.prop_map(|e| format!("({e})")),
            ]
        })
        .boxed()
}

fn measurement() -> BoxedStrategy<String> {
    prop_oneof![
        ident(),
        regex(),
        (ident(), ident(), ident()).prop_map(|(d, r, m)| format!("{d}.{r}.{m}")),
        (ident(), ident()).prop_map(|(d, m)| format!("{d}..{m}")),
        (ident(), regex()).prop_map(|(r, re)| format!("{r}.{re}")),
    ]
    .boxed()
}

/// A measurement without database or retention policy (DROP SERIES and DELETE take no other).
fn local_measurement() -> BoxedStrategy<String> {
    prop_oneof![ident(), regex()].boxed()
}

fn field() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (arithmetic(), proptest::option::of(ident())).prop_map(|(e, a)| match a {
            Some(alias) => format!("{e} AS {alias}"),
            None => e,
        }),
        1 => Just("*".to_string()),
        1 => Just("*::tag".to_string()),
        1 => regex(),
        1 => ident().prop_map(|i| format!("DISTINCT {i}")),
    ]
    .boxed()
}

/// GROUP BY entries: tags, `*`, regexes, and at most one `time()` (first or last).
fn dimensions() -> BoxedStrategy<Vec<String>> {
    let tag = prop_oneof![prop::sample::select(PLAIN).prop_map(str::to_string), Just("*".to_string()), regex()];
    (prop::collection::vec(tag, 0..3), proptest::option::of(time_dimension()), any::<bool>())
        .prop_map(|(mut dims, time, first)| {
            if let Some(time) = time {
                if first {
                    dims.insert(0, time);
                } else {
                    dims.push(time);
                }
            }
            dims
        })
        .boxed()
}

fn time_dimension() -> BoxedStrategy<String> {
    prop_oneof![
        duration().prop_map(|d| format!("time({d})")),
        (duration(), duration()).prop_map(|(d, o)| format!("time({d}, -{o})")),
        duration().prop_map(|d| format!("time({d},now())")),
    ]
    .boxed()
}

fn tail() -> BoxedStrategy<String> {
    let fill = prop::sample::select(&["", " fill(null)", " fill(none)", " fill(previous)", " fill(linear)", " fill(0)", " fill(-2.5)"][..]);
    let order = prop::sample::select(&["", " ORDER BY time", " order by time desc", " ORDER BY DESC", " ORDER BY \"time\" ASC"][..]);
    let counts = prop::collection::vec(proptest::option::of(0u64..1000), 4);
    let tz = prop::sample::select(&["", " tz('Europe/Paris')", " TZ('UTC')"][..]);
    (fill, order, counts, tz)
        .prop_map(|(fill, order, counts, tz)| {
            let mut out = format!("{fill}{order}");
            for (keyword, count) in ["LIMIT", "OFFSET", "SLIMIT", "SOFFSET"].iter().zip(counts) {
                if let Some(n) = count {
                    out.push_str(&format!(" {keyword} {n}"));
                }
            }
            out + tz
        })
        .boxed()
}

fn select_statement() -> BoxedStrategy<String> {
    let source = measurement().prop_recursive(2, 4, 1, |inner| {
        (prop::collection::vec(field(), 1..3), inner, proptest::option::of(condition()))
            .prop_map(|(fields, from, cond)| {
                let cond = cond.map(|c| format!(" WHERE {c}")).unwrap_or_default();
                format!("(SELECT {} FROM {from}{cond})", fields.join(", "))
            })
            .boxed()
    });
    (
        prop::collection::vec(field(), 1..4),
        proptest::option::of(prop_oneof![ident(), (ident(), ident()).prop_map(|(d, r)| format!("{d}.{r}.:MEASUREMENT"))]),
        prop::collection::vec(source, 1..3),
        proptest::option::of(condition()),
        dimensions(),
        tail(),
    )
        .prop_map(|(fields, into, sources, cond, dims, tail)| {
            let into = into.map(|t| format!(" INTO {t}")).unwrap_or_default();
            let cond = cond.map(|c| format!(" WHERE {c}")).unwrap_or_default();
            let dims = if dims.is_empty() { String::new() } else { format!(" GROUP BY {}", dims.join(",")) };
            format!("SELECT {}{into} FROM {}{cond}{dims}{tail}", fields.join(","), sources.join(", "))
        })
        .boxed()
}

fn other_statement() -> BoxedStrategy<String> {
    let on = proptest::option::of(ident()).prop_map(|d| d.map(|d| format!(" ON {d}")).unwrap_or_default());
    let from = proptest::option::of(prop::collection::vec(measurement(), 1..3))
        .prop_map(|m| m.map(|m| format!(" FROM {}", m.join(","))).unwrap_or_default());
    let local_from = proptest::option::of(prop::collection::vec(local_measurement(), 1..3))
        .prop_map(|m| m.map(|m| format!(" FROM {}", m.join(","))).unwrap_or_default());
    let cond = proptest::option::of(condition()).prop_map(|c| c.map(|c| format!(" WHERE {c}")).unwrap_or_default());
    let limit = proptest::option::of(0u64..100).prop_map(|l| l.map(|l| format!(" LIMIT {l} OFFSET {l}")).unwrap_or_default());
    let key = prop_oneof![
        ident().prop_map(|k| format!("= {k}")),
        ident().prop_map(|k| format!("!= {k}")),
        regex().prop_map(|r| format!("=~ {r}")),
        prop::collection::vec(ident(), 1..3).prop_map(|k| format!("IN ({})", k.join(","))),
    ];
    prop_oneof![
        Just("SHOW DATABASES".to_string()),
        (
            on.clone(),
            proptest::option::of(prop_oneof![regex().prop_map(|r| format!("=~ {r}")), ident().prop_map(|m| format!("= {m}"))]),
            cond.clone(),
            limit.clone()
        )
            .prop_map(|(on, with, cond, limit)| format!(
                "SHOW MEASUREMENTS{on}{}{cond}{limit}",
                with.map(|w| format!(" WITH MEASUREMENT {w}")).unwrap_or_default()
            )),
        (on.clone(), from.clone(), cond.clone(), limit.clone())
            .prop_map(|(on, from, cond, limit)| format!("show tag keys{on}{from}{cond}{limit} SLIMIT 2")),
        (on.clone(), from.clone(), key, cond.clone(), limit.clone())
            .prop_map(|(on, from, key, cond, limit)| format!("SHOW TAG VALUES{on}{from} WITH KEY {key}{cond}{limit}")),
        (on.clone(), from.clone(), limit.clone()).prop_map(|(on, from, limit)| format!("SHOW FIELD KEYS{on}{from}{limit}")),
        on.clone().prop_map(|on| format!("SHOW RETENTION POLICIES{on}")),
        (on, from.clone(), cond.clone(), limit).prop_map(|(on, from, cond, limit)| format!("SHOW SERIES{on}{from}{cond}{limit}")),
        (
            ident(),
            proptest::option::of(duration()),
            proptest::option::of(1u32..5),
            proptest::option::of(duration()),
            proptest::option::of(ident())
        )
            .prop_map(|(name, d, r, s, n)| {
                let opts = [
                    d.map(|d| format!(" DURATION {d}")),
                    r.map(|r| format!(" REPLICATION {r}")),
                    s.map(|s| format!(" SHARD DURATION {s}")),
                    n.map(|n| format!(" NAME {n}")),
                ];
                let opts: String = opts.into_iter().flatten().collect();
                if opts.is_empty() {
                    format!("CREATE DATABASE {name}")
                } else {
                    format!("CREATE DATABASE {name} WITH{opts}")
                }
            }),
        ident().prop_map(|n| format!("DROP DATABASE {n}")),
        ident().prop_map(|n| format!("drop measurement {n}")),
        (local_from.clone(), condition()).prop_map(|(from, c)| format!("DROP SERIES{from} WHERE {c}")),
        (prop::collection::vec(local_measurement(), 1..3), cond).prop_map(|(m, cond)| format!("DELETE FROM {}{cond}", m.join(", "))),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn generated_selects_parse_and_round_trip(text in select_statement()) {
        common::round_trip(&text);
    }

    #[test]
    fn generated_other_statements_parse_and_round_trip(text in other_statement()) {
        common::round_trip(&text);
    }

    #[test]
    fn generated_queries_of_several_statements_round_trip(texts in prop::collection::vec(prop_oneof![select_statement(), other_statement()], 1..4)) {
        let query = common::round_trip(&texts.join(" ;\n"));
        prop_assert_eq!(query.statements.len(), texts.len());
    }
}
