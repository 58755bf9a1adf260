//! Inflating a gzip write body within `max_body_bytes` into a pooled buffer: the output is
//! bounded as it grows, so a gzip bomb stops at the limit, and a lying size trailer cannot make a
//! small body zero a large buffer.

use super::too_large;
use crate::http::ApiError;
use std::io::Read;

/// Decompresses a gzip body (one or more members) into `out`, refusing more than `limit` bytes
/// of output; returns the length. `out` is kept initialized over its whole length (a reused
/// buffer is only zeroed where it grows); bytes past the returned length are garbage.
pub(super) fn gunzip(raw: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<usize, ApiError> {
    // The trailer's ISIZE is the last member's size mod 2^32: with one member (what clients
    // send), the exact size, so the output grows at most once. Only a hint, capped by `limit`.
    let last_member_bytes = raw.last_chunk::<4>().map_or(0, |isize| u32::from_le_bytes(*isize) as usize);
    // A lying trailer must not make a small body zero a large buffer: at most 32 times the
    // compressed size to start with (TSBS bodies shrink 8 times), more only as output arrives.
    let wanted = last_member_bytes.min(raw.len() * 32).max(raw.len() * 4).min(limit) + 1;
    if out.len() < wanted {
        out.resize(wanted, 0);
    }
    let mut decoder = flate2::read::MultiGzDecoder::new(raw);
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled > limit {
                return Err(too_large(limit));
            }
            let grown = (filled * 2).clamp(filled + 1, limit + 1);
            out.resize(grown, 0);
        }
        match decoder.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ApiError::bad_request(format!("cannot decompress gzip body: {e}"))),
        }
    }
    if filled > limit {
        return Err(too_large(limit));
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::gunzip;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).expect("gzip");
        encoder.finish().expect("gzip")
    }

    #[test]
    fn gunzip_reuses_a_dirty_buffer_reads_every_member_and_stops_at_the_limit() {
        let text: Vec<u8> = (0..20_000u32).flat_map(|i| format!("m,t=a f={i} {i}\n").into_bytes()).collect();
        let mut buffer = vec![0xEE; 3];
        let len = gunzip(&gzip(&text), 1 << 30, &mut buffer).expect("decodes");
        assert_eq!(&buffer[..len], &text[..]);
        // A reused buffer holding the longer text before: only the returned length counts.
        let mut two_members = gzip(b"first\n");
        two_members.extend_from_slice(&gzip(b"second\n"));
        let len = gunzip(&two_members, 1 << 30, &mut buffer).expect("decodes");
        assert_eq!(&buffer[..len], b"first\nsecond\n");
        // Exactly at the limit is fine, one byte over is refused.
        assert_eq!(gunzip(&gzip(&text), text.len(), &mut Vec::new()).expect("at the limit"), text.len());
        assert!(gunzip(&gzip(&text), text.len() - 1, &mut Vec::new()).is_err());
        // A trailer claiming 4 GiB: the buffer grows with the real output only.
        let mut lying = gzip(b"m f=1\n");
        let end = lying.len();
        lying[end - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut fresh = Vec::new();
        assert!(gunzip(&lying, 1 << 30, &mut fresh).is_err(), "the size check of the trailer fails");
        assert!(fresh.len() <= lying.len() * 32 + 1, "{} bytes zeroed", fresh.len());
        assert!(gunzip(b"plain text", 1 << 20, &mut Vec::new()).is_err());
    }
}
