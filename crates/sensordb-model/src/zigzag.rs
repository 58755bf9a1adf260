//! The zigzag mapping of signed to unsigned integers (0, -1, 1, -2, … → 0, 1, 2, 3, …), so that
//! values near zero of either sign make short varints.

/// Maps a signed value to an unsigned one, small magnitudes to small values.
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_magnitudes_map_to_small_values() {
        assert_eq!([0, -1, 1, -2, 2].map(zigzag), [0, 1, 2, 3, 4]);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }

    proptest! {
        #[test]
        fn zigzag_round_trips(value: i64) {
            prop_assert_eq!(unzigzag(zigzag(value)), value);
        }
    }
}
