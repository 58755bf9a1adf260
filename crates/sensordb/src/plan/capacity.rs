//! The capacity model behind `sensordb plan`: what S sensors writing at rate A for a storage
//! period Y put on a disk of capacity C, and which segment size R keeps the store "planing".
//!
//! Planing (Zhivchikova and Shevchuk, "Riak KV performance in sensor data storage application",
//! section 4.2) means that whenever disk usage reaches the target U_m there is at least one
//! segment whose data is all dead, so space comes back by deleting a file without reading it:
//! no merge I/O competes with ingest. The paper's condition for Bitcask is
//! R ≤ (C/n)·(U_m − V), n vnodes per node and V the live data's share of C. sensordb has one
//! stream of time-ordered segments (n = 1) and, besides the live data L = V·C, needs the WAL W
//! and four segments of slack at U_m (docs/PLANNING.md derives each):
//!
//! ```text
//!   (1 + margin)·L + W + 4·R ≤ U_m·C
//!   1: the oldest live segment, partly dead (up to R of dead data in it)
//!   2: the open segment, whose short, not yet compacted blocks may cost more than L assumes
//!   3: the output of a compaction in progress
//!   4: the fully dead segment that planing promises
//! ```
//!
//! L depends a little on R: a segment holds one block per series at least, so small segments
//! shared by many series mean short blocks and more index bytes per point. The model therefore
//! evaluates the condition at each candidate size of a fixed grid instead of solving it once.
//! Everything is a pure function of [`PlanInput`]; the CLI only parses and prints.

use serde::Serialize;

/// Block index bytes per block, in the segment footer on disk and again in memory (the index
/// rebuilt at start-up).
pub const BLOCK_INDEX_BYTES: f64 = 40.0;
/// Catalog bytes per series (key, id, kind), on disk and in memory.
pub const CATALOG_BYTES_PER_SERIES: f64 = 64.0;
/// Start-up time per block: docs/BENCHMARKS.md measured about 1.5 µs per block, catalog
/// included, because start-up reads footers and never a block.
pub const STARTUP_SECONDS_PER_BLOCK: f64 = 1.5e-6;
/// Smallest segment recommended: below it rotations (a footer, an fsync and a directory fsync
/// each) and file counts grow without bound while the disk gains almost nothing.
pub const SEGMENT_BYTES_MIN: u64 = 4 << 20;
/// Largest segment recommended: an unsealed segment is scanned whole at start-up after a crash,
/// and compaction rewrites runs of up to R at once; 1 GiB keeps both to about a second of I/O.
pub const SEGMENT_BYTES_MAX: u64 = 1 << 30;
/// Segments of slack the planing condition reserves besides live data and WAL (module docs).
pub const SLACK_SEGMENTS: f64 = 4.0;
/// One segment should span at most this share of the storage period: expired data waits for its
/// whole segment to die, and the open segment stays uncompacted until sealed.
pub const SEGMENTS_PER_PERIOD_MIN: f64 = 16.0;
/// Blocks shorter than this compress worse than the measured bytes-per-point figure assumes
/// (0.59 was measured with blocks of about 1,300 points; 5-minute blocks of 30 points cost 4.6).
pub const SHORT_BLOCK_POINTS: f64 = 1000.0;

/// What arrives, and what one unit of it costs on disk before block overhead.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ingest {
    /// Numeric points, `per_sensor_per_second` from each sensor, each costing `bytes_per_point`
    /// on disk (0.59 measured on TSBS IoT data; random 64-bit floats cost 8 to 9).
    Points { per_sensor_per_second: f64, bytes_per_point: f64 },
    /// Opaque payload bytes from all sensors together, stored as they come.
    Payload { total_bytes_per_second: f64 },
}

impl Ingest {
    /// Units (points, or payload bytes) arriving per second from all sensors together.
    fn units_per_second(&self, sensors: u64) -> f64 {
        match *self {
            Ingest::Points { per_sensor_per_second, .. } => per_sensor_per_second * sensors as f64,
            Ingest::Payload { total_bytes_per_second } => total_bytes_per_second,
        }
    }

    /// Disk bytes of one unit, block overhead aside.
    pub fn bytes_per_unit(&self) -> f64 {
        match *self {
            Ingest::Points { bytes_per_point, .. } => bytes_per_point,
            Ingest::Payload { .. } => 1.0,
        }
    }
}

/// Disk usage thresholds, as shares of the disk.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// U_m: reclamation keeps usage at or below this; the plan must fit under it.
    pub target_usage: f64,
    /// U_l: above it acknowledgements are delayed (U − U_l)/(U_h − U_l) seconds.
    pub throttle_low: f64,
    /// U_h: at and above it writers wait.
    pub throttle_high: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { target_usage: 0.80, throttle_low: 0.90, throttle_high: 0.95 }
    }
}

/// Everything the plan depends on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanInput {
    /// Series written (a device with five fields is five sensors).
    pub sensors: u64,
    pub ingest: Ingest,
    /// Storage period Y.
    pub period_seconds: f64,
    /// Disk capacity C available to the data directory.
    pub disk_bytes: u64,
    /// Longest block, in the ingest's unit: points for numbers, bytes for payloads.
    pub block_units_max: u64,
    /// W: the WAL at its largest (the memtable it protects plus one WAL file).
    pub wal_bytes: u64,
    pub thresholds: Thresholds,
    /// Live data may exceed the estimate by this share and the recommended R still planes.
    pub margin: f64,
    /// A segment size checked besides the recommendation: the store's current setting.
    pub current_segment_bytes: u64,
}

/// How data lays out in segments of one size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SegmentFill {
    pub segment_bytes: u64,
    /// Units per block: the block limit, or a series' whole share of a segment when that is
    /// smaller (every series gets at least one block in each segment it writes to).
    pub block_units: f64,
    /// Disk bytes per unit, block index included.
    pub stored_bytes_per_unit: f64,
    /// Disk bytes per second from all sensors.
    pub stored_bytes_per_second: f64,
    /// Time one segment covers.
    pub span_seconds: f64,
}

/// The data kept for one storage period.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LiveData {
    /// L: disk bytes of one period of data, block index and catalog included.
    pub bytes: f64,
    /// V = L / C.
    pub share: f64,
    pub blocks: f64,
    pub catalog_bytes: f64,
    /// The block index held in memory.
    pub index_memory_bytes: f64,
    /// Estimated start-up time, which reads every block's footer entry.
    pub startup_seconds: f64,
}

/// The planing condition at one segment size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PlaningCheck {
    pub segment_bytes: u64,
    /// L at this segment size.
    pub live_bytes: f64,
    /// The most live data for which the condition holds: U_m·C − W − 4·R.
    pub live_bytes_max: f64,
    pub holds: bool,
    /// Holds for live data `margin` larger than estimated.
    pub holds_with_margin: bool,
}

/// What limited the recommended segment size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentLimit {
    /// The next larger size breaks the planing condition (with margin).
    Planing,
    /// Planing would allow more; clamped to [`SEGMENT_BYTES_MAX`].
    Maximum,
    /// Planing would allow more, but a segment would span over 1/16 of the period.
    Span,
    /// Every size that planes spans over 1/16 of the period; the smallest is taken.
    SmallestPlaning,
}

/// Room between the usage thresholds, and how long ingest fills it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ThrottleMargins {
    pub target_to_low_bytes: f64,
    /// Ingest at the full rate until throttling starts, should reclamation stall at U_m.
    pub target_to_low_seconds: f64,
    pub low_to_high_bytes: f64,
    /// Ingest at the full rate (throttling slows it) until writers wait.
    pub low_to_high_seconds: f64,
}

/// Something the plan assumes that this input strains.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "warning", rename_all = "snake_case")]
pub enum Warning {
    /// Each series writes fewer than [`SHORT_BLOCK_POINTS`] points into a segment, so its blocks
    /// are that short and compress worse than `bytes_per_point` says.
    ShortBlocks { block_points: f64 },
    /// Even the smallest planing segment spans more than 1/16 of the period: expired data stays
    /// on disk up to this long past the period.
    LongSegmentSpan { span_seconds: f64 },
}

/// A plan that fits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub input: PlanInput,
    /// Live data at the recommended segment size.
    pub live: LiveData,
    pub fill: SegmentFill,
    /// The recommended `segment_bytes_max`.
    pub segment_bytes: u64,
    pub segment_limit: SegmentLimit,
    /// The planing condition solved for R (with margin), at the recommended size's live data.
    pub planing_bound_bytes: f64,
    pub recommended: PlaningCheck,
    pub current: PlaningCheck,
    /// F = U_m·C / R: segments on disk when usage reaches U_m (the paper's formula 2).
    pub segments_at_target: u64,
    /// Segments that hold any live data at most: the full ones plus the partly dead oldest.
    pub segments_with_live_data: u64,
    pub throttle: ThrottleMargins,
    pub warnings: Vec<Warning>,
}

/// What would make a refused plan fit, each at the segment size that suits it best.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// The longest storage period this disk can plan; `None` when even a moment's data does not
    /// fit beside the WAL and the slack segments.
    pub max_period_seconds: Option<f64>,
    /// The smallest disk that plans this storage period.
    pub min_disk_bytes: u64,
    /// The plan fits with `margin` 0.
    pub fits_without_margin: bool,
}

/// Why no plan fits.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanRefusal {
    #[error("{message}")]
    Invalid { message: String },
    #[error("the live data would exceed 16 EiB: check --sensors, --rate and --period")]
    Overflow,
    #[error(
        "live data alone, {}, is {:.1}% of the disk, not below the target usage U_m = {:.0}%",
        super::units::format_bytes(*.live_bytes), .live_share * 100.0, .target_usage * 100.0
    )]
    LiveDataAboveTarget { live_bytes: f64, live_share: f64, target_usage: f64, fit: Fit },
    #[error(
        "live data, {} ({:.1}% of the disk), leaves too little room below the target usage U_m = {:.0}% \
         for the margin, the WAL and four segments: {}",
        super::units::format_bytes(*.live_bytes), .live_share * 100.0, .target_usage * 100.0,
        describe_planing_bound(*.planing_bound_bytes, *.segment_bytes_min)
    )]
    NoRoomForSegments { live_bytes: f64, live_share: f64, target_usage: f64, planing_bound_bytes: f64, segment_bytes_min: u64, fit: Fit },
}

fn describe_planing_bound(planing_bound_bytes: f64, segment_bytes_min: u64) -> String {
    let minimum = super::units::format_binary_bytes(segment_bytes_min);
    if planing_bound_bytes > 0.0 {
        format!("segments could be at most {}, below the minimum {minimum}", super::units::format_bytes(planing_bound_bytes))
    } else {
        format!("there is no room even for segments of the minimum {minimum}")
    }
}

/// Candidate segment sizes, ascending: powers of two and one and a half times powers of two,
/// in MiB, from [`SEGMENT_BYTES_MIN`] to [`SEGMENT_BYTES_MAX`] (4, 6, 8, 12, … 768, 1024 MiB).
/// Finer steps than powers of two lose at most a third of what the condition allows.
pub fn segment_size_grid() -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut power = SEGMENT_BYTES_MIN;
    while power <= SEGMENT_BYTES_MAX {
        sizes.push(power);
        if power < SEGMENT_BYTES_MAX {
            sizes.push(power / 2 * 3);
        }
        power *= 2;
    }
    sizes
}

/// How data lays out in segments of `segment_bytes`.
pub fn segment_fill(input: &PlanInput, segment_bytes: u64) -> SegmentFill {
    let unit_bytes = input.ingest.bytes_per_unit();
    let block_max = input.block_units_max as f64;
    let series_share_bytes = segment_bytes as f64 / input.sensors as f64;
    // Data arrives in time order, so each segment holds every series' next stretch of points.
    // If a series' share holds a full block, blocks are full; otherwise the series gets one
    // block per segment holding its whole share (at least one unit). The two cases meet at
    // share = block_max·unit_bytes + BLOCK_INDEX_BYTES, so the cost is continuous in R.
    let units_in_full_blocks = series_share_bytes / (unit_bytes + BLOCK_INDEX_BYTES / block_max);
    let block_units =
        if units_in_full_blocks >= block_max { block_max } else { ((series_share_bytes - BLOCK_INDEX_BYTES) / unit_bytes).max(1.0) };
    let stored_bytes_per_unit = unit_bytes + BLOCK_INDEX_BYTES / block_units;
    let stored_bytes_per_second = input.ingest.units_per_second(input.sensors) * stored_bytes_per_unit;
    SegmentFill {
        segment_bytes,
        block_units,
        stored_bytes_per_unit,
        stored_bytes_per_second,
        span_seconds: segment_bytes as f64 / stored_bytes_per_second,
    }
}

/// One storage period of data laid out as `fill` says.
pub fn live_data(input: &PlanInput, fill: &SegmentFill) -> LiveData {
    let units = input.ingest.units_per_second(input.sensors) * input.period_seconds;
    // Continuous approximation: a period shorter than a segment span still gives each series a
    // block; the difference is at most 40 bytes a series, far below one segment of slack.
    let blocks = units / fill.block_units;
    let catalog_bytes = input.sensors as f64 * CATALOG_BYTES_PER_SERIES;
    let bytes = fill.stored_bytes_per_second * input.period_seconds + catalog_bytes;
    LiveData {
        bytes,
        share: bytes / input.disk_bytes as f64,
        blocks,
        catalog_bytes,
        index_memory_bytes: blocks * BLOCK_INDEX_BYTES,
        startup_seconds: blocks * STARTUP_SECONDS_PER_BLOCK,
    }
}

/// Bytes below the target usage: U_m·C.
fn target_bytes(input: &PlanInput) -> f64 {
    input.thresholds.target_usage * input.disk_bytes as f64
}

/// Bytes the condition reserves besides live data at segment size R: W + 4·R.
fn slack_bytes(input: &PlanInput, segment_bytes: u64) -> f64 {
    input.wal_bytes as f64 + SLACK_SEGMENTS * segment_bytes as f64
}

/// The planing condition solved for R: (U_m·C − (1 + m)·L − W) / 4.
fn planing_bound_bytes(input: &PlanInput, live_bytes: f64) -> f64 {
    (target_bytes(input) - (1.0 + input.margin) * live_bytes - input.wal_bytes as f64) / SLACK_SEGMENTS
}

/// The planing condition at `segment_bytes`.
pub fn check_planing(input: &PlanInput, segment_bytes: u64) -> PlaningCheck {
    let live_bytes = live_data(input, &segment_fill(input, segment_bytes)).bytes;
    let live_bytes_max = target_bytes(input) - slack_bytes(input, segment_bytes);
    PlaningCheck {
        segment_bytes,
        live_bytes,
        live_bytes_max,
        holds: live_bytes <= live_bytes_max,
        holds_with_margin: (1.0 + input.margin) * live_bytes <= live_bytes_max,
    }
}

fn validate(input: &PlanInput) -> Result<(), PlanRefusal> {
    let invalid = |message: &str| Err(PlanRefusal::Invalid { message: message.to_string() });
    let positive = |value: f64| value.is_finite() && value > 0.0;
    if input.sensors == 0 {
        return invalid("--sensors must be at least 1");
    }
    let rate_ok = match input.ingest {
        Ingest::Points { per_sensor_per_second, bytes_per_point } => {
            if !positive(bytes_per_point) {
                return invalid("--bytes-per-point must be greater than zero");
            }
            positive(per_sensor_per_second)
        }
        Ingest::Payload { total_bytes_per_second } => positive(total_bytes_per_second),
    };
    if !rate_ok {
        return invalid("--rate must be greater than zero");
    }
    if !positive(input.period_seconds) {
        return invalid("--period must be greater than zero");
    }
    if input.disk_bytes == 0 || input.block_units_max == 0 || input.current_segment_bytes == 0 {
        return invalid("--disk, --block and --current-segment must be greater than zero");
    }
    let Thresholds { target_usage, throttle_low, throttle_high } = input.thresholds;
    if !(0.0 < target_usage && target_usage < throttle_low && throttle_low < throttle_high && throttle_high <= 1.0) {
        return invalid("thresholds must rise: 0 < --target-usage < --throttle-low < --throttle-high <= 1");
    }
    if !(input.margin.is_finite() && input.margin >= 0.0) {
        return invalid("--margin must be zero or more");
    }
    Ok(())
}

/// The recommended segment size for `input`, or why none fits.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanRefusal> {
    validate(input)?;
    let sizes = segment_size_grid();
    // Live data is largest at the smallest segments; past 2^64 bytes nothing below means much.
    let largest_live = check_planing(input, SEGMENT_BYTES_MIN).live_bytes;
    if largest_live.is_nan() || largest_live >= 18_446_744_073_709_551_616.0 {
        return Err(PlanRefusal::Overflow);
    }
    let planing: Vec<u64> = sizes.iter().copied().filter(|&size| check_planing(input, size).holds_with_margin).collect();
    let Some(&largest_planing) = planing.last() else {
        return Err(refusal(input));
    };
    let span_seconds_max = input.period_seconds / SEGMENTS_PER_PERIOD_MIN;
    let within_span = planing.iter().rev().copied().find(|&size| segment_fill(input, size).span_seconds <= span_seconds_max);
    let (segment_bytes, segment_limit) = match within_span {
        Some(size) if size < largest_planing => (size, SegmentLimit::Span),
        Some(size) if size == SEGMENT_BYTES_MAX => (size, SegmentLimit::Maximum),
        Some(size) => (size, SegmentLimit::Planing),
        None => (planing[0], SegmentLimit::SmallestPlaning),
    };

    let fill = segment_fill(input, segment_bytes);
    let live = live_data(input, &fill);
    let target = target_bytes(input);
    let disk = input.disk_bytes as f64;
    let Thresholds { target_usage, throttle_low, throttle_high } = input.thresholds;
    // Whole bytes: (0.90 − 0.80) × 500 GB is 49,999,999,999.99999 in floating point.
    let target_to_low_bytes = ((throttle_low - target_usage) * disk).round();
    let low_to_high_bytes = ((throttle_high - throttle_low) * disk).round();
    let throttle = ThrottleMargins {
        target_to_low_bytes,
        target_to_low_seconds: target_to_low_bytes / fill.stored_bytes_per_second,
        low_to_high_bytes,
        low_to_high_seconds: low_to_high_bytes / fill.stored_bytes_per_second,
    };
    let mut warnings = Vec::new();
    if matches!(input.ingest, Ingest::Points { .. }) && fill.block_units < SHORT_BLOCK_POINTS {
        warnings.push(Warning::ShortBlocks { block_points: fill.block_units });
    }
    if segment_limit == SegmentLimit::SmallestPlaning {
        warnings.push(Warning::LongSegmentSpan { span_seconds: fill.span_seconds });
    }
    Ok(Plan {
        input: input.clone(),
        live,
        fill,
        segment_bytes,
        segment_limit,
        planing_bound_bytes: planing_bound_bytes(input, live.bytes),
        recommended: check_planing(input, segment_bytes),
        current: check_planing(input, input.current_segment_bytes),
        segments_at_target: (target / segment_bytes as f64).floor() as u64,
        segments_with_live_data: (live.bytes / segment_bytes as f64).ceil() as u64 + 1,
        throttle,
        warnings,
    })
}

/// Why nothing planes, with what would make it fit.
fn refusal(input: &PlanInput) -> PlanRefusal {
    let fit = fit(input);
    // The best case for V is the largest segment (fewest, longest blocks).
    let best_live = check_planing(input, SEGMENT_BYTES_MAX).live_bytes;
    let live_share = best_live / input.disk_bytes as f64;
    let target_usage = input.thresholds.target_usage;
    if live_share >= target_usage {
        return PlanRefusal::LiveDataAboveTarget { live_bytes: best_live, live_share, target_usage, fit };
    }
    let smallest = check_planing(input, SEGMENT_BYTES_MIN);
    PlanRefusal::NoRoomForSegments {
        live_bytes: best_live,
        live_share,
        target_usage,
        planing_bound_bytes: planing_bound_bytes(input, smallest.live_bytes),
        segment_bytes_min: SEGMENT_BYTES_MIN,
        fit,
    }
}

/// The longest period and the smallest disk that plan, each at its best grid size. Live data is
/// linear in the period at a fixed segment size, so both are solved exactly per size.
fn fit(input: &PlanInput) -> Fit {
    let margin_factor = 1.0 + input.margin;
    let catalog_bytes = input.sensors as f64 * CATALOG_BYTES_PER_SERIES;
    let mut max_period_seconds: Option<f64> = None;
    let mut min_disk_bytes = f64::INFINITY;
    for size in segment_size_grid() {
        let fill = segment_fill(input, size);
        let live_budget = (target_bytes(input) - slack_bytes(input, size)) / margin_factor - catalog_bytes;
        // Whole seconds, rounded down, so the suggestion is inside the limit.
        let period = (live_budget / fill.stored_bytes_per_second).floor();
        if period >= 1.0 && max_period_seconds.is_none_or(|best| period > best) {
            max_period_seconds = Some(period);
        }
        let live = live_data(input, &fill).bytes;
        // One byte over the rounded-up quotient absorbs the float rounding of U_m·C.
        let disk = ((margin_factor * live + slack_bytes(input, size)) / input.thresholds.target_usage).ceil() + 1.0;
        min_disk_bytes = min_disk_bytes.min(disk);
    }
    let fits_without_margin = segment_size_grid().into_iter().any(|size| check_planing(input, size).holds);
    Fit { max_period_seconds, min_disk_bytes: min_disk_bytes.min(u64::MAX as f64) as u64, fits_without_margin }
}

#[cfg(test)]
mod tests;
