//! M4 downsampling for graphs (Jugel et al., "M4: A Visualization-Oriented Time Series Data
//! Aggregation", VLDB 2014): for each pixel column of a plot, the first, last, minimum and
//! maximum point. A line drawn through those points is pixel-identical to the line through every
//! point, so spikes survive, and a week at 1 Hz (604,800 points) becomes at most 4,000.
//!
//! Points go in sorted by time, in runs ([`M4::add`]); a run is cut at pixel boundaries and each
//! piece is reduced by one tight loop over its slice. Whole stored blocks that fall inside one
//! pixel can be added from their statistics without decoding ([`M4::add_summary`]).

use crate::value::ColumnSlice;

/// A point of a graph: time in nanoseconds and value.
pub type GraphPoint = (i64, f64);

#[derive(Clone, Copy, Debug, PartialEq)]
struct Column {
    first: GraphPoint,
    last: GraphPoint,
    min: GraphPoint,
    max: GraphPoint,
}

impl Column {
    fn of(p: GraphPoint) -> Column {
        Column { first: p, last: p, min: p, max: p }
    }

    fn merge(&mut self, other: &Column) {
        if other.first.0 < self.first.0 {
            self.first = other.first;
        }
        if other.last.0 >= self.last.0 {
            self.last = other.last;
        }
        if other.min.1 < self.min.1 || (other.min.1 == self.min.1 && other.min.0 < self.min.0) {
            self.min = other.min;
        }
        if other.max.1 > self.max.1 || (other.max.1 == self.max.1 && other.max.0 < self.max.0) {
            self.max = other.max;
        }
    }
}

/// The M4 reduction of one series over `[from, to]` into `width` pixel columns.
#[derive(Clone, Debug)]
pub struct M4 {
    from: i64,
    /// Nanoseconds per column, as a fraction: column of t = (t - from) * width / span.
    span: i128,
    width: usize,
    columns: Vec<Option<Column>>,
}

impl M4 {
    /// `width` columns over `[from, to]`; `width` is at least 1 and `from <= to`.
    pub fn new(from: i64, to: i64, width: usize) -> M4 {
        assert!(width > 0 && from <= to, "M4 over an empty range or no pixels");
        M4 { from, span: i128::from(to) - i128::from(from) + 1, width, columns: vec![None; width] }
    }

    fn column_of(&self, t: i64) -> usize {
        (((i128::from(t) - i128::from(self.from)) * self.width as i128 / self.span) as usize).min(self.width - 1)
    }

    /// First time of column `c`.
    fn column_start(&self, c: usize) -> i64 {
        let width = self.width as i128;
        let offset = (c as i128 * self.span + width - 1) / width;
        (i128::from(self.from) + offset) as i64
    }

    /// Adds points sorted by time, all within the range; non-numbers are skipped (booleans
    /// count as 0 and 1), NaN values too.
    pub fn add(&mut self, times: &[i64], values: ColumnSlice<'_>) {
        let mut start = 0;
        while start < times.len() {
            let c = self.column_of(times[start]);
            let end = if c + 1 < self.width {
                let next = self.column_start(c + 1);
                start + crate::runs::points_before(&times[start..], next)
            } else {
                times.len()
            };
            if let Some(piece) = reduce(&times[start..end], values, start) {
                match &mut self.columns[c] {
                    Some(column) => column.merge(&piece),
                    empty => *empty = Some(piece),
                }
            }
            start = end.max(start + 1);
        }
    }

    /// Adds a whole block known only by its statistics, when its time range lies in one column;
    /// returns false (adding nothing) when it spans columns and must be decoded instead.
    pub fn add_summary(&mut self, first: GraphPoint, last: GraphPoint, min: GraphPoint, max: GraphPoint) -> bool {
        let c = self.column_of(first.0);
        if c != self.column_of(last.0) {
            return false;
        }
        let piece = Column { first, last, min, max };
        match &mut self.columns[c] {
            Some(column) => column.merge(&piece),
            empty => *empty = Some(piece),
        }
        true
    }

    /// The graph's points in time order: per column its first, minimum, maximum and last point,
    /// each once.
    pub fn points(&self) -> Vec<GraphPoint> {
        let mut out = Vec::with_capacity(self.width * 4);
        for column in self.columns.iter().flatten() {
            let mut four = [column.first, column.min, column.max, column.last];
            four.sort_by_key(|p| p.0);
            for p in four {
                if out.last().is_none_or(|last: &GraphPoint| last.0 != p.0) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// First, last, min and max of a run of points (indices `offset..` of `values`).
fn reduce(times: &[i64], values: ColumnSlice<'_>, offset: usize) -> Option<Column> {
    let value = |i: usize| -> Option<f64> {
        match values {
            ColumnSlice::Float(v) => Some(v[offset + i]).filter(|x| !x.is_nan()),
            ColumnSlice::Integer(v) => Some(v[offset + i] as f64),
            ColumnSlice::Unsigned(v) => Some(v[offset + i] as f64),
            ColumnSlice::Boolean(v) => Some(f64::from(u8::from(v[offset + i]))),
            ColumnSlice::String(_) => None,
        }
    };
    if let ColumnSlice::Float(v) = values {
        // The common case: one vectorisable pass for the extremes; the ends are the first and
        // last values that are numbers (almost always the run's own ends).
        let slice = &v[offset..offset + times.len()];
        let (_, Some(low), Some(high)) = crate::runs::extremes::<false>(slice) else { return None };
        let first = slice.iter().position(|x| !x.is_nan())?;
        let last = slice.iter().rposition(|x| !x.is_nan())?;
        let point = |i: usize| (times[i], slice[i]);
        return Some(Column { first: point(first), last: point(last), min: point(low), max: point(high) });
    }
    let mut column: Option<Column> = None;
    for (i, &t) in times.iter().enumerate() {
        let Some(x) = value(i) else { continue };
        let p = (t, x);
        match &mut column {
            None => column = Some(Column::of(p)),
            Some(c) => c.merge(&Column::of(p)),
        }
    }
    column
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_spike_survives_and_each_column_keeps_four_points() {
        let times: Vec<i64> = (0..100).collect();
        let mut values: Vec<f64> = times.iter().map(|&t| t as f64).collect();
        values[37] = 1000.0;
        let mut m4 = M4::new(0, 99, 10);
        m4.add(&times, ColumnSlice::Float(&values));
        let points = m4.points();
        assert!(points.contains(&(37, 1000.0)), "the spike is kept");
        // Column 3 (times 30..39): first 30, min 30, max 37 (spike), last 39.
        assert!(points.contains(&(30, 30.0)) && points.contains(&(39, 39.0)));
        assert!(points.len() <= 40);
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "time order");
    }

    #[test]
    fn runs_split_anywhere_give_the_same_graph() {
        let times: Vec<i64> = (0..1000).map(|i| i * 7).collect();
        let values: Vec<i64> = (0..1000).map(|i| (i * 37 % 101) - 50).collect();
        let mut whole = M4::new(0, 7000, 33);
        whole.add(&times, ColumnSlice::Integer(&values));
        let mut parts = M4::new(0, 7000, 33);
        for (t, v) in times.chunks(13).zip(values.chunks(13)) {
            parts.add(t, ColumnSlice::Integer(v));
        }
        assert_eq!(whole.points(), parts.points());
    }

    #[test]
    fn a_block_inside_one_column_is_added_from_its_statistics() {
        let mut m4 = M4::new(0, 999, 10);
        assert!(m4.add_summary((0, 1.0), (50, 2.0), (10, -1.0), (20, 5.0)));
        assert!(!m4.add_summary((90, 1.0), (110, 2.0), (95, 0.0), (100, 3.0)), "spans two columns");
        assert_eq!(m4.points(), vec![(0, 1.0), (10, -1.0), (20, 5.0), (50, 2.0)]);
    }

    proptest! {
        /// Every column's extremes are the true extremes of its points.
        #[test]
        fn columns_hold_the_true_extremes(mut points in proptest::collection::vec((0i64..10_000, -1e6f64..1e6), 1..500), width in 1usize..50) {
            points.sort_by_key(|p| p.0);
            points.dedup_by_key(|p| p.0);
            let (times, values): (Vec<i64>, Vec<f64>) = points.iter().copied().unzip();
            let mut m4 = M4::new(0, 9_999, width);
            m4.add(&times, ColumnSlice::Float(&values));
            let out = m4.points();
            for c in 0..width {
                let in_column: Vec<GraphPoint> = points.iter().copied().filter(|p| m4.column_of(p.0) == c).collect();
                if in_column.is_empty() { continue; }
                let max = in_column.iter().map(|p| p.1).fold(f64::MIN, f64::max);
                let min = in_column.iter().map(|p| p.1).fold(f64::MAX, f64::min);
                prop_assert!(out.iter().any(|p| p.1 == max && m4.column_of(p.0) == c));
                prop_assert!(out.iter().any(|p| p.1 == min && m4.column_of(p.0) == c));
                prop_assert!(out.contains(&in_column[0]) && out.contains(in_column.last().expect("nonempty")));
            }
        }
    }
}
