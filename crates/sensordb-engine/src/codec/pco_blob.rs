//! The pcodec (`pco`) sub-format shared by the timestamp, float, decimal and integer encodings.
//!
//! We use pco's *wrapped* format (format-version header, one chunk's metadata, one page) rather
//! than its standalone files: the block already stores the value count, so the standalone
//! magic bytes, count and footer would be a dozen bytes of redundancy in every column, and
//! handing pco the count ourselves means no length read from the input ever sizes an
//! allocation.
//!
//! pco's decoder trusts one length from its input that can size a large allocation: a
//! dictionary-mode chunk allocates its dictionary (up to 2^25 entries) before checking that the
//! input holds it. We never write dictionary mode, so the decoder refuses it up front.

use crate::error::CodecError;
use pco::data_types::Number;
use pco::wrapped::{FileCompressor, FileDecompressor};
use pco::{ChunkConfig, DeltaSpec, PagingSpec};

/// pco's limit on numbers per chunk; longer columns fall back to a raw encoding.
pub(crate) const MAX_N: usize = 1 << 24;

/// Mode variant of pco's dictionary mode: the low 4 bits of the first chunk-metadata byte.
const DICT_MODE_VARIANT: u8 = 4;
const MODE_VARIANT_MASK: u8 = 0x0f;

/// How pco should look for deltas: timestamps are nearly arithmetic sequences, so first-order
/// deltas are the right transform and trying others only costs encode time; other columns let
/// pco pick.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Delta {
    Consecutive1,
    Auto,
}

/// pco's default level 8 of 0..=12. Level 4 encodes 15-50% faster on single columns, but on a
/// real TSBS IoT day (`sensordb bench engine --file`) it left value columns 3.9% larger (0.490
/// against 0.472 bytes per value) for only 5% less ingest CPU, and bytes on disk are what a
/// store keeps for years. Blocks that compaction rewrites anyway (a memtable flush's) are
/// encoded quickly instead: see [`super::with_quick_encoding`].
const COMPRESSION_LEVEL: usize = 8;

/// Level of quick encoding (see [`super::with_quick_encoding`]).
const QUICK_COMPRESSION_LEVEL: usize = 4;

/// Quick encoding applies only to columns shorter than this: compaction rewrites segments whose
/// blocks average fewer than 2,048 points (`EngineOptions::compaction_small_block_points`), so a
/// longer block may stay as the flush wrote it and gets the full effort.
pub(super) const QUICK_N_MAX: usize = 2048;

thread_local! {
    /// Set while [`super::with_quick_encoding`] runs on this thread.
    pub(super) static QUICK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// pco is not tried on fewer numbers than this: its header alone is most of the 16 bytes two
/// numbers take raw, and no two-number column tried came out smaller, while trying took 6.5 µs
/// (`cargo bench -p sensordb-engine --bench codec -- "f64 two"`): a compaction joining a
/// fleet's one-point blocks into two-point ones encodes hundreds of thousands of them.
const MIN_N: usize = 3;

/// Appends the pco encoding of `nums` (at least [`MIN_N`], at most [`MAX_N`]) to `out`.
/// Returns false, leaving `out` as it was, when pco refuses the input or it is too short to
/// try; callers then store it raw.
pub(crate) fn compress<T: Number>(nums: &[T], delta: Delta, out: &mut Vec<u8>) -> bool {
    if nums.len() < MIN_N || nums.len() > MAX_N {
        return false;
    }
    let start = out.len();
    let quick = nums.len() < QUICK_N_MAX && QUICK.with(|q| q.get());
    let config = ChunkConfig::default()
        .with_compression_level(if quick { QUICK_COMPRESSION_LEVEL } else { COMPRESSION_LEVEL })
        .with_delta_spec(match delta {
            // pco's automatic choice trains its bins on a sample once per delta encoding it
            // tries (none, lookback, first order, second order, ...): for a block of a few
            // hundred values, most of the encoding time.
            Delta::Auto if !quick => DeltaSpec::Auto,
            Delta::Auto | Delta::Consecutive1 => DeltaSpec::TryConsecutive(1),
        })
        // One page for the whole column: the page count is the block's value count.
        .with_paging_spec(PagingSpec::Exact(vec![nums.len()]));
    let file = FileCompressor::default();
    let written = (|| -> pco::errors::PcoResult<()> {
        file.write_header(&mut *out)?;
        let mut chunk = file.chunk_compressor(nums, &config)?;
        chunk.write_meta(&mut *out)?;
        chunk.write_page(0, &mut *out)?;
        Ok(())
    })();
    if written.is_err() {
        out.truncate(start);
        return false;
    }
    true
}

/// Decodes exactly `count` numbers from `input`, which must be exactly one [`compress`] output.
pub(crate) fn decompress<T: Number + Default>(input: &[u8], count: usize) -> Result<Vec<T>, CodecError> {
    if count == 0 || count > MAX_N {
        return Err(CodecError::Invalid(format!("pco column of {count} values")));
    }
    let (file, rest) = FileDecompressor::new(input).map_err(pco_err)?;
    match rest.first() {
        None => return Err(CodecError::Truncated { needed: input.len() + 1, available: input.len() }),
        Some(b) if b & MODE_VARIANT_MASK == DICT_MODE_VARIANT => {
            return Err(CodecError::Invalid("pco dictionary mode is not accepted".into()))
        }
        Some(_) => {}
    }
    let (mut chunk, rest) = file.chunk_decompressor::<T, &[u8]>(rest).map_err(pco_err)?;
    let mut page = chunk.page_decompressor(rest, count).map_err(pco_err)?;
    let mut nums = vec![T::default(); count];
    let progress = page.read(&mut nums).map_err(pco_err)?;
    if progress.n_processed != count || !progress.finished {
        return Err(CodecError::Invalid(format!("pco page gave {} of {count} values", progress.n_processed)));
    }
    let trailing = page.into_src().len();
    if trailing != 0 {
        return Err(CodecError::Invalid(format!("{trailing} trailing bytes after pco page")));
    }
    Ok(nums)
}

fn pco_err(e: pco::errors::PcoError) -> CodecError {
    CodecError::Invalid(format!("pco: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pco::ModeSpec;

    #[test]
    fn round_trips_and_rejects_trailing_bytes_but_trusts_count() {
        let nums: Vec<i64> = (0..1000).map(|i| i * i - 7).collect();
        let mut out = vec![];
        assert!(compress(&nums, Delta::Auto, &mut out));
        assert_eq!(decompress::<i64>(&out, nums.len()).expect("decodes"), nums);
        // pco cannot always tell a wrong count from padding bits; the count is the block
        // header's, under its checksum, so this only pins that the right values come first.
        if let Ok(prefix) = decompress::<i64>(&out, nums.len() - 1) {
            assert_eq!(prefix, nums[..nums.len() - 1]);
        }
        if let Ok(longer) = decompress::<i64>(&out, nums.len() + 1) {
            assert_eq!(longer[..nums.len()], nums);
        }
        out.push(0);
        assert!(decompress::<i64>(&out, nums.len()).is_err());
    }

    #[test]
    fn quick_encoding_round_trips_and_ends_with_its_scope() {
        let walk: Vec<i64> = (0..300i64).map(|i| (i * 7919) % 101 - 50 + i * 3).collect();
        let noise: Vec<f64> =
            (0..300u64).map(|i| f64::from_bits(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 12 | 0x3ff0_0000_0000_0000)).collect();
        let (mut full, mut quick) = (vec![], vec![]);
        assert!(compress(&walk, Delta::Auto, &mut full));
        assert!(super::super::with_quick_encoding(|| {
            assert!(QUICK.with(|q| q.get()));
            let mut floats = vec![];
            assert!(compress(&noise, Delta::Auto, &mut floats));
            assert_eq!(
                decompress::<f64>(&floats, noise.len()).expect("decodes").iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                noise.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            compress(&walk, Delta::Auto, &mut quick)
        }));
        assert!(!QUICK.with(|q| q.get()), "quick encoding outlived its scope");
        assert_eq!(decompress::<i64>(&quick, walk.len()).expect("decodes"), walk);
        let mut again = vec![];
        assert!(compress(&walk, Delta::Auto, &mut again));
        assert_eq!(again, full, "full encoding after a quick scope is the full encoding");
    }

    /// Pins where pco keeps the mode variant, which the dictionary guard relies on: a pco
    /// upgrade that moves it must fail here rather than silently disarm the guard.
    #[test]
    fn dictionary_mode_is_refused() {
        let nums: Vec<u64> = (0..4096).map(|i| [u64::MAX, 3, 1 << 40][i % 3]).collect();
        let config = ChunkConfig::default().with_mode_spec(ModeSpec::TryDict).with_paging_spec(PagingSpec::Exact(vec![nums.len()]));
        let file = FileCompressor::default();
        let mut out = vec![];
        file.write_header(&mut out).expect("header");
        let header_len = out.len();
        let mut chunk = file.chunk_compressor(&nums, &config).expect("chunk");
        chunk.write_meta(&mut out).expect("meta");
        chunk.write_page(0, &mut out).expect("page");
        assert_eq!(out[header_len] & MODE_VARIANT_MASK, DICT_MODE_VARIANT, "pco moved its mode bits");
        assert!(matches!(decompress::<u64>(&out, nums.len()), Err(CodecError::Invalid(_))));
    }
}
