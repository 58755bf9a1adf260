//! What each SELECT field computes: a plain expression over rows, or a tree of aggregates,
//! selectors, transformations and math over buckets; and the column names InfluxDB gives them.

use crate::error::QueryError;
use crate::reduce::Reducer;
use crate::transform::Transform;
use crate::value::FieldValue;
use sensordb_influxql::{BinaryOp, Duration, Expr};

const AGGREGATES: &[&str] =
    &["count", "distinct", "sum", "mean", "median", "mode", "spread", "stddev", "min", "max", "first", "last", "percentile"];
const TRANSFORMS: &[&str] =
    &["derivative", "non_negative_derivative", "difference", "non_negative_difference", "moving_average", "cumulative_sum", "elapsed"];
const MATH: &[&str] = &["abs", "floor", "ceil", "round", "sqrt", "ln", "log2", "log10", "exp", "sin", "cos", "tan", "asin", "acos", "atan"];

/// Refuses calls of functions InfluxQL does not have (or that sensordb does not run yet).
pub(crate) fn check_functions(expr: &Expr) -> Result<(), QueryError> {
    match expr {
        Expr::Call(call) => {
            let name = call.name.as_str();
            if !(AGGREGATES.contains(&name) || TRANSFORMS.contains(&name) || MATH.contains(&name) || name == "now") {
                return Err(QueryError::invalid(format!("undefined function {name}()")));
            }
            call.args.iter().try_for_each(check_functions)
        }
        Expr::Binary(b) => {
            check_functions(&b.lhs)?;
            check_functions(&b.rhs)
        }
        Expr::Paren(inner) | Expr::Negate(inner) => check_functions(inner),
        _ => Ok(()),
    }
}

/// A row-wise math function by name, applied to a value (`floor(x)` in a raw query).
pub(crate) fn apply_math(name: &str, value: &FieldValue) -> Option<FieldValue> {
    Math::of(name).map(|m| m.apply(value))
}

/// Whether `expr` aggregates (holds an aggregate, selector or transformation call).
pub(crate) fn is_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Call(call) => {
            AGGREGATES.contains(&call.name.as_str()) || TRANSFORMS.contains(&call.name.as_str()) || call.args.iter().any(is_aggregate)
        }
        Expr::Binary(b) => is_aggregate(&b.lhs) || is_aggregate(&b.rhs),
        Expr::Paren(inner) | Expr::Negate(inner) => is_aggregate(inner),
        Expr::Distinct(_) => true,
        _ => false,
    }
}

/// A row-wise math function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Math {
    Abs,
    Floor,
    Ceil,
    Round,
    Sqrt,
    Ln,
    Log2,
    Log10,
    Exp,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
}

impl Math {
    pub(crate) fn of(name: &str) -> Option<Math> {
        Some(match name {
            "abs" => Math::Abs,
            "floor" => Math::Floor,
            "ceil" => Math::Ceil,
            "round" => Math::Round,
            "sqrt" => Math::Sqrt,
            "ln" => Math::Ln,
            "log2" => Math::Log2,
            "log10" => Math::Log10,
            "exp" => Math::Exp,
            "sin" => Math::Sin,
            "cos" => Math::Cos,
            "tan" => Math::Tan,
            "asin" => Math::Asin,
            "acos" => Math::Acos,
            "atan" => Math::Atan,
            _ => return None,
        })
    }

    /// InfluxDB keeps integers for abs, floor, ceil and round; everything else is a float.
    pub fn apply(self, value: &FieldValue) -> FieldValue {
        if let FieldValue::Integer(n) = value {
            match self {
                Math::Abs => return FieldValue::Integer(n.wrapping_abs()),
                Math::Floor | Math::Ceil | Math::Round => return FieldValue::Integer(*n),
                _ => {}
            }
        }
        let Some(x) = value.as_f64() else { return FieldValue::Null };
        FieldValue::Float(match self {
            Math::Abs => x.abs(),
            Math::Floor => x.floor(),
            Math::Ceil => x.ceil(),
            // Go's math.Round: half away from zero, as Rust's round.
            Math::Round => x.round(),
            Math::Sqrt => x.sqrt(),
            Math::Ln => x.ln(),
            Math::Log2 => x.log2(),
            Math::Log10 => x.log10(),
            Math::Exp => x.exp(),
            Math::Sin => x.sin(),
            Math::Cos => x.cos(),
            Math::Tan => x.tan(),
            Math::Asin => x.asin(),
            Math::Acos => x.acos(),
            Math::Atan => x.atan(),
        })
    }
}

/// A compiled aggregate SELECT field.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Agg {
    /// A reducer over one field's values in a bucket.
    Reduce {
        reducer: Reducer,
        field: String,
    },
    /// A transformation over the series of `inner` (bucketed) or over a raw field.
    Transform {
        transform: Transform,
        inner: Box<Agg>,
    },
    /// `elapsed(f, unit)`: time between successive points, in units.
    Elapsed {
        field: String,
        unit: i64,
    },
    /// A raw field, only as the argument of a transformation without `GROUP BY time`.
    Field(String),
    Math {
        math: Math,
        arg: Box<Agg>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Agg>,
        rhs: Box<Agg>,
    },
    Literal(FieldValue),
}

impl Agg {
    pub fn is_transform(&self) -> bool {
        matches!(self, Agg::Transform { .. } | Agg::Elapsed { .. })
    }

    /// A single selector, whose point's time can be the row's time.
    pub fn selector(&self) -> Option<Reducer> {
        match self {
            Agg::Reduce { reducer, .. } if reducer.is_selector() => Some(*reducer),
            _ => None,
        }
    }
}

fn field_arg(call: &sensordb_influxql::Call) -> Result<String, QueryError> {
    match call.args.first() {
        Some(Expr::VarRef(v)) => Ok(v.name.clone()),
        _ => Err(QueryError::invalid(format!("expected field argument in {}()", call.name))),
    }
}

fn duration_arg(call: &sensordb_influxql::Call, at: usize, default: i64) -> Result<i64, QueryError> {
    match call.args.get(at) {
        None => Ok(default),
        Some(Expr::Duration(Duration(d))) if *d > 0 => Ok(*d),
        Some(other) => Err(QueryError::invalid(format!("second argument to {} must be a duration, got {other}", call.name))),
    }
}

/// Compiles one aggregate field; `interval` is the GROUP BY time interval, if any.
pub(crate) fn compile(expr: &Expr, interval: Option<i64>) -> Result<Agg, QueryError> {
    match expr {
        Expr::Paren(inner) => compile(inner, interval),
        Expr::Integer(n) => Ok(Agg::Literal(FieldValue::Integer(*n))),
        Expr::Float(x) => Ok(Agg::Literal(FieldValue::Float(*x))),
        Expr::Unsigned(n) => Ok(Agg::Literal(FieldValue::Unsigned(*n))),
        Expr::Bool(b) => Ok(Agg::Literal(FieldValue::Boolean(*b))),
        Expr::String(s) => Ok(Agg::Literal(FieldValue::String(s.as_str().into()))),
        Expr::Negate(inner) => Ok(Agg::Binary {
            op: BinaryOp::Mul,
            lhs: Box::new(Agg::Literal(FieldValue::Integer(-1))),
            rhs: Box::new(compile(inner, interval)?),
        }),
        Expr::Binary(b) if !b.op.is_condition() => {
            Ok(Agg::Binary { op: b.op, lhs: Box::new(compile(&b.lhs, interval)?), rhs: Box::new(compile(&b.rhs, interval)?) })
        }
        Expr::Distinct(field) => Ok(Agg::Reduce { reducer: Reducer::Distinct, field: field.clone() }),
        Expr::VarRef(v) => Err(QueryError::invalid(format!(
            "mixing aggregate and non-aggregate queries is not supported (field {} outside an aggregate)",
            v.name
        ))),
        Expr::Call(call) => {
            let name = call.name.as_str();
            if let Some(math) = Math::of(name) {
                let arg = call.args.first().ok_or_else(|| QueryError::invalid(format!("invalid number of arguments for {name}")))?;
                return Ok(Agg::Math { math, arg: Box::new(compile(arg, interval)?) });
            }
            let reducer = match name {
                "count" => match call.args.first() {
                    Some(Expr::Call(inner)) if inner.name == "distinct" => {
                        return Ok(Agg::Reduce { reducer: Reducer::CountDistinct, field: field_arg(inner)? })
                    }
                    Some(Expr::Distinct(field)) => return Ok(Agg::Reduce { reducer: Reducer::CountDistinct, field: field.clone() }),
                    _ => Some(Reducer::Count),
                },
                "distinct" => Some(Reducer::Distinct),
                "sum" => Some(Reducer::Sum),
                "mean" => Some(Reducer::Mean),
                "median" => Some(Reducer::Median),
                "mode" => Some(Reducer::Mode),
                "spread" => Some(Reducer::Spread),
                "stddev" => Some(Reducer::Stddev),
                "min" => Some(Reducer::Min),
                "max" => Some(Reducer::Max),
                "first" => Some(Reducer::First),
                "last" => Some(Reducer::Last),
                "percentile" => {
                    let p = match call.args.get(1) {
                        Some(Expr::Integer(n)) => *n as f64,
                        Some(Expr::Float(x)) => *x,
                        _ => return Err(QueryError::invalid("expected float argument in percentile()")),
                    };
                    if !(0.0..=100.0).contains(&p) {
                        return Err(QueryError::invalid("percentile must be between 0 and 100"));
                    }
                    Some(Reducer::Percentile(p))
                }
                _ => None,
            };
            if let Some(reducer) = reducer {
                return Ok(Agg::Reduce { reducer, field: field_arg(call)? });
            }
            let transform = match name {
                "derivative" | "non_negative_derivative" => {
                    let unit = duration_arg(call, 1, Duration::SECOND)?;
                    Transform::Derivative { unit, non_negative: name == "non_negative_derivative" }
                }
                "difference" | "non_negative_difference" => Transform::Difference { non_negative: name == "non_negative_difference" },
                "moving_average" => match call.args.get(1) {
                    Some(Expr::Integer(n)) if *n > 1 => Transform::MovingAverage { window: *n as usize },
                    _ => return Err(QueryError::invalid("moving_average window must be greater than 1")),
                },
                "cumulative_sum" => Transform::CumulativeSum,
                "elapsed" => return Ok(Agg::Elapsed { field: field_arg(call)?, unit: duration_arg(call, 1, 1)? }),
                other => return Err(QueryError::invalid(format!("undefined function {other}()"))),
            };
            let inner = match call.args.first() {
                Some(Expr::VarRef(v)) if interval.is_none() => Agg::Field(v.name.clone()),
                Some(Expr::VarRef(_)) => {
                    return Err(QueryError::invalid(format!("aggregate function required inside the call to {name}")));
                }
                Some(arg) => compile(arg, interval)?,
                None => return Err(QueryError::invalid(format!("invalid number of arguments for {name}"))),
            };
            Ok(Agg::Transform { transform, inner: Box::new(inner) })
        }
        other => Err(QueryError::invalid(format!("unsupported expression in SELECT: {other}"))),
    }
}

/// The column name InfluxDB gives a field without an alias.
pub(crate) fn column_name(expr: &Expr) -> String {
    match expr {
        Expr::VarRef(v) => v.name.clone(),
        Expr::Call(call) => call.name.clone(),
        Expr::Distinct(_) => "distinct".to_string(),
        Expr::Paren(inner) | Expr::Negate(inner) => column_name(inner),
        Expr::Binary(b) => {
            let names: Vec<String> = [column_name(&b.lhs), column_name(&b.rhs)].into_iter().filter(|n| !n.is_empty()).collect();
            names.join("_")
        }
        _ => String::new(),
    }
}

/// Makes repeated names unique the way InfluxDB does: the second `mean` is `mean_1`.
pub(crate) fn dedupe_names(names: &mut [String]) {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for name in names.iter_mut() {
        let count = seen.entry(name.clone()).or_insert(0);
        if *count > 0 {
            *name = format!("{name}_{count}");
        }
        *count += 1;
    }
}
