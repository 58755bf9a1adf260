//! The Fisherman merge selection (Zhivchikova & Shevchuk, "Riak KV performance in sensor data
//! storage application", section 3.0.4), a pure function of disk usage and candidate files.
//!
//! A candidate is a sealed segment with dead share `D` (dead block bytes over all block bytes).
//! Hunger `H = (U − U_m)/(U_full − U_m)` grows as disk usage `U` passes the target `U_m` (the
//! paper's `U_full` is 1; see below). A segment is
//! taken when `D ≥ D_m`, where `D_m = min(1 − H, ewma(D of segments merged))` while `H > 0` and
//! `D_m = 1` otherwise; fully dead segments (`D = 1`) are always taken, and taken segments are
//! processed highest `D` first. The moving average is the fisherman's memory of what is worth
//! eating: an unusually small catch lowers it, so he settles for smaller fish; a big one raises
//! it, so he lets small fish go in the hope of more big ones.
//!
//! Two adaptations of the paper, both measured with `sensordb bench reclaim --short-share 0.3`
//! (a share of the series with a short storage period, so old segments are about 30% dead; see
//! docs/BENCHMARKS.md):
//! - Hunger is full where writers start being slowed: `H = (U − U_m)/(U_full − U_m)` with
//!   `U_full` = the throttle's `U_l`. The paper's `U_full` is 1: its disk was "full" at 100%, with
//!   its throttle band at 95-100%. With sensordb's band at 90-95% the paper's formula only takes a
//!   file of dead share `D` at `U ≥ U_m + (1 − U_m)(1 − D)`, for `D` ≈ 0.3 at 94%: deep in the
//!   band, so writers were slowed for good (0.38 of the empty store's rate at V = 0.8). At and
//!   above `U_full`, `H ≥ 1` and every file with dead data is taken: copying live data costs less
//!   than slowing writers. [`Fisherman::with_full_usage`] keeps the paper's form for `U_full` = 1.
//! - The moving average covers the files *merged* only ([`Fisherman::ate`] is not called for
//!   fully dead files). sensordb writes segments in time order, so plain expiry removes whole dead
//!   files by the hundred, for free; fed to the average they would hold it near 1, and the
//!   fisherman would never learn the size of the partly dead fish in his pond.

/// A segment that could be reclaimed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub segment: u64,
    /// Dead share `D` in [0, 1].
    pub dead_share: f64,
    /// Bytes on disk.
    pub bytes: u64,
}

/// The selection state: the moving average of the dead share of what was taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fisherman {
    /// Target disk usage `U_m`, in (0, 1).
    target_usage: f64,
    /// Usage `U_full` at which hunger is full (`H` = 1), in (`U_m`, 1].
    full_usage: f64,
    /// Smoothing constant α of the moving average (the paper's EWMA_n uses α = 1/n).
    alpha: f64,
    ewma: f64,
}

impl Fisherman {
    /// The paper's form: hunger is full at `U` = 1.
    #[cfg(test)]
    pub fn new(target_usage: f64, alpha: f64) -> Fisherman {
        Fisherman::with_full_usage(target_usage, 1.0, alpha)
    }

    /// Hunger full at `full_usage`. Starts with no memory: the average begins at 1, so the
    /// first threshold is `1 − H`.
    pub fn with_full_usage(target_usage: f64, full_usage: f64, alpha: f64) -> Fisherman {
        assert!(target_usage > 0.0 && target_usage < 1.0, "target usage must be in (0, 1), got {target_usage}");
        assert!(full_usage > target_usage && full_usage <= 1.0, "full usage must be in (target, 1], got {full_usage}");
        assert!(alpha > 0.0 && alpha <= 1.0, "smoothing constant must be in (0, 1], got {alpha}");
        Fisherman { target_usage, full_usage, alpha, ewma: 1.0 }
    }

    /// `H = (U − U_m)/(U_full − U_m)`; negative while usage is below the target.
    pub fn hunger(&self, usage: f64) -> f64 {
        (usage - self.target_usage) / (self.full_usage - self.target_usage)
    }

    /// `D_m` at disk usage `usage`.
    pub fn threshold(&self, usage: f64) -> f64 {
        let hunger = self.hunger(usage);
        if hunger > 0.0 {
            (1.0 - hunger).min(self.ewma).max(0.0)
        } else {
            1.0
        }
    }

    pub fn ewma(&self) -> f64 {
        self.ewma
    }

    /// The candidates to take at `usage`, highest dead share first. Segments without dead data
    /// are never taken: rewriting them frees nothing.
    pub fn select(&self, usage: f64, candidates: &[Candidate]) -> Vec<Candidate> {
        let threshold = self.threshold(usage);
        let mut taken: Vec<Candidate> =
            candidates.iter().filter(|c| c.dead_share > 0.0 && (c.dead_share >= 1.0 || c.dead_share >= threshold)).copied().collect();
        taken.sort_by(|a, b| b.dead_share.total_cmp(&a.dead_share).then(a.segment.cmp(&b.segment)));
        taken
    }

    /// Remembers a segment that was reclaimed.
    pub fn ate(&mut self, dead_share: f64) {
        self.ewma += self.alpha * (dead_share.clamp(0.0, 1.0) - self.ewma);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(segment: u64, dead_share: f64) -> Candidate {
        Candidate { segment, dead_share, bytes: 100 }
    }

    #[test]
    fn hunger_and_threshold_follow_the_formulas() {
        let fisherman = Fisherman::new(0.8, 0.1);
        assert!((fisherman.hunger(0.9) - 0.5).abs() < 1e-12, "(0.9 − 0.8)/(1 − 0.8)");
        assert!((fisherman.hunger(0.7) + 0.5).abs() < 1e-12);
        assert_eq!(fisherman.threshold(0.8), 1.0, "not hungry at the target");
        assert_eq!(fisherman.threshold(0.5), 1.0);
        // ewma starts at 1, so D_m = 1 − H.
        assert!((fisherman.threshold(0.9) - 0.5).abs() < 1e-12);
        assert!((fisherman.threshold(0.95) - 0.25).abs() < 1e-12);
        assert_eq!(fisherman.threshold(1.0), 0.0, "starving: anything with dead data");
    }

    #[test]
    fn hunger_is_full_at_the_full_usage() {
        // Full where the throttle begins (U_l = 0.9), as the reclaimer runs it.
        let fisherman = Fisherman::with_full_usage(0.8, 0.9, 0.1);
        assert!((fisherman.hunger(0.85) - 0.5).abs() < 1e-12, "(0.85 − 0.8)/(0.9 − 0.8)");
        assert!((fisherman.threshold(0.87) - 0.3).abs() < 1e-12, "a 30% dead file is taken from 87%");
        assert_eq!(fisherman.threshold(0.9), 0.0, "at U_l: anything with dead data");
        assert_eq!(fisherman.threshold(0.97), 0.0);
        let pond = [candidate(1, 0.05), candidate(2, 0.0)];
        assert_eq!(fisherman.select(0.9, &pond).iter().map(|c| c.segment).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn the_moving_average_caps_the_threshold_and_learns() {
        let mut fisherman = Fisherman::new(0.8, 0.5);
        fisherman.ate(0.2);
        assert!((fisherman.ewma() - 0.6).abs() < 1e-12, "1 + 0.5 × (0.2 − 1)");
        // Barely hungry (1 − H = 0.95) yet the memory of small fish lowers D_m to 0.6.
        assert!((fisherman.threshold(0.81) - 0.6).abs() < 1e-12);
        fisherman.ate(1.0);
        assert!((fisherman.ewma() - 0.8).abs() < 1e-12, "a big catch raises it again");
    }

    #[test]
    fn fully_dead_segments_are_always_taken_and_the_best_come_first() {
        let fisherman = Fisherman::new(0.8, 0.1);
        let pond = [candidate(1, 0.3), candidate(2, 1.0), candidate(3, 0.7), candidate(4, 0.0), candidate(5, 0.9)];
        let ids = |taken: Vec<Candidate>| taken.iter().map(|c| c.segment).collect::<Vec<_>>();
        assert_eq!(ids(fisherman.select(0.5, &pond)), vec![2], "not hungry: only D = 1");
        assert_eq!(ids(fisherman.select(0.9, &pond)), vec![2, 5, 3], "H = 0.5: D ≥ 0.5, highest first");
        assert_eq!(ids(fisherman.select(1.0, &pond)), vec![2, 5, 3, 1], "starving: every D > 0, never D = 0");
    }

    /// A synthetic stream of candidate segments, as the paper's Riak node produced them: a
    /// store at live share V whose usage rises with every segment written and falls by what
    /// each reclaim frees. The fisherman must hold usage near the target, never run the disk
    /// full, and settle on merging segments of high dead share rather than everything.
    #[test]
    fn simulation_holds_usage_near_the_target_on_a_synthetic_stream() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let capacity = 1000.0_f64;
        let segment = 10.0_f64;
        let target = 0.8;
        let mut fisherman = Fisherman::with_full_usage(target, 0.9, 0.1);
        // (id, bytes, dead share): dead share of a segment grows with its age, at a rate
        // that varies by segment (some series are overwritten or deleted sooner).
        let mut segments: Vec<(u64, f64, f64, f64)> = Vec::new();
        let mut next_id = 0u64;
        let (mut max_usage, mut merged, mut merged_dead, mut written) = (0.0f64, 0usize, 0.0f64, 0.0f64);
        for step in 0..5_000 {
            segments.push((next_id, segment, 0.0, rng.gen_range(0.005..0.05)));
            next_id += 1;
            written += segment;
            for s in &mut segments {
                s.2 = (s.2 + s.3).min(1.0);
            }
            let used: f64 = segments.iter().map(|s| s.1).sum();
            let usage = used / capacity;
            max_usage = max_usage.max(usage);
            let candidates: Vec<Candidate> =
                segments.iter().map(|s| Candidate { segment: s.0, dead_share: s.2, bytes: s.1 as u64 }).collect();
            // One merge per step: the merge rate limit of the real reclaimer.
            if let Some(best) = fisherman.select(usage, &candidates).first() {
                let position = segments.iter().position(|s| s.0 == best.segment).expect("selected segment exists");
                let (_, bytes, dead, rate) = segments.remove(position);
                // As the reclaimer does: a fully dead file is removed, not merged.
                if dead < 1.0 {
                    fisherman.ate(dead);
                }
                merged += 1;
                merged_dead += dead;
                let live = bytes * (1.0 - dead);
                if live > 0.0 {
                    // The live part is rewritten into a fresh segment; its data keeps dying.
                    segments.push((next_id, live, 0.0, rate / (1.0 - dead)));
                    next_id += 1;
                }
            }
            if step > 1000 {
                assert!(usage <= 0.91, "usage ran away to {usage:.3} at step {step}: past U_l = 0.9 by more than a segment");
            }
        }
        let average_dead = merged_dead / merged as f64;
        assert!(max_usage <= 0.91, "usage peaked at {max_usage:.3}");
        assert!(average_dead > 0.5, "merged segments averaged D = {average_dead:.3}: too much live data copied");
        assert!(written > 10.0 * capacity, "the simulation wrote {written} bytes, more than ten capacities");
    }
}
