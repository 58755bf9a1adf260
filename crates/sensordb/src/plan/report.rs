//! The human-readable side of `sensordb plan`: the plan as a short report ending in a
//! configuration snippet, and a refused plan as its reason plus command-line values that would
//! fit.

use super::capacity::{
    Fit, Ingest, Plan, PlanInput, PlanRefusal, PlaningCheck, SegmentLimit, Warning, BLOCK_INDEX_BYTES, SEGMENTS_PER_PERIOD_MIN,
    SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN,
};
use super::units::{
    bytes_argument_rounded_up, duration_argument_rounded_down, format_binary_bytes, format_bytes, format_count, format_duration,
    three_significant,
};
use std::fmt::Write;

/// One labelled line of the report. Writing to a String cannot fail.
fn row(text: &mut String, label: &str, value: String) {
    let _ = writeln!(text, "  {label:<20} {value}");
}

/// What the plan is about, in one line.
fn describe_input(input: &PlanInput) -> String {
    let sensors = format_count(input.sensors);
    let rate = match input.ingest {
        Ingest::Points { per_sensor_per_second: 1.0, .. } => format!("{sensors} sensors × 1 point/s each"),
        Ingest::Points { per_sensor_per_second, .. } if per_sensor_per_second > 1.0 => {
            format!("{sensors} sensors × {per_sensor_per_second} points/s each")
        }
        Ingest::Points { per_sensor_per_second, .. } => {
            format!("{sensors} sensors × one point every {} each", format_duration(1.0 / per_sensor_per_second))
        }
        Ingest::Payload { total_bytes_per_second } => {
            format!("{sensors} sensors sending {}/s of payload together", format_bytes(total_bytes_per_second))
        }
    };
    format!("{rate}, kept {}, on a {} disk", format_duration(input.period_seconds), format_bytes(input.disk_bytes as f64))
}

fn percent(share: f64) -> String {
    let text = format!("{:.2}", share * 100.0);
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

/// "holds for live data up to …" or why not, at one segment size.
fn describe_check(check: &PlaningCheck, margin: f64) -> String {
    let limit = format_bytes(check.live_bytes_max.max(0.0));
    let growth = three_significant(check.live_bytes_max / check.live_bytes);
    if check.holds_with_margin {
        format!("holds: live data may grow to {limit} ({growth} × L)")
    } else if check.holds {
        format!("holds, but with less than the {} margin: live data may grow to {limit} ({growth} × L)", percent(margin))
    } else {
        format!("does not hold: live data must stay under {limit}, L is {}", format_bytes(check.live_bytes))
    }
}

/// The whole report, ending in the snippet to paste.
pub fn plan_text(plan: &Plan) -> String {
    let input = &plan.input;
    let thresholds = input.thresholds;
    let mut text = format!(
        "sensordb capacity plan\n  {}\n  (target usage U_m {}, margin {})\n\nLive data\n",
        describe_input(input),
        percent(thresholds.target_usage),
        percent(input.margin)
    );

    let block = format_count(plan.fill.block_units.round() as u64);
    let cost = match input.ingest {
        Ingest::Points { bytes_per_point, .. } => format!(
            "{:.3} bytes a point: {bytes_per_point} + {BLOCK_INDEX_BYTES} B of block index per {block} points",
            plan.fill.stored_bytes_per_unit
        ),
        Ingest::Payload { .. } => {
            format!("payload bytes + {BLOCK_INDEX_BYTES} B of block index per {} block", format_binary_bytes(plan.fill.block_units as u64))
        }
    };
    row(&mut text, "stored cost", cost);
    row(
        &mut text,
        "disk growth",
        format!(
            "{}/s, {} a day",
            format_bytes(plan.fill.stored_bytes_per_second),
            format_bytes(plan.fill.stored_bytes_per_second * 86_400.0)
        ),
    );
    row(
        &mut text,
        "live data L",
        format!(
            "{}, V = {} of the disk ({} blocks, {} series)",
            format_bytes(plan.live.bytes),
            percent(plan.live.share),
            format_count(plan.live.blocks.round() as u64),
            format_count(input.sensors)
        ),
    );
    row(&mut text, "WAL W", format_bytes(input.wal_bytes as f64));
    row(
        &mut text,
        "memory",
        format!(
            "block index {} + catalog {}; start-up ≈ {}",
            format_bytes(plan.live.index_memory_bytes),
            format_bytes(plan.live.catalog_bytes),
            format_duration(plan.live.startup_seconds)
        ),
    );

    let _ = writeln!(text, "\nSegment size R");
    row(
        &mut text,
        "planing condition",
        format!("{:.2}·L + W + 4·R ≤ U_m·C  →  R ≤ {}", 1.0 + input.margin, format_bytes(plan.planing_bound_bytes.max(0.0))),
    );
    let recommended = format_binary_bytes(plan.segment_bytes);
    let why = match plan.segment_limit {
        SegmentLimit::Planing => "the largest size the planing condition allows".to_string(),
        SegmentLimit::Maximum => format!("clamped to the maximum {}", format_binary_bytes(SEGMENT_BYTES_MAX)),
        SegmentLimit::Span => format!("so one segment spans at most 1/{SEGMENTS_PER_PERIOD_MIN} of the period"),
        SegmentLimit::SmallestPlaning if plan.segment_bytes == SEGMENT_BYTES_MIN => {
            format!("clamped to the minimum {}", format_binary_bytes(SEGMENT_BYTES_MIN))
        }
        SegmentLimit::SmallestPlaning => "the smallest size that planes".to_string(),
    };
    row(&mut text, "recommended", format!("{recommended} ({why})"));
    row(
        &mut text,
        "one segment holds",
        format!(
            "{} of data; at U_m the disk holds F = {} segments, up to {} with live data",
            format_duration(plan.fill.span_seconds),
            format_count(plan.segments_at_target),
            format_count(plan.segments_with_live_data)
        ),
    );
    row(&mut text, &format!("planing at {recommended}"), describe_check(&plan.recommended, input.margin));
    if plan.current.segment_bytes != plan.segment_bytes {
        row(
            &mut text,
            &format!("planing at {}", format_binary_bytes(plan.current.segment_bytes)),
            format!("{} (current setting)", describe_check(&plan.current, input.margin)),
        );
    }

    let _ = writeln!(text, "\nThrottling (disk usage U)");
    let throttle = &plan.throttle;
    row(
        &mut text,
        &format!("{} → {}", percent(thresholds.target_usage), percent(thresholds.throttle_low)),
        format!(
            "{}: {} of ingest should reclamation stall at U_m",
            format_bytes(throttle.target_to_low_bytes),
            format_duration(throttle.target_to_low_seconds)
        ),
    );
    row(
        &mut text,
        &format!("{} → {}", percent(thresholds.throttle_low), percent(thresholds.throttle_high)),
        format!(
            "{}: {} at the full rate; acknowledgements delayed (U − {}) / {} s",
            format_bytes(throttle.low_to_high_bytes),
            format_duration(throttle.low_to_high_seconds),
            thresholds.throttle_low,
            round_share(thresholds.throttle_high - thresholds.throttle_low)
        ),
    );
    row(&mut text, &format!("{} and above", percent(thresholds.throttle_high)), "writers wait".to_string());

    for warning in &plan.warnings {
        let _ = writeln!(text, "\nwarning: {}", describe_warning(warning, input));
    }
    let _ = write!(text, "\nConfiguration (sensordb.toml)\n  segment_bytes_max = {}  # {recommended}\n", plan.segment_bytes);
    text
}

/// 0.95 − 0.90 prints as 0.05, not 0.04999999999999993.
fn round_share(share: f64) -> f64 {
    (share * 1e6).round() / 1e6
}

fn describe_warning(warning: &Warning, input: &PlanInput) -> String {
    match *warning {
        Warning::ShortBlocks { block_points } => {
            let bytes_per_point = input.ingest.bytes_per_unit();
            format!(
                "each series writes only {} points into a segment, so its blocks are that short; expect more than \
                 {bytes_per_point} bytes a point (0.59 was measured with blocks of about 1,300 points, 30-point \
                 blocks cost 4.6). Measure with `sensordb inspect`, or plan with a larger --bytes-per-point.",
                format_count(block_points.round() as u64)
            )
        }
        Warning::LongSegmentSpan { span_seconds } => format!(
            "one segment spans {}, more than 1/{SEGMENTS_PER_PERIOD_MIN} of the period: data stays on disk up to that \
             long past its period (within the planned space), and the open segment stays uncompacted that long.",
            format_duration(span_seconds)
        ),
    }
}

/// Why the plan was refused and what would fit, as command-line values.
pub fn refusal_text(refusal: &PlanRefusal, input: &PlanInput) -> String {
    let mut text = format!("cannot plan: {refusal}\nWhat would fit:");
    let fit = match refusal {
        PlanRefusal::LiveDataAboveTarget { fit, .. } | PlanRefusal::NoRoomForSegments { fit, .. } => fit,
        _ => return format!("cannot plan: {refusal}"),
    };
    let Fit { max_period_seconds, min_disk_bytes, fits_without_margin } = *fit;
    let mut option = |argument: String, explanation: String| {
        let _ = write!(text, "\n  {argument:<20} {explanation}");
    };
    match max_period_seconds {
        Some(seconds) => option(
            format!("--period {}", duration_argument_rounded_down(seconds)),
            format!("the longest period a {} disk can plan", format_bytes(input.disk_bytes as f64)),
        ),
        None => option("no period fits".into(), "the WAL, the catalog and four minimum segments alone fill U_m of this disk".into()),
    }
    option(
        format!("--disk {}", bytes_argument_rounded_up(min_disk_bytes)),
        format!("the smallest disk for {}", format_duration(input.period_seconds)),
    );
    if fits_without_margin {
        option("--margin 0".into(), "plan with no room for live data beyond the estimate".into());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::super::capacity::{plan, Thresholds};
    use super::*;

    fn fleet() -> PlanInput {
        PlanInput {
            sensors: 10_000,
            ingest: Ingest::Points { per_sensor_per_second: 1.0, bytes_per_point: 0.59 },
            period_seconds: 90.0 * 86_400.0,
            disk_bytes: 500_000_000_000,
            block_units_max: 16_384,
            wal_bytes: 96 << 20,
            thresholds: Thresholds::default(),
            margin: 0.25,
            current_segment_bytes: 64 << 20,
        }
    }

    #[test]
    fn the_report_names_every_figure_and_ends_in_the_snippet() {
        let text = plan_text(&plan(&fleet()).expect("fits"));
        for expected in [
            "10,000 sensors × 1 point/s each, kept 90 days, on a 500 GB disk",
            "46.1 GB, V = 9.21% of the disk",
            "R ≤ 85.6 GB",
            "1 GiB (clamped to the maximum 1 GiB)",
            "2.1 days of data",
            "F = 372 segments",
            "planing at 64 MiB",
            "80% → 90%",
            "50 GB: 97.7 days",
            "acknowledgements delayed (U − 0.9) / 0.05 s",
            "95% and above",
            "segment_bytes_max = 1073741824  # 1 GiB\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn a_refusal_offers_values_that_fit() {
        let input = PlanInput { sensors: 1_000_000, ..fleet() };
        let refusal = plan(&input).expect_err("too much");
        let text = refusal_text(&refusal, &input);
        assert!(text.starts_with("cannot plan: live data alone, 4.77 TB, is 953.1% of the disk"), "{text}");
        assert!(text.contains("--period 143h "), "{text}");
        assert!(text.contains("--disk 7.5TB "), "{text}");
        assert!(!text.contains("--margin 0"), "{text}");
    }
}
