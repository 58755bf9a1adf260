//! Expressions bound to one table of rows: each name resolved once to a field column, a tag
//! value or the time, and what the tags decide folded to a constant, so that evaluating a row
//! compares no names and copies no strings. The result is [`crate::eval::eval`]'s on every row
//! (a property test holds the two together); the general path of SELECT evaluates its WHERE
//! clauses and projections this way, tens of thousands of rows a query.

use crate::eval::{apply, compares, Regexes};
use crate::select::plan::Math;
use crate::value::FieldValue;
use sensordb_influxql::{BinaryOp, DataType, Expr};
use std::borrow::Cow;

/// An expression bound to a table's columns and tags.
#[derive(Debug)]
pub enum Bound<'r> {
    Const(FieldValue),
    /// The row's value in field column `i`.
    Column(usize),
    Time,
    Negate(Box<Bound<'r>>),
    /// `And` or `Or` of whether each side holds.
    Logic {
        and: bool,
        lhs: Box<Bound<'r>>,
        rhs: Box<Bound<'r>>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Bound<'r>>,
        rhs: Box<Bound<'r>>,
    },
    /// A field's text against a regex (a tag's is folded when bound).
    Regex {
        text: Box<Bound<'r>>,
        regex: &'r regex::Regex,
        matches: bool,
    },
    Math {
        math: Math,
        arg: Box<Bound<'r>>,
    },
}

/// What a table shows an expression: its field columns (by name) and its tags.
pub struct Scope<'s> {
    pub columns: &'s [std::sync::Arc<str>],
    pub tags: &'s [(String, String)],
}

impl Scope<'_> {
    fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| &**c == name)
    }

    fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A bare name that is not a field column: a tag, present or not (see `eval::is_tag_ref`).
    fn tag_ref<'e>(&self, expr: &'e Expr) -> Option<&'e str> {
        match expr {
            Expr::VarRef(v)
                if !v.name.eq_ignore_ascii_case("time")
                    && v.data_type.is_none_or(|t| t == DataType::Tag)
                    && self.column(&v.name).is_none() =>
            {
                Some(&v.name)
            }
            _ => None,
        }
    }
}

impl<'r> Bound<'r> {
    /// `expr` bound to `scope`.
    pub fn new(expr: &Expr, scope: &Scope<'_>, regexes: &'r Regexes) -> Bound<'r> {
        let bound = match expr {
            Expr::VarRef(v) => {
                if v.name.eq_ignore_ascii_case("time") {
                    return Bound::Time;
                }
                let tag = || scope.tag(&v.name).map_or(FieldValue::Null, |t| FieldValue::String(t.into()));
                match (v.data_type, scope.column(&v.name)) {
                    (Some(DataType::Tag), _) => Bound::Const(tag()),
                    (_, Some(c)) => Bound::Column(c),
                    (Some(_), None) => Bound::Const(FieldValue::Null),
                    (None, None) => Bound::Const(tag()),
                }
            }
            Expr::Integer(n) => Bound::Const(FieldValue::Integer(*n)),
            Expr::Unsigned(n) => Bound::Const(FieldValue::Unsigned(*n)),
            Expr::Float(x) => Bound::Const(FieldValue::Float(*x)),
            Expr::String(s) => Bound::Const(FieldValue::String(s.as_str().into())),
            Expr::Bool(b) => Bound::Const(FieldValue::Boolean(*b)),
            Expr::Duration(d) => Bound::Const(FieldValue::Integer(d.nanos())),
            Expr::Paren(inner) => return Bound::new(inner, scope, regexes),
            Expr::Negate(inner) => Bound::Negate(Box::new(Bound::new(inner, scope, regexes))),
            Expr::Binary(b) => match b.op {
                BinaryOp::And | BinaryOp::Or => Bound::Logic {
                    and: b.op == BinaryOp::And,
                    lhs: Box::new(Bound::new(&b.lhs, scope, regexes)),
                    rhs: Box::new(Bound::new(&b.rhs, scope, regexes)),
                },
                BinaryOp::EqRegex | BinaryOp::NotEqRegex => {
                    let matches = b.op == BinaryOp::EqRegex;
                    let Expr::Regex(pattern) = &b.rhs else { return Bound::Const(FieldValue::Null) };
                    let Some(regex) = regexes.get(pattern.as_str()) else { return Bound::Const(FieldValue::Null) };
                    // A tag (a missing one is the empty string) is known now.
                    if let Some(name) = scope.tag_ref(&b.lhs) {
                        return Bound::Const(FieldValue::Boolean(regex.is_match(scope.tag(name).unwrap_or("")) == matches));
                    }
                    Bound::Regex { text: Box::new(Bound::new(&b.lhs, scope, regexes)), regex, matches }
                }
                op => {
                    // In a comparison or arithmetic a tag, present or not, is a string.
                    let operand = |side: &Expr| match scope.tag_ref(side) {
                        Some(name) => Bound::Const(FieldValue::String(scope.tag(name).unwrap_or("").into())),
                        None => Bound::new(side, scope, regexes),
                    };
                    Bound::Binary { op, lhs: Box::new(operand(&b.lhs)), rhs: Box::new(operand(&b.rhs)) }
                }
            },
            Expr::Call(call) if call.args.len() == 1 => match Math::of(&call.name) {
                Some(math) => Bound::Math { math, arg: Box::new(Bound::new(&call.args[0], scope, regexes)) },
                None => Bound::Const(FieldValue::Null),
            },
            Expr::Call(_) | Expr::Regex(_) | Expr::Wildcard(_) | Expr::Distinct(_) => Bound::Const(FieldValue::Null),
        };
        bound.folded()
    }

    /// The constant this expression is, where its parts are constants.
    fn folded(self) -> Bound<'r> {
        let holds = |b: &Bound<'_>| match b {
            Bound::Const(v) => Some(matches!(v, FieldValue::Boolean(true))),
            _ => None,
        };
        match self {
            Bound::Logic { and, lhs, rhs } => match (holds(&lhs), holds(&rhs)) {
                (Some(l), Some(r)) => Bound::Const(FieldValue::Boolean(if and { l && r } else { l || r })),
                // One side decides: false under AND, true under OR.
                (Some(side), _) | (_, Some(side)) if side != and => Bound::Const(FieldValue::Boolean(side)),
                _ => Bound::Logic { and, lhs, rhs },
            },
            Bound::Binary { op, lhs, rhs } => match (&*lhs, &*rhs) {
                (Bound::Const(l), Bound::Const(r)) => Bound::Const(apply(op, l, r)),
                _ => Bound::Binary { op, lhs, rhs },
            },
            Bound::Negate(inner) => match *inner {
                Bound::Const(v) => Bound::Const(negate(&v)),
                inner => Bound::Negate(Box::new(inner)),
            },
            Bound::Math { math, arg } => match *arg {
                Bound::Const(v) => Bound::Const(math.apply(&v)),
                arg => Bound::Math { math, arg: Box::new(arg) },
            },
            other => other,
        }
    }

    /// The constant value, if the tags decided it.
    pub fn constant(&self) -> Option<&FieldValue> {
        match self {
            Bound::Const(v) => Some(v),
            _ => None,
        }
    }

    /// The value on the row at `time` whose field columns are `row`. Inline for the leaves
    /// every row reaches (a column, a constant); the rest computes out of line.
    #[inline]
    pub fn value<'v>(&'v self, time: i64, row: &'v [FieldValue]) -> Cow<'v, FieldValue> {
        match self {
            Bound::Const(v) => Cow::Borrowed(v),
            Bound::Column(c) => Cow::Borrowed(&row[*c]),
            _ => self.computed(time, row),
        }
    }

    fn computed<'v>(&'v self, time: i64, row: &'v [FieldValue]) -> Cow<'v, FieldValue> {
        match self {
            Bound::Const(_) | Bound::Column(_) => self.value(time, row),
            Bound::Time => Cow::Owned(FieldValue::Integer(time)),
            Bound::Negate(inner) => Cow::Owned(negate(&inner.value(time, row))),
            Bound::Logic { and: true, lhs, rhs } => Cow::Owned(FieldValue::Boolean(lhs.holds(time, row) && rhs.holds(time, row))),
            Bound::Logic { and: false, lhs, rhs } => Cow::Owned(FieldValue::Boolean(lhs.holds(time, row) || rhs.holds(time, row))),
            Bound::Binary { op, lhs, rhs } => Cow::Owned(apply(*op, &lhs.value(time, row), &rhs.value(time, row))),
            Bound::Regex { text, regex, matches } => Cow::Owned(FieldValue::Boolean(match &*text.value(time, row) {
                FieldValue::String(s) => regex.is_match(s) == *matches,
                _ => false,
            })),
            Bound::Math { math, arg } => Cow::Owned(math.apply(&arg.value(time, row))),
        }
    }

    /// Whether the condition holds on the row (null and non-booleans are false). Logic and
    /// comparisons answer without making the boolean [`Bound::value`] would: a WHERE clause is
    /// evaluated on every row a query reads.
    pub fn holds(&self, time: i64, row: &[FieldValue]) -> bool {
        match self {
            Bound::Logic { and: true, lhs, rhs } => lhs.holds(time, row) && rhs.holds(time, row),
            Bound::Logic { and: false, lhs, rhs } => lhs.holds(time, row) || rhs.holds(time, row),
            Bound::Binary { op, lhs, rhs } if op.is_comparison() => match (&**lhs, &**rhs) {
                // The usual comparison, a field against a literal, straight from the row: every
                // row a query reads is tested (TSBS low-fuel tests 27,000 a query), and the
                // general path's two `value` calls and their `Cow`s were 70 of its 90
                // instructions a row (callgrind).
                (Bound::Column(c), Bound::Const(v)) => compares(*op, &row[*c], v),
                (Bound::Const(v), Bound::Column(c)) => compares(*op, v, &row[*c]),
                _ => compares(*op, &lhs.value(time, row), &rhs.value(time, row)),
            },
            _ => matches!(&*self.value(time, row), FieldValue::Boolean(true)),
        }
    }

    /// This condition as a test of row after row: a field compared with a number, the usual
    /// WHERE clause on fields, is tested on the float itself; anything else by [`Bound::holds`].
    pub fn row_test(&self) -> RowTest<'_> {
        if let Bound::Binary { op, lhs, rhs } = self {
            match (&**lhs, &**rhs) {
                (Bound::Column(column), Bound::Const(FieldValue::Float(number))) if op.is_comparison() => {
                    return RowTest::FloatComparison { column: *column, op: *op, number: *number };
                }
                // `0.1 >= x` is `x <= 0.1`.
                (Bound::Const(FieldValue::Float(number)), Bound::Column(column)) if op.is_comparison() => {
                    let op = match op {
                        BinaryOp::Lt => BinaryOp::Gt,
                        BinaryOp::LtEq => BinaryOp::GtEq,
                        BinaryOp::Gt => BinaryOp::Lt,
                        BinaryOp::GtEq => BinaryOp::LtEq,
                        other => *other,
                    };
                    return RowTest::FloatComparison { column: *column, op, number: *number };
                }
                _ => {}
            }
        }
        RowTest::General(self)
    }

    /// Whether the expression's value on the row is null, without making the value where it
    /// is a column or a literal (a raw query asks it of each selected field on every row).
    pub fn is_null_on(&self, time: i64, row: &[FieldValue]) -> bool {
        match self {
            Bound::Column(c) => row[*c].is_null(),
            Bound::Const(v) => v.is_null(),
            _ => self.value(time, row).is_null(),
        }
    }

    /// This expression as a WHERE clause, where only whether it holds matters: a side of AND
    /// that the tags made true, or a side of OR they made false, drops out (`fleet = 'South'
    /// AND fuel_state <= 0.1` bound to a South truck is the comparison alone). Its value may
    /// differ from the expression's (`x AND true` is a boolean, `x` need not be), whether it
    /// holds does not.
    pub fn into_condition(self) -> Bound<'r> {
        match self {
            Bound::Logic { and, lhs, rhs } => {
                let (lhs, rhs) = (lhs.into_condition(), rhs.into_condition());
                // The side that leaves the other to decide: true under AND, anything that does
                // not hold under OR.
                let neutral = |side: &Bound<'_>| match side.constant() {
                    Some(value) => matches!(value, FieldValue::Boolean(true)) == and,
                    None => false,
                };
                if neutral(&rhs) {
                    lhs
                } else if neutral(&lhs) {
                    rhs
                } else {
                    Bound::Logic { and, lhs: Box::new(lhs), rhs: Box::new(rhs) }
                }
            }
            other => other,
        }
    }

    /// Whether the expression reads a field column (a row whose fields it reads are all null
    /// gives it no output row in a raw query).
    pub fn reads_field(expr: &Expr, scope: &Scope<'_>) -> bool {
        match expr {
            Expr::VarRef(v) => scope.column(&v.name).is_some(),
            Expr::Binary(b) => Bound::reads_field(&b.lhs, scope) || Bound::reads_field(&b.rhs, scope),
            Expr::Paren(inner) | Expr::Negate(inner) => Bound::reads_field(inner, scope),
            Expr::Call(call) => call.args.iter().any(|a| Bound::reads_field(a, scope)),
            _ => false,
        }
    }
}

/// A condition prepared for testing many rows (see [`Bound::row_test`]).
#[derive(Debug)]
pub enum RowTest<'b> {
    /// `column op number`.
    FloatComparison {
        column: usize,
        op: BinaryOp,
        number: f64,
    },
    General(&'b Bound<'b>),
}

impl RowTest<'_> {
    /// Whether the condition holds on the row, as [`Bound::holds`] says.
    #[inline]
    pub fn holds(&self, time: i64, row: &[FieldValue]) -> bool {
        match self {
            RowTest::FloatComparison { column, op, number } => compares_with_number(*op, &row[*column], *number),
            RowTest::General(bound) => bound.holds(time, row),
        }
    }
}

/// `value op number` as [`compares`] decides it, a float compared without the general path.
#[inline]
pub fn compares_with_number(op: BinaryOp, value: &FieldValue, number: f64) -> bool {
    match value {
        FieldValue::Float(x) => float_compares(op, *x, number),
        other => compares(op, other, &FieldValue::Float(number)),
    }
}

/// `x op number` as [`compares`] decides it on two floats: a NaN orders against nothing, so no
/// comparison holds (`!=` neither).
#[inline]
fn float_compares(op: BinaryOp, x: f64, number: f64) -> bool {
    match op {
        BinaryOp::Eq => x == number,
        BinaryOp::NotEq => matches!(x.partial_cmp(&number), Some(std::cmp::Ordering::Less | std::cmp::Ordering::Greater)),
        BinaryOp::Lt => x < number,
        BinaryOp::LtEq => x <= number,
        BinaryOp::Gt => x > number,
        BinaryOp::GtEq => x >= number,
        _ => false,
    }
}

fn negate(value: &FieldValue) -> FieldValue {
    match value {
        FieldValue::Float(x) => FieldValue::Float(-x),
        FieldValue::Integer(x) => FieldValue::Integer(x.wrapping_neg()),
        _ => FieldValue::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{eval, Row};
    use proptest::prelude::*;
    use sensordb_influxql::{parse, Statement};
    use std::sync::Arc;

    /// A row as `eval` sees it, made of the same columns and tags as the scope.
    struct Plain<'a> {
        columns: &'a [Arc<str>],
        values: &'a [FieldValue],
        tags: &'a [(String, String)],
    }

    impl Row for Plain<'_> {
        fn time(&self) -> i64 {
            1_700_000_000_000_000_000
        }
        fn tag(&self, name: &str) -> Option<&str> {
            self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
        }
        fn field(&self, name: &str) -> Option<FieldValue> {
            self.columns.iter().position(|c| &**c == name).map(|i| self.values[i].clone())
        }
    }

    fn leaf() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("fuel"),
            Just("load"),
            Just("s"),
            Just("n"),
            Just("host"),
            Just("dc"),
            Just("missing"),
            Just("time"),
            Just("fuel::float"),
            Just("host::tag"),
            Just("s::tag"),
            Just("load::field"),
            Just("0.1"),
            Just("1"),
            Just("0"),
            Just("1500"),
            Just("'a'"),
            Just("''"),
            Just("true"),
            Just("1s"),
        ]
        .prop_map(str::to_string)
    }

    /// Arithmetic and functions over names and literals.
    fn term() -> impl Strategy<Value = String> {
        leaf().prop_recursive(2, 8, 2, |inner| {
            let ops = prop_oneof![Just("+"), Just("-"), Just("*"), Just("/"), Just("%"), Just("&"), Just("|"), Just("^")];
            prop_oneof![
                (inner.clone(), ops, inner.clone()).prop_map(|(l, op, r)| format!("({l} {op} {r})")),
                (prop_oneof![Just("abs"), Just("floor"), Just("sqrt"), Just("nope")], inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
                inner.prop_map(|a| format!("-({a})")),
            ]
        })
    }

    /// Conditions: comparisons and regex matches of terms under AND and OR.
    fn expr() -> impl Strategy<Value = String> {
        let compare = prop_oneof![Just("="), Just("!="), Just("<"), Just("<="), Just(">"), Just(">=")];
        let regex = prop_oneof![Just("=~ /^a/"), Just("!~ /a|b/"), Just("=~ /^$/")];
        let atom = prop_oneof![
            4 => (term(), compare, term()).prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            2 => (term(), regex).prop_map(|(l, re)| format!("({l} {re})")),
            1 => term(),
        ];
        atom.prop_recursive(3, 12, 2, |inner| {
            (inner.clone(), prop_oneof![Just("AND"), Just("OR")], inner).prop_map(|(l, op, r)| format!("({l} {op} {r})"))
        })
    }

    fn value() -> impl Strategy<Value = FieldValue> {
        prop_oneof![
            Just(FieldValue::Null),
            (-3.0f64..3.0).prop_map(FieldValue::Float),
            Just(FieldValue::Float(f64::NAN)),
            (-3i64..3).prop_map(FieldValue::Integer),
            (0u64..3).prop_map(FieldValue::Unsigned),
            any::<bool>().prop_map(FieldValue::Boolean),
            prop_oneof![Just("a"), Just("b"), Just("")].prop_map(|s| FieldValue::String(s.into())),
        ]
    }

    /// `text`'s value by `eval` and bound, on a row with fields fuel 0.05, load 1400, s 'a', n
    /// null and tags host 'a', load_capacity '1500'.
    fn both(text: &str) -> (String, String) {
        let parsed = parse(&format!("SELECT a FROM m WHERE {text}")).expect("parses");
        let Statement::Select(select) = &parsed.statements[0] else { panic!("a select") };
        let condition = select.condition.clone().expect("a condition");
        let regexes = Regexes::compile([&condition]).expect("regexes");
        let columns: Vec<Arc<str>> = ["fuel", "load", "s", "n"].into_iter().map(Arc::from).collect();
        let values = [FieldValue::Float(0.05), FieldValue::Integer(1400), FieldValue::String("a".into()), FieldValue::Null];
        let tags = vec![("host".to_string(), "a".to_string()), ("load_capacity".to_string(), "1500".to_string())];
        let row = Plain { columns: &columns, values: &values, tags: &tags };
        let bound = Bound::new(&condition, &Scope { columns: &columns, tags: &tags }, &regexes);
        (format!("{:?}", eval(&condition, &row, &regexes)), format!("{:?}", &*bound.value(row.time(), &values)))
    }

    #[test]
    fn tags_missing_tags_and_folded_parts_evaluate_as_eval_does() {
        for (text, expected) in [
            ("dc = ''", "Boolean(true)"),
            ("dc =~ /^$/", "Boolean(true)"),
            ("host =~ /^a$/ AND fuel < 0.1", "Boolean(true)"),
            ("host = 'b' OR fuel > 0.1", "Boolean(false)"),
            ("host = 'a' AND fuel > 0.1", "Boolean(false)"),
            ("host = 'a' OR s = 'b'", "Boolean(true)"),
            ("load >= 0.9 * load_capacity", "Boolean(false)"),
            ("s::tag = ''", "Boolean(false)"),
            ("host::tag", "String(\"a\")"),
            ("-(fuel) < 0 AND abs(-2) = 2", "Boolean(true)"),
            ("n = 1 OR n != 1", "Boolean(false)"),
            ("time > 0", "Boolean(true)"),
        ] {
            let (by_eval, bound) = both(text);
            assert_eq!(by_eval, expected, "{text} by eval");
            assert_eq!(bound, expected, "{text} bound");
        }
    }

    #[test]
    fn what_the_tags_decide_leaves_a_condition() {
        let parsed = parse("SELECT a FROM m WHERE (host = 'a' AND fuel <= 0.1) OR host = 'b'").expect("parses");
        let Statement::Select(select) = &parsed.statements[0] else { panic!("a select") };
        let condition = select.condition.clone().expect("a condition");
        let regexes = Regexes::compile([&condition]).expect("regexes");
        let columns: Vec<Arc<str>> = vec![Arc::from("fuel")];
        let tags = vec![("host".to_string(), "a".to_string())];
        let bound = Bound::new(&condition, &Scope { columns: &columns, tags: &tags }, &regexes).into_condition();
        assert!(
            matches!(&bound, Bound::Binary { op: BinaryOp::LtEq, lhs, rhs } if matches!(**lhs, Bound::Column(0)) && matches!(**rhs, Bound::Const(FieldValue::Float(_)))),
            "{bound:?}"
        );
        assert!(bound.holds(0, &[FieldValue::Float(0.05)]));
        assert!(!bound.holds(0, &[FieldValue::Float(0.5)]));
        assert!(!bound.holds(0, &[FieldValue::Null]));
    }

    #[test]
    fn a_field_compared_with_a_number_is_tested_as_the_general_path_tests_it() {
        let regexes = Regexes::compile(std::iter::empty::<&Expr>()).expect("no regexes");
        let columns: Vec<Arc<str>> = vec![Arc::from("f")];
        let scope = Scope { columns: &columns, tags: &[] };
        let values = [
            FieldValue::Float(0.05),
            FieldValue::Float(0.1),
            FieldValue::Float(0.5),
            FieldValue::Float(f64::NAN),
            FieldValue::Float(-0.0),
            FieldValue::Integer(0),
            FieldValue::Integer(1),
            FieldValue::Null,
            FieldValue::String("a".into()),
            FieldValue::Boolean(true),
        ];
        let mut fast = 0;
        for op in ["=", "!=", "<", "<=", ">", ">="] {
            for text in [format!("f {op} 0.1"), format!("0.1 {op} f"), format!("f {op} 0.0"), format!("0.0 {op} f")] {
                let parsed = parse(&format!("SELECT f FROM m WHERE {text}")).expect("parses");
                let Statement::Select(select) = &parsed.statements[0] else { panic!("a select") };
                let bound = Bound::new(select.condition.as_ref().expect("a condition"), &scope, &regexes).into_condition();
                let test = bound.row_test();
                fast += usize::from(matches!(test, RowTest::FloatComparison { .. }));
                for value in &values {
                    let row = std::slice::from_ref(value);
                    let by_eval = compares_on(&bound, row);
                    assert_eq!(test.holds(0, row), by_eval, "{text} on {value:?}");
                }
            }
        }
        assert_eq!(fast, 24, "every comparison of the field with a float takes the float path");
    }

    /// Whether `bound`, a comparison, holds on `row` by the general path: both sides' values
    /// compared by `compares`.
    fn compares_on(bound: &Bound<'_>, row: &[FieldValue]) -> bool {
        let Bound::Binary { op, lhs, rhs } = bound else { panic!("a comparison: {bound:?}") };
        compares(*op, &lhs.value(0, row), &rhs.value(0, row))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// On any row, a bound expression has the value `eval` gives the expression.
        #[test]
        fn bound_expressions_evaluate_as_eval_does(text in expr(), values in proptest::collection::vec(value(), 4), host in prop_oneof![Just(None), Just(Some("a")), Just(Some("b"))]) {
            let parsed = parse(&format!("SELECT a FROM m WHERE {text}"));
            prop_assume!(parsed.is_ok());
            let parsed = parsed.expect("parsed");
            let Statement::Select(select) = &parsed.statements[0] else { panic!("a select") };
            let condition = select.condition.clone().expect("a condition");
            let regexes = Regexes::compile([&condition]).expect("regexes");
            let columns: Vec<Arc<str>> = ["fuel", "load", "s", "n"].into_iter().map(Arc::from).collect();
            let mut tags = vec![("load_capacity".to_string(), "1500".to_string())];
            if let Some(host) = host {
                tags.push(("host".to_string(), host.to_string()));
            }
            tags.sort();
            let row = Plain { columns: &columns, values: &values, tags: &tags };
            let expected = eval(&condition, &row, &regexes);
            let bound = Bound::new(&condition, &Scope { columns: &columns, tags: &tags }, &regexes);
            let actual = bound.value(row.time(), &values);
            prop_assert_eq!(format!("{expected:?}"), format!("{:?}", &*actual), "{} bound as {:?}", text, bound);
            let holds = matches!(expected, FieldValue::Boolean(true));
            prop_assert_eq!(bound.holds(row.time(), &values), holds, "{} bound as {:?}", text, bound);
            let condition = Bound::new(&condition, &Scope { columns: &columns, tags: &tags }, &regexes).into_condition();
            prop_assert_eq!(condition.holds(row.time(), &values), holds, "{} as a condition: {:?}", text, condition);
            prop_assert_eq!(condition.row_test().holds(row.time(), &values), holds, "{} as a row test: {:?}", text, condition.row_test());
        }
    }
}
