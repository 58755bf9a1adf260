//! Column compression: timestamps and values of one block.
//!
//! Every encoded column starts with a one-byte encoding tag, so the encoder can choose per block
//! what pays best and the decoder needs no outside hint. (Placeholder: raw little-endian columns;
//! the adaptive encoders replace this.)

use crate::error::CodecError;
use crate::model::{ValueColumn, ValueKind};
use bytes::Bytes;

const RAW: u8 = 0;

/// Appends the encoding of `timestamps` (any order, repeats allowed) to `out`.
pub fn encode_timestamps(timestamps: &[i64], out: &mut Vec<u8>) {
    out.push(RAW);
    for t in timestamps {
        out.extend_from_slice(&t.to_le_bytes());
    }
}

/// Decodes `count` timestamps written by [`encode_timestamps`]; `input` is exactly the column.
pub fn decode_timestamps(input: &[u8], count: usize) -> Result<Vec<i64>, CodecError> {
    let body = raw_body(input, count * 8)?;
    Ok(body.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// Appends the encoding of `values` to `out`.
pub fn encode_values(values: &ValueColumn, out: &mut Vec<u8>) {
    out.push(RAW);
    match values {
        ValueColumn::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_bits().to_le_bytes())),
        ValueColumn::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ValueColumn::U64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ValueColumn::Bool(v) => v.iter().for_each(|x| out.push(u8::from(*x))),
        ValueColumn::Bytes(v) => {
            for x in v {
                out.extend_from_slice(&(x.len() as u32).to_le_bytes());
                out.extend_from_slice(x);
            }
        }
    }
}

/// Decodes `count` values of `kind` written by [`encode_values`]; `input` is exactly the column.
pub fn decode_values(kind: ValueKind, input: &[u8], count: usize) -> Result<ValueColumn, CodecError> {
    let u64s = |body: &[u8]| -> Vec<u64> {
        body.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
    };
    Ok(match kind {
        ValueKind::F64 => ValueColumn::F64(u64s(raw_body(input, count * 8)?).into_iter().map(f64::from_bits).collect()),
        ValueKind::I64 => ValueColumn::I64(u64s(raw_body(input, count * 8)?).into_iter().map(|x| x as i64).collect()),
        ValueKind::U64 => ValueColumn::U64(u64s(raw_body(input, count * 8)?)),
        ValueKind::Bool => ValueColumn::Bool(raw_body(input, count)?.iter().map(|b| *b != 0).collect()),
        ValueKind::Bytes => {
            let mut body = raw_body(input, input.len().saturating_sub(1))?;
            let mut out = Vec::with_capacity(count);
            for _ in 0..count {
                let len = body.get(..4).ok_or(CodecError::Truncated { needed: 4, available: body.len() })?;
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                let data = body.get(4..4 + len).ok_or(CodecError::Truncated { needed: 4 + len, available: body.len() })?;
                out.push(Bytes::copy_from_slice(data));
                body = &body[4 + len..];
            }
            ValueColumn::Bytes(out)
        }
    })
}

fn raw_body(input: &[u8], len: usize) -> Result<&[u8], CodecError> {
    match input.first() {
        Some(&RAW) => {}
        Some(&tag) => return Err(CodecError::UnknownEncoding(tag)),
        None => return Err(CodecError::Truncated { needed: 1, available: 0 }),
    }
    if input.len() != 1 + len {
        return Err(CodecError::Invalid(format!("raw column of {} bytes, expected {}", input.len() - 1, len)));
    }
    Ok(&input[1..])
}
