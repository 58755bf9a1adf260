//! Boolean columns: CONSTANT, BITPACKED.
//!
//! Booleans are alarms and door contacts: almost always constant for a whole block (2 bytes),
//! otherwise one bit per value is within a small factor of any entropy coder and costs nothing
//! to decode. Unused high bits of the last byte must be zero, so every column has exactly one
//! encoding and a corrupted pad is noticed.

use super::{tag, CodecError};

pub(crate) fn encode(values: &[bool], out: &mut Vec<u8>) {
    if let [first, rest @ ..] = values {
        if rest.iter().all(|x| x == first) {
            out.push(tag::CONSTANT);
            out.push(u8::from(*first));
            return;
        }
    }
    out.push(tag::BITPACKED);
    out.extend(values.chunks(8).map(|byte| byte.iter().rev().fold(0u8, |acc, &b| acc << 1 | u8::from(b))));
}

pub(crate) fn decode(input: &[u8], count: usize) -> Result<Vec<bool>, CodecError> {
    let (&t, body) = input.split_first().ok_or(CodecError::Truncated { needed: 1, available: 0 })?;
    match t {
        tag::CONSTANT => match body {
            [b @ (0 | 1)] => Ok(vec![*b == 1; count]),
            _ => Err(CodecError::Invalid("constant boolean column must be one byte 0 or 1".into())),
        },
        tag::BITPACKED => {
            super::expect_len(body, count.div_ceil(8))?;
            let pad_bits = (8 - count % 8) % 8;
            if let Some(&last) = body.last() {
                if pad_bits > 0 && last >> (8 - pad_bits) != 0 {
                    return Err(CodecError::Invalid("non-zero padding bits in boolean column".into()));
                }
            }
            Ok((0..count).map(|i| body[i / 8] >> (i % 8) & 1 == 1).collect())
        }
        other => Err(CodecError::UnknownEncoding(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(values: &[bool]) -> Vec<u8> {
        let mut out = vec![];
        encode(values, &mut out);
        assert_eq!(decode(&out, values.len()).expect("decodes"), values);
        out
    }

    #[test]
    fn constant_and_bitpacked() {
        assert_eq!(encoded(&[true; 1000]), [tag::CONSTANT, 1]);
        assert_eq!(encoded(&[false]), [tag::CONSTANT, 0]);
        assert_eq!(encoded(&[]), [tag::BITPACKED]);
        // Bit i of byte i/8 is value i.
        assert_eq!(encoded(&[true, false, false, false, false, false, false, false, false, true]), [tag::BITPACKED, 1, 2]);
        let mixed: Vec<bool> = (0..86_400).map(|i| i % 3 == 0).collect();
        assert_eq!(encoded(&mixed).len(), 1 + 10_800);
    }

    #[test]
    fn rejects_padding_and_bad_constants() {
        assert!(decode(&[tag::BITPACKED, 0b0000_0100], 2).is_err());
        assert!(decode(&[tag::BITPACKED, 0b0000_0010], 2).is_ok());
        assert!(decode(&[tag::CONSTANT, 2], 3).is_err());
        assert!(decode(&[tag::BITPACKED, 0], 9).is_err());
    }
}
