//! Bytes columns (strings, binary frames, waveform chunks): PAYLOAD_RAW, PAYLOAD_LZ4.
//!
//! The lengths go first as a nested u64 column (so equal-sized frames cost 9 bytes, varying ones
//! go through pcodec), then all payloads concatenated. The concatenation is LZ4-compressed
//! only when that saves at least a tenth: text and structured frames often shrink several
//! times, while compressed or random binary would only grow and cost decode time. LZ4 because
//! decoding runs at memory speed and the crate is pure Rust.
//!
//! Decoding slices one shared buffer into all values, so a block costs one allocation however
//! many payloads it holds.

use super::{integers, read_u32, tag, CodecError};
use bytes::Bytes;

/// LZ4 only pays when it saves at least this fraction (in tenths) of the raw bytes.
const LZ4_MAX_TENTHS: usize = 9;

/// An LZ4 block can expand at most about 255:1, so a claim of more decompressed bytes than this
/// per compressed byte is corrupt; checking it first bounds the allocation by the input.
const LZ4_MAX_RATIO: usize = 256;

pub(crate) fn encode(values: &[Bytes], out: &mut Vec<u8>) {
    if encode_leaving_raw(values, out) {
        out.reserve(values.iter().map(Bytes::len).sum());
        values.iter().for_each(|v| out.extend_from_slice(v));
    }
}

/// Writes the column like [`encode`], except that when the payloads stay uncompressed their
/// concatenation is left out and `true` returned: the caller appends every payload right after
/// what was written. Block encoding does, straight into the group's page-aligned buffer, so a
/// payload is copied once on its way to the disk instead of through a column buffer.
pub(crate) fn encode_leaving_raw(values: &[Bytes], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    out.push(tag::PAYLOAD_RAW);
    let lengths: Vec<u64> = values.iter().map(|v| v.len() as u64).collect();
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    integers::encode(&lengths, out);
    let lengths_len = u32::try_from(out.len() - len_at - 4).expect("lengths column of 16M values fits in 4 GiB");
    out[len_at..len_at + 4].copy_from_slice(&lengths_len.to_le_bytes());

    let raw_len: usize = values.iter().map(Bytes::len).sum();
    if raw_len >= 32 && lz4_may_pay(values, raw_len) {
        // One payload is compressed where it is; several are concatenated first.
        let concatenated;
        let raw: &[u8] = if let [only] = values {
            only
        } else {
            let mut all = Vec::with_capacity(raw_len);
            values.iter().for_each(|v| all.extend_from_slice(v));
            concatenated = all;
            &concatenated
        };
        let data_at = out.len();
        out.resize(data_at + lz4_flex::block::get_maximum_output_size(raw_len), 0);
        if let Ok(n) = lz4_flex::block::compress_into(raw, &mut out[data_at..]) {
            if n * 10 < raw_len * LZ4_MAX_TENTHS {
                out.truncate(data_at + n);
                out[start] = tag::PAYLOAD_LZ4;
                return false;
            }
        }
        out.truncate(data_at);
    }
    true
}

/// Most bytes of the sample that decides whether a column is worth compressing at all.
const LZ4_SAMPLE_BYTES: usize = 64 * 1024;

/// Columns of at least this many bytes are sampled before they are compressed whole.
const LZ4_SAMPLED_FROM: usize = 16 * 1024;

/// For columns of [`LZ4_SAMPLED_FROM`] bytes and more, compresses a sample from the start, the
/// middle and the end first (an eighth of the column, at most [`LZ4_SAMPLE_BYTES`]): random or
/// already compressed payloads (the common case for binary frames) then skip the full LZ4 pass
/// and its zeroed output buffer, which would otherwise cap payload ingest well below the disk's
/// bandwidth. A 64 KiB portion of random bytes cost the Cassandra store's node 6 % of its CPU
/// in the full pass, and 2.5 % more zeroing its output (issue 15).
fn lz4_may_pay(values: &[Bytes], raw_len: usize) -> bool {
    if raw_len < LZ4_SAMPLED_FROM {
        return true;
    }
    let sample_len = (raw_len / 8).min(LZ4_SAMPLE_BYTES);
    let part = sample_len / 3;
    let mut sample = Vec::with_capacity(sample_len);
    for target in [0, raw_len / 2, raw_len - part] {
        // Copy `part` bytes starting at byte `target` of the concatenation.
        let mut skipped = 0usize;
        let mut need = part;
        for value in values {
            if need == 0 {
                break;
            }
            if skipped + value.len() <= target {
                skipped += value.len();
                continue;
            }
            let from = target.saturating_sub(skipped);
            let take = (value.len() - from).min(need);
            sample.extend_from_slice(&value[from..from + take]);
            need -= take;
            skipped += value.len();
        }
    }
    let compressed = lz4_flex::block::compress(&sample);
    compressed.len() * 10 < sample.len() * LZ4_MAX_TENTHS
}

pub(crate) fn decode(input: &[u8], count: usize) -> Result<Vec<Bytes>, CodecError> {
    let (&t, body) = input.split_first().ok_or(CodecError::Truncated { needed: 1, available: 0 })?;
    if t != tag::PAYLOAD_RAW && t != tag::PAYLOAD_LZ4 {
        return Err(CodecError::UnknownEncoding(t));
    }
    if body.len() < 4 {
        return Err(CodecError::Truncated { needed: 5, available: input.len() });
    }
    let lengths_len = read_u32(&body[..4]) as usize;
    let lengths_col = body[4..].get(..lengths_len).ok_or(CodecError::Truncated { needed: 5 + lengths_len, available: input.len() })?;
    let data = &body[4 + lengths_len..];
    let lengths = integers::decode::<u64>(lengths_col, count)?;
    let total = lengths
        .iter()
        .try_fold(0usize, |acc, &l| acc.checked_add(usize::try_from(l).ok()?))
        .ok_or(CodecError::Invalid("payload lengths overflow".into()))?;

    let buffer = if t == tag::PAYLOAD_RAW {
        if data.len() != total {
            return Err(CodecError::Invalid(format!("payload data of {} bytes, lengths sum to {total}", data.len())));
        }
        Bytes::copy_from_slice(data)
    } else {
        if total > data.len().saturating_mul(LZ4_MAX_RATIO) {
            return Err(CodecError::Invalid(format!("{} LZ4 bytes cannot hold {total} bytes", data.len())));
        }
        let mut buffer = vec![0u8; total];
        let n = lz4_flex::block::decompress_into(data, &mut buffer).map_err(|e| CodecError::Invalid(format!("lz4: {e}")))?;
        if n != total {
            return Err(CodecError::Invalid(format!("lz4 data gave {n} bytes, lengths sum to {total}")));
        }
        Bytes::from(buffer)
    };
    let mut at = 0;
    Ok(lengths
        .iter()
        .map(|&l| {
            // Cannot overflow or exceed the buffer: the lengths sum to its size.
            let end = at + l as usize;
            let value = buffer.slice(at..end);
            at = end;
            value
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(values: &[Bytes]) -> Vec<u8> {
        let mut out = vec![];
        encode(values, &mut out);
        assert_eq!(decode(&out, values.len()).expect("decodes"), values);
        out
    }

    #[test]
    fn large_random_columns_skip_lz4_and_large_text_columns_use_it() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let random: Vec<Bytes> = (0..8)
            .map(|_| {
                (0..65_536)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect::<Vec<u8>>()
                    .into()
            })
            .collect();
        assert!(!lz4_may_pay(&random, 8 * 65_536));
        assert_eq!(encoded(&random)[0], tag::PAYLOAD_RAW);
        let text: Vec<Bytes> = (0..8).map(|i| Bytes::from(format!("{{\"sensor\": {i}, \"ok\": true}} ").repeat(3000))).collect();
        assert!(lz4_may_pay(&text, text.iter().map(Bytes::len).sum()));
        assert_eq!(encoded(&text)[0], tag::PAYLOAD_LZ4);
        // One 64 KiB portion (a payload transaction's usual size) is sampled too.
        assert!(!lz4_may_pay(&random[..1], 65_536));
        assert!(lz4_may_pay(&text[..1], text[0].len()));
        assert_eq!(encoded(&text[..1])[0], tag::PAYLOAD_LZ4);
    }

    #[test]
    fn text_is_lz4_compressed() {
        let values: Vec<Bytes> = (0..1000).map(|i| Bytes::from(format!("{{\"state\":\"ok\",\"seq\":{i}}}"))).collect();
        let raw: usize = values.iter().map(Bytes::len).sum();
        let out = encoded(&values);
        assert_eq!(out[0], tag::PAYLOAD_LZ4);
        assert!(out.len() * 3 < raw, "{} of {raw} bytes", out.len());
    }

    #[test]
    fn random_binary_stays_raw_and_does_not_grow() {
        let mut state = 5u64;
        let frame: Vec<u8> = (0..1 << 20)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        let values = vec![Bytes::from(frame)];
        let out = encoded(&values);
        assert_eq!(out[0], tag::PAYLOAD_RAW);
        // tag + lengths length + lengths column (tag, order, the length as a 4-byte varint)
        assert_eq!(out.len(), (1 << 20) + 1 + 4 + 6);
    }

    #[test]
    fn empty_and_tiny() {
        assert_eq!(encoded(&[]), [tag::PAYLOAD_RAW, 1, 0, 0, 0, tag::RAW]);
        assert_eq!(encoded(&[Bytes::new(), Bytes::new()]).len(), 1 + 4 + 4);
        encoded(&[Bytes::from_static(b"a"), Bytes::new(), Bytes::from_static(b"bc")]);
    }

    #[test]
    fn rejects_inconsistent_lengths() {
        let mut out = vec![];
        encode(&[Bytes::from_static(b"hello"), Bytes::from_static(b"world")], &mut out);
        assert!(decode(&out[..out.len() - 1], 2).is_err());
        assert!(decode(&out, 1).is_err());
        let mut lz = vec![tag::PAYLOAD_LZ4, 9, 0, 0, 0, tag::CONSTANT];
        lz.extend_from_slice(&(1u64 << 40).to_le_bytes());
        lz.extend_from_slice(&[0x1f, 0]);
        assert!(matches!(decode(&lz, 1), Err(CodecError::Invalid(_))), "huge claimed size refused before allocating");
    }
}
