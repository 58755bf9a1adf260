//! Transformations over a series of results in time order: `derivative`,
//! `non_negative_derivative`, `difference`, `non_negative_difference`, `moving_average` and
//! `cumulative_sum`, as InfluxDB 1.x computes them. Null values (empty buckets under
//! `fill(null)`) are skipped; a point at the same time as the one before it is ignored.

use crate::value::FieldValue;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Transform {
    /// Change per `unit` nanoseconds (InfluxDB's default unit is one second).
    Derivative {
        unit: i64,
        non_negative: bool,
    },
    Difference {
        non_negative: bool,
    },
    /// Mean of the last `window` values.
    MovingAverage {
        window: usize,
    },
    CumulativeSum,
}

impl Transform {
    pub fn name(&self) -> &'static str {
        match self {
            Transform::Derivative { non_negative: false, .. } => "derivative",
            Transform::Derivative { non_negative: true, .. } => "non_negative_derivative",
            Transform::Difference { non_negative: false } => "difference",
            Transform::Difference { non_negative: true } => "non_negative_difference",
            Transform::MovingAverage { .. } => "moving_average",
            Transform::CumulativeSum => "cumulative_sum",
        }
    }
}

/// Applies `transform` to `points` (sorted by time, ascending unless `descending`).
pub fn apply(transform: Transform, points: &[(i64, FieldValue)], descending: bool) -> Vec<(i64, FieldValue)> {
    let mut out = Vec::new();
    let mut previous: Option<(i64, &FieldValue)> = None;
    let mut window: Vec<f64> = Vec::new();
    let mut window_position = 0usize;
    let mut running: Option<FieldValue> = None;
    for (time, value) in points.iter().filter(|(_, v)| v.as_f64().is_some()) {
        if previous.is_some_and(|(t, _)| t == *time) {
            continue;
        }
        match transform {
            Transform::Derivative { unit, non_negative } => {
                if let Some((t0, v0)) = previous {
                    let diff = value.as_f64().unwrap_or(f64::NAN) - v0.as_f64().unwrap_or(f64::NAN);
                    let elapsed = if descending { t0 - time } else { time - t0 };
                    let rate = diff / (elapsed as f64 / unit as f64);
                    if !(non_negative && diff < 0.0) {
                        out.push((*time, FieldValue::Float(rate)));
                    }
                }
            }
            Transform::Difference { non_negative } => {
                if let Some((_, v0)) = previous {
                    let diff = match (value, v0) {
                        (FieldValue::Integer(a), FieldValue::Integer(b)) => FieldValue::Integer(a.wrapping_sub(*b)),
                        (FieldValue::Unsigned(a), FieldValue::Unsigned(b)) => FieldValue::Unsigned(a.wrapping_sub(*b)),
                        _ => FieldValue::Float(value.as_f64().unwrap_or(f64::NAN) - v0.as_f64().unwrap_or(f64::NAN)),
                    };
                    let negative = match &diff {
                        FieldValue::Integer(d) => *d < 0,
                        FieldValue::Unsigned(_) => matches!((value, v0), (FieldValue::Unsigned(a), FieldValue::Unsigned(b)) if a < b),
                        other => other.as_f64().is_some_and(|d| d < 0.0),
                    };
                    if !(non_negative && negative) {
                        out.push((*time, diff));
                    }
                }
            }
            Transform::MovingAverage { window: size } => {
                let x = value.as_f64().unwrap_or(f64::NAN);
                if window.len() < size {
                    window.push(x);
                } else {
                    window[window_position] = x;
                }
                window_position = (window_position + 1) % size.max(1);
                if window.len() == size {
                    out.push((*time, FieldValue::Float(window.iter().sum::<f64>() / size as f64)));
                }
            }
            Transform::CumulativeSum => {
                let next = match (&running, value) {
                    (None, v) => v.clone(),
                    (Some(FieldValue::Integer(a)), FieldValue::Integer(b)) => FieldValue::Integer(a.wrapping_add(*b)),
                    (Some(FieldValue::Unsigned(a)), FieldValue::Unsigned(b)) => FieldValue::Unsigned(a.wrapping_add(*b)),
                    (Some(a), b) => FieldValue::Float(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)),
                };
                out.push((*time, next.clone()));
                running = Some(next);
            }
        }
        previous = Some((*time, value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn floats(points: &[(i64, f64)]) -> Vec<(i64, FieldValue)> {
        points.iter().map(|&(t, v)| (t, FieldValue::Float(v))).collect()
    }

    #[test]
    fn derivative_is_change_per_unit_and_skips_nulls() {
        let mut input = floats(&[(0, 1.0), (10 * S, 6.0), (20 * S, 2.0)]);
        input.insert(1, (5 * S, FieldValue::Null));
        let out = apply(Transform::Derivative { unit: S, non_negative: false }, &input, false);
        assert_eq!(out, floats(&[(10 * S, 0.5), (20 * S, -0.4)]));
        let out = apply(Transform::Derivative { unit: 10 * S, non_negative: true }, &input, false);
        assert_eq!(out, floats(&[(10 * S, 5.0)]));
    }

    #[test]
    fn derivative_in_descending_order_uses_the_reversed_elapsed_time() {
        let input = floats(&[(20 * S, 2.0), (10 * S, 6.0)]);
        let out = apply(Transform::Derivative { unit: S, non_negative: false }, &input, true);
        assert_eq!(out, floats(&[(10 * S, 0.4)]));
    }

    #[test]
    fn difference_keeps_integers_and_non_negative_drops_decreases() {
        let input = vec![(1, FieldValue::Integer(5)), (2, FieldValue::Integer(3)), (3, FieldValue::Integer(10))];
        let out = apply(Transform::Difference { non_negative: false }, &input, false);
        assert_eq!(out, vec![(2, FieldValue::Integer(-2)), (3, FieldValue::Integer(7))]);
        let out = apply(Transform::Difference { non_negative: true }, &input, false);
        assert_eq!(out, vec![(3, FieldValue::Integer(7))]);
    }

    #[test]
    fn moving_average_starts_once_the_window_is_full() {
        let input = floats(&[(1, 1.0), (2, 2.0), (3, 3.0), (4, 10.0)]);
        let out = apply(Transform::MovingAverage { window: 3 }, &input, false);
        assert_eq!(out, floats(&[(3, 2.0), (4, 5.0)]));
    }

    #[test]
    fn cumulative_sum_runs_over_every_value_and_ignores_repeated_times() {
        let input =
            vec![(1, FieldValue::Integer(1)), (1, FieldValue::Integer(100)), (2, FieldValue::Integer(2)), (3, FieldValue::Integer(3))];
        let out = apply(Transform::CumulativeSum, &input, false);
        assert_eq!(out, vec![(1, FieldValue::Integer(1)), (2, FieldValue::Integer(3)), (3, FieldValue::Integer(6))]);
    }
}
