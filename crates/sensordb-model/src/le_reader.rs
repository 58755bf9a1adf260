//! A reader of fixed-width little-endian fields from a byte slice, for the headers and bodies
//! of every binary format (on-disk files and protocol frames).

/// Reads fixed-width little-endian fields from a byte slice; every read returns `None` instead
/// of reading past the end.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_little_endian_and_never_past_the_end() {
        let bytes = [1, 2, 0, 3, 0, 0, 0, 9];
        let mut reader = LeReader::new(&bytes);
        assert_eq!(reader.u8(), Some(1));
        assert_eq!(reader.u16(), Some(2));
        assert_eq!(reader.u32(), Some(3));
        assert_eq!(reader.position(), 7);
        assert_eq!(reader.u16(), None, "one byte left");
        assert_eq!(reader.position(), 7, "a failed read consumes nothing");
        assert_eq!(reader.take(1), Some(&[9u8][..]));
        assert_eq!(reader.take(usize::MAX), None);
    }
}
