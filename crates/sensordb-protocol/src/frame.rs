//! Frames: a 12-byte header (body length, type, flags, CRC32C) and a typed body.
//!
//! ```text
//! 0      4      5      6        8        12
//! +------+------+------+--------+--------+----------------------+
//! |length| type | flags|reserved| crc32c | body (length bytes)  |
//! | u32  |  u8  |  u8  |  u16   |  u32   |                      |
//! +------+------+------+--------+--------+----------------------+
//! ```
//! All integers little-endian. The CRC32C covers header bytes 0..8 followed by the body, so a
//! flipped bit anywhere but in the checksum itself is caught. `flags` and `reserved` are 0 in
//! every version so far (1 to 4: version 2 added a frame type and an error code, version 3 a
//! meaning of ERROR's `context`, version 4 the PEERS, PEERS_OK and COMPLETE_FIRST frames, no
//! flag), and
//! a header with any of their bits set is refused ([`FrameError::Reserved`]) before the checksum
//! is checked, whichever version the connection speaks. See `docs/PROTOCOL.md` for every body.

use bytes::Bytes;
use sensordb_model::le_reader::LeReader;
use sensordb_model::ValueKind;
use std::fmt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Newest protocol version spoken by this build. Version 2 adds COMPLETE_CHECKED and the
/// CHECKSUM_MISMATCH error code; version 3 has an ERROR naming a transaction carry the type of
/// the frame it answers in `context` ([`ANSWERED_FRAME_VERSION`]); version 4 adds PEERS, which
/// asks a node for the live nodes sharing its store ([`PEERS_VERSION`]). A connection negotiates
/// the highest version both ends speak.
pub const VERSION: u16 = 4;
/// Oldest protocol version this build still speaks.
pub const MIN_VERSION: u16 = 1;
/// The first version with COMPLETE_CHECKED (one round trip per transaction).
pub const CHECKED_COMPLETE_VERSION: u16 = 2;
/// The first version whose ERRORs naming a transaction carry, in `context`, the type of the
/// frame they answer (0 for one answering no frame, TRANSACTION_TIMEOUT): with every frame of a
/// transaction but a successful SEND answered once and in order, a pipelining client can tell
/// which answer is the last.
pub const ANSWERED_FRAME_VERSION: u16 = 3;
/// The first version with PEERS and PEERS_OK (a node tells a client its peers' addresses).
pub const PEERS_VERSION: u16 = 4;
/// The first version with COMPLETE_FIRST (COMPLETE_CHECKED of a first attempt), also 4.
pub const FIRST_ATTEMPT_VERSION: u16 = 4;
/// Most peers a PEERS_OK lists.
pub const PEERS_MAX: usize = 1024;
/// Bytes of the frame header.
pub const HEADER_LEN: usize = 12;
/// First bytes of every HELLO body.
pub const HELLO_MAGIC: [u8; 4] = *b"SDBN";
/// The longest HELLO body there can be: magic, two versions, client id, and a token and a
/// client name of at most `u16::MAX` bytes each with their length prefixes. A server refuses a
/// longer frame before the handshake without reading its body.
pub const HELLO_BODY_MAX: u32 = 4 + 2 + 2 + 16 + (2 + u16::MAX as u32) * 2;

/// A client-chosen transaction id: 16 bytes (a u64 id is its 8 LE bytes followed by 8 zeros).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TxId(pub [u8; 16]);

impl TxId {
    pub fn from_u64(id: u64) -> TxId {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&id.to_le_bytes());
        TxId(bytes)
    }
}

impl fmt::Debug for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Frame type byte. Client to server below 0x80, server to client from 0x80.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    Hello = 0x01,
    DefineSeries = 0x02,
    Create = 0x03,
    Send = 0x04,
    Confirm = 0x05,
    Complete = 0x06,
    Cancel = 0x07,
    Ping = 0x08,
    /// Version 2: COMPLETE with the client's checksum, bytes and points of what it sent.
    CompleteChecked = 0x09,
    /// Version 4: asks for the node's live peers.
    Peers = 0x0A,
    /// Version 4: COMPLETE_CHECKED of a first attempt (the id was never completed anywhere).
    CompleteFirst = 0x0B,
    HelloOk = 0x81,
    SeriesOk = 0x82,
    Created = 0x83,
    Confirmed = 0x85,
    Completed = 0x86,
    Cancelled = 0x87,
    Pong = 0x88,
    /// Version 4: the answer to PEERS.
    PeersOk = 0x8A,
    Error = 0xEE,
}

impl TryFrom<u8> for FrameType {
    type Error = u8;
    fn try_from(tag: u8) -> Result<Self, u8> {
        Ok(match tag {
            0x01 => FrameType::Hello,
            0x02 => FrameType::DefineSeries,
            0x03 => FrameType::Create,
            0x04 => FrameType::Send,
            0x05 => FrameType::Confirm,
            0x06 => FrameType::Complete,
            0x07 => FrameType::Cancel,
            0x08 => FrameType::Ping,
            0x09 => FrameType::CompleteChecked,
            0x0A => FrameType::Peers,
            0x0B => FrameType::CompleteFirst,
            0x81 => FrameType::HelloOk,
            0x82 => FrameType::SeriesOk,
            0x83 => FrameType::Created,
            0x85 => FrameType::Confirmed,
            0x86 => FrameType::Completed,
            0x87 => FrameType::Cancelled,
            0x88 => FrameType::Pong,
            0x8A => FrameType::PeersOk,
            0xEE => FrameType::Error,
            other => return Err(other),
        })
    }
}

/// Error codes carried by ERROR frames (u16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    BadChecksum = 1,
    UnknownFrameType = 2,
    FrameTooLarge = 3,
    Malformed = 4,
    WrongState = 5,
    UnsupportedVersion = 6,
    Unauthenticated = 7,
    Forbidden = 8,
    UnknownSeries = 9,
    KindMismatch = 10,
    InvalidSeriesKey = 11,
    TransactionTooLarge = 12,
    TransactionTimeout = 13,
    DuplicateTransaction = 14,
    NoSpace = 15,
    PayloadTooLarge = 16,
    Storage = 17,
    ShuttingDown = 18,
    IdleTimeout = 19,
    TooManyTransactions = 20,
    /// Version 2: COMPLETE_CHECKED's checksum, bytes or points differ from what the server
    /// received; the transaction is rolled back.
    ChecksumMismatch = 21,
    /// DEFINE_SERIES of a new series in a database holding `max_series_per_database` series
    /// already (any version; an older peer shows it as an unknown code with its message).
    SeriesLimitExceeded = 22,
    /// A code this build does not know (from a newer peer).
    Unknown = 0xFFFF,
}

impl ErrorCode {
    pub fn from_u16(code: u16) -> ErrorCode {
        use ErrorCode::*;
        match code {
            1 => BadChecksum,
            2 => UnknownFrameType,
            3 => FrameTooLarge,
            4 => Malformed,
            5 => WrongState,
            6 => UnsupportedVersion,
            7 => Unauthenticated,
            8 => Forbidden,
            9 => UnknownSeries,
            10 => KindMismatch,
            11 => InvalidSeriesKey,
            12 => TransactionTooLarge,
            13 => TransactionTimeout,
            14 => DuplicateTransaction,
            15 => NoSpace,
            16 => PayloadTooLarge,
            17 => Storage,
            18 => ShuttingDown,
            19 => IdleTimeout,
            20 => TooManyTransactions,
            21 => ChecksumMismatch,
            22 => SeriesLimitExceeded,
            _ => Unknown,
        }
    }

    /// True when resending the same transaction later may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::BadChecksum
                | ErrorCode::NoSpace
                | ErrorCode::TransactionTimeout
                | ErrorCode::ShuttingDown
                | ErrorCode::IdleTimeout
                | ErrorCode::Storage
                | ErrorCode::ChecksumMismatch
        )
    }
}

/// One decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Hello {
        min_version: u16,
        max_version: u16,
        client_id: [u8; 16],
        token: String,
        client_name: String,
    },
    DefineSeries {
        short_id: u32,
        kind: ValueKind,
        key: String,
    },
    Create {
        tx: TxId,
    },
    /// `records`: point records (see [`super::points`]).
    Send {
        tx: TxId,
        records: Bytes,
    },
    Confirm {
        tx: TxId,
    },
    Complete {
        tx: TxId,
    },
    /// COMPLETE that stores the transaction only if the server received exactly what the
    /// client sent: `crc`, `bytes` and `points` as in CONFIRMED, computed by the client.
    CompleteChecked {
        tx: TxId,
        crc: u32,
        bytes: u64,
        points: u64,
    },
    /// Version 4: COMPLETE_CHECKED sent by a client that has never sent COMPLETE,
    /// COMPLETE_CHECKED or COMPLETE_FIRST for this id before (to any node): no other node can
    /// have completed it, so a server that would look the id up among other nodes' completions
    /// need not. Same body as COMPLETE_CHECKED.
    CompleteFirst {
        tx: TxId,
        crc: u32,
        bytes: u64,
        points: u64,
    },
    Cancel {
        tx: TxId,
    },
    Ping {
        nonce: u64,
    },
    /// Version 4: which nodes share this node's store (empty body).
    Peers,
    HelloOk {
        version: u16,
        max_frame_bytes: u32,
        max_transaction_bytes: u64,
        transaction_timeout_ms: u32,
        server: String,
    },
    SeriesOk {
        short_id: u32,
        series_id: u32,
    },
    /// `already_completed`: the id is in the completed-transaction window (informational).
    Created {
        tx: TxId,
        already_completed: bool,
    },
    /// `crc`: CRC32C of the concatenated record bytes of every SEND of the transaction.
    Confirmed {
        tx: TxId,
        crc: u32,
        bytes: u64,
        points: u64,
    },
    /// `duplicate`: completed earlier; nothing was written this time.
    Completed {
        tx: TxId,
        duplicate: bool,
        points: u64,
    },
    Cancelled {
        tx: TxId,
    },
    Pong {
        nonce: u64,
    },
    /// Version 4: the live nodes sharing the answering node's store (itself included, when it
    /// advertises an address), each with the address clients reach its native listener at.
    PeersOk {
        peers: Vec<Peer>,
    },
    /// `context`: the short series id a DEFINE_SERIES error is about; from version 3, for an
    /// error naming a transaction, the type of the frame it answers (0: none); else 0.
    Error {
        code: ErrorCode,
        fatal: bool,
        tx: Option<TxId>,
        context: u32,
        message: String,
    },
}

/// One node of a PEERS_OK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The node's id among those sharing the store (`[cassandra] node_id`).
    pub node_id: u16,
    /// `host:port` of its native listener, as the node advertises it.
    pub address: String,
}

/// Why bytes are not a valid frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame body of {len} bytes exceeds the limit of {limit}")]
    TooLarge { len: u32, limit: u32 },
    /// A frame before a successful HELLO longer than any HELLO can be ([`HELLO_BODY_MAX`]).
    #[error("frame body of {len} bytes before a successful HELLO exceeds the longest HELLO ({limit} bytes)")]
    TooLargeBeforeHello { len: u32, limit: u32 },
    #[error("frame checksum mismatch (header says {expected:#010x}, computed {actual:#010x})")]
    BadChecksum { expected: u32, actual: u32 },
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    #[error("malformed {frame:?} frame: {detail}")]
    Malformed { frame: FrameType, detail: String },
    #[error("nonzero flags or reserved bits in a frame header")]
    Reserved,
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameError {
    /// The ERROR code that reports this problem.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::TooLarge { .. } | FrameError::TooLargeBeforeHello { .. } => ErrorCode::FrameTooLarge,
            FrameError::BadChecksum { .. } => ErrorCode::BadChecksum,
            FrameError::UnknownType(_) => ErrorCode::UnknownFrameType,
            FrameError::Malformed { .. } | FrameError::Reserved => ErrorCode::Malformed,
            FrameError::Io(_) => ErrorCode::Malformed,
        }
    }
}

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub frame_type: u8,
    pub crc: u32,
    raw: [u8; 8],
}

impl Header {
    /// Parses a header; refuses a body longer than `max_body` and nonzero flags or reserved bits.
    pub fn parse(bytes: &[u8; HEADER_LEN], max_body: u32) -> Result<Header, FrameError> {
        let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if len > max_body {
            return Err(FrameError::TooLarge { len, limit: max_body });
        }
        if bytes[5] != 0 || bytes[6] != 0 || bytes[7] != 0 {
            return Err(FrameError::Reserved);
        }
        let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&bytes[..8]);
        Ok(Header { len, frame_type: bytes[4], crc, raw })
    }

    /// Checks the body against the checksum, then decodes it.
    pub fn decode_body(&self, body: Bytes) -> Result<Frame, FrameError> {
        let actual = crc32c::crc32c_append(crc32c::crc32c(&self.raw), &body);
        if actual != self.crc {
            return Err(FrameError::BadChecksum { expected: self.crc, actual });
        }
        let frame_type = FrameType::try_from(self.frame_type).map_err(FrameError::UnknownType)?;
        Frame::decode_body(frame_type, body)
    }
}

impl Frame {
    pub fn frame_type(&self) -> FrameType {
        match self {
            Frame::Hello { .. } => FrameType::Hello,
            Frame::DefineSeries { .. } => FrameType::DefineSeries,
            Frame::Create { .. } => FrameType::Create,
            Frame::Send { .. } => FrameType::Send,
            Frame::Confirm { .. } => FrameType::Confirm,
            Frame::Complete { .. } => FrameType::Complete,
            Frame::CompleteChecked { .. } => FrameType::CompleteChecked,
            Frame::CompleteFirst { .. } => FrameType::CompleteFirst,
            Frame::Cancel { .. } => FrameType::Cancel,
            Frame::Ping { .. } => FrameType::Ping,
            Frame::Peers => FrameType::Peers,
            Frame::HelloOk { .. } => FrameType::HelloOk,
            Frame::SeriesOk { .. } => FrameType::SeriesOk,
            Frame::Created { .. } => FrameType::Created,
            Frame::Confirmed { .. } => FrameType::Confirmed,
            Frame::Completed { .. } => FrameType::Completed,
            Frame::Cancelled { .. } => FrameType::Cancelled,
            Frame::Pong { .. } => FrameType::Pong,
            Frame::PeersOk { .. } => FrameType::PeersOk,
            Frame::Error { .. } => FrameType::Error,
        }
    }

    /// The transaction a frame belongs to, if any.
    pub fn tx(&self) -> Option<TxId> {
        match self {
            Frame::Create { tx }
            | Frame::Send { tx, .. }
            | Frame::Confirm { tx }
            | Frame::Complete { tx }
            | Frame::CompleteChecked { tx, .. }
            | Frame::CompleteFirst { tx, .. }
            | Frame::Cancel { tx }
            | Frame::Created { tx, .. }
            | Frame::Confirmed { tx, .. }
            | Frame::Completed { tx, .. }
            | Frame::Cancelled { tx } => Some(*tx),
            Frame::Error { tx, .. } => *tx,
            _ => None,
        }
    }

    /// Appends the whole frame, header and body, to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0u8; HEADER_LEN]);
        self.encode_body(out);
        let len = (out.len() - start - HEADER_LEN) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
        out[start + 4] = self.frame_type() as u8;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..start + 8]), &out[start + HEADER_LEN..]);
        out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    }

    /// The whole frame as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        fn text(out: &mut Vec<u8>, text: &str) {
            let bytes = &text.as_bytes()[..text.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        match self {
            Frame::Hello { min_version, max_version, client_id, token, client_name } => {
                out.extend_from_slice(&HELLO_MAGIC);
                out.extend_from_slice(&min_version.to_le_bytes());
                out.extend_from_slice(&max_version.to_le_bytes());
                out.extend_from_slice(client_id);
                text(out, token);
                text(out, client_name);
            }
            Frame::DefineSeries { short_id, kind, key } => {
                out.extend_from_slice(&short_id.to_le_bytes());
                out.push(*kind as u8);
                text(out, key);
            }
            Frame::Create { tx } | Frame::Confirm { tx } | Frame::Complete { tx } | Frame::Cancel { tx } | Frame::Cancelled { tx } => {
                out.extend_from_slice(&tx.0)
            }
            Frame::Send { tx, records } => {
                out.extend_from_slice(&tx.0);
                out.extend_from_slice(records);
            }
            Frame::Ping { nonce } | Frame::Pong { nonce } => out.extend_from_slice(&nonce.to_le_bytes()),
            Frame::Peers => {}
            Frame::PeersOk { peers } => {
                let peers = &peers[..peers.len().min(PEERS_MAX)];
                out.extend_from_slice(&(peers.len() as u16).to_le_bytes());
                for peer in peers {
                    out.extend_from_slice(&peer.node_id.to_le_bytes());
                    text(out, &peer.address);
                }
            }
            Frame::HelloOk { version, max_frame_bytes, max_transaction_bytes, transaction_timeout_ms, server } => {
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&max_frame_bytes.to_le_bytes());
                out.extend_from_slice(&max_transaction_bytes.to_le_bytes());
                out.extend_from_slice(&transaction_timeout_ms.to_le_bytes());
                text(out, server);
            }
            Frame::SeriesOk { short_id, series_id } => {
                out.extend_from_slice(&short_id.to_le_bytes());
                out.extend_from_slice(&series_id.to_le_bytes());
            }
            Frame::Created { tx, already_completed } => {
                out.extend_from_slice(&tx.0);
                out.push(u8::from(*already_completed));
            }
            Frame::Confirmed { tx, crc, bytes, points }
            | Frame::CompleteChecked { tx, crc, bytes, points }
            | Frame::CompleteFirst { tx, crc, bytes, points } => {
                out.extend_from_slice(&tx.0);
                out.extend_from_slice(&crc.to_le_bytes());
                out.extend_from_slice(&bytes.to_le_bytes());
                out.extend_from_slice(&points.to_le_bytes());
            }
            Frame::Completed { tx, duplicate, points } => {
                out.extend_from_slice(&tx.0);
                out.push(u8::from(*duplicate));
                out.extend_from_slice(&points.to_le_bytes());
            }
            Frame::Error { code, fatal, tx, context, message } => {
                out.extend_from_slice(&(*code as u16).to_le_bytes());
                out.push(u8::from(*fatal) | if tx.is_some() { 2 } else { 0 });
                out.extend_from_slice(&tx.unwrap_or_default().0);
                out.extend_from_slice(&context.to_le_bytes());
                text(out, message);
            }
        }
    }

    /// Decodes a body whose checksum was verified.
    pub fn decode_body(frame_type: FrameType, body: Bytes) -> Result<Frame, FrameError> {
        let malformed = |detail: &str| FrameError::Malformed { frame: frame_type, detail: detail.to_string() };
        let mut r = LeReader::new(&body);
        let truncated = || malformed("truncated body");
        fn tx_id(r: &mut LeReader<'_>) -> Option<TxId> {
            let mut id = [0u8; 16];
            id.copy_from_slice(r.take(16)?);
            Some(TxId(id))
        }
        fn text(r: &mut LeReader<'_>) -> Option<Result<String, ()>> {
            let len = r.u16()? as usize;
            Some(String::from_utf8(r.take(len)?.to_vec()).map_err(|_| ()))
        }
        let utf8 = |t: Option<Result<String, ()>>| -> Result<String, FrameError> {
            t.ok_or_else(truncated)?.map_err(|_| malformed("text is not UTF-8"))
        };
        let frame = match frame_type {
            FrameType::Hello => {
                if r.take(4).ok_or_else(truncated)? != HELLO_MAGIC {
                    return Err(malformed("bad magic"));
                }
                let min_version = r.u16().ok_or_else(truncated)?;
                let max_version = r.u16().ok_or_else(truncated)?;
                let mut client_id = [0u8; 16];
                client_id.copy_from_slice(r.take(16).ok_or_else(truncated)?);
                let token = utf8(text(&mut r))?;
                let client_name = utf8(text(&mut r))?;
                Frame::Hello { min_version, max_version, client_id, token, client_name }
            }
            FrameType::DefineSeries => {
                let short_id = r.u32().ok_or_else(truncated)?;
                let kind = r.u8().ok_or_else(truncated)?;
                let kind = ValueKind::try_from(kind).map_err(|k| malformed(&format!("unknown value kind {k}")))?;
                let key = utf8(text(&mut r))?;
                Frame::DefineSeries { short_id, kind, key }
            }
            FrameType::Create => Frame::Create { tx: tx_id(&mut r).ok_or_else(truncated)? },
            FrameType::Confirm => Frame::Confirm { tx: tx_id(&mut r).ok_or_else(truncated)? },
            FrameType::Complete => Frame::Complete { tx: tx_id(&mut r).ok_or_else(truncated)? },
            FrameType::Cancel => Frame::Cancel { tx: tx_id(&mut r).ok_or_else(truncated)? },
            FrameType::Cancelled => Frame::Cancelled { tx: tx_id(&mut r).ok_or_else(truncated)? },
            FrameType::Send => {
                let tx = tx_id(&mut r).ok_or_else(truncated)?;
                let position = r.position();
                return Ok(Frame::Send { tx, records: body.slice(position..) });
            }
            FrameType::Ping => Frame::Ping { nonce: r.u64().ok_or_else(truncated)? },
            FrameType::Pong => Frame::Pong { nonce: r.u64().ok_or_else(truncated)? },
            FrameType::Peers => Frame::Peers,
            FrameType::PeersOk => {
                let count = r.u16().ok_or_else(truncated)? as usize;
                if count > PEERS_MAX {
                    return Err(malformed("more peers than PEERS_MAX"));
                }
                let mut peers = Vec::with_capacity(count);
                for _ in 0..count {
                    let node_id = r.u16().ok_or_else(truncated)?;
                    let address = utf8(text(&mut r))?;
                    peers.push(Peer { node_id, address });
                }
                Frame::PeersOk { peers }
            }
            FrameType::HelloOk => {
                let version = r.u16().ok_or_else(truncated)?;
                let max_frame_bytes = r.u32().ok_or_else(truncated)?;
                let max_transaction_bytes = r.u64().ok_or_else(truncated)?;
                let transaction_timeout_ms = r.u32().ok_or_else(truncated)?;
                let server = utf8(text(&mut r))?;
                Frame::HelloOk { version, max_frame_bytes, max_transaction_bytes, transaction_timeout_ms, server }
            }
            FrameType::SeriesOk => Frame::SeriesOk { short_id: r.u32().ok_or_else(truncated)?, series_id: r.u32().ok_or_else(truncated)? },
            FrameType::Created => {
                let tx = tx_id(&mut r).ok_or_else(truncated)?;
                let flag = r.u8().ok_or_else(truncated)?;
                Frame::Created { tx, already_completed: flag & 1 != 0 }
            }
            FrameType::Confirmed => Frame::Confirmed {
                tx: tx_id(&mut r).ok_or_else(truncated)?,
                crc: r.u32().ok_or_else(truncated)?,
                bytes: r.u64().ok_or_else(truncated)?,
                points: r.u64().ok_or_else(truncated)?,
            },
            FrameType::CompleteChecked => Frame::CompleteChecked {
                tx: tx_id(&mut r).ok_or_else(truncated)?,
                crc: r.u32().ok_or_else(truncated)?,
                bytes: r.u64().ok_or_else(truncated)?,
                points: r.u64().ok_or_else(truncated)?,
            },
            FrameType::CompleteFirst => Frame::CompleteFirst {
                tx: tx_id(&mut r).ok_or_else(truncated)?,
                crc: r.u32().ok_or_else(truncated)?,
                bytes: r.u64().ok_or_else(truncated)?,
                points: r.u64().ok_or_else(truncated)?,
            },
            FrameType::Completed => {
                let tx = tx_id(&mut r).ok_or_else(truncated)?;
                let flag = r.u8().ok_or_else(truncated)?;
                let points = r.u64().ok_or_else(truncated)?;
                Frame::Completed { tx, duplicate: flag & 1 != 0, points }
            }
            FrameType::Error => {
                let code = ErrorCode::from_u16(r.u16().ok_or_else(truncated)?);
                let flags = r.u8().ok_or_else(truncated)?;
                let tx = tx_id(&mut r).ok_or_else(truncated)?;
                let context = r.u32().ok_or_else(truncated)?;
                let message = utf8(text(&mut r))?;
                Frame::Error { code, fatal: flags & 1 != 0, tx: (flags & 2 != 0).then_some(tx), context, message }
            }
        };
        if r.position() != body.len() {
            return Err(malformed("trailing bytes after the body"));
        }
        Ok(frame)
    }

    /// Decodes one whole frame from the front of `bytes`; returns it and the bytes used, or
    /// `Ok(None)` when more bytes are needed.
    pub fn decode(bytes: &[u8], max_body: u32) -> Result<Option<(Frame, usize)>, FrameError> {
        let Some(head) = bytes.get(..HEADER_LEN) else { return Ok(None) };
        let mut array = [0u8; HEADER_LEN];
        array.copy_from_slice(head);
        let header = Header::parse(&array, max_body)?;
        let end = HEADER_LEN + header.len as usize;
        let Some(body) = bytes.get(HEADER_LEN..end) else { return Ok(None) };
        Ok(Some((header.decode_body(Bytes::copy_from_slice(body))?, end)))
    }
}

/// Reads one frame. `Ok(None)` on a clean end of stream before a header.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, max_body: u32) -> Result<Option<Frame>, FrameError> {
    let mut head = [0u8; HEADER_LEN];
    match reader.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let header = Header::parse(&head, max_body)?;
    let mut body = vec![0u8; header.len as usize];
    reader.read_exact(&mut body).await?;
    header.decode_body(Bytes::from(body)).map(Some)
}

/// Writes one frame (not flushed).
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, frame: &Frame) -> std::io::Result<()> {
    writer.write_all(&frame.to_bytes()).await
}

#[cfg(test)]
mod tests;
