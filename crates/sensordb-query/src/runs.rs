//! Kernels over runs of points sorted by time, shared by the aggregates of the streaming path
//! and the M4 graph: where a run's extremes are, and how many of its points lie before a
//! bucket's edge. A week graph sends 604,800 points through them, so they are written for the
//! cache and for the compiler's vectoriser.

/// Lanes of [`extremes`]: four f64 fill a 256-bit vector.
const LANES: usize = 4;

/// The sum of `values` in order (0 unless `SUM`), and the places of the earliest minimum and
/// the earliest maximum; `None` when every value is NaN (NaN is never an extreme).
pub fn extremes<const SUM: bool>(values: &[f64]) -> (f64, Option<usize>, Option<usize>) {
    // One pass: the sum in order and, in lanes of compare-and-select the compiler can
    // vectorise, each lane's extremes with where they are. Strict comparisons keep a lane's
    // earliest of equal extremes, and NaN never wins one. (Index-chasing passes, and searches
    // for the extremes' places after them, took most of a week graph's time.)
    let mut sum = 0.0;
    let mut lows = [f64::INFINITY; LANES];
    let mut highs = [f64::NEG_INFINITY; LANES];
    let mut low_at = [usize::MAX; LANES];
    let mut high_at = [usize::MAX; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for (c, chunk) in chunks.enumerate() {
        for lane in 0..LANES {
            let (x, at) = (chunk[lane], c * LANES + lane);
            if SUM {
                sum += x;
            }
            let lower = x < lows[lane];
            lows[lane] = if lower { x } else { lows[lane] };
            low_at[lane] = if lower { at } else { low_at[lane] };
            let higher = x > highs[lane];
            highs[lane] = if higher { x } else { highs[lane] };
            high_at[lane] = if higher { at } else { high_at[lane] };
        }
    }
    let tail = values.len() - rest.len();
    for (i, &x) in rest.iter().enumerate() {
        if SUM {
            sum += x;
        }
        // The tail goes to lanes of its own index, so no lane sees an earlier point late.
        let lane = i;
        if x < lows[lane] {
            (lows[lane], low_at[lane]) = (x, tail + i);
        }
        if x > highs[lane] {
            (highs[lane], high_at[lane]) = (x, tail + i);
        }
    }
    // Across lanes: the extreme, the earliest of equal ones. No lane has a place when every
    // value is NaN.
    let pick = |values: &[f64; LANES], places: &[usize; LANES], better: fn(f64, f64) -> bool| {
        (0..LANES).filter(|&l| places[l] != usize::MAX).reduce(|best, l| {
            if better(values[l], values[best]) || (values[l] == values[best] && places[l] < places[best]) {
                l
            } else {
                best
            }
        })
    };
    // A lane whose values are all +inf never found a lower one (nor -inf a higher one):
    // with no lane placed, the extreme is the first infinity, or every value is NaN.
    let low = pick(&lows, &low_at, |a, b| a < b).map(|l| low_at[l]).or_else(|| values.iter().position(|&x| x == f64::INFINITY));
    let high = pick(&highs, &high_at, |a, b| a > b).map(|l| high_at[l]).or_else(|| values.iter().position(|&x| x == f64::NEG_INFINITY));
    (sum, low, high)
}

/// How many of the ascending `times` lie before `edge`. Sensors report at steady rates, so the
/// answer is first guessed from the times at both ends, then searched from the guess with
/// growing steps: the block behind `times` is cold in the cache (the aggregates read only its
/// values), and each probe of a plain binary search missed it, most of a week graph's time.
pub fn points_before(times: &[i64], edge: i64) -> usize {
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else { return 0 };
    if first >= edge {
        return 0;
    }
    if last < edge {
        return times.len();
    }
    // first < edge <= last, so the span is positive and the guess lies in [0, len - 1].
    let span = i128::from(last) - i128::from(first);
    let guess = ((i128::from(edge) - i128::from(first)) * (times.len() as i128 - 1) / span) as usize;
    if times[guess] < edge {
        // The answer lies above the guess: gallop up from it.
        let mut below = guess;
        let mut step = 1;
        let mut above = loop {
            let probe = below + step;
            if probe >= times.len() || times[probe] >= edge {
                break probe.min(times.len());
            }
            below = probe;
            step *= 2;
        };
        above = above.max(below + 1);
        below + 1 + times[below + 1..above].partition_point(|&t| t < edge)
    } else {
        // The answer is at most the guess: gallop down from it.
        let mut above = guess;
        let mut step = 1;
        let below = loop {
            if above < step {
                break 0;
            }
            let probe = above - step;
            if times[probe] < edge {
                break probe;
            }
            above = probe;
            step *= 2;
        };
        below + times[below..above].partition_point(|&t| t < edge)
    }
}
