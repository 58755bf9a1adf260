//! Encoding and decoding of one catalog record (layout: see the module comment in `mod.rs`).

use super::SERIES_KEY_BYTES_MAX;
use crate::checksum::{crc32c, get_varint, put_varint};
use crate::model::ValueKind;

/// Bytes of the CRC32C that follows the length.
const CRC_BYTES: usize = 4;
/// Smallest body: 1-byte id, kind, 1-byte shared length, empty suffix.
const BODY_BYTES_MIN: usize = 3;
/// Largest body: 5-byte id, kind, 3-byte shared length, a whole key as suffix.
const BODY_BYTES_MAX: usize = 5 + 1 + 3 + SERIES_KEY_BYTES_MAX;

/// The kind byte of a tombstone: the series `id` (named again by its key text) is deleted.
pub(super) const TOMBSTONE: u8 = 0xFE;

/// A decoded record.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub id: u32,
    /// `None` for a tombstone.
    pub kind: Option<ValueKind>,
    /// The full key text, previous prefix and suffix joined.
    pub text: String,
}

/// Bytes `next` shares at its start with `previous`, cut back to a character boundary of `next`
/// so that the stored suffix is valid UTF-8 on its own.
pub(super) fn shared_prefix(previous: &str, next: &str) -> usize {
    let mut shared = previous.bytes().zip(next.bytes()).take_while(|(a, b)| a == b).count();
    while !next.is_char_boundary(shared) {
        shared -= 1;
    }
    shared
}

/// Appends the record for series `id` with key `text`, written after a record whose key text
/// was `previous` (empty for the first record).
pub(super) fn encode(out: &mut Vec<u8>, id: u32, kind: Option<ValueKind>, previous: &str, text: &str) {
    let shared = shared_prefix(previous, text);
    let mut body = Vec::with_capacity(8 + text.len() - shared);
    put_varint(&mut body, u64::from(id));
    body.push(kind.map_or(TOMBSTONE, |k| k as u8));
    put_varint(&mut body, shared as u64);
    body.extend_from_slice(&text.as_bytes()[shared..]);
    let start = out.len();
    put_varint(out, body.len() as u64);
    let length_end = out.len();
    let mut crc_input = Vec::with_capacity(length_end - start + body.len());
    crc_input.extend_from_slice(&out[start..length_end]);
    crc_input.extend_from_slice(&body);
    out.extend_from_slice(&crc32c(&crc_input).to_le_bytes());
    out.extend_from_slice(&body);
}

/// How many records `bytes` (the records after the file header) seem to hold, and their key
/// suffixes' bytes, by their length prefixes alone: a hint for sizing the key table before
/// decoding them (a damaged record stops the count; decoding finds and reports it).
pub(super) fn count(bytes: &[u8]) -> (usize, usize) {
    let (mut records, mut body_bytes, mut offset) = (0usize, 0usize, 0usize);
    while offset < bytes.len() {
        let mut position = offset;
        let Some(len) = get_varint(bytes, &mut position).and_then(|len| usize::try_from(len).ok()) else { break };
        if !(BODY_BYTES_MIN..=BODY_BYTES_MAX).contains(&len) || position + CRC_BYTES + len > bytes.len() {
            break;
        }
        records += 1;
        body_bytes += len;
        offset = position + CRC_BYTES + len;
    }
    (records, body_bytes)
}

/// Decodes the record at the start of `bytes`, which follows a record whose key text was
/// `previous`. Returns the record and its size in bytes, or why it is not a whole, intact record.
pub(super) fn decode(bytes: &[u8], previous: &str) -> Result<(Record, usize), String> {
    let mut position = 0;
    let len = get_varint(bytes, &mut position).ok_or("record length truncated")?;
    let len = usize::try_from(len).map_err(|_| format!("implausible record length {len}"))?;
    if !(BODY_BYTES_MIN..=BODY_BYTES_MAX).contains(&len) {
        return Err(format!("implausible record length {len}"));
    }
    let length_bytes = &bytes[..position];
    let stored = bytes.get(position..position + CRC_BYTES).ok_or("record checksum truncated")?;
    let stored = u32::from_le_bytes(stored.try_into().map_err(|_| "record checksum truncated")?);
    let body_start = position + CRC_BYTES;
    let body = bytes.get(body_start..body_start + len).ok_or("record body truncated")?;
    // The length bytes and the body, which the checksum sits between, without copying them.
    if crc32c::crc32c_append(crc32c(length_bytes), body) != stored {
        return Err("record checksum mismatch".into());
    }

    let mut at = 0;
    let id = get_varint(body, &mut at).ok_or("series id truncated")?;
    let id = u32::try_from(id).map_err(|_| format!("series id {id} out of range"))?;
    let tag = *body.get(at).ok_or("value kind missing")?;
    at += 1;
    let kind = match tag {
        TOMBSTONE => None,
        tag => Some(ValueKind::try_from(tag).map_err(|tag| format!("unknown value kind {tag}"))?),
    };
    let shared = get_varint(body, &mut at).ok_or("shared prefix length truncated")?;
    let shared = usize::try_from(shared)
        .ok()
        .filter(|&s| s <= previous.len())
        .ok_or_else(|| format!("shared prefix length {shared} exceeds the previous key's {} bytes", previous.len()))?;
    let suffix = body.get(at..).ok_or("series key truncated")?;
    if shared + suffix.len() > SERIES_KEY_BYTES_MAX {
        return Err(format!("series key of {} bytes is too long", shared + suffix.len()));
    }
    let mut text = Vec::with_capacity(shared + suffix.len());
    text.extend_from_slice(&previous.as_bytes()[..shared]);
    text.extend_from_slice(suffix);
    let text = String::from_utf8(text).map_err(|_| "series key is not UTF-8")?;
    Ok((Record { id, kind, text }, body_start + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_follows_the_length_prefixes_and_stops_at_damage() {
        let mut bytes = Vec::new();
        encode(&mut bytes, 1, Some(ValueKind::F64), "", "m,host=a f");
        encode(&mut bytes, 2, Some(ValueKind::F64), "m,host=a f", "m,host=b f");
        encode(&mut bytes, 2, None, "m,host=b f", "m,host=b f");
        assert_eq!(count(&bytes).0, 3);
        assert!(count(&bytes).1 >= "m,host=a f".len() + 2);
        assert_eq!(count(&bytes[..bytes.len() - 1]).0, 2, "a torn last record is not counted");
        assert_eq!(count(&[]), (0, 0));
        let (first, _) = decode(&bytes, "").expect("decode");
        assert_eq!(first, Record { id: 1, kind: Some(ValueKind::F64), text: "m,host=a f".into() });
    }

    #[test]
    fn the_shared_prefix_never_splits_a_character() {
        // "é" is C3 A9 and "è" is C3 A8: the bytes share C3, the characters share nothing.
        assert_eq!(shared_prefix("m,name=é f", "m,name=è f"), "m,name=".len());
        assert_eq!(shared_prefix("m,n=日本 f", "m,n=日曜 f"), "m,n=日".len());
        assert_eq!(shared_prefix("", "abc"), 0);
        assert_eq!(shared_prefix("abc", "ab"), 2);
        assert_eq!(shared_prefix("ab", "abc"), 2);
    }

    #[test]
    fn records_round_trip_against_their_predecessor() {
        let mut out = Vec::new();
        encode(&mut out, 300, Some(ValueKind::Bytes), "m,name=é f", "m,name=è f");
        let (record, len) = decode(&out, "m,name=é f").expect("decodes");
        assert_eq!(len, out.len());
        assert_eq!(record, Record { id: 300, kind: Some(ValueKind::Bytes), text: "m,name=è f".into() });
    }

    #[test]
    fn a_shared_prefix_that_would_split_a_character_is_refused() {
        // Hand-made record that shares one byte of "é" and stores the rest of "è".
        let mut body = vec![1, ValueKind::F64 as u8];
        put_varint(&mut body, "m,name=".len() as u64 + 1);
        body.extend_from_slice(&"è f".as_bytes()[1..]);
        let mut record = Vec::new();
        put_varint(&mut record, body.len() as u64);
        let mut crc_input = record.clone();
        crc_input.extend_from_slice(&body);
        record.extend_from_slice(&crc32c(&crc_input).to_le_bytes());
        record.extend_from_slice(&body);
        // Same bytes as "m,name=è f", so it decodes to valid UTF-8 and is accepted …
        assert_eq!(decode(&record, "m,name=é f").expect("valid").0.text, "m,name=è f");
        // … but against a previous key whose byte there is not C3, the result is not UTF-8.
        assert_eq!(decode(&record, "m,name=a f").expect_err("invalid"), "series key is not UTF-8");
    }

    #[test]
    fn a_shared_prefix_longer_than_the_previous_key_is_refused() {
        let mut out = Vec::new();
        encode(&mut out, 2, Some(ValueKind::F64), "m,name=a f", "m,name=a g");
        let err = decode(&out, "m").expect_err("too long");
        assert!(err.contains("exceeds"), "{err}");
    }
}
