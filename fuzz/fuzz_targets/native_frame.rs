//! Fuzzes the native protocol's frame parser, `sensordb_protocol::frame`: `Header::parse`
//! and `Header::decode_body` (through `Frame::decode`), `read_frame`, and `Frame::decode_body`.
//!
//! Each input is read three ways:
//! * as a stream of frames, as it is: `Frame::decode` frame after frame until it needs more bytes
//!   or fails, and `read_frame` over the same bytes alongside;
//! * the same with every frame's checksum recomputed (and its length cut to the bytes there, its
//!   flags and reserved bits zeroed), so mutations get past the CRC to the body decoders;
//! * the first byte as a frame type and the rest as its body, straight to `Frame::decode_body`.
//!
//! Asserts: no panic, only `Ok` or a typed `FrameError`; `read_frame` reads the same frames and
//! fails on the same frame with the same kind of error (or an I/O error where `Frame::decode`
//! wants more bytes), consuming exactly the bytes `Frame::decode` says it used; every decoded
//! frame re-encoded with `Frame::encode` decodes to the same frame, and encoding is canonical
//! (the decoded copy encodes to the same bytes).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sensordb_protocol::frame::{read_frame, Frame, FrameError, FrameType, HEADER_LEN};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The largest body accepted in the stream runs.
const MAX_BODY: u32 = 1 << 16;

/// Runs a future that never has to wait (it reads from a byte slice) to its end.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("reading from a byte slice waited"),
    }
}

/// `frame` survives an encode → decode round trip, and its encoding is canonical.
fn round_trip(frame: &Frame) {
    let bytes = frame.to_bytes();
    let (again, used) = match Frame::decode(&bytes, u32::MAX) {
        Ok(Some(decoded)) => decoded,
        other => panic!("{frame:?} re-encoded as {bytes:?} does not decode: {other:?}"),
    };
    assert_eq!(used, bytes.len(), "{frame:?}: decode used {used} of {} bytes", bytes.len());
    assert_eq!(&again, frame, "round trip changed the frame");
    assert_eq!(again.to_bytes(), bytes, "{frame:?}: encoding is not canonical");
    assert_eq!(again.frame_type(), frame.frame_type());
    assert_eq!(again.tx(), frame.tx());
}

/// Reads `data` as a stream of frames with `Frame::decode` and `read_frame` side by side.
fn stream(data: &[u8]) {
    let mut rest = data;
    let mut reader = data;
    loop {
        let decoded = Frame::decode(rest, MAX_BODY);
        let read = ready(read_frame(&mut reader, MAX_BODY));
        match decoded {
            Ok(Some((frame, used))) => {
                assert!((HEADER_LEN..=rest.len()).contains(&used), "used {used} of {} bytes", rest.len());
                assert!(used - HEADER_LEN <= MAX_BODY as usize);
                round_trip(&frame);
                match read {
                    Ok(Some(read)) => assert_eq!(read, frame, "read_frame and Frame::decode disagree"),
                    other => panic!("Frame::decode gave {frame:?}, read_frame {other:?}"),
                }
                rest = &rest[used..];
                assert_eq!(reader.len(), rest.len(), "read_frame consumed other bytes than Frame::decode used");
            }
            Ok(None) => {
                // Too few bytes: a clean end before a header, or a body cut short.
                assert!(matches!(read, Ok(None) | Err(FrameError::Io(_))), "Frame::decode wants more bytes, read_frame gave {read:?}");
                if let Err(FrameError::Io(e)) = &read {
                    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
                }
                return;
            }
            Err(error) => {
                let _ = (error.code(), error.to_string());
                match read {
                    Err(other) => assert_eq!(
                        std::mem::discriminant(&other),
                        std::mem::discriminant(&error),
                        "Frame::decode failed with {error:?}, read_frame with {other:?}"
                    ),
                    Ok(frame) => panic!("Frame::decode failed with {error:?}, read_frame gave {frame:?}"),
                }
                return;
            }
        }
    }
}

/// `data` with each frame's length cut to the bytes that follow, flags and reserved bits zeroed
/// and the checksum recomputed.
fn fixup(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 0;
    while out.len() - at >= HEADER_LEN {
        let available = (out.len() - at - HEADER_LEN) as u32;
        let len = u32::from_le_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]).min(available);
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        out[at + 5..at + 8].fill(0);
        let body = at + HEADER_LEN..at + HEADER_LEN + len as usize;
        let crc = crc32c_of(&out[at..at + 8], &out[body.clone()]);
        out[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        at = body.end;
    }
    out
}

/// CRC32C of `head` followed by `body`: the frame checksum.
fn crc32c_of(head: &[u8], body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(head), body)
}

/// The first byte as a frame type, the rest as its body (no header, no checksum).
fn body(data: &[u8]) {
    let Some((&tag, rest)) = data.split_first() else { return };
    let Ok(frame_type) = FrameType::try_from(tag) else { return };
    match Frame::decode_body(frame_type, Bytes::copy_from_slice(rest)) {
        Ok(frame) => {
            assert_eq!(frame.frame_type(), frame_type);
            round_trip(&frame);
        }
        Err(error) => {
            assert!(matches!(error, FrameError::Malformed { frame, .. } if frame == frame_type), "{error:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    stream(data);
    stream(&fixup(data));
    body(data);
});
