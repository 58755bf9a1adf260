//! Per-block value statistics, kept in the block header so that downsampling can answer
//! min/max/sum/count over whole blocks without decoding them.
//!
//! min and max are stored as 8 raw bytes in the kind's own type (f64 bits, i64, u64) so that
//! integers keep full precision; NaN is ignored for float min/max (a block of only NaN has
//! min = +inf, max = -inf). For booleans min/max are 0/1 and the sum counts `true`; for byte
//! payloads min/max are payload lengths and the sum is the total payload bytes.

use crate::model::{ValueColumn, ValueKind};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueStats {
    pub min_bits: u64,
    pub max_bits: u64,
    /// Sum as f64 (approximate for large integers).
    pub sum: f64,
}

impl ValueStats {
    pub fn of(values: &ValueColumn) -> Self {
        match values {
            ValueColumn::F64(v) => {
                let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
                for &x in v.iter().filter(|x| !x.is_nan()) {
                    min = min.min(x);
                    max = max.max(x);
                    sum += x;
                }
                ValueStats { min_bits: min.to_bits(), max_bits: max.to_bits(), sum }
            }
            ValueColumn::I64(v) => ValueStats {
                min_bits: v.iter().copied().min().unwrap_or(0) as u64,
                max_bits: v.iter().copied().max().unwrap_or(0) as u64,
                sum: v.iter().map(|&x| x as f64).sum(),
            },
            ValueColumn::U64(v) => ValueStats {
                min_bits: v.iter().copied().min().unwrap_or(0),
                max_bits: v.iter().copied().max().unwrap_or(0),
                sum: v.iter().map(|&x| x as f64).sum(),
            },
            ValueColumn::Bool(v) => ValueStats {
                min_bits: u64::from(v.iter().all(|&b| b)),
                max_bits: u64::from(v.iter().any(|&b| b)),
                sum: v.iter().filter(|&&b| b).count() as f64,
            },
            ValueColumn::Bytes(v) => ValueStats {
                min_bits: v.iter().map(|b| b.len() as u64).min().unwrap_or(0),
                max_bits: v.iter().map(|b| b.len() as u64).max().unwrap_or(0),
                sum: v.iter().map(|b| b.len() as f64).sum(),
            },
        }
    }

    fn as_f64(bits: u64, kind: ValueKind) -> f64 {
        match kind {
            ValueKind::F64 => f64::from_bits(bits),
            ValueKind::I64 => bits as i64 as f64,
            ValueKind::U64 | ValueKind::Bool | ValueKind::Bytes => bits as f64,
        }
    }

    /// The minimum as f64, `None` when a float block holds only NaN.
    pub fn min_f64(&self, kind: ValueKind) -> Option<f64> {
        let min = Self::as_f64(self.min_bits, kind);
        (min != f64::INFINITY || kind != ValueKind::F64 || self.max_f64_raw(kind) != f64::NEG_INFINITY).then_some(min)
    }

    pub fn max_f64(&self, kind: ValueKind) -> Option<f64> {
        let max = self.max_f64_raw(kind);
        (max != f64::NEG_INFINITY || kind != ValueKind::F64 || Self::as_f64(self.min_bits, kind) != f64::INFINITY).then_some(max)
    }

    fn max_f64_raw(&self, kind: ValueKind) -> f64 {
        Self::as_f64(self.max_bits, kind)
    }
}
