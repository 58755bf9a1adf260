//! Tests of the write batch: pushing points, appending columns, and the WAL record encoding against the layout in the parent module's documentation.

use super::*;
use proptest::prelude::*;

proptest! {
    /// A batch counts the same value bytes however it was filled.
    #[test]
    fn push_and_push_column_count_the_same_bytes(values in proptest::collection::vec(value_strategy(), 1..30)) {
        let mut by_point = WriteBatch::new();
        let mut by_column = WriteBatch::new();
        for (n, value) in values.into_iter().enumerate() {
            let series = SeriesId(1 + value.kind() as u32);
            let mut column = ValueColumn::new(value.kind());
            column.push(value.clone()).expect("same kind");
            by_point.push(series, n as i64, value).expect("push");
            by_column.push_column(series, &[n as i64], &column).expect("push_column");
        }
        prop_assert_eq!(by_point.value_bytes(), by_column.value_bytes());
    }
}

#[test]
fn append_with_appends_or_leaves_the_batch_as_it_was() {
    let mut batch = WriteBatch::new();
    let a = batch.entry_index(SeriesId(1), ValueKind::F64).expect("entry");
    let added = batch.append_with(a, |ts, values| -> Result<(), ()> {
        ts.extend([1, 2]);
        values.push(Value::F64(1.0)).map_err(drop)?;
        values.push(Value::F64(2.0)).map_err(drop)
    });
    assert_eq!(added, Ok(2));
    assert_eq!((batch.len(), batch.value_bytes()), (2, 16));
    // A failing append to an existing entry is cut back to what it held.
    let failed = batch.append_with(a, |ts, values| {
        ts.push(3);
        values.push(Value::F64(3.0)).map_err(drop)?;
        Err(())
    });
    assert_eq!(failed, Err(()));
    assert_eq!((batch.len(), batch.value_bytes()), (2, 16));
    assert_eq!(batch.entries()[0].timestamps, vec![1, 2]);
    assert_eq!(batch.entries()[0].values.len(), 2);
    // One for a new series leaves no empty entry behind, and the series can come back.
    let b = batch.entry_index(SeriesId(2), ValueKind::I64).expect("entry");
    assert_eq!(
        batch.append_with(b, |ts, _| -> Result<(), ()> {
            ts.push(9);
            Err(())
        }),
        Err(())
    );
    assert_eq!(batch.entries().len(), 1);
    let b = batch.entry_index(SeriesId(2), ValueKind::I64).expect("entry");
    assert_eq!(batch.append_with(b, |ts, values| values.push(Value::I64(7)).map(|()| ts.push(5)).map_err(drop)), Ok(1));
    assert_eq!(batch.entries().len(), 2);
    assert_eq!(batch.len(), 3);
}

#[test]
#[should_panic(expected = "unequal length")]
fn append_with_refuses_columns_of_unequal_length() {
    let mut batch = WriteBatch::new();
    let a = batch.entry_index(SeriesId(1), ValueKind::F64).expect("entry");
    let _ = batch.append_with(a, |ts, _| -> Result<(), ()> {
        ts.push(1);
        Ok(())
    });
}

fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(|bits| Value::F64(f64::from_bits(bits))),
        any::<i64>().prop_map(Value::I64),
        any::<u64>().prop_map(Value::U64),
        any::<bool>().prop_map(Value::Bool),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Bytes(Bytes::from(b))),
    ]
}

/// The encoding as the layout in the module documentation reads, a push per byte: what
/// [`WriteBatch::encode`] must match byte for byte.
fn encode_plainly(batch: &WriteBatch, out: &mut Vec<u8>) {
    use crate::checksum::put_varint;
    out.push(BATCH_FORMAT_VERSION);
    put_varint(out, batch.entries.len() as u64);
    for entry in &batch.entries {
        put_varint(out, u64::from(entry.series.0));
        out.push(entry.values.kind() as u8);
        put_varint(out, entry.timestamps.len() as u64);
        let mut previous = 0i64;
        for &t in &entry.timestamps {
            put_varint(out, zigzag(t.wrapping_sub(previous)));
            previous = t;
        }
        match &entry.values {
            ValueColumn::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_bits().to_le_bytes())),
            ValueColumn::I64(v) => v.iter().for_each(|&x| put_varint(out, zigzag(x))),
            ValueColumn::U64(v) => v.iter().for_each(|&x| put_varint(out, x)),
            ValueColumn::Bool(v) => v.iter().for_each(|&x| out.push(u8::from(x))),
            ValueColumn::Bytes(v) => v.iter().for_each(|x| {
                put_varint(out, x.len() as u64);
                out.extend_from_slice(x);
            }),
        }
    }
}

/// Values at the extremes of every encoding's width, and in between.
fn wide_value_strategy() -> impl Strategy<Value = Value> {
    let wide = prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), (0u32..64).prop_map(|b| 1u64 << b), any::<u64>()];
    prop_oneof![
        wide.clone().prop_map(|bits| Value::F64(f64::from_bits(bits))),
        wide.clone().prop_map(|x| Value::I64(x as i64)),
        wide.prop_map(Value::U64),
        any::<bool>().prop_map(Value::Bool),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Value::Bytes(Bytes::from(b))),
    ]
}

proptest! {
    #[test]
    fn the_record_is_the_plain_encoding(
        prefix in proptest::collection::vec(any::<u8>(), 0..5),
        points in proptest::collection::vec((0u32..40, prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()], wide_value_strategy()), 0..200),
    ) {
        let mut batch = WriteBatch::new();
        for (series, t, v) in points {
            let _ = batch.push(SeriesId(series), t, v);
        }
        let (mut ours, mut plain) = (prefix.clone(), prefix);
        batch.encode(&mut ours);
        encode_plainly(&batch, &mut plain);
        prop_assert_eq!(ours, plain);
    }

    #[test]
    fn batches_round_trip_through_their_record(points in proptest::collection::vec((1u32..6, any::<i64>(), value_strategy()), 0..60)) {
        let mut batch = WriteBatch::new();
        for (series, t, v) in points {
            // Kinds are per series; a clash is a legitimate rejection, not a failure.
            let _ = batch.push(SeriesId(series), t, v);
        }
        let mut record = Vec::new();
        batch.encode(&mut record);
        let decoded = WriteBatch::decode(&record).expect("decodes");
        prop_assert_eq!(decoded.entries(), batch.entries());
        prop_assert_eq!(decoded.len(), batch.len());
    }

    #[test]
    fn a_cleared_batch_takes_new_points_like_a_fresh_one(
        first in proptest::collection::vec((1u32..6, any::<i64>(), value_strategy()), 0..60),
        second in proptest::collection::vec((1u32..9, any::<i64>(), value_strategy()), 0..60),
    ) {
        let mut reused = WriteBatch::new();
        for (series, t, v) in first {
            let _ = reused.push(SeriesId(series), t, v);
        }
        reused.clear();
        prop_assert!(reused.is_empty() && reused.entries().is_empty());
        let mut fresh = WriteBatch::new();
        for (series, t, v) in second {
            prop_assert_eq!(reused.push(SeriesId(series), t, v.clone()), fresh.push(SeriesId(series), t, v));
        }
        prop_assert_eq!(reused.entries(), fresh.entries());
        prop_assert_eq!((reused.len(), reused.value_bytes()), (fresh.len(), fresh.value_bytes()));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        reused.encode(&mut a);
        fresh.encode(&mut b);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn garbage_records_never_panic(record in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = WriteBatch::decode(&record);
    }
}

#[test]
fn points_are_grouped_by_series_and_kinds_checked() {
    let mut batch = WriteBatch::new();
    batch.push(SeriesId(1), 10, Value::F64(1.0)).expect("push");
    batch.push(SeriesId(2), 10, Value::Bool(true)).expect("push");
    batch.push(SeriesId(1), 20, Value::F64(2.0)).expect("push");
    assert_eq!(batch.entries().len(), 2);
    assert_eq!(batch.entries()[0].timestamps, vec![10, 20]);
    let err = batch.push(SeriesId(2), 30, Value::I64(3)).expect_err("kind clash");
    assert_eq!(err.existing, ValueKind::Bool);
    assert_eq!(batch.len(), 3);
}

#[test]
fn pushes_at_an_entry_index_land_in_that_series() {
    let mut batch = WriteBatch::new();
    batch.push(SeriesId(1), 10, Value::F64(1.0)).expect("push");
    let two = batch.entry_index(SeriesId(2), ValueKind::I64).expect("new entry");
    let one = batch.entry_index(SeriesId(1), ValueKind::F64).expect("existing entry");
    assert_eq!((one, two), (0, 1));
    batch.push_at(two, 5, Value::I64(7)).expect("push");
    batch.push_at(one, 20, Value::F64(2.0)).expect("push");
    assert_eq!(batch.push_at(two, 6, Value::F64(0.5)).expect_err("kind clash").existing, ValueKind::I64);
    assert_eq!(batch.entry_index(SeriesId(1), ValueKind::Bool).expect_err("kind clash").existing, ValueKind::F64);
    assert_eq!(batch.len(), 3);
    assert_eq!(batch.entries()[0].timestamps, vec![10, 20]);
    assert_eq!(batch.entries()[1], SeriesPoints { series: SeriesId(2), timestamps: vec![5], values: ValueColumn::I64(vec![7]) });
    batch.clear();
    assert_eq!(batch.entry_index(SeriesId(3), ValueKind::Bool).expect("entry after clear"), 0);
}

/// Freezes the record layout: the bytes were worked out from the layout in the module
/// documentation (by a separate script), not printed by this code.
#[test]
fn the_record_layout_is_frozen() {
    let mut batch = WriteBatch::new();
    batch.push(SeriesId(300), 1_700_000_000_000_000_000, Value::F64(1.25)).expect("push");
    batch.push(SeriesId(2), 5, Value::I64(-3)).expect("push");
    batch.push(SeriesId(2), 7, Value::I64(200)).expect("push");
    batch.push(SeriesId(1), -1, Value::Bytes(Bytes::from_static(b"ab"))).expect("push");
    batch.push(SeriesId(4), 0, Value::Bool(true)).expect("push");
    batch.push(SeriesId(9), 3, Value::U64(u64::MAX)).expect("push");
    let mut record = vec![0xAA];
    batch.encode(&mut record);
    let expected: &[u8] = &[
        0xAA, 1, 5, 172, 2, 1, 1, 128, 128, 208, 226, 198, 191, 206, 151, 47, 0, 0, 0, 0, 0, 0, 244, 63, 2, 2, 2, 10, 4, 5, 144, 3, 1, 5,
        1, 1, 2, 97, 98, 4, 4, 1, 0, 1, 9, 3, 1, 6, 255, 255, 255, 255, 255, 255, 255, 255, 255, 1,
    ];
    assert_eq!(record, expected, "appended after what `out` held");
}

#[test]
fn truncated_records_are_rejected() {
    let mut batch = WriteBatch::new();
    batch.push(SeriesId(300), 1_700_000_000_000_000_000, Value::F64(1.25)).expect("push");
    let mut record = Vec::new();
    batch.encode(&mut record);
    for len in 0..record.len() {
        assert!(WriteBatch::decode(&record[..len]).is_err(), "prefix of {len} bytes accepted");
    }
}
