//! The native protocol's wire format, shared by the server (`sensordb-server`'s `native`
//! module) and the client crate (`sensordb-client`): frames ([`frame`]) and the compact point
//! records carried by SEND frames ([`points`]).
//!
//! Specified byte for byte in `docs/PROTOCOL.md` (protocol version [`VERSION`]). Everything here
//! is pure encoding and decoding over byte slices plus two small async helpers that read and
//! write one frame; decoding never panics on any input and never allocates more than the frame
//! length it was allowed to read. It depends on the data model (`sensordb-model`) only, not on
//! the engine or the server: where decoded points go is the caller's [`PointsSink`].

pub mod frame;
pub mod points;

pub use frame::{read_frame, write_frame, ErrorCode, Frame, FrameError, FrameType, TxId, HEADER_LEN, HELLO_MAGIC, VERSION};
pub use points::{Appended, DecodeError, PointRecord, PointsDecoder, PointsEncoder, PointsSink};
