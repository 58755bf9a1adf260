//! Aggregate and selector functions over the points of one bucket, with InfluxDB 1.x's results
//! to the bit: its result types (the mean of integers is a float, their sum an integer), its
//! tie-breaks (the earliest point wins a tie of `min`; of two points at the same time `last`
//! keeps the larger value), its empty-input answers (`stddev` of one point is null) and its
//! percentile index.
//!
//! A bucket's points may come from several series (a `GROUP BY` over fewer tags than the
//! series have), so nothing here assumes the times are sorted or distinct.

use crate::value::{ColumnSlice, FieldValue};
use std::cmp::Ordering;

/// A function that turns a bucket's points into one value (or, for `distinct`, several).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reducer {
    Count,
    /// `count(distinct(f))`.
    CountDistinct,
    Distinct,
    Sum,
    Mean,
    Median,
    Mode,
    Spread,
    Stddev,
    Min,
    Max,
    First,
    Last,
    /// `percentile(f, p)` with `p` in `[0, 100]`.
    Percentile(f64),
}

/// Why a function cannot take a field's type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported {function} iterator type: {kind}")]
pub struct UnsupportedType {
    pub function: &'static str,
    pub kind: &'static str,
}

impl Reducer {
    pub fn name(&self) -> &'static str {
        match self {
            Reducer::Count | Reducer::CountDistinct => "count",
            Reducer::Distinct => "distinct",
            Reducer::Sum => "sum",
            Reducer::Mean => "mean",
            Reducer::Median => "median",
            Reducer::Mode => "mode",
            Reducer::Spread => "spread",
            Reducer::Stddev => "stddev",
            Reducer::Min => "min",
            Reducer::Max => "max",
            Reducer::First => "first",
            Reducer::Last => "last",
            Reducer::Percentile(_) => "percentile",
        }
    }

    /// Selectors return a stored point, whose own time is the row's time when the query has no
    /// `GROUP BY time` and selects only this function.
    pub fn is_selector(&self) -> bool {
        matches!(self, Reducer::Min | Reducer::Max | Reducer::First | Reducer::Last | Reducer::Percentile(_))
    }

    /// What an empty bucket yields before `fill` (InfluxDB reports a count of 0, everything else
    /// as missing).
    pub fn empty_value(&self) -> FieldValue {
        match self {
            Reducer::Count | Reducer::CountDistinct => FieldValue::Integer(0),
            _ => FieldValue::Null,
        }
    }
}

/// One result of a reducer: a value and, for selectors, the time of the point it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduced {
    pub time: Option<i64>,
    pub value: FieldValue,
}

impl Reduced {
    fn at(time: i64, value: FieldValue) -> Reduced {
        Reduced { time: Some(time), value }
    }
    fn value(value: FieldValue) -> Reduced {
        Reduced { time: None, value }
    }
}

fn kind_name(values: &ColumnSlice<'_>) -> &'static str {
    match values {
        ColumnSlice::Float(_) => "float",
        ColumnSlice::Integer(_) => "integer",
        ColumnSlice::Unsigned(_) => "unsigned",
        ColumnSlice::Boolean(_) => "boolean",
        ColumnSlice::String(_) => "string",
    }
}

/// Applies `reducer` to the points `times[i]`, `values[i]`. An empty input gives no results
/// (the caller decides what an empty bucket shows, see [`Reducer::empty_value`]).
pub fn reduce(reducer: Reducer, times: &[i64], values: ColumnSlice<'_>) -> Result<Vec<Reduced>, UnsupportedType> {
    assert_eq!(times.len(), values.len(), "BUG: times and values of a bucket differ in length");
    if times.is_empty() {
        return Ok(Vec::new());
    }
    let unsupported = || UnsupportedType { function: reducer.name(), kind: kind_name(&values) };
    let numeric = !matches!(values, ColumnSlice::Boolean(_) | ColumnSlice::String(_));
    Ok(match reducer {
        Reducer::Count => vec![Reduced::value(FieldValue::Integer(times.len() as i64))],
        Reducer::CountDistinct => vec![Reduced::value(FieldValue::Integer(distinct(values).len() as i64))],
        Reducer::Distinct => distinct(values).into_iter().map(Reduced::value).collect(),
        Reducer::First => vec![select(times, values, |a, b| b.0.cmp(&a.0).then(compare(&a.1, &b.1)))],
        Reducer::Last => vec![select(times, values, |a, b| a.0.cmp(&b.0).then(compare(&a.1, &b.1)))],
        Reducer::Min if numeric || matches!(values, ColumnSlice::Boolean(_)) => {
            vec![select(times, values, |a, b| compare(&b.1, &a.1).then(b.0.cmp(&a.0)))]
        }
        Reducer::Max if numeric || matches!(values, ColumnSlice::Boolean(_)) => {
            vec![select(times, values, |a, b| compare(&a.1, &b.1).then(b.0.cmp(&a.0)))]
        }
        Reducer::Sum => match values {
            ColumnSlice::Float(v) => vec![Reduced::value(FieldValue::Float(v.iter().sum()))],
            ColumnSlice::Integer(v) => vec![Reduced::value(FieldValue::Integer(v.iter().fold(0i64, |s, &x| s.wrapping_add(x))))],
            ColumnSlice::Unsigned(v) => vec![Reduced::value(FieldValue::Unsigned(v.iter().fold(0u64, |s, &x| s.wrapping_add(x))))],
            _ => return Err(unsupported()),
        },
        Reducer::Mean => match values {
            ColumnSlice::Float(v) => vec![Reduced::value(FieldValue::Float(v.iter().sum::<f64>() / v.len() as f64))],
            // Go sums integers in an int64 before dividing; so do we (wrapping alike).
            ColumnSlice::Integer(v) => {
                vec![Reduced::value(FieldValue::Float(v.iter().fold(0i64, |s, &x| s.wrapping_add(x)) as f64 / v.len() as f64))]
            }
            ColumnSlice::Unsigned(v) => {
                vec![Reduced::value(FieldValue::Float(v.iter().fold(0u64, |s, &x| s.wrapping_add(x)) as f64 / v.len() as f64))]
            }
            _ => return Err(unsupported()),
        },
        Reducer::Median => {
            let mut sorted = numbers(values).ok_or_else(unsupported)?;
            sorted.sort_by(|a, b| a.total_cmp(b));
            let n = sorted.len();
            let median = if n % 2 == 0 {
                let (lo, hi) = (sorted[n / 2 - 1], sorted[n / 2]);
                lo + (hi - lo) / 2.0
            } else {
                sorted[n / 2]
            };
            vec![Reduced::value(FieldValue::Float(median))]
        }
        Reducer::Mode => vec![Reduced::value(mode(times, values))],
        Reducer::Spread => match values {
            ColumnSlice::Float(v) => {
                let (min, max) = v.iter().fold((v[0], v[0]), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                vec![Reduced::value(FieldValue::Float(max - min))]
            }
            ColumnSlice::Integer(v) => {
                let (min, max) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
                vec![Reduced::value(FieldValue::Integer(max.wrapping_sub(min)))]
            }
            ColumnSlice::Unsigned(v) => {
                let (min, max) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
                vec![Reduced::value(FieldValue::Unsigned(max - min))]
            }
            _ => return Err(unsupported()),
        },
        Reducer::Stddev => {
            let numbers = numbers(values).ok_or_else(unsupported)?;
            if numbers.len() < 2 {
                vec![Reduced::value(FieldValue::Null)]
            } else {
                // InfluxDB's two passes: a running mean, then the sample variance, NaNs skipped.
                let (mut mean, mut count) = (0.0, 0usize);
                for &x in numbers.iter().filter(|x| !x.is_nan()) {
                    count += 1;
                    mean += (x - mean) / count as f64;
                }
                let variance: f64 = numbers.iter().filter(|x| !x.is_nan()).map(|&x| (x - mean).powi(2)).sum();
                vec![Reduced::value(FieldValue::Float((variance / (count as f64 - 1.0)).sqrt()))]
            }
        }
        Reducer::Percentile(p) => {
            if !numeric {
                return Err(unsupported());
            }
            let n = times.len();
            let i = (n as f64 * p / 100.0 + 0.5).floor() as i64 - 1;
            if i < 0 || i >= n as i64 {
                return Ok(Vec::new());
            }
            let mut order: Vec<usize> = (0..n).collect();
            // Go's sort.Sort is not stable; sorting by value then time makes ours deterministic.
            order.sort_by(|&a, &b| compare(&values.get(a), &values.get(b)).then(times[a].cmp(&times[b])));
            let at = order[i as usize];
            vec![Reduced::at(times[at], values.get(at))]
        }
        Reducer::Min | Reducer::Max => return Err(unsupported()),
    })
}

/// Total order for selecting: numbers by value (NaN lowest), strings and booleans by their
/// own order.
fn compare(a: &FieldValue, b: &FieldValue) -> Ordering {
    match (a, b) {
        (FieldValue::Float(x), FieldValue::Float(y)) => x.total_cmp(y),
        _ => a.compare(b).unwrap_or(Ordering::Equal),
    }
}

/// The point that is greatest under `better` (time, value pairs).
fn select(times: &[i64], values: ColumnSlice<'_>, better: impl Fn(&(i64, FieldValue), &(i64, FieldValue)) -> Ordering) -> Reduced {
    let mut best = (times[0], values.get(0));
    for (i, &time) in times.iter().enumerate().skip(1) {
        let candidate = (time, values.get(i));
        if better(&candidate, &best) == Ordering::Greater {
            best = candidate;
        }
    }
    Reduced::at(best.0, best.1)
}

fn numbers(values: ColumnSlice<'_>) -> Option<Vec<f64>> {
    match values {
        ColumnSlice::Float(v) => Some(v.to_vec()),
        ColumnSlice::Integer(v) => Some(v.iter().map(|&x| x as f64).collect()),
        ColumnSlice::Unsigned(v) => Some(v.iter().map(|&x| x as f64).collect()),
        _ => None,
    }
}

/// Distinct values in ascending order (InfluxDB sorts them by value).
fn distinct(values: ColumnSlice<'_>) -> Vec<FieldValue> {
    let mut all: Vec<FieldValue> = (0..values.len()).map(|i| values.get(i)).collect();
    all.sort_by(compare);
    all.dedup_by(|a, b| compare(a, b) == Ordering::Equal);
    all
}

/// The most frequent value; a tie goes to the value seen first in time.
fn mode(times: &[i64], values: ColumnSlice<'_>) -> FieldValue {
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by(|&a, &b| compare(&values.get(a), &values.get(b)).then(times[a].cmp(&times[b])));
    let (mut best, mut best_count, mut best_time) = (values.get(order[0]), 0usize, i64::MAX);
    let mut run_start = 0;
    while run_start < order.len() {
        let value = values.get(order[run_start]);
        let mut run_end = run_start + 1;
        while run_end < order.len() && compare(&values.get(order[run_end]), &value) == Ordering::Equal {
            run_end += 1;
        }
        let (count, first_time) = (run_end - run_start, times[order[run_start]]);
        if count > best_count || (count == best_count && first_time < best_time) {
            (best, best_count, best_time) = (value, count, first_time);
        }
        run_start = run_end;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Column;

    fn run(reducer: Reducer, times: &[i64], values: &Column) -> Vec<Reduced> {
        reduce(reducer, times, values.as_slice()).expect("supported")
    }

    fn one(reducer: Reducer, times: &[i64], values: &Column) -> FieldValue {
        let mut out = run(reducer, times, values);
        assert_eq!(out.len(), 1, "{reducer:?} gives one value");
        out.remove(0).value
    }

    #[test]
    fn result_types_follow_influxdb() {
        let ints = Column::Integer(vec![1, 2, 4]);
        let t = [10, 20, 30];
        assert_eq!(one(Reducer::Mean, &t, &ints), FieldValue::Float(7.0 / 3.0));
        assert_eq!(one(Reducer::Sum, &t, &ints), FieldValue::Integer(7));
        assert_eq!(one(Reducer::Spread, &t, &ints), FieldValue::Integer(3));
        assert_eq!(one(Reducer::Median, &t, &ints), FieldValue::Float(2.0));
        assert_eq!(one(Reducer::Count, &t, &ints), FieldValue::Integer(3));
        assert_eq!(one(Reducer::Max, &t, &ints), FieldValue::Integer(4));
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let v = Column::Float(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(one(Reducer::Median, &[1, 2, 3, 4], &v), FieldValue::Float(2.5));
    }

    #[test]
    fn selectors_carry_the_time_of_their_point_and_break_ties_as_influxdb() {
        let v = Column::Float(vec![5.0, 1.0, 5.0, 1.0]);
        let t = [40, 30, 20, 10];
        // The earliest of equal extremes wins.
        assert_eq!(run(Reducer::Max, &t, &v), vec![Reduced::at(20, FieldValue::Float(5.0))]);
        assert_eq!(run(Reducer::Min, &t, &v), vec![Reduced::at(10, FieldValue::Float(1.0))]);
        assert_eq!(run(Reducer::First, &t, &v), vec![Reduced::at(10, FieldValue::Float(1.0))]);
        assert_eq!(run(Reducer::Last, &t, &v), vec![Reduced::at(40, FieldValue::Float(5.0))]);
        // Two points at the same time (two series): first and last keep the larger value.
        let same = Column::Float(vec![1.0, 9.0]);
        assert_eq!(run(Reducer::First, &[5, 5], &same), vec![Reduced::at(5, FieldValue::Float(9.0))]);
        assert_eq!(run(Reducer::Last, &[5, 5], &same), vec![Reduced::at(5, FieldValue::Float(9.0))]);
    }

    #[test]
    fn stddev_is_the_sample_deviation_and_null_for_one_point() {
        let v = Column::Float(vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        let t: Vec<i64> = (0..8).collect();
        let FieldValue::Float(sd) = one(Reducer::Stddev, &t, &v) else { panic!("float") };
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(one(Reducer::Stddev, &[1], &Column::Float(vec![3.0])), FieldValue::Null);
    }

    #[test]
    fn percentile_picks_the_nearest_rank_like_influxdb() {
        let v = Column::Integer((1..=10).rev().collect());
        let t: Vec<i64> = (0..10).collect();
        // floor(10 * 0.9 + 0.5) - 1 = 8 -> the ninth smallest value, 9, stored at time 1.
        assert_eq!(run(Reducer::Percentile(90.0), &t, &v), vec![Reduced::at(1, FieldValue::Integer(9))]);
        assert_eq!(run(Reducer::Percentile(100.0), &t, &v), vec![Reduced::at(0, FieldValue::Integer(10))]);
        // floor(10 * 0.01 + 0.5) - 1 = -1: no value.
        assert_eq!(run(Reducer::Percentile(1.0), &t, &v), vec![]);
    }

    #[test]
    fn distinct_values_come_sorted_and_count_distinct_counts_them() {
        let v = Column::String(vec!["b".into(), "a".into(), "b".into()]);
        let out: Vec<FieldValue> = run(Reducer::Distinct, &[1, 2, 3], &v).into_iter().map(|r| r.value).collect();
        assert_eq!(out, vec![FieldValue::String("a".into()), FieldValue::String("b".into())]);
        assert_eq!(one(Reducer::CountDistinct, &[1, 2, 3], &v), FieldValue::Integer(2));
    }

    #[test]
    fn mode_prefers_the_value_seen_first_on_a_tie() {
        let v = Column::Integer(vec![7, 3, 3, 7]);
        assert_eq!(one(Reducer::Mode, &[1, 2, 3, 4], &v), FieldValue::Integer(7));
        assert_eq!(one(Reducer::Mode, &[5, 2, 3, 4], &v), FieldValue::Integer(3));
    }

    #[test]
    fn numeric_functions_refuse_strings_and_empty_input_gives_nothing() {
        let v = Column::String(vec!["x".into()]);
        assert!(reduce(Reducer::Mean, &[1], v.as_slice()).is_err());
        assert!(reduce(Reducer::Sum, &[1], v.as_slice()).is_err());
        assert_eq!(run(Reducer::Mean, &[], &Column::Float(vec![])), vec![]);
        assert_eq!(Reducer::Count.empty_value(), FieldValue::Integer(0));
        assert_eq!(Reducer::Mean.empty_value(), FieldValue::Null);
    }
}
