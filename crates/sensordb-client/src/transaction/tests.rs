//! Tests of a transaction's SEND packets: sizes, every point carried, and the corruption switch.

use super::*;
use bytes::Bytes;
use sensordb_model::ValueKind;
use sensordb_protocol::points::{PointRecord, PointsDecoder};

#[test]
fn packets_respect_the_size_and_carry_every_point() {
    let mut runs = BTreeMap::new();
    runs.insert(1, Run { timestamps: (0..1000).collect(), values: ValueColumn::F64((0..1000).map(f64::from).collect()) });
    let big = Bytes::from(vec![7u8; 5000]);
    runs.insert(2, Run { timestamps: vec![5, 6], values: ValueColumn::Bytes(vec![Bytes::from_static(b"small"), big.clone()]) });
    let tx = TxId::from_u64(9);
    let mut out = Vec::new();
    let (crc, bytes) = encode_sends(&mut out, tx, &runs, 1024, false);
    let mut packets = Vec::new();
    let mut rest = &out[..];
    while !rest.is_empty() {
        let (frame, used) = Frame::decode(rest, u32::MAX).expect("valid frame").expect("whole frame");
        match frame {
            Frame::Send { tx: id, records } => {
                assert_eq!(id, tx);
                assert_eq!(Frame::Send { tx, records: records.clone() }.to_bytes(), &rest[..used], "encoded as Frame::encode does");
                packets.push(records.to_vec());
            }
            other => panic!("unexpected {other:?}"),
        }
        rest = &rest[used..];
    }
    assert_eq!(crc, crc32c::crc32c(&packets.concat()));
    assert_eq!(bytes, packets.iter().map(|p| p.len() as u64).sum::<u64>());
    assert!(packets.len() > 10);
    let kind_of = |id: u32| Some(if id == 1 { ValueKind::F64 } else { ValueKind::Bytes });
    let (mut floats, mut payloads, mut assembled) = (0, Vec::new(), Vec::new());
    for packet in packets {
        assert!(packet.len() <= 1024, "packet of {} bytes", packet.len());
        let mut decoder = PointsDecoder::new(Bytes::from(packet));
        while let Some(record) = decoder.next_record(kind_of) {
            match record.expect("decodes") {
                PointRecord::Points { short_id: 1, timestamps, .. } => floats += timestamps.len(),
                PointRecord::Points { values: ValueColumn::Bytes(v), .. } => payloads.extend(v),
                PointRecord::PayloadPart { bytes, last, .. } => {
                    assembled.extend_from_slice(&bytes);
                    if last {
                        payloads.push(Bytes::from(std::mem::take(&mut assembled)));
                    }
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(floats, 1000);
    assert_eq!(payloads, vec![Bytes::from_static(b"small"), big]);
}

#[test]
fn corruption_flips_one_byte_of_the_first_send_after_the_checksum() {
    let mut runs = BTreeMap::new();
    runs.insert(3, Run { timestamps: (0..100).collect(), values: ValueColumn::I64((0..100).collect()) });
    let tx = TxId::from_u64(1);
    let (mut clean, mut corrupted) = (Vec::new(), Vec::new());
    let sums = encode_sends(&mut clean, tx, &runs, 256, false);
    assert_eq!(encode_sends(&mut corrupted, tx, &runs, 256, true), sums);
    let records = |bytes: &[u8]| {
        let mut all = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (frame, used) = Frame::decode(rest, u32::MAX).expect("valid frame").expect("whole frame");
            let Frame::Send { records, .. } = frame else { panic!("not a SEND") };
            all.push(records.to_vec());
            rest = &rest[used..];
        }
        all
    };
    let (clean, corrupted) = (records(&clean), records(&corrupted));
    assert!(clean.len() > 2);
    assert_eq!(clean[1..], corrupted[1..]);
    let first = clean[0].len();
    assert_eq!(clean[0][..first - 1], corrupted[0][..first - 1]);
    assert_eq!(clean[0][first - 1] ^ 1, corrupted[0][first - 1]);
}
