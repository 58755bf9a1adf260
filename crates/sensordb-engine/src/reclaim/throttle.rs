//! Throttling writers as the disk fills (the paper's section 2.3): between the thresholds
//! `U_l < U_h` every acknowledgement is delayed by `T = (U − U_l)/(U_h − U_l)` seconds, which
//! slows synchronous senders and leaves disk bandwidth to reclaim; at `U_h` writers wait until
//! reclaim brings usage back under it.

use std::time::Duration;

/// What a writer must do before its acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Acknowledge now.
    Now,
    /// Acknowledge after this delay.
    After(Duration),
    /// Usage is at or over `U_h`: wait for reclaim to free space.
    WaitForSpace,
}

/// The throttle thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttle {
    pub low: f64,
    pub high: f64,
}

impl Throttle {
    pub fn new(low: f64, high: f64) -> Throttle {
        assert!(0.0 < low && low < high && high <= 1.0, "need 0 < U_l < U_h ≤ 1, got {low} and {high}");
        Throttle { low, high }
    }

    /// `T = max(0, (U − U_l)/(U_h − U_l))` seconds, or [`Admission::WaitForSpace`] at `U_h`.
    pub fn admission(&self, usage: f64) -> Admission {
        if usage >= self.high {
            return Admission::WaitForSpace;
        }
        let seconds = ((usage - self.low) / (self.high - self.low)).max(0.0);
        if seconds == 0.0 {
            Admission::Now
        } else {
            Admission::After(Duration::from_secs_f64(seconds))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_is_zero_below_the_low_threshold_and_grows_linearly_to_one_second() {
        let throttle = Throttle::new(0.90, 0.95);
        assert_eq!(throttle.admission(0.50), Admission::Now);
        assert_eq!(throttle.admission(0.90), Admission::Now);
        let Admission::After(delay) = throttle.admission(0.925) else { panic!("halfway must delay") };
        assert!((delay.as_secs_f64() - 0.5).abs() < 1e-9, "{delay:?}");
        let Admission::After(delay) = throttle.admission(0.94) else { panic!("must delay") };
        assert!((delay.as_secs_f64() - 0.8).abs() < 1e-9, "{delay:?}");
        assert_eq!(throttle.admission(0.95), Admission::WaitForSpace);
        assert_eq!(throttle.admission(1.0), Admission::WaitForSpace);
    }

    #[test]
    #[should_panic(expected = "U_l < U_h")]
    fn thresholds_out_of_order_are_refused() {
        Throttle::new(0.95, 0.90);
    }
}
