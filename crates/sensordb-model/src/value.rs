//! Timestamps, values, value kinds and value columns.
//!
//! Every series has one [`ValueKind`], fixed when the series is first written; a later write
//! of another kind is rejected, so every block of a series holds one kind of value.
//! Timestamps are i64 nanoseconds since the Unix epoch. Floats compare bitwise throughout,
//! because storage must give back every f64 bit for bit.

use bytes::Bytes;
use std::fmt;

/// Nanoseconds since the Unix epoch.
pub type Timestamp = i64;

/// The earliest timestamp a point may carry: InfluxDB's `MinNanoTime`, `i64::MIN + 2`.
pub const TIMESTAMP_MIN: Timestamp = i64::MIN + 2;
/// The latest timestamp a point may carry: InfluxDB's `MaxNanoTime`, `i64::MAX - 1`. Every read
/// range ends before `i64::MAX` (`[from, to)` with `to` at most `i64::MAX`), so a point after
/// this could be stored but never read back.
pub const TIMESTAMP_MAX: Timestamp = i64::MAX - 1;

/// Why a point may not carry `timestamp` (outside [`TIMESTAMP_MIN`]..=[`TIMESTAMP_MAX`]), in
/// InfluxDB's words; `None` when it may. Both protocols refuse with this message.
pub fn timestamp_out_of_range(timestamp: Timestamp) -> Option<String> {
    (!(TIMESTAMP_MIN..=TIMESTAMP_MAX).contains(&timestamp))
        .then(|| format!("timestamp {timestamp} is out of range: time outside range {TIMESTAMP_MIN} - {TIMESTAMP_MAX}"))
}

/// The kind of value a series holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    F64 = 1,
    I64 = 2,
    U64 = 3,
    Bool = 4,
    /// Opaque bytes: strings, waveform chunks, binary telemetry frames.
    Bytes = 5,
}

impl TryFrom<u8> for ValueKind {
    type Error = u8;
    fn try_from(tag: u8) -> Result<Self, u8> {
        Ok(match tag {
            1 => ValueKind::F64,
            2 => ValueKind::I64,
            3 => ValueKind::U64,
            4 => ValueKind::Bool,
            5 => ValueKind::Bytes,
            other => return Err(other),
        })
    }
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueKind::F64 => "float",
            ValueKind::I64 => "integer",
            ValueKind::U64 => "unsigned",
            ValueKind::Bool => "boolean",
            ValueKind::Bytes => "bytes",
        })
    }
}

/// One value. Equality of floats is bitwise (NaN == NaN of the same bits, -0.0 != 0.0), because
/// storage must give back every f64 bit for bit.
#[derive(Clone, Debug)]
pub enum Value {
    F64(f64),
    I64(i64),
    U64(u64),
    Bool(bool),
    Bytes(Bytes),
}

impl Value {
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::F64(_) => ValueKind::F64,
            Value::I64(_) => ValueKind::I64,
            Value::U64(_) => ValueKind::U64,
            Value::Bool(_) => ValueKind::Bool,
            Value::Bytes(_) => ValueKind::Bytes,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::F64(a), Value::F64(b)) => a.to_bits() == b.to_bits(),
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::U64(a), Value::U64(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Value {}

/// Values of one kind, column-wise: the unit the codecs compress. Equality of floats is bitwise,
/// as for [`Value`].
#[derive(Clone, Debug)]
pub enum ValueColumn {
    F64(Vec<f64>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Bytes(Vec<Bytes>),
}

impl PartialEq for ValueColumn {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ValueColumn::F64(a), ValueColumn::F64(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            (ValueColumn::I64(a), ValueColumn::I64(b)) => a == b,
            (ValueColumn::U64(a), ValueColumn::U64(b)) => a == b,
            (ValueColumn::Bool(a), ValueColumn::Bool(b)) => a == b,
            (ValueColumn::Bytes(a), ValueColumn::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl ValueColumn {
    pub fn new(kind: ValueKind) -> Self {
        match kind {
            ValueKind::F64 => ValueColumn::F64(Vec::new()),
            ValueKind::I64 => ValueColumn::I64(Vec::new()),
            ValueKind::U64 => ValueColumn::U64(Vec::new()),
            ValueKind::Bool => ValueColumn::Bool(Vec::new()),
            ValueKind::Bytes => ValueColumn::Bytes(Vec::new()),
        }
    }

    pub fn kind(&self) -> ValueKind {
        match self {
            ValueColumn::F64(_) => ValueKind::F64,
            ValueColumn::I64(_) => ValueKind::I64,
            ValueColumn::U64(_) => ValueKind::U64,
            ValueColumn::Bool(_) => ValueKind::Bool,
            ValueColumn::Bytes(_) => ValueKind::Bytes,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ValueColumn::F64(v) => v.len(),
            ValueColumn::I64(v) => v.len(),
            ValueColumn::U64(v) => v.len(),
            ValueColumn::Bool(v) => v.len(),
            ValueColumn::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `index`. Panics when out of bounds, like slice indexing.
    pub fn get(&self, index: usize) -> Value {
        match self {
            ValueColumn::F64(v) => Value::F64(v[index]),
            ValueColumn::I64(v) => Value::I64(v[index]),
            ValueColumn::U64(v) => Value::U64(v[index]),
            ValueColumn::Bool(v) => Value::Bool(v[index]),
            ValueColumn::Bytes(v) => Value::Bytes(v[index].clone()),
        }
    }

    /// The values at `indices`, in that order.
    pub fn gather(&self, indices: &[usize]) -> ValueColumn {
        match self {
            ValueColumn::F64(v) => ValueColumn::F64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::I64(v) => ValueColumn::I64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::U64(v) => ValueColumn::U64(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::Bool(v) => ValueColumn::Bool(indices.iter().map(|&i| v[i]).collect()),
            ValueColumn::Bytes(v) => ValueColumn::Bytes(indices.iter().map(|&i| v[i].clone()).collect()),
        }
    }

    /// The values in `range`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> ValueColumn {
        match self {
            ValueColumn::F64(v) => ValueColumn::F64(v[range].to_vec()),
            ValueColumn::I64(v) => ValueColumn::I64(v[range].to_vec()),
            ValueColumn::U64(v) => ValueColumn::U64(v[range].to_vec()),
            ValueColumn::Bool(v) => ValueColumn::Bool(v[range].to_vec()),
            ValueColumn::Bytes(v) => ValueColumn::Bytes(v[range].to_vec()),
        }
    }

    /// Removes every value, keeping the allocation.
    pub fn clear(&mut self) {
        match self {
            ValueColumn::F64(v) => v.clear(),
            ValueColumn::I64(v) => v.clear(),
            ValueColumn::U64(v) => v.clear(),
            ValueColumn::Bool(v) => v.clear(),
            ValueColumn::Bytes(v) => v.clear(),
        }
    }

    /// Appends all of `other`; returns false (appending nothing) when the kinds differ.
    pub fn extend_from(&mut self, other: &ValueColumn) -> bool {
        self.extend_from_range(other, 0..other.len())
    }

    /// Appends `other[range]`; returns false (appending nothing) when the kinds differ.
    pub fn extend_from_range(&mut self, other: &ValueColumn, range: std::ops::Range<usize>) -> bool {
        match (self, other) {
            (ValueColumn::F64(a), ValueColumn::F64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::I64(a), ValueColumn::I64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::U64(a), ValueColumn::U64(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::Bool(a), ValueColumn::Bool(b)) => a.extend_from_slice(&b[range]),
            (ValueColumn::Bytes(a), ValueColumn::Bytes(b)) => a.extend_from_slice(&b[range]),
            _ => return false,
        }
        true
    }

    /// Approximate heap bytes held, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes_from(0)
    }

    /// [`ValueColumn::heap_bytes`] of the values from index `start` on.
    pub fn heap_bytes_from(&self, start: usize) -> usize {
        let count = self.len().saturating_sub(start);
        match self {
            ValueColumn::F64(_) | ValueColumn::I64(_) | ValueColumn::U64(_) => count * 8,
            ValueColumn::Bool(_) => count,
            ValueColumn::Bytes(v) => v[start.min(v.len())..].iter().map(|b| b.len() + 32).sum(),
        }
    }

    /// Keeps the first `len` values.
    pub fn truncate(&mut self, len: usize) {
        match self {
            ValueColumn::F64(v) => v.truncate(len),
            ValueColumn::I64(v) => v.truncate(len),
            ValueColumn::U64(v) => v.truncate(len),
            ValueColumn::Bool(v) => v.truncate(len),
            ValueColumn::Bytes(v) => v.truncate(len),
        }
    }

    /// Appends `value`; returns it back when its kind differs from the column's.
    pub fn push(&mut self, value: Value) -> Result<(), Value> {
        match (self, value) {
            (ValueColumn::F64(v), Value::F64(x)) => v.push(x),
            (ValueColumn::I64(v), Value::I64(x)) => v.push(x),
            (ValueColumn::U64(v), Value::U64(x)) => v.push(x),
            (ValueColumn::Bool(v), Value::Bool(x)) => v.push(x),
            (ValueColumn::Bytes(v), Value::Bytes(x)) => v.push(x),
            (_, value) => return Err(value),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_values_compare_bitwise() {
        assert_eq!(Value::F64(f64::NAN), Value::F64(f64::NAN));
        assert_ne!(Value::F64(0.0), Value::F64(-0.0));
        assert_ne!(Value::F64(1.0), Value::I64(1));
    }
}
