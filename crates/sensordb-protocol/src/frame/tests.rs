//! Tests of the frame codec: documented bytes, reserved bits, limits and checksums, and round trips of every frame.

use super::*;
use proptest::prelude::*;

fn tx_strategy() -> impl Strategy<Value = TxId> {
    any::<[u8; 16]>().prop_map(TxId)
}

fn kind_strategy() -> impl Strategy<Value = ValueKind> {
    prop_oneof![Just(ValueKind::F64), Just(ValueKind::I64), Just(ValueKind::U64), Just(ValueKind::Bool), Just(ValueKind::Bytes)]
}

fn code_strategy() -> impl Strategy<Value = ErrorCode> {
    (1u16..=22).prop_map(ErrorCode::from_u16)
}

fn frame_strategy() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), any::<[u8; 16]>(), ".{0,20}", ".{0,20}").prop_map(|(a, b, c, t, n)| Frame::Hello {
            min_version: a,
            max_version: b,
            client_id: c,
            token: t,
            client_name: n
        }),
        (any::<u32>(), kind_strategy(), ".{0,40}").prop_map(|(short_id, kind, key)| Frame::DefineSeries { short_id, kind, key }),
        tx_strategy().prop_map(|tx| Frame::Create { tx }),
        (tx_strategy(), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(|(tx, r)| Frame::Send { tx, records: Bytes::from(r) }),
        tx_strategy().prop_map(|tx| Frame::Confirm { tx }),
        tx_strategy().prop_map(|tx| Frame::Complete { tx }),
        (tx_strategy(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(tx, crc, bytes, points)| Frame::CompleteChecked {
            tx,
            crc,
            bytes,
            points
        }),
        tx_strategy().prop_map(|tx| Frame::Cancel { tx }),
        any::<u64>().prop_map(|nonce| Frame::Ping { nonce }),
        (any::<u16>(), any::<u32>(), any::<u64>(), any::<u32>(), ".{0,20}").prop_map(|(v, f, t, ms, s)| Frame::HelloOk {
            version: v,
            max_frame_bytes: f,
            max_transaction_bytes: t,
            transaction_timeout_ms: ms,
            server: s
        }),
        (any::<u32>(), any::<u32>()).prop_map(|(short_id, series_id)| Frame::SeriesOk { short_id, series_id }),
        (tx_strategy(), any::<bool>()).prop_map(|(tx, already_completed)| Frame::Created { tx, already_completed }),
        (tx_strategy(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(tx, crc, bytes, points)| Frame::Confirmed {
            tx,
            crc,
            bytes,
            points
        }),
        (tx_strategy(), any::<bool>(), any::<u64>()).prop_map(|(tx, duplicate, points)| Frame::Completed { tx, duplicate, points }),
        tx_strategy().prop_map(|tx| Frame::Cancelled { tx }),
        any::<u64>().prop_map(|nonce| Frame::Pong { nonce }),
        Just(Frame::Peers),
        (tx_strategy(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(tx, crc, bytes, points)| Frame::CompleteFirst {
            tx,
            crc,
            bytes,
            points
        }),
        proptest::collection::vec((any::<u16>(), ".{0,30}"), 0..5)
            .prop_map(|peers| Frame::PeersOk { peers: peers.into_iter().map(|(node_id, address)| Peer { node_id, address }).collect() }),
        (code_strategy(), any::<bool>(), proptest::option::of(tx_strategy()), any::<u32>(), ".{0,40}")
            .prop_map(|(code, fatal, tx, context, message)| Frame::Error { code, fatal, tx, context, message }),
    ]
}

#[test]
fn a_known_frame_has_the_documented_bytes() {
    let bytes = Frame::Ping { nonce: 7 }.to_bytes();
    assert_eq!(&bytes[..8], &[8, 0, 0, 0, 0x08, 0, 0, 0]);
    let mut covered = bytes[..8].to_vec();
    covered.extend_from_slice(&bytes[12..]);
    assert_eq!(u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]), crc32c::crc32c(&covered));
    assert_eq!(&bytes[12..], &7u64.to_le_bytes());
}

#[test]
fn complete_checked_has_the_documented_bytes() {
    let frame = Frame::CompleteChecked { tx: TxId::from_u64(3), crc: 0xAABB_CCDD, bytes: 5, points: 2 };
    let bytes = frame.to_bytes();
    assert_eq!(&bytes[..8], &[36, 0, 0, 0, 0x09, 0, 0, 0]);
    assert_eq!(&bytes[12..28], &TxId::from_u64(3).0);
    assert_eq!(&bytes[28..32], &0xAABB_CCDDu32.to_le_bytes());
    assert_eq!(&bytes[32..40], &5u64.to_le_bytes());
    assert_eq!(&bytes[40..48], &2u64.to_le_bytes());
    assert_eq!(ErrorCode::from_u16(21), ErrorCode::ChecksumMismatch);
    assert!(ErrorCode::ChecksumMismatch.is_retryable());
}

#[test]
fn nonzero_flags_or_reserved_bits_are_refused_even_under_a_valid_checksum() {
    for byte in 5..8 {
        let mut bytes = Frame::Ping { nonce: 7 }.to_bytes();
        bytes[byte] = 1;
        let mut covered = bytes[..8].to_vec();
        covered.extend_from_slice(&bytes[12..]);
        bytes[8..12].copy_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
        assert!(matches!(Frame::decode(&bytes, 1024), Err(FrameError::Reserved)), "header byte {byte}");
    }
    assert_eq!(FrameError::Reserved.code(), ErrorCode::Malformed);
}

#[test]
fn limits_and_checksums_are_enforced() {
    let mut bytes = Frame::Create { tx: TxId::from_u64(1) }.to_bytes();
    assert!(matches!(Frame::decode(&bytes, 8), Err(FrameError::TooLarge { len: 16, limit: 8 })));
    bytes[20] ^= 1;
    assert!(matches!(Frame::decode(&bytes, 1024), Err(FrameError::BadChecksum { .. })));
    assert!(matches!(Frame::decode(&bytes[..5], 1024), Ok(None)));
}

proptest! {
    #[test]
    fn frames_round_trip(frame in frame_strategy()) {
        let bytes = frame.to_bytes();
        let (decoded, used) = Frame::decode(&bytes, u32::MAX).expect("decodes").expect("complete");
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(decoded, frame);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Frame::decode(&bytes, 1 << 20);
    }

    #[test]
    fn garbage_bodies_with_valid_checksums_never_panic(kind in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..120)) {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&[kind, 0, 0, 0]);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..8]), &body);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(&body);
        let _ = Frame::decode(&bytes, 1 << 20);
    }

    #[test]
    fn every_flipped_bit_is_caught(frame in frame_strategy(), bit in any::<usize>()) {
        let mut bytes = frame.to_bytes();
        let bit = bit % (bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        if let Ok(Some((decoded, _))) = Frame::decode(&bytes, u32::MAX) {
            prop_assert!(false, "flipped bit {} accepted as {:?}", bit, decoded);
        }
    }
}

#[test]
fn the_longest_hello_is_exactly_hello_body_max() {
    let longest = "t".repeat(u16::MAX as usize);
    let hello = Frame::Hello { min_version: 1, max_version: 2, client_id: [7; 16], token: longest.clone(), client_name: longest };
    let encoded = hello.to_bytes();
    assert_eq!(encoded.len() - HEADER_LEN, HELLO_BODY_MAX as usize);
    let (decoded, _) = Frame::decode(&encoded, HELLO_BODY_MAX).expect("decodes").expect("whole");
    assert_eq!(decoded, hello);
}
