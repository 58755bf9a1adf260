//! Helpers shared by the fuzz targets in `fuzz_targets/` and the seed generator in
//! `examples/make_seeds.rs`: scratch directories, the series every engine-level target uses,
//! and the catalog file that registers them.

use sensordb_engine::test_support::catalog::Catalog;
use sensordb_engine::{RealFs, SeriesKey, Value, ValueKind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// File name of the first segment (`<data>/segments/`): the header must name segment 1.
pub const SEGMENT_NAME: &str = "00000000000000000001.seg";
/// File name of the first WAL file (`<data>/wal/`): the header must name file 1.
pub const WAL_NAME: &str = "00000000000000000001.wal";
/// File name of the catalog (`<data>/`).
pub const CATALOG_NAME: &str = "series.catalog";

/// A fresh directory removed on drop, on tmpfs when the machine has one (fsync is free
/// there). `SENSORDB_FUZZ_TMP` overrides the parent directory.
pub fn scratch_dir() -> tempfile::TempDir {
    let base = std::env::var_os("SENSORDB_FUZZ_TMP")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new().prefix("sensordb-fuzz-").tempdir_in(base).expect("scratch directory")
}

/// The series of the engine targets, in catalog order (ids 1, 2, …). The first five form
/// one row (same measurement and tags), so flushes share timestamp records between them;
/// the last is a row of its own, so its blocks keep their timestamps inline.
pub fn series_keys() -> Vec<(SeriesKey, ValueKind)> {
    let row = |field: &str| SeriesKey::new("sensor", [("host", "a"), ("room", "b")], field).expect("valid key");
    vec![
        (row("f"), ValueKind::F64),
        (row("i"), ValueKind::I64),
        (row("u"), ValueKind::U64),
        (row("b"), ValueKind::Bool),
        (row("s"), ValueKind::Bytes),
        (SeriesKey::new("other", Vec::<(String, String)>::new(), "x").expect("valid key"), ValueKind::F64),
    ]
}

/// Registers [`series_keys`] in the catalog at `path` (created if missing).
pub fn write_catalog(path: &Path) {
    let (catalog, _) = Catalog::open(&RealFs, path, false).expect("catalog opens");
    for (key, kind) in series_keys() {
        catalog.get_or_create(&key, kind).expect("series registers");
    }
}

/// The bytes of a catalog file that holds [`series_keys`], built once per process.
pub fn catalog_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = scratch_dir();
        let path = dir.path().join(CATALOG_NAME);
        write_catalog(&path);
        std::fs::read(&path).expect("catalog readable")
    })
}

/// A value of `kind` made from 64 arbitrary bits (bytes values take 0–8 of them).
pub fn value_of(kind: ValueKind, bits: u64) -> Value {
    match kind {
        ValueKind::F64 => Value::F64(f64::from_bits(bits)),
        ValueKind::I64 => Value::I64(bits as i64),
        ValueKind::U64 => Value::U64(bits),
        ValueKind::Bool => Value::Bool(bits & 1 == 1),
        ValueKind::Bytes => {
            let len = (bits % 9) as usize;
            Value::Bytes(bits.to_le_bytes()[..len].to_vec().into())
        }
    }
}

/// Every value kind, in tag order.
pub const KINDS: [ValueKind; 5] = [ValueKind::F64, ValueKind::I64, ValueKind::U64, ValueKind::Bool, ValueKind::Bytes];

/// Checksum repair: copies of an input with every checksum the format layout lets us locate
/// recomputed, so that mutations reach the parsers behind the checksums instead of stopping at
/// a mismatch. Targets run both the input as it is and its repaired copy (when it differs).
/// Structure that cannot be located is left alone: the copy is still arbitrary bytes.
pub mod fixup {
    use sensordb_engine::test_support::block::{BlockHeader, FLAG_SHARED_TIMESTAMPS};
    use sensordb_engine::test_support::checksum::crc32c;
    use sensordb_engine::test_support::segment::IndexEntry;
    use sensordb_model::varint::get_varint;

    fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    /// A trailing CRC32C of everything before it (blocks, shared timestamp records).
    pub fn trailing_crc(bytes: &mut [u8]) {
        if bytes.len() >= 4 {
            let end = bytes.len() - 4;
            let crc = crc32c(&bytes[..end]);
            put_u32(bytes, end, crc);
        }
    }

    /// A WAL file: header checksum, then each record's checksum while the lengths fit.
    pub fn wal_file(bytes: &mut [u8]) {
        if bytes.len() < 24 {
            return;
        }
        let crc = crc32c(&bytes[..20]);
        put_u32(bytes, 20, crc);
        let mut offset = 24usize;
        while offset + 8 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes")) as usize;
            let Some(end) = (offset + 8).checked_add(len).filter(|&end| end <= bytes.len()) else { break };
            let mut input = bytes[offset..offset + 4].to_vec();
            input.extend_from_slice(&bytes[offset + 8..end]);
            let crc = crc32c(&input);
            put_u32(bytes, offset + 4, crc);
            offset = end;
        }
    }

    /// A catalog file: header checksum, then each record's checksum while the lengths fit.
    pub fn catalog_file(bytes: &mut [u8]) {
        if bytes.len() < 16 {
            return;
        }
        let crc = crc32c(&bytes[..12]);
        put_u32(bytes, 12, crc);
        let mut offset = 16usize;
        while offset < bytes.len() {
            let mut position = offset;
            let Some(len) = get_varint(bytes, &mut position) else { break };
            let body_start = position + 4;
            let Some(end) = usize::try_from(len).ok().and_then(|len| body_start.checked_add(len)).filter(|&end| end <= bytes.len()) else {
                break;
            };
            let mut input = bytes[offset..position].to_vec();
            input.extend_from_slice(&bytes[body_start..end]);
            let crc = crc32c(&input);
            put_u32(bytes, position, crc);
            offset = end;
        }
    }

    /// The blocks an index list names (and the shared timestamp records they refer to).
    fn segment_blocks(bytes: &mut [u8], entries: &[IndexEntry]) {
        for entry in entries {
            let (start, length) = (entry.offset, u64::from(entry.length));
            let Some(end) = start.checked_add(length).filter(|&end| end <= bytes.len() as u64) else { continue };
            let (start, end) = (start as usize, end as usize);
            trailing_crc(&mut bytes[start..end]);
            let Ok(header) = BlockHeader::verified(&bytes[start..end]) else { continue };
            if header.flags & FLAG_SHARED_TIMESTAMPS == 0 {
                continue;
            }
            let at = start + header.header_bytes as usize;
            if at + 8 > end {
                continue;
            }
            let distance = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
            let record_len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
            if let Some(record_start) = start.checked_sub(distance) {
                if record_len <= distance {
                    trailing_crc(&mut bytes[record_start..record_start + record_len]);
                }
            }
        }
    }

    /// A segment file: file header, every flush group found on a page boundary (its blocks,
    /// index and header), torn marks, and the footer and trailer of a sealed file.
    pub fn segment_file(bytes: &mut [u8]) {
        const PAGE: usize = 4096;
        if bytes.len() < 32 {
            return;
        }
        let crc = crc32c(&bytes[..28]);
        put_u32(bytes, 28, crc);
        let mut offset = PAGE;
        while offset + 64 <= bytes.len() {
            let mut next = offset + PAGE;
            if &bytes[offset..offset + 8] == b"SDBGROUP" {
                let index_offset = u64_at(bytes, offset + 24).checked_add(offset as u64 + 64);
                let index_len = u64_at(bytes, offset + 40);
                let index_end = index_offset.and_then(|start| start.checked_add(index_len)).filter(|&end| end <= bytes.len() as u64);
                if let (Some(start), Some(end)) = (index_offset, index_end) {
                    let (start, end) = (start as usize, end as usize);
                    if let Ok(entries) = IndexEntry::decode_list(&bytes[start..end]) {
                        segment_blocks(bytes, &entries);
                    }
                    let crc = crc32c(&bytes[start..end]);
                    put_u32(bytes, offset + 36, crc);
                    next = next.max(end.div_ceil(PAGE) * PAGE);
                }
                let crc = crc32c(&bytes[offset..offset + 60]);
                put_u32(bytes, offset + 60, crc);
            } else if &bytes[offset..offset + 8] == b"SDBTORNG" {
                let crc = crc32c(&bytes[offset..offset + 60]);
                put_u32(bytes, offset + 60, crc);
            }
            offset = next;
        }
        let len = bytes.len();
        if len >= PAGE + 40 && &bytes[len - 8..len - 4] == b"SEAL" {
            let trailer = len - 40;
            let footer_offset = u64_at(bytes, trailer);
            let footer_end = footer_offset.checked_add(u64_at(bytes, trailer + 8)).filter(|&end| end <= trailer as u64);
            if let Some(end) = footer_end {
                let (start, end) = (footer_offset as usize, end as usize);
                if let Ok(entries) = IndexEntry::decode_list(&bytes[start..end]) {
                    segment_blocks(bytes, &entries);
                }
                let crc = crc32c(&bytes[start..end]);
                put_u32(bytes, trailer + 20, crc);
            }
            let crc = crc32c(&bytes[trailer..trailer + 36]);
            put_u32(bytes, trailer + 36, crc);
        }
    }
}
