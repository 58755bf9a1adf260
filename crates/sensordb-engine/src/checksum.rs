//! Checksums and little-endian field access shared by every on-disk format.
//!
//! All checksums are CRC32C (Castagnoli), hardware-accelerated on x86-64 and ARM.

/// CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Rounds `offset` up to the next multiple of `alignment` (a power of two).
pub fn align_up(offset: u64, alignment: u64) -> u64 {
    debug_assert!(alignment.is_power_of_two());
    (offset + alignment - 1) & !(alignment - 1)
}

/// Reads fixed-width little-endian fields from a byte slice whose length was checked before.
pub struct LeReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> LeReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        LeReader { bytes, position: 0 }
    }
    pub fn position(&self) -> usize {
        self.position
    }
    pub fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.position..self.position.checked_add(len)?)?;
        self.position += len;
        Some(slice)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
    pub fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|b| {
            let mut out = [0u8; N];
            out.copy_from_slice(b);
            out
        })
    }
}

/// Unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads an unsigned LEB128 varint at `*position`, advancing it; `None` when truncated or longer
/// than 10 bytes.
pub fn get_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
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

pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn align_up_rounds_to_the_next_page() {
        assert_eq!(align_up(0, 4096), 0);
        assert_eq!(align_up(1, 4096), 4096);
        assert_eq!(align_up(4096, 4096), 4096);
        assert_eq!(align_up(4097, 4096), 8192);
    }

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
