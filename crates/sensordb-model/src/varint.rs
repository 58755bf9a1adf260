//! Unsigned LEB128 varints: seven bits per byte, least significant first, the high bit set on
//! every byte but the last. Signed values are mapped with [`crate::zigzag`] first.

/// Appends `value` as an unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads an unsigned LEB128 varint at `*position`, advancing it; `None` when truncated or longer
/// than 10 bytes.
///
/// Inlined with a one-byte fast path: most varints of a segment directory or a run are one
/// byte, and the call across crates was a fifth of opening a store of 2 M series (`perf`).
#[inline]
pub fn get_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
    let first = *bytes.get(*position)?;
    if first < 0x80 {
        *position += 1;
        return Some(u64::from(first));
    }
    get_long_varint(bytes, position)
}

fn get_long_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*position)?;
        *position += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zigzag::{unzigzag, zigzag};
    use proptest::prelude::*;

    #[test]
    fn overlong_varints_are_rejected() {
        let mut position = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut position), None);
        let mut position = 0;
        assert_eq!(get_varint(&[0x80], &mut position), None);
    }

    proptest! {
        #[test]
        fn varints_round_trip(value: u64, signed: i64) {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            put_varint(&mut out, zigzag(signed));
            let mut position = 0;
            prop_assert_eq!(get_varint(&out, &mut position), Some(value));
            prop_assert_eq!(get_varint(&out, &mut position).map(unzigzag), Some(signed));
            prop_assert_eq!(position, out.len());
        }
    }
}
