//! Tests of the capacity model against hand arithmetic and the defaults of `sensordb plan`.

use super::*;

const DAY: f64 = 86_400.0;
const MIB: u64 = 1 << 20;

/// The defaults of `sensordb plan`, at 0.59 bytes per point.
fn points(sensors: u64, per_sensor_per_second: f64, period_seconds: f64, disk_bytes: u64) -> PlanInput {
    PlanInput {
        sensors,
        ingest: Ingest::Points { per_sensor_per_second, bytes_per_point: 0.59 },
        period_seconds,
        disk_bytes,
        block_units_max: 16_384,
        wal_bytes: 96 * MIB,
        thresholds: Thresholds::default(),
        margin: 0.25,
        current_segment_bytes: 64 * MIB,
    }
}

/// Numbers for hand arithmetic, exact in binary floating point: 1,000 sensors at 1 point/s,
/// 1 byte per point, blocks of at most 1,024 points, no WAL, no margin, U_m = 50%. Every grid
/// size gives each series at least 4 MiB / 1,000 = 4,194 bytes per segment, more than a full
/// block (1,024 + 40 bytes), so a point costs 1 + 40/1,024 = 1.0390625 bytes and the disk
/// grows 1,039.0625 bytes/s at every R.
fn round_numbers(period_seconds: f64, disk_bytes: u64) -> PlanInput {
    PlanInput {
        ingest: Ingest::Points { per_sensor_per_second: 1.0, bytes_per_point: 1.0 },
        block_units_max: 1024,
        wal_bytes: 0,
        margin: 0.0,
        thresholds: Thresholds { target_usage: 0.5, throttle_low: 0.75, throttle_high: 0.875 },
        ..points(1000, 1.0, period_seconds, disk_bytes)
    }
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= expected.abs() * 1e-9
}

#[test]
fn the_grid_runs_from_4_mib_to_1_gib_in_steps_of_at_most_a_half() {
    let sizes = segment_size_grid();
    assert_eq!(sizes.first(), Some(&(4 * MIB)));
    assert_eq!(sizes.last(), Some(&(1024 * MIB)));
    assert_eq!(&sizes[..5], &[4 * MIB, 6 * MIB, 8 * MIB, 12 * MIB, 16 * MIB]);
    assert!(sizes.windows(2).all(|pair| pair[1] > pair[0] && pair[1] * 2 <= pair[0] * 3));
}

#[test]
fn a_series_share_below_a_full_block_makes_one_short_block_per_segment() {
    // 10,000 sensors share a 64 MiB segment: 6,710.8864 bytes each. A full block would take
    // 16,384 × 0.59 + 40 = 9,706.56 bytes, so each series writes one block of
    // (6,710.8864 − 40) / 0.59 = 11,306.59 points, at 0.59 + 40/11,306.59 = 0.593538 bytes each.
    let fill = segment_fill(&points(10_000, 1.0, 90.0 * DAY, 500_000_000_000), 64 * MIB);
    assert!(close(fill.block_units, (6_710.886_4 - 40.0) / 0.59), "{fill:?}");
    assert!(close(fill.stored_bytes_per_unit, 0.59 + 40.0 / ((6_710.886_4 - 40.0) / 0.59)));
    // At 1 GiB each share holds 11 full blocks: 0.59 + 40/16,384 = 0.592441 bytes a point.
    let fill = segment_fill(&points(10_000, 1.0, 90.0 * DAY, 500_000_000_000), 1024 * MIB);
    assert_eq!(fill.block_units, 16_384.0);
    assert!(close(fill.stored_bytes_per_second, 10_000.0 * (0.59 + 40.0 / 16_384.0)));
}

#[test]
fn realistic_fleet_plans_at_the_maximum_segment() {
    // 10,000 sensors at 1 Hz for 90 days on 500 GB. At 1 GiB a point costs 0.5924414 bytes
    // (previous test), so the disk grows 5,924.41 bytes/s and one period is
    // 77,760,000,000 points × 0.5924414 + 640,000 bytes of catalog = 46,068,883,750 bytes:
    // V = 9.21%. With margin: 1.25 × L + W + 4 × 1 GiB = 61,981,735,279.5 ≤ 400 GB holds,
    // and R ≤ (400 GB − 1.25 L − 96 MiB) / 4 = 85,578,308,004 bytes, far above 1 GiB.
    let plan = plan(&points(10_000, 1.0, 90.0 * DAY, 500_000_000_000)).expect("fits");
    assert_eq!(plan.segment_bytes, 1024 * MIB);
    assert_eq!(plan.segment_limit, SegmentLimit::Maximum);
    assert!(close(plan.live.bytes, 46_068_883_750.0), "{}", plan.live.bytes);
    assert!(close(plan.live.share, 46_068_883_750.0 / 500e9));
    assert!(close(plan.planing_bound_bytes, 85_578_308_004.0), "{}", plan.planing_bound_bytes);
    // 77.76 G points in blocks of 16,384: 4,746,093.75 blocks, 189.8 MB of index, 7.1 s.
    assert!(close(plan.live.blocks, 4_746_093.75));
    assert!(close(plan.live.index_memory_bytes, 189_843_750.0));
    // A segment spans 1 GiB / 5,924.41 B/s = 181,240 s (2.1 days), under 90/16 = 5.6 days.
    assert!(close(plan.fill.span_seconds, 1_073_741_824.0 / (10_000.0 * (0.59 + 40.0 / 16_384.0))));
    // F = 400 GB / 1 GiB = 372.5 → 372; live data fills 42.9 segments, so 43 + 1.
    assert_eq!(plan.segments_at_target, 372);
    assert_eq!(plan.segments_with_live_data, 44);
    // 80% → 90% is 50 GB: 50e9 / 5,924.41 = 8,439,653 s (97.7 days); 90% → 95% half that.
    assert_eq!(plan.throttle.target_to_low_bytes, 50e9);
    assert!((plan.throttle.target_to_low_seconds - 8_439_653.2).abs() < 1.0, "{}", plan.throttle.target_to_low_seconds);
    assert!((plan.throttle.low_to_high_seconds - 4_219_826.6).abs() < 1.0);
    assert!(plan.recommended.holds_with_margin && plan.current.holds_with_margin);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

#[test]
fn the_planing_condition_picks_the_largest_size_it_allows() {
    // Period 2,000,000 s: L = 2,000,000 × 1,039.0625 + 64,000 catalog = 2,078,189,000 bytes.
    // Choose U_m·C = L + 4 × 64 MiB = 2,346,624,456, i.e. C = 4,693,248,912: 64 MiB planes
    // exactly, 96 MiB does not. A 64 MiB segment spans 67,108,864 / 1,039.0625 = 64,586 s,
    // under Y/16 = 125,000 s, so the planing condition is what limits R.
    let input = round_numbers(2_000_000.0, 4_693_248_912);
    let plan = plan(&input).expect("fits");
    assert_eq!(plan.segment_bytes, 64 * MIB);
    assert_eq!(plan.segment_limit, SegmentLimit::Planing);
    assert_eq!(plan.live.bytes, 2_078_189_000.0);
    assert_eq!(plan.planing_bound_bytes, (64 * MIB) as f64);
    // One byte less of disk and 64 MiB no longer planes: the next size down is 48 MiB.
    let plan = super::plan(&PlanInput { disk_bytes: 4_693_248_911, ..input }).expect("fits");
    assert_eq!(plan.segment_bytes, 48 * MIB);
    assert!(!plan.current.holds, "the 64 MiB default no longer planes");
}

#[test]
fn the_margin_shrinks_the_segment() {
    // Same store, margin 25%: 1.25 L = 2,597,736,250 > U_m·C, nothing planes any more.
    let input = PlanInput { margin: 0.25, ..round_numbers(2_000_000.0, 4_693_248_912) };
    let refused = plan(&input).expect_err("margin eats the room");
    assert!(matches!(refused, PlanRefusal::NoRoomForSegments { fit: Fit { fits_without_margin: true, .. }, .. }), "{refused:?}");
}

#[test]
fn slow_streams_get_segments_spanning_at_most_a_sixteenth_of_the_period() {
    // 100 sensors at 1 Hz for 30 days on 100 GB: 59.24 bytes/s. Y/16 = 162,000 s; 8 MiB
    // spans 8,388,608 / 59.24 = 141,594 s, 12 MiB 212,391 s: 8 MiB, though 1 GiB planes.
    let plan = plan(&points(100, 1.0, 30.0 * DAY, 100_000_000_000)).expect("fits");
    assert_eq!(plan.segment_bytes, 8 * MIB);
    assert_eq!(plan.segment_limit, SegmentLimit::Span);
    assert!(plan.fill.span_seconds <= 30.0 * DAY / 16.0);
    assert!(check_planing(&plan.input, SEGMENT_BYTES_MAX).holds_with_margin);
}

#[test]
fn a_trickle_takes_the_smallest_segment_and_says_it_spans_long() {
    // One sensor at 1 Hz for a day: even 4 MiB spans 4 MiB / 0.5924 B/s = 82 days.
    let plan = plan(&points(1, 1.0, DAY, 100_000_000_000)).expect("fits");
    assert_eq!(plan.segment_bytes, SEGMENT_BYTES_MIN);
    assert_eq!(plan.segment_limit, SegmentLimit::SmallestPlaning);
    assert!(matches!(plan.warnings.as_slice(), [Warning::LongSegmentSpan { span_seconds }] if *span_seconds > 80.0 * DAY));
}

#[test]
fn many_sensors_on_small_segments_warn_of_short_blocks() {
    // 1,000,000 sensors at one point a minute for 30 days on 4 TB: 1 GiB gives each series
    // 1,074 bytes per segment, blocks of (1,073.7 − 40) / 0.59 = 1,752 points. The span cap
    // (30 d / 16 = 45.0 h) allows 1 GiB (its span: 1,752 min = 29.2 h) ...
    let plan = plan(&points(1_000_000, 1.0 / 60.0, 30.0 * DAY, 4_000_000_000_000)).expect("fits");
    assert_eq!(plan.segment_bytes, SEGMENT_BYTES_MAX);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    // ... while at the 64 MiB default each series writes (67.1 − 40) / 0.59 = 46 points a
    // segment.
    assert!(segment_fill(&plan.input, 64 * MIB).block_units < 50.0);
    // With 10 times the sensors at a tenth of the rate, 1 GiB gives each series 107.4 bytes:
    // blocks of (107.4 − 40) / 0.59 = 114 points, and a warning.
    let plan = super::plan(&points(10_000_000, 1.0 / 600.0, 30.0 * DAY, 4_000_000_000_000)).expect("fits");
    assert_eq!(plan.segment_bytes, SEGMENT_BYTES_MAX);
    assert!(
        matches!(plan.warnings.as_slice(), [Warning::ShortBlocks { block_points }] if (114.0..115.0).contains(block_points)),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn payload_streams_cost_their_bytes_plus_block_index() {
    // 2 MB/s from 64 sensors for 7 days: 1.2096e12 payload bytes. At 1 GiB each series' share
    // is 16 MiB, four full 4 MiB blocks: 1 + 40/4,194,304 bytes per byte.
    let input = PlanInput {
        ingest: Ingest::Payload { total_bytes_per_second: 2e6 },
        block_units_max: 4 * MIB,
        ..points(64, 1.0, 7.0 * DAY, 4_000_000_000_000)
    };
    let plan = plan(&input).expect("fits");
    assert_eq!(plan.segment_bytes, SEGMENT_BYTES_MAX);
    let payload = 2e6 * 7.0 * DAY;
    assert!(close(plan.live.bytes, payload * (1.0 + 40.0 / 4_194_304.0) + 64.0 * 64.0));
}

#[test]
fn live_data_above_the_target_is_refused_with_a_fit() {
    // 1,000,000 sensors at 1 Hz for 90 days: 7.776 T points, about 4.8 TB, on 500 GB.
    let input = points(1_000_000, 1.0, 90.0 * DAY, 500_000_000_000);
    let refused = plan(&input).expect_err("cannot fit");
    let PlanRefusal::LiveDataAboveTarget { live_share, fit, .. } = refused else { panic!("{refused:?}") };
    assert!(live_share > 9.0);
    // Both suggestions plan, and a little more of either does not.
    let period = fit.max_period_seconds.expect("some period fits");
    assert!(super::plan(&PlanInput { period_seconds: period, ..input.clone() }).is_ok());
    assert!(super::plan(&PlanInput { period_seconds: period * 1.01, ..input.clone() }).is_err());
    assert!(super::plan(&PlanInput { disk_bytes: fit.min_disk_bytes, ..input.clone() }).is_ok());
    assert!(super::plan(&PlanInput { disk_bytes: fit.min_disk_bytes * 99 / 100, ..input }).is_err());
}

#[test]
fn live_data_just_below_the_target_is_refused_for_want_of_segment_room() {
    // L = 2,078,189,000 (period 2,000,000 s, see above); C = 4,172,378,000 gives
    // U_m·C = L + 8,000,000: V = 49.8% < 50%, but R ≤ 8,000,000 / 4 = 2,000,000 bytes, under
    // 4 MiB.
    let refused = plan(&round_numbers(2_000_000.0, 4_172_378_000)).expect_err("no room");
    let PlanRefusal::NoRoomForSegments { live_share, planing_bound_bytes, fit, .. } = refused else { panic!("{refused:?}") };
    assert_eq!(live_share, 2_078_189_000.0 / 4_172_378_000.0);
    assert_eq!(planing_bound_bytes, 2_000_000.0);
    // Best at 4 MiB: disk ≥ (L + 16 MiB) / 0.5 = 4,189,932,432 (+1 byte of rounding guard);
    // period ≤ (2,086,189,000 − 16,777,216 − 64,000 catalog) / 1,039.0625 = 1,991,552.75 s.
    assert_eq!(fit.min_disk_bytes, 4_189_932_433);
    assert_eq!(fit.max_period_seconds, Some(1_991_552.0));
    assert!(!fit.fits_without_margin);
}

#[test]
fn a_disk_too_small_for_the_wal_has_no_period_that_fits() {
    let fit = match plan(&points(10, 1.0, DAY, 100 * MIB)) {
        Err(PlanRefusal::NoRoomForSegments { fit, .. }) => fit,
        other => panic!("{other:?}"),
    };
    assert_eq!(fit.max_period_seconds, None);
}

#[test]
fn impossible_numbers_are_refused() {
    let fleet = points(10_000, 1.0, 90.0 * DAY, 500_000_000_000);
    let invalid = |input: PlanInput| matches!(plan(&input), Err(PlanRefusal::Invalid { .. }));
    assert!(invalid(PlanInput { sensors: 0, ..fleet.clone() }));
    assert!(invalid(PlanInput { period_seconds: 0.0, ..fleet.clone() }));
    assert!(invalid(PlanInput { period_seconds: f64::NAN, ..fleet.clone() }));
    assert!(invalid(PlanInput { disk_bytes: 0, ..fleet.clone() }));
    assert!(invalid(PlanInput { ingest: Ingest::Points { per_sensor_per_second: -1.0, bytes_per_point: 0.59 }, ..fleet.clone() }));
    assert!(invalid(PlanInput { ingest: Ingest::Points { per_sensor_per_second: 1.0, bytes_per_point: 0.0 }, ..fleet.clone() }));
    assert!(invalid(PlanInput { ingest: Ingest::Payload { total_bytes_per_second: f64::INFINITY }, ..fleet.clone() }));
    assert!(invalid(PlanInput { margin: -0.1, ..fleet.clone() }));
    let thresholds = |target_usage, throttle_low, throttle_high| PlanInput {
        thresholds: Thresholds { target_usage, throttle_low, throttle_high },
        ..fleet.clone()
    };
    assert!(invalid(thresholds(0.9, 0.9, 0.95)), "U_m must be below U_l");
    assert!(invalid(thresholds(0.8, 0.95, 0.9)), "U_l must be below U_h");
    assert!(invalid(thresholds(0.8, 0.9, 1.1)));
    assert!(plan(&thresholds(0.8, 0.9, 1.0)).is_ok(), "U_h may be the whole disk");
    // 10^12 sensors at 10^6 points/s for 100 years: about 2·10^27 bytes.
    let huge = points(1_000_000_000_000, 1e6, 100.0 * 365.0 * DAY, u64::MAX);
    assert_eq!(plan(&huge), Err(PlanRefusal::Overflow));
}
