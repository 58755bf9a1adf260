//! Tests of the fast line-protocol parser: property tests against the influxdb-line-protocol
//! crate (same answers on valid lines, refusals on invalid ones) and hand-written examples.

use super::*;
use proptest::prelude::*;

type Parsed = (String, Vec<(String, String)>, Vec<(String, FieldValue<'static>)>, Option<i64>);

fn owned(fields: &[Field<'_>]) -> Vec<(String, FieldValue<'static>)> {
    fields
        .iter()
        .map(|f| {
            let value = match &f.value {
                FieldValue::String(s) => FieldValue::String(Cow::Owned(s.to_string())),
                FieldValue::F64(x) => FieldValue::F64(*x),
                FieldValue::I64(x) => FieldValue::I64(*x),
                FieldValue::U64(x) => FieldValue::U64(*x),
                FieldValue::Bool(x) => FieldValue::Bool(*x),
            };
            (f.key.to_string(), value)
        })
        .collect()
}

fn ours(line: &str) -> Option<Parsed> {
    let mut fields = Vec::new();
    let parsed = parse_line(line, &mut fields)?;
    let (measurement, tags) = parse_series(parsed.series_text).expect("series text of an accepted line");
    Some((measurement, tags, owned(&fields), parsed.timestamp))
}

/// The crate's reading of `line` as one record under InfluxDB 1.8's rules (`.5` and `1.` are
/// floats; no unescaped comma in a field key; finite floats only), or `None` when it refuses it.
fn reference(line: &str) -> Option<Parsed> {
    use influxdb_line_protocol::FieldValue as F;
    let text = super::super::influxdb_1_8::text_for_the_crate(line).ok()?;
    let mut lines = influxdb_line_protocol::parse_lines(&text);
    let parsed = lines.next()?.ok()?;
    if lines.next().is_some() {
        return None;
    }
    let tags = parsed.series.tag_set.iter().flatten().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if parsed.field_set.iter().any(|(_, v)| matches!(v, F::F64(x) if !x.is_finite())) {
        return None;
    }
    let fields = parsed
        .field_set
        .iter()
        .map(|(k, v)| {
            let value = match v {
                F::F64(x) => FieldValue::F64(*x),
                F::I64(x) => FieldValue::I64(*x),
                F::U64(x) => FieldValue::U64(*x),
                F::Boolean(x) => FieldValue::Bool(*x),
                F::String(s) => FieldValue::String(Cow::Owned(s.to_string())),
            };
            (k.to_string(), value)
        })
        .collect();
    Some((parsed.series.measurement.to_string(), tags, fields, parsed.timestamp))
}

/// Equality with floats compared bit for bit.
fn same(a: &Parsed, b: &Parsed) -> bool {
    a.0 == b.0
        && a.1 == b.1
        && a.3 == b.3
        && a.2.len() == b.2.len()
        && a.2.iter().zip(&b.2).all(|(x, y)| {
            x.0 == y.0
                && match (&x.1, &y.1) {
                    (FieldValue::F64(p), FieldValue::F64(q)) => p.to_bits() == q.to_bits(),
                    (p, q) => p == q,
                }
        })
}

/// Checks one line: whatever we accept, the crate accepts the same way.
fn check(line: &str) -> Result<bool, TestCaseError> {
    let series_prefix = super::super::series_prefix(line);
    match ours(line) {
        Some(fast) => {
            let slow = reference(line);
            prop_assert!(slow.is_some(), "we accept what the crate refuses: {line:?} -> {fast:?}");
            let slow = slow.expect("checked");
            prop_assert!(same(&fast, &slow), "{line:?}: ours {fast:?} crate {slow:?}");
            let mut fields = Vec::new();
            let read = parse_line(line, &mut fields).expect("accepted");
            let text = read.series_text;
            prop_assert_eq!(text, series_prefix);
            // Read again with its series text known (a later line of the same series): the same.
            let owned_fields = owned(&fields);
            let again = parse_line_knowing(line, &mut fields, &|t| t == text);
            prop_assert_eq!(again, Some(read));
            prop_assert_eq!(owned(&fields), owned_fields);
            Ok(true)
        }
        None => Ok(false),
    }
}

fn escape(text: &str, special: &[char]) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if special.contains(&c) || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9_ ,=\"\\\\é.\\-]{1,8}").expect("regex")
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| format!("{v}i")),
        any::<u64>().prop_map(|v| format!("{v}u")),
        any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(|v| format!("{v}")),
        (-100000i64..100000, 0u32..6).prop_map(|(m, k)| format!("{}", m as f64 / 10f64.powi(k as i32))),
        (-99999i64..99999, 0u32..12, -30i32..30).prop_map(|(m, d, e)| format!("{m}.{d}e{e}")),
        proptest::string::string_regex("[0-9]{1,25}(\\.[0-9]{1,25})?").expect("regex"),
        proptest::sample::select(vec!["t", "T", "true", "True", "TRUE", "f", "F", "false", "False", "FALSE"]).prop_map(str::to_string),
        proptest::string::string_regex("[a-z \",=\\\\é]{0,8}")
            .expect("regex")
            .prop_map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))),
    ]
}

fn valid_line() -> impl Strategy<Value = String> {
    (
        name(),
        proptest::collection::vec((name(), name()), 0..4),
        proptest::collection::vec((name(), value()), 1..5),
        proptest::option::of(any::<i64>()),
        0usize..3,
    )
        .prop_map(|(m, tags, fields, ts, spaces)| {
            let mut line = escape(&m, &[',', ' ']);
            for (k, v) in tags {
                line.push(',');
                line.push_str(&escape(&k, &[',', '=', ' ']));
                line.push('=');
                line.push_str(&escape(&v, &[',', '=', ' ']));
            }
            line.push_str(&" ".repeat(spaces + 1));
            let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("{}={v}", escape(&k, &[',', '=', ' ']))).collect();
            line.push_str(&fields.join(","));
            if let Some(ts) = ts {
                line.push_str(&" ".repeat(spaces + 1));
                line.push_str(&ts.to_string());
            }
            line
        })
}

/// Lines made of fragments that are often invalid or odd.
fn soup() -> impl Strategy<Value = String> {
    let piece = proptest::sample::select(vec![
        "m",
        "a",
        ",",
        " ",
        "  ",
        "=",
        "\\",
        "\"",
        "1",
        "-",
        ".",
        "e",
        "E",
        "+",
        "i",
        "u",
        "t",
        "true",
        "F",
        "x",
        "\t",
        "\n",
        "\0",
        "\r",
        "é",
        "9223372036854775808",
        "18446744073709551616",
        "#",
    ]);
    proptest::collection::vec(piece, 1..24).prop_map(|pieces| pieces.concat())
}

fn mutated() -> impl Strategy<Value = String> {
    (valid_line(), any::<prop::sample::Index>(), soup()).prop_map(|(line, at, extra)| {
        let mut cut = at.index(line.len() + 1);
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}{extra}{}", &line[..cut], &line[cut..])
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn fast_parser_agrees_with_the_crate(line in valid_line()) {
        let trimmed = line.trim_start();
        prop_assume!(!trimmed.starts_with('#'));
        let accepted = check(trimmed)?;
        // Valid lines are the hot path: the fast reader must take every one the crate takes.
        prop_assert_eq!(accepted, reference(trimmed).is_some(), "{:?}", trimmed);
    }

    #[test]
    fn fast_parser_refuses_what_the_crate_refuses(line in prop_oneof![soup(), mutated()]) {
        let trimmed = line.trim_start();
        prop_assume!(!trimmed.is_empty() && !trimmed.starts_with('#'));
        check(trimmed)?;
    }
}

#[test]
fn examples() {
    for line in [
        "m f=1",
        "m,t=a f=1.5,g=-2i,h=3u,s=\"x\\\"y\\\\z\",b=TRUE 17",
        "m\\ x\\,y,t\\=k=v\\ a\\,b f\\ g=1e5",
        "m,a,b=c,d=e=f x=-0 -5",
        "m x\\,y=1",
        "m=1 f=\"\"",
        "m f=1  12  ",
        "m f=\"a\\b\"",
        "m\\a f=1",
        "readings,name=truck_1,fleet=South latitude=50.12,longitude=4.72037,elevation=12i,heading=221 1451606400000000000",
    ] {
        assert!(check(line).expect("agrees"), "{line:?} should be taken by the fast reader");
    }
    for line in ["m", "m f", "m f=", "m f=1 ", "m f=1x", "m f=-5u", "m,t= f=1", "m\\ f=1", "m,t=a\\\\ f=1", "m f=\"x"] {
        assert!(ours(line).is_none(), "{line:?}");
        assert!(reference(line).is_none(), "{line:?} crate");
    }
}

/// Found by the issue 13 review, against InfluxDB 1.8: `.5` and `1.` were refused, `1e309` was
/// read as +Inf, and an unescaped comma made part of a field key (`v=1,,w=2`: field `,w`; a
/// trailing comma ignored).
#[test]
fn influxdb_1_8_floats_and_field_keys() {
    for (line, expected) in
        [("m f=.5", 0.5), ("m f=1.", 1.0), ("m f=-.5 3", -0.5), ("m f=-1. 3", -1.0), ("m f=1.e5", 1e5), ("m f=.5E-1", 0.05)]
    {
        assert!(check(line).expect("agrees"), "{line:?} should be taken by the fast reader");
        let (_, _, fields, _) = ours(line).expect("accepted");
        assert_eq!(fields[0].1, FieldValue::F64(expected), "{line:?}");
    }
    for line in ["m f=.", "m f=-.", "m f=.5i", "m f=1e309", "m f=-1e309", "m f=1,", "m f=1,,g=2", "m a,b=1", "m f=1, 5"] {
        assert!(ours(line).is_none(), "{line:?}");
        assert!(reference(line).is_none(), "{line:?} under InfluxDB 1.8's rules");
    }
}

#[test]
fn a_known_series_text_is_taken_without_checking_it_again() {
    let line = "readings,name=truck_1,fleet=South latitude=52.5,velocity=3i 1000";
    let mut fields = Vec::new();
    let first = parse_line(line, &mut fields).expect("valid");
    let asked = std::cell::Cell::new(0);
    let known = |t: &str| {
        asked.set(asked.get() + 1);
        t == first.series_text
    };
    assert_eq!(parse_line_knowing(line, &mut fields, &known), Some(first));
    assert_eq!(asked.get(), 1);
    assert_eq!(fields.len(), 2);
    // A text with a backslash is always checked: its end is not simply the first space.
    let escaped = r"readings,name=truck\ 1 latitude=1 1000";
    let read = parse_line_knowing(escaped, &mut fields, &known).expect("valid");
    assert_eq!(read.series_text, r"readings,name=truck\ 1");
    assert_eq!(asked.get(), 1, "not asked about a text with a backslash");
    // An unknown text is checked, so a bad one is still refused.
    assert_eq!(parse_line_knowing("readings,name latitude=1 1000", &mut fields, &known), None);
    assert_eq!(asked.get(), 2);
}
