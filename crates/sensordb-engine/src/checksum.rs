//! Checksums and alignment shared by every on-disk format.
//!
//! All checksums are CRC32C (Castagnoli), hardware-accelerated on x86-64 and ARM.
//!
//! The varints, zigzag mapping and little-endian reader that used to live here are
//! `sensordb-model`'s (modules `varint`, `zigzag`, `le_reader`), shared with the native
//! protocol; they are re-exported at this old path so the engine's formats keep their imports.

pub use sensordb_model::le_reader::LeReader;
pub use sensordb_model::varint::{get_varint, put_varint};
pub use sensordb_model::zigzag::{unzigzag, zigzag};

/// CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Rounds `offset` up to the next multiple of `alignment` (a power of two).
pub fn align_up(offset: u64, alignment: u64) -> u64 {
    debug_assert!(alignment.is_power_of_two());
    (offset + alignment - 1) & !(alignment - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
