//! The protocol's [`PointsSink`] over the engine's [`WriteBatch`]: SEND records decoded
//! straight into an open transaction's batch, through [`WriteBatch::append_with`], with no
//! columns per record.
//!
//! The impl lives here, on a server type that borrows the batch, rather than in the engine:
//! the trait is `sensordb-protocol`'s and the batch the engine's, and a server-side wrapper
//! keeps the engine free of any dependency on the wire format (the orphan rule allows it, as
//! the wrapper is local). The wrapper also carries the connection's short-id definitions,
//! which are the server's anyway.

use sensordb_engine::{SeriesId, Timestamp, ValueColumn, ValueKind, WriteBatch};
use sensordb_protocol::points::{DecodeError, PointsSink};

/// A [`PointsSink`] that appends POINTS records to `batch`, to the series `resolve` maps their
/// short id to (with the series' kind; `None`: undefined on the connection).
pub struct BatchSink<'a, R> {
    resolve: R,
    batch: &'a mut WriteBatch,
}

impl<'a, R: Fn(u32) -> Option<(SeriesId, ValueKind)>> BatchSink<'a, R> {
    pub fn new(resolve: R, batch: &'a mut WriteBatch) -> Self {
        BatchSink { resolve, batch }
    }
}

impl<R: Fn(u32) -> Option<(SeriesId, ValueKind)>> PointsSink for BatchSink<'_, R> {
    fn kind_of(&self, short_id: u32) -> Option<ValueKind> {
        (self.resolve)(short_id).map(|(_, kind)| kind)
    }

    /// A record whose series holds another kind in the batch (two definitions of one key
    /// disagreeing) is refused as malformed; a failed `decode` leaves the batch as it was.
    fn append_points<D>(&mut self, short_id: u32, kind: ValueKind, decode: D) -> Result<(), DecodeError>
    where
        D: FnOnce(&mut Vec<Timestamp>, &mut ValueColumn) -> Result<(), DecodeError>,
    {
        let (series, _) = (self.resolve)(short_id).ok_or(DecodeError::UnknownSeries(short_id))?;
        let index = self.batch.entry_index(series, kind).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        self.batch.append_with(index, decode).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;
    use sensordb_protocol::points::{Appended, PointRecord, PointsDecoder, PointsEncoder};

    fn kind_of(id: u32) -> Option<ValueKind> {
        ValueKind::try_from((id % 5 + 1) as u8).ok()
    }

    fn column(kind: ValueKind, seed: &[i64]) -> ValueColumn {
        match kind {
            ValueKind::F64 => ValueColumn::F64(seed.iter().map(|&x| x as f64 / 3.0).collect()),
            ValueKind::I64 => ValueColumn::I64(seed.to_vec()),
            ValueKind::U64 => ValueColumn::U64(seed.iter().map(|&x| x as u64).collect()),
            ValueKind::Bool => ValueColumn::Bool(seed.iter().map(|&x| x & 1 == 1).collect()),
            ValueKind::Bytes => ValueColumn::Bytes(seed.iter().map(|&x| Bytes::from(x.to_string())).collect()),
        }
    }

    #[test]
    fn a_series_of_another_kind_in_the_batch_is_refused_and_the_batch_kept() {
        let mut body = Vec::new();
        PointsEncoder::points(&mut body, 0, &[1, 2], &ValueColumn::F64(vec![1.0, 2.0]));
        PointsEncoder::points(&mut body, 1, &[3], &ValueColumn::I64(vec![3]));
        // Short ids 0 and 1 name one series with two kinds.
        let resolve = |id: u32| [(SeriesId(7), ValueKind::F64), (SeriesId(7), ValueKind::I64)].get(id as usize).copied();
        let mut batch = WriteBatch::new();
        let mut decoder = PointsDecoder::new(Bytes::from(body));
        let mut sink = BatchSink::new(resolve, &mut batch);
        assert_eq!(decoder.next_into(&mut sink), Some(Ok(Appended::Points { short_id: 0, count: 2 })));
        assert!(matches!(decoder.next_into(&mut sink), Some(Err(DecodeError::Malformed(_)))));
        assert_eq!(decoder.next_into(&mut sink), None);
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.entries()[0].timestamps, vec![1, 2]);
    }

    proptest! {
        /// Decoding into a batch stores what decoding into columns and pushing them would.
        #[test]
        fn next_into_fills_a_batch_as_next_record_does(runs in proptest::collection::vec((0u32..20, proptest::collection::vec(sensordb_engine::TIMESTAMP_MIN..=sensordb_engine::TIMESTAMP_MAX, 1..20)), 0..8),
                                                       cut in any::<proptest::sample::Index>()) {
            let mut body = Vec::new();
            for (short_id, seed) in &runs {
                let kind = kind_of(*short_id).expect("kind");
                PointsEncoder::points(&mut body, *short_id, seed, &column(kind, seed));
            }
            // Short ids map to series two to one (0 and 10 share series 0), as two connections'
            // definitions of one key would; the kinds agree.
            let resolve = |id: u32| kind_of(id).map(|kind| (SeriesId(id % 10), kind));
            // A body cut anywhere: both decoders fail at the same record, having kept the same.
            let body = if body.is_empty() { body } else { body[..cut.index(body.len() + 1)].to_vec() };
            let mut expected = WriteBatch::new();
            let mut columns = PointsDecoder::new(Bytes::from(body.clone()));
            let mut failed_expected = false;
            while let Some(record) = columns.next_record(kind_of) {
                match record {
                    Ok(PointRecord::Points { short_id, timestamps, values }) => {
                        expected.push_column(SeriesId(short_id % 10), &timestamps, &values).expect("kinds agree");
                    }
                    Ok(other) => prop_assert!(false, "unexpected {:?}", other),
                    Err(_) => failed_expected = true,
                }
            }
            let mut batch = WriteBatch::new();
            let mut direct = PointsDecoder::new(Bytes::from(body));
            let mut failed = false;
            let mut counted = 0;
            while let Some(record) = direct.next_into(&mut BatchSink::new(resolve, &mut batch)) {
                match record {
                    Ok(Appended::Points { count, .. }) => counted += count,
                    Ok(other) => prop_assert!(false, "unexpected {:?}", other),
                    Err(_) => failed = true,
                }
            }
            prop_assert_eq!(failed, failed_expected);
            prop_assert_eq!(batch.len(), expected.len());
            prop_assert_eq!(counted, batch.len());
            prop_assert_eq!(batch.value_bytes(), expected.value_bytes());
            prop_assert_eq!(batch.entries(), expected.entries());
        }

        #[test]
        fn garbage_never_panics_and_leaves_a_consistent_batch(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut batch = WriteBatch::new();
            let mut direct = PointsDecoder::new(Bytes::from(bytes));
            let mut sink = BatchSink::new(|id| kind_of(id).map(|kind| (SeriesId(id), kind)), &mut batch);
            let mut n = 0;
            while let Some(_record) = direct.next_into(&mut sink) {
                n += 1;
                prop_assert!(n < 1000);
            }
            let stored: usize = batch.entries().iter().map(|entry| entry.timestamps.len()).sum();
            prop_assert_eq!(stored, batch.len());
            prop_assert!(batch.entries().iter().all(|entry| entry.timestamps.len() == entry.values.len()));
        }
    }
}
