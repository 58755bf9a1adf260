//! The running aggregate of one bucket on the streaming path: count, sum, the extremes with
//! their times, and the first and last points, added a run of points at a time. A week graph
//! of 1,000 buckets adds 604,800 points here, in one pass of [`crate::runs::extremes`] a run.

use crate::reduce::Reducer;
use crate::value::FieldValue;

/// Running aggregate of one bucket.
#[derive(Clone, Copy, Debug)]
pub(super) struct Acc {
    pub(super) count: u64,
    sum: f64,
    min: (f64, i64),
    max: (f64, i64),
    first: (i64, f64),
    last: (i64, f64),
    /// Whether `min` and `max` are kept: a bucket asked only for count, sum, mean, first or
    /// last sums its runs in a plain loop (TSBS long-driving-sessions' `mean` spent a fifth of
    /// its instructions finding extremes nobody read).
    extremes: bool,
}

impl Acc {
    pub(super) const EMPTY: Acc = Acc {
        count: 0,
        sum: 0.0,
        min: (f64::INFINITY, i64::MAX),
        max: (f64::NEG_INFINITY, i64::MAX),
        first: (i64::MAX, 0.0),
        last: (i64::MIN, 0.0),
        extremes: true,
    };

    /// An empty bucket that keeps its extremes only if `extremes` (min, max, spread need them).
    pub(super) const fn empty(extremes: bool) -> Acc {
        Acc { extremes, ..Acc::EMPTY }
    }

    /// Adds points of one series, sorted by time.
    pub(super) fn add(&mut self, times: &[i64], values: &[f64]) {
        if times.is_empty() {
            return;
        }
        debug_assert!(times.windows(2).all(|w| w[0] < w[1]), "a run ascends");
        // The sum in order, as the general path sums: the answers agree to the bit.
        let (sum, low, high) =
            if self.extremes { crate::runs::extremes::<true>(values) } else { (values.iter().fold(0.0, |sum, &x| sum + x), None, None) };
        self.sum += sum;
        self.count += times.len() as u64;
        if let (Some(low), Some(high)) = (low, high) {
            // Across runs (several series in one bucket), the earliest of equal extremes wins.
            let (x, t) = (values[low], times[low]);
            if x < self.min.0 || (x == self.min.0 && t < self.min.1) {
                self.min = (x, t);
            }
            let (x, t) = (values[high], times[high]);
            if x > self.max.0 || (x == self.max.0 && t < self.max.1) {
                self.max = (x, t);
            }
        }
        let (t0, x0) = (times[0], values[0]);
        if t0 < self.first.0 || (t0 == self.first.0 && x0 > self.first.1) {
            self.first = (t0, x0);
        }
        let (t1, x1) = (times[times.len() - 1], values[values.len() - 1]);
        if t1 > self.last.0 || (t1 == self.last.0 && x1 > self.last.1) {
            self.last = (t1, x1);
        }
    }

    /// The value and (for selectors) the point's time.
    pub(super) fn result(&self, reducer: Reducer) -> (FieldValue, Option<i64>) {
        if self.count == 0 {
            return (reducer.empty_value(), None);
        }
        assert!(
            self.extremes || !matches!(reducer, Reducer::Min | Reducer::Max | Reducer::Spread),
            "BUG: {reducer:?} of a bucket without extremes"
        );
        match reducer {
            Reducer::Count => (FieldValue::Integer(self.count as i64), None),
            Reducer::Sum => (FieldValue::Float(self.sum), None),
            Reducer::Mean => (FieldValue::Float(self.sum / self.count as f64), None),
            Reducer::Spread => (FieldValue::Float(self.max.0 - self.min.0), None),
            Reducer::Min => (FieldValue::Float(self.min.0), Some(self.min.1)),
            Reducer::Max => (FieldValue::Float(self.max.0), Some(self.max.1)),
            Reducer::First => (FieldValue::Float(self.first.1), Some(self.first.0)),
            Reducer::Last => (FieldValue::Float(self.last.1), Some(self.last.0)),
            _ => (FieldValue::Null, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `add` must find, written plainly: the earliest of equal extremes, NaN never one.
    fn plain(times: &[i64], values: &[f64]) -> Option<((f64, i64), (f64, i64))> {
        let mut extremes: Option<((f64, i64), (f64, i64))> = None;
        for (&t, &x) in times.iter().zip(values) {
            if x.is_nan() {
                continue;
            }
            extremes = Some(match extremes {
                None => ((x, t), (x, t)),
                Some((low, high)) => (if x < low.0 { (x, t) } else { low }, if x > high.0 { (x, t) } else { high }),
            });
        }
        extremes
    }

    fn special() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-4i64..4).prop_map(|v| v as f64),
            Just(f64::NAN),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            any::<f64>(),
        ]
    }

    proptest! {
        #[test]
        fn one_run_gives_the_plain_extremes_sum_and_ends(values in proptest::collection::vec(special(), 1..40)) {
            let times: Vec<i64> = (0..values.len() as i64).map(|i| i * 10).collect();
            let mut acc = Acc::EMPTY;
            acc.add(&times, &values);
            prop_assert_eq!(acc.count, values.len() as u64);
            let sum = values.iter().fold(0.0, |s, &x| s + x);
            prop_assert!(acc.sum.to_bits() == sum.to_bits() || (acc.sum.is_nan() && sum.is_nan()), "sum {} != {}", acc.sum, sum);
            match plain(&times, &values) {
                None => {
                    prop_assert_eq!(acc.min.1, i64::MAX);
                    prop_assert_eq!(acc.max.1, i64::MAX);
                }
                Some((low, high)) => {
                    prop_assert_eq!((acc.min.0.to_bits(), acc.min.1), (low.0.to_bits(), low.1));
                    prop_assert_eq!((acc.max.0.to_bits(), acc.max.1), (high.0.to_bits(), high.1));
                }
            }
            prop_assert_eq!(acc.first.0, 0);
            prop_assert_eq!(acc.last.0, times[times.len() - 1]);
        }
    }

    #[test]
    fn infinities_are_extremes_and_nan_never_is() {
        let inf = f64::INFINITY;
        for (values, low, high) in [
            (vec![inf], Some((inf, 0)), Some((inf, 0))),
            (vec![f64::NAN, inf, inf, f64::NAN, inf], Some((inf, 10)), Some((inf, 10))),
            (vec![-inf, -inf], Some((-inf, 0)), Some((-inf, 0))),
            (vec![inf, 1.0, -inf, 2.0, inf, -inf], Some((-inf, 20)), Some((inf, 0))),
            (vec![f64::NAN; 6], None, None),
        ] {
            let times: Vec<i64> = (0..values.len() as i64).map(|i| i * 10).collect();
            let mut acc = Acc::EMPTY;
            acc.add(&times, &values);
            assert_eq!(low.is_some(), acc.min.1 != i64::MAX, "{values:?}");
            if let (Some(low), Some(high)) = (low, high) {
                assert_eq!((acc.min, acc.max), (low, high), "{values:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn without_extremes_count_sum_mean_and_ends_are_the_same(values in proptest::collection::vec(special(), 1..40), split in 0usize..40) {
            let times: Vec<i64> = (0..values.len() as i64).map(|i| i * 10).collect();
            let split = split.min(values.len());
            let (mut full, mut lean) = (Acc::EMPTY, Acc::empty(false));
            for acc in [&mut full, &mut lean] {
                acc.add(&times[split..], &values[split..]);
                acc.add(&times[..split], &values[..split]);
            }
            for reducer in [Reducer::Count, Reducer::Sum, Reducer::Mean, Reducer::First, Reducer::Last] {
                prop_assert_eq!(format!("{:?}", full.result(reducer)), format!("{:?}", lean.result(reducer)), "{:?}", reducer);
            }
        }
    }

    #[test]
    #[should_panic(expected = "without extremes")]
    fn a_bucket_without_extremes_refuses_min() {
        let mut acc = Acc::empty(false);
        acc.add(&[10], &[1.0]);
        let _ = acc.result(Reducer::Min);
    }

    #[test]
    fn across_runs_the_earliest_of_equal_extremes_wins() {
        let mut acc = Acc::EMPTY;
        acc.add(&[50, 60], &[1.0, 3.0]);
        acc.add(&[10, 20], &[3.0, 1.0]);
        assert_eq!(acc.min, (1.0, 20));
        assert_eq!(acc.max, (3.0, 10));
        assert_eq!(acc.first, (10, 3.0));
        assert_eq!(acc.last, (60, 3.0));
        assert_eq!(acc.result(Reducer::Mean).0, FieldValue::Float(2.0));
    }
}
