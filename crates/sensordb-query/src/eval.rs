//! Expressions evaluated against a row: a series' tags, its fields at one time, and the time.
//! Conditions follow InfluxDB: a missing tag is the empty string, a missing field is null and
//! any comparison with null is false; `/` of two integers is a float.
//!
//! Before any point is read, [`tag_condition`] decides from the tags alone which series a
//! condition can hold for, so that a `WHERE "host" = 'a'` reads one series, not all.

use crate::error::QueryError;
use crate::value::FieldValue;
use sensordb_influxql::{BinaryOp, DataType, Expr};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Compiled regular expressions of a statement, by pattern.
#[derive(Default, Debug)]
pub struct Regexes(HashMap<String, regex::Regex>);

impl Regexes {
    /// Compiles every regex literal in `exprs`.
    pub fn compile<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> Result<Regexes, QueryError> {
        let mut regexes = Regexes::default();
        for expr in exprs {
            regexes.add(expr)?;
        }
        Ok(regexes)
    }

    fn add(&mut self, expr: &Expr) -> Result<(), QueryError> {
        match expr {
            Expr::Regex(r) if !self.0.contains_key(r.as_str()) => {
                self.0.insert(r.as_str().to_string(), Regexes::one(r.as_str())?);
            }
            Expr::Binary(b) => {
                self.add(&b.lhs)?;
                self.add(&b.rhs)?;
            }
            Expr::Paren(inner) | Expr::Negate(inner) => self.add(inner)?,
            Expr::Call(call) => {
                for arg in &call.args {
                    self.add(arg)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub fn get(&self, pattern: &str) -> Option<&regex::Regex> {
        self.0.get(pattern)
    }

    /// Compiles one pattern on its own (SHOW ... WITH ... =~ /re/).
    pub fn one(pattern: &str) -> Result<regex::Regex, QueryError> {
        regex::Regex::new(pattern).map_err(|e| QueryError::invalid(format!("invalid regex /{pattern}/: {e}")))
    }
}

/// What an expression can see of a row.
pub trait Row {
    fn time(&self) -> i64;
    /// The tag `name`, if the series has it.
    fn tag(&self, name: &str) -> Option<&str>;
    /// The field `name` at this row, null when absent; `None` when there is no such field
    /// column at all (the name may then be a tag).
    fn field(&self, name: &str) -> Option<FieldValue>;
}

/// The value of `expr` on `row`.
pub fn eval(expr: &Expr, row: &dyn Row, regexes: &Regexes) -> FieldValue {
    match expr {
        Expr::VarRef(v) => {
            if v.name.eq_ignore_ascii_case("time") {
                return FieldValue::Integer(row.time());
            }
            let tag = || row.tag(&v.name).map(|t| FieldValue::String(t.into()));
            match v.data_type {
                Some(DataType::Tag) => tag().unwrap_or(FieldValue::Null),
                Some(_) => row.field(&v.name).unwrap_or(FieldValue::Null),
                None => row.field(&v.name).or_else(tag).unwrap_or(FieldValue::Null),
            }
        }
        Expr::Integer(n) => FieldValue::Integer(*n),
        Expr::Unsigned(n) => FieldValue::Unsigned(*n),
        Expr::Float(x) => FieldValue::Float(*x),
        Expr::String(s) => FieldValue::String(s.as_str().into()),
        Expr::Bool(b) => FieldValue::Boolean(*b),
        Expr::Duration(d) => FieldValue::Integer(d.nanos()),
        Expr::Paren(inner) => eval(inner, row, regexes),
        Expr::Negate(inner) => match eval(inner, row, regexes) {
            FieldValue::Float(x) => FieldValue::Float(-x),
            FieldValue::Integer(x) => FieldValue::Integer(x.wrapping_neg()),
            _ => FieldValue::Null,
        },
        Expr::Binary(b) => binary(b.op, &b.lhs, &b.rhs, row, regexes),
        Expr::Call(call) if call.args.len() == 1 => {
            crate::select::plan::apply_math(&call.name, &eval(&call.args[0], row, regexes)).unwrap_or(FieldValue::Null)
        }
        Expr::Call(_) | Expr::Regex(_) | Expr::Wildcard(_) | Expr::Distinct(_) => FieldValue::Null,
    }
}

/// Whether a condition holds on `row` (null and non-booleans are false).
pub fn holds(expr: &Expr, row: &dyn Row, regexes: &Regexes) -> bool {
    matches!(eval(expr, row, regexes), FieldValue::Boolean(true))
}

fn binary(op: BinaryOp, lhs: &Expr, rhs: &Expr, row: &dyn Row, regexes: &Regexes) -> FieldValue {
    match op {
        BinaryOp::And => FieldValue::Boolean(holds(lhs, row, regexes) && holds(rhs, row, regexes)),
        BinaryOp::Or => FieldValue::Boolean(holds(lhs, row, regexes) || holds(rhs, row, regexes)),
        BinaryOp::EqRegex | BinaryOp::NotEqRegex => {
            let Expr::Regex(pattern) = rhs else { return FieldValue::Null };
            let Some(regex) = regexes.get(pattern.as_str()) else { return FieldValue::Null };
            let text = match eval(lhs, row, regexes) {
                FieldValue::String(s) => s,
                // A missing tag is the empty string.
                FieldValue::Null if is_tag_ref(lhs, row) => "".into(),
                _ => return FieldValue::Boolean(false),
            };
            FieldValue::Boolean(regex.is_match(&text) == (op == BinaryOp::EqRegex))
        }
        _ => {
            let mut left = eval(lhs, row, regexes);
            let mut right = eval(rhs, row, regexes);
            if left.is_null() && is_tag_ref(lhs, row) {
                left = FieldValue::String("".into());
            }
            if right.is_null() && is_tag_ref(rhs, row) {
                right = FieldValue::String("".into());
            }
            apply(op, &left, &right)
        }
    }
}

/// A bare name that is not a field column of the row: a tag, present or not.
fn is_tag_ref(expr: &Expr, row: &dyn Row) -> bool {
    matches!(expr, Expr::VarRef(v) if !v.name.eq_ignore_ascii_case("time") && v.data_type.is_none_or(|t| t == DataType::Tag) && row.field(&v.name).is_none())
}

/// `left op right` for arithmetic and comparison operators. As in InfluxDB, dividing by zero
/// gives 0 (not infinity or NaN) and so does an integer remainder by zero.
pub fn apply(op: BinaryOp, left: &FieldValue, right: &FieldValue) -> FieldValue {
    use FieldValue::{Boolean, Float, Integer, Null, Unsigned};
    match op {
        op if op.is_comparison() => Boolean(compares(op, left, right)),
        _ => match (left, right) {
            (Integer(a), Integer(b)) => match op {
                BinaryOp::Add => Integer(a.wrapping_add(*b)),
                BinaryOp::Sub => Integer(a.wrapping_sub(*b)),
                BinaryOp::Mul => Integer(a.wrapping_mul(*b)),
                BinaryOp::Div if *b == 0 => Float(0.0),
                BinaryOp::Div => Float(*a as f64 / *b as f64),
                BinaryOp::Mod if *b == 0 => Integer(0),
                BinaryOp::Mod => Integer(a.wrapping_rem(*b)),
                BinaryOp::BitAnd => Integer(a & b),
                BinaryOp::BitOr => Integer(a | b),
                BinaryOp::BitXor => Integer(a ^ b),
                _ => Null,
            },
            (Unsigned(a), Unsigned(b)) => match op {
                BinaryOp::Add => Unsigned(a.wrapping_add(*b)),
                BinaryOp::Sub => Unsigned(a.wrapping_sub(*b)),
                BinaryOp::Mul => Unsigned(a.wrapping_mul(*b)),
                BinaryOp::Div if *b == 0 => Unsigned(0),
                BinaryOp::Div => Float(*a as f64 / *b as f64),
                BinaryOp::Mod if *b == 0 => Unsigned(0),
                BinaryOp::Mod => Unsigned(a % b),
                _ => Null,
            },
            (Boolean(a), Boolean(b)) => match op {
                BinaryOp::BitAnd => Boolean(a & b),
                BinaryOp::BitOr => Boolean(a | b),
                BinaryOp::BitXor => Boolean(a ^ b),
                _ => Null,
            },
            _ => {
                let (Some(a), Some(b)) = (left.as_f64(), right.as_f64()) else { return Null };
                match op {
                    BinaryOp::Add => Float(a + b),
                    BinaryOp::Sub => Float(a - b),
                    BinaryOp::Mul => Float(a * b),
                    BinaryOp::Div if b == 0.0 => Float(0.0),
                    BinaryOp::Div => Float(a / b),
                    BinaryOp::Mod => Float(a % b),
                    _ => Null,
                }
            }
        },
    }
}

/// Whether `left op right` holds for a comparison operator (values that do not compare make it
/// false); false for any other operator.
#[inline]
pub fn compares(op: BinaryOp, left: &FieldValue, right: &FieldValue) -> bool {
    let Some(ordering) = left.compare(right) else { return false };
    ordering_holds(op, ordering)
}

/// Whether comparison `op` holds of two values that order as `ordering`; false for any other
/// operator.
#[inline]
fn ordering_holds(op: BinaryOp, ordering: Ordering) -> bool {
    match op {
        BinaryOp::Eq => ordering == Ordering::Equal,
        BinaryOp::NotEq => ordering != Ordering::Equal,
        BinaryOp::Lt => ordering == Ordering::Less,
        BinaryOp::LtEq => ordering != Ordering::Greater,
        BinaryOp::Gt => ordering == Ordering::Greater,
        BinaryOp::GtEq => ordering != Ordering::Less,
        _ => false,
    }
}

/// What the tags alone say of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    True,
    False,
    /// Depends on field values.
    Unknown,
}

/// Decides `condition` from a series' tags alone; `is_field(name)` says which names are fields
/// of the measurement (those make a comparison unknown until points are read).
pub fn tag_condition(condition: &Expr, tags: &[(String, String)], is_field: &dyn Fn(&str) -> bool, regexes: &Regexes) -> Verdict {
    match condition {
        Expr::Paren(inner) => tag_condition(inner, tags, is_field, regexes),
        Expr::Binary(b) if b.op == BinaryOp::And => {
            match (tag_condition(&b.lhs, tags, is_field, regexes), tag_condition(&b.rhs, tags, is_field, regexes)) {
                (Verdict::False, _) | (_, Verdict::False) => Verdict::False,
                (Verdict::True, Verdict::True) => Verdict::True,
                _ => Verdict::Unknown,
            }
        }
        Expr::Binary(b) if b.op == BinaryOp::Or => {
            match (tag_condition(&b.lhs, tags, is_field, regexes), tag_condition(&b.rhs, tags, is_field, regexes)) {
                (Verdict::True, _) | (_, Verdict::True) => Verdict::True,
                (Verdict::False, Verdict::False) => Verdict::False,
                _ => Verdict::Unknown,
            }
        }
        other if references_field(other, is_field) => Verdict::Unknown,
        other => {
            if let Some(verdict) = tag_compared_with_text(other, tags) {
                return verdict;
            }
            let row = TagsOnly { tags };
            if holds(other, &row, regexes) {
                Verdict::True
            } else {
                Verdict::False
            }
        }
    }
}

/// `tag op 'text'` (or `'text' op tag`) decided by comparing the two strings, as [`eval`]
/// decides it (a missing tag is the empty string), without making a value of either: a query
/// decides its condition on each tag set it may read (TSBS last-loc: 120 a query, each an
/// evaluation with two strings allocated).
fn tag_compared_with_text(expr: &Expr, tags: &[(String, String)]) -> Option<Verdict> {
    let Expr::Binary(b) = expr else { return None };
    if !b.op.is_comparison() {
        return None;
    }
    let tag = |side: &Expr| match side {
        Expr::VarRef(v) if !v.name.eq_ignore_ascii_case("time") && v.data_type.is_none_or(|t| t == DataType::Tag) => {
            Some(tags.iter().find(|(k, _)| *k == v.name).map_or("", |(_, value)| value.as_str()))
        }
        _ => None,
    };
    let ordering = match (&b.lhs, &b.rhs) {
        (lhs, Expr::String(text)) => tag(lhs)?.cmp(text.as_str()),
        (Expr::String(text), rhs) => text.as_str().cmp(tag(rhs)?),
        _ => return None,
    };
    Some(if ordering_holds(b.op, ordering) { Verdict::True } else { Verdict::False })
}

fn references_field(expr: &Expr, is_field: &dyn Fn(&str) -> bool) -> bool {
    match expr {
        Expr::VarRef(v) => v.data_type != Some(DataType::Tag) && !v.name.eq_ignore_ascii_case("time") && is_field(&v.name),
        Expr::Binary(b) => references_field(&b.lhs, is_field) || references_field(&b.rhs, is_field),
        Expr::Paren(inner) | Expr::Negate(inner) => references_field(inner, is_field),
        Expr::Call(_) => true,
        _ => false,
    }
}

/// A row of tags only: the condition's field-free parts are decided on it.
struct TagsOnly<'a> {
    tags: &'a [(String, String)],
}

impl Row for TagsOnly<'_> {
    fn time(&self) -> i64 {
        0
    }
    fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    fn field(&self, _name: &str) -> Option<FieldValue> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sensordb_influxql::{parse, Statement};

    struct TestRow {
        tags: Vec<(String, String)>,
        fields: Vec<(String, FieldValue)>,
    }

    impl Row for TestRow {
        fn time(&self) -> i64 {
            42
        }
        fn tag(&self, name: &str) -> Option<&str> {
            self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
        }
        fn field(&self, name: &str) -> Option<FieldValue> {
            self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn a_tag_compared_with_text_is_decided_as_eval_decides_it() {
        let regexes = Regexes::default();
        let tag_sets = [vec![("host".to_string(), "b".to_string())], vec![("host".to_string(), String::new())], vec![]];
        let mut decided = 0;
        for op in ["=", "!=", "<", "<=", ">", ">="] {
            for text in ["''", "'a'", "'b'", "'c'"] {
                for name in ["host", "host::tag", "\"host\""] {
                    for expr in [format!("{name} {op} {text}"), format!("{text} {op} {name}")] {
                        let condition = condition(&expr);
                        for tags in &tag_sets {
                            let expected = if holds(&condition, &TagsOnly { tags }, &regexes) { Verdict::True } else { Verdict::False };
                            decided += usize::from(tag_compared_with_text(&condition, tags).is_some());
                            assert_eq!(tag_condition(&condition, tags, &|_| false, &regexes), expected, "{expr} on {tags:?}");
                        }
                    }
                }
            }
        }
        assert_eq!(decided, 6 * 4 * 3 * 2 * 3, "every comparison of a tag with text is decided by the strings");
    }

    fn condition(text: &str) -> Expr {
        let parsed = parse(&format!("SELECT a FROM m WHERE {text}")).expect("parses");
        let Statement::Select(select) = &parsed.statements[0] else { panic!("select") };
        select.condition.clone().expect("where")
    }

    fn row() -> TestRow {
        TestRow {
            tags: vec![("host".into(), "a".into()), ("load_capacity".into(), "1500".into())],
            fields: vec![
                ("fuel".into(), FieldValue::Float(0.05)),
                ("load".into(), FieldValue::Float(1400.0)),
                ("n".into(), FieldValue::Null),
            ],
        }
    }

    fn check(text: &str) -> bool {
        let c = condition(text);
        let regexes = Regexes::compile([&c]).expect("regexes");
        holds(&c, &row(), &regexes)
    }

    #[test]
    fn conditions_on_fields_tags_and_regexes() {
        assert!(check("fuel <= 0.1"));
        assert!(!check("fuel > 0.1"));
        assert!(check("host = 'a' AND fuel < 1"));
        assert!(check("host =~ /^a$/ OR fuel > 100"));
        assert!(!check("host !~ /a/"));
        // A missing tag is the empty string; a null field compares false both ways.
        assert!(check("dc = ''"));
        assert!(!check("n = 1") && !check("n != 1"));
        // A string tag does not compare with a number.
        assert!(!check("load >= 0.9 * load_capacity"));
    }

    #[test]
    fn integer_division_gives_a_float() {
        let row = row();
        assert_eq!(apply(BinaryOp::Div, &FieldValue::Integer(1), &FieldValue::Integer(2)), FieldValue::Float(0.5));
        assert_eq!(apply(BinaryOp::Mul, &FieldValue::Integer(3), &FieldValue::Float(0.5)), FieldValue::Float(1.5));
        assert_eq!(eval(&condition("fuel * 2"), &row, &Regexes::default()), FieldValue::Float(0.1));
    }

    #[test]
    fn the_tags_decide_what_they_can() {
        let tags = vec![("host".to_string(), "a".to_string())];
        let is_field = |name: &str| name == "fuel";
        let verdict = |text: &str| {
            let c = condition(text);
            let regexes = Regexes::compile([&c]).expect("regexes");
            tag_condition(&c, &tags, &is_field, &regexes)
        };
        assert_eq!(verdict("host = 'a'"), Verdict::True);
        assert_eq!(verdict("host = 'b'"), Verdict::False);
        assert_eq!(verdict("host = 'b' AND fuel < 1"), Verdict::False);
        assert_eq!(verdict("host = 'a' AND fuel < 1"), Verdict::Unknown);
        assert_eq!(verdict("host = 'a' OR fuel < 1"), Verdict::True);
        assert_eq!(verdict("(host = 'b' OR host =~ /^a/) AND dc = ''"), Verdict::True);
    }
}
