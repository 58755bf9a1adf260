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

// Inlined too: a series run is three long varints an entry, and the call across crates cost
// a tenth of decoding one (callgrind, first reads of the large-store bench).
#[inline]
fn get_long_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
    // Up to eight bytes at once when eight are there: the last byte of the varint is the first
    // without its high bit, and its seven-bit groups are packed by three shifts (varints of up
    // to eight bytes hold values below 2^56: offsets, times, spans). A byte loop took half of
    // decoding a segment's series run.
    if let Some(word) = bytes.get(*position..*position + 8) {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let stops = !word & 0x8080_8080_8080_8080;
        if stops != 0 {
            let length = (stops.trailing_zeros() + 1) / 8;
            let kept = if length == 8 { u64::MAX } else { (1u64 << (8 * length)) - 1 };
            let x = word & kept & 0x7f7f_7f7f_7f7f_7f7f;
            let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            *position += length as usize;
            return Some(x);
        }
    }
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

    #[test]
    fn varints_of_every_length_decode_with_and_without_bytes_after_them() {
        for bits in 0..64 {
            for value in [1u64 << bits, (1u64 << bits) - 1, (1u64 << bits) | 0x55, u64::MAX >> (63 - bits)] {
                let mut out = Vec::new();
                put_varint(&mut out, value);
                let length = out.len();
                // Alone (the byte loop), then followed by bytes (eight read at once).
                for tail in [0usize, 1, 9] {
                    let mut bytes = out.clone();
                    bytes.extend(std::iter::repeat_n(0xff, tail));
                    let mut position = 0;
                    assert_eq!(get_varint(&bytes, &mut position), Some(value), "{value} with {tail} bytes after");
                    assert_eq!(position, length, "{value} with {tail} bytes after");
                }
            }
        }
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
