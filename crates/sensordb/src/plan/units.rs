//! The units `sensordb plan` reads and prints: byte sizes, durations, ingest rates, block sizes,
//! fractions and counts, each parsed from what a person types and formatted back for reading.
//!
//! Parsing is strict where a guess could cost a factor of a thousand: a size needs a byte unit
//! when it has any unit at all (`500GB` or `500GiB`, never `500G`), a duration always needs a
//! unit (`3600s`, not `3600`), and a byte rate needs a time unit (`2MB/s`). Decimal units (kB,
//! MB, GB, TB, PB) are powers of 1000, binary ones (KiB … PiB) powers of 1024; letters are
//! case-insensitive, so `500gb` is `500GB`.

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UnitError {
    #[error("empty value")]
    Empty,
    #[error("'{0}' is not a number")]
    NotANumber(String),
    #[error("unknown unit '{unit}' (expected {expected})")]
    UnknownUnit { unit: String, expected: &'static str },
    #[error("'{text}' needs a unit: {hint}")]
    NeedsUnit { text: String, hint: &'static str },
    #[error("'{0}' must be greater than zero")]
    NotPositive(String),
    #[error("'{0}' is too large")]
    TooLarge(String),
    #[error("'{0}' must be a fraction above 0 and at most 1 (0.8 or 80%)")]
    NotAFraction(String),
}

/// An ingest rate as typed: points per second from each sensor, or payload bytes per second
/// from all sensors together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    PointsPerSensorPerSecond(f64),
    TotalBytesPerSecond(f64),
}

/// A block size as typed: points per block for numeric series, bytes per block for payloads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BlockSize {
    Points(u64),
    Bytes(u64),
}

const SIZE_UNITS: &str = "B, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB";
const DURATION_UNITS: &str = "s, m or min, h, d, w, y (365 days)";

/// Splits "12.5 GiB" into the number and the unit ("" when there is none).
fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(UnitError::Empty);
    }
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == ',')).unwrap_or(text.len());
    let digits: String = text[..end].chars().filter(|&c| c != '_' && c != ',').collect();
    // Exponents ("1e9") are not accepted: `e` would be read as the start of a unit.
    let number: f64 = digits.parse().map_err(|_| UnitError::NotANumber(text.to_string()))?;
    Ok((number, text[end..].trim()))
}

fn byte_unit_multiplier(unit: &str) -> Option<f64> {
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        "pib" => 1024f64.powi(5),
        _ => return None,
    };
    Some(multiplier)
}

fn duration_unit_seconds(unit: &str) -> Option<f64> {
    let seconds = match unit.to_ascii_lowercase().as_str() {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        "y" => 365.0 * 86_400.0,
        _ => return None,
    };
    Some(seconds)
}

/// `value` if it is above zero and finite (400 digits parse as infinity).
fn positive_finite(value: f64, text: &str) -> Result<f64, UnitError> {
    if value.is_nan() || value <= 0.0 {
        Err(UnitError::NotPositive(text.to_string()))
    } else if value.is_infinite() {
        Err(UnitError::TooLarge(text.to_string()))
    } else {
        Ok(value)
    }
}

/// A positive value in whole bytes (or a whole count).
fn whole_bytes(value: f64, text: &str) -> Result<u64, UnitError> {
    let bytes = positive_finite(value, text)?.round();
    // 2^64 is exactly representable; anything at or above it does not fit a u64.
    if bytes >= 18_446_744_073_709_551_616.0 {
        return Err(UnitError::TooLarge(text.to_string()));
    }
    Ok(bytes as u64)
}

/// A size in bytes: `500GB`, `1TiB`, `800 MiB`, `1.5TB`, or a plain number of bytes.
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text)?;
    let multiplier = if unit.is_empty() {
        1.0
    } else {
        byte_unit_multiplier(unit).ok_or_else(|| UnitError::UnknownUnit { unit: unit.to_string(), expected: SIZE_UNITS })?
    };
    whole_bytes(number * multiplier, text)
}

/// A duration in seconds: `30d`, `12h`, `90m`, `3600s`, `1.5y`. The unit is required.
pub fn parse_duration_seconds(text: &str) -> Result<f64, UnitError> {
    let (number, unit) = split_number(text)?;
    if unit.is_empty() {
        return Err(UnitError::NeedsUnit { text: text.to_string(), hint: "for example 30d, 12h, 90m or 3600s" });
    }
    let seconds_per_unit =
        duration_unit_seconds(unit).ok_or_else(|| UnitError::UnknownUnit { unit: unit.to_string(), expected: DURATION_UNITS })?;
    positive_finite(number * seconds_per_unit, text)
}

/// The time after the slash of a rate: a unit (`s`, `min`) or a count and unit (`10s`).
fn parse_per_seconds(text: &str) -> Result<f64, UnitError> {
    let text = text.trim();
    if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        parse_duration_seconds(&format!("1{text}"))
    } else {
        parse_duration_seconds(text)
    }
}

/// An ingest rate. Points per second per sensor: `1`, `0.1`, `6/min`, `1/10s` (one point every
/// ten seconds). Payload bytes per second from all sensors together: `2MB/s`, `500KiB/s`,
/// `1GB/h`.
pub fn parse_rate(text: &str) -> Result<Rate, UnitError> {
    let (amount, per) = match text.split_once('/') {
        Some((amount, per)) => (amount, Some(per)),
        None => (text, None),
    };
    let (number, unit) = split_number(amount)?;
    let per_seconds = match per {
        Some(per) => parse_per_seconds(per)?,
        None => 1.0,
    };
    if unit.is_empty() {
        return Ok(Rate::PointsPerSensorPerSecond(positive_finite(number / per_seconds, text)?));
    }
    if per.is_none() {
        return Err(UnitError::NeedsUnit { text: text.to_string(), hint: "a byte rate needs a time unit, for example 2MB/s" });
    }
    let bytes = parse_bytes(amount)? as f64;
    Ok(Rate::TotalBytesPerSecond(positive_finite(bytes / per_seconds, text)?))
}

/// A block size: a plain count is points per block (`16384`), a size is payload bytes per block
/// (`4MiB`).
pub fn parse_block_size(text: &str) -> Result<BlockSize, UnitError> {
    let (number, unit) = split_number(text)?;
    if unit.is_empty() {
        if number.fract() != 0.0 {
            return Err(UnitError::NotANumber(text.to_string()));
        }
        return Ok(BlockSize::Points(whole_bytes(number, text)?));
    }
    Ok(BlockSize::Bytes(parse_bytes(text)?))
}

/// A share of the disk: `0.8` or `80%`.
pub fn parse_fraction(text: &str) -> Result<f64, UnitError> {
    let (number, unit) = split_number(text)?;
    let fraction = match unit {
        "" => number,
        "%" => number / 100.0,
        other => return Err(UnitError::UnknownUnit { unit: other.to_string(), expected: "nothing or %" }),
    };
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(fraction)
    } else {
        Err(UnitError::NotAFraction(text.to_string()))
    }
}

/// A non-negative share, such as a safety margin: `0.25`, `25%`, `0`.
pub fn parse_share(text: &str) -> Result<f64, UnitError> {
    let (number, unit) = split_number(text)?;
    match unit {
        "" => Ok(number),
        "%" => Ok(number / 100.0),
        other => Err(UnitError::UnknownUnit { unit: other.to_string(), expected: "nothing or %" }),
    }
}

/// A number greater than zero, such as bytes per point: `0.59`, `8.5`.
pub fn parse_positive(text: &str) -> Result<f64, UnitError> {
    let (number, unit) = split_number(text)?;
    if !unit.is_empty() {
        return Err(UnitError::NotANumber(text.to_string()));
    }
    positive_finite(number, text)
}

/// A count of at least one: `10000`, `10_000`, `10,000`.
pub fn parse_count(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text)?;
    if !unit.is_empty() || number.fract() != 0.0 {
        return Err(UnitError::NotANumber(text.to_string()));
    }
    whole_bytes(number, text)
}

/// Three significant digits in decimal units, the way disks are sold: `4.61 GB`.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{} {}", three_significant(value), UNITS[unit])
    }
}

/// A segment size as the configuration shows it, in binary units: `64 MiB`, `1 GiB`, `1.5 GiB`.
pub fn format_binary_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{} {}", three_significant(value), UNITS[unit])
}

/// Three significant digits in the largest unit that keeps the number at least one:
/// `2.37 ms`, `45 s`, `12.5 min`, `3.2 h`, `2.1 days`, `1.5 years`.
pub fn format_duration(seconds: f64) -> String {
    let (value, unit) = if seconds < 1.0 {
        (seconds * 1000.0, "ms")
    } else if seconds < 60.0 {
        (seconds, "s")
    } else if seconds < 3600.0 {
        (seconds / 60.0, "min")
    } else if seconds < 86_400.0 {
        (seconds / 3600.0, "h")
    } else if seconds < 365.0 * 86_400.0 {
        (seconds / 86_400.0, "days")
    } else {
        (seconds / (365.0 * 86_400.0), "years")
    };
    format!("{} {unit}", three_significant(value))
}

/// A duration rounded down to a whole number of the largest unit that still counts at least
/// ten, written as `--period` takes it: 41.7 days → `41d`, 5.97 days → `143h`. Rounding down
/// keeps a suggested period inside the limit it was computed from; ten units or more keep what
/// rounding loses under a tenth.
pub fn duration_argument_rounded_down(seconds: f64) -> String {
    for (unit, size) in [("d", 86_400.0), ("h", 3600.0), ("m", 60.0)] {
        if seconds >= 10.0 * size {
            return format!("{}{unit}", (seconds / size).floor());
        }
    }
    format!("{}s", seconds.floor().max(1.0))
}

/// A size rounded up to two significant digits in decimal units, written as `--disk` takes it:
/// 5.73 GB → `5.8GB`. Rounding up keeps a suggested disk above the limit it was computed from.
pub fn bytes_argument_rounded_up(bytes: u64) -> String {
    const UNITS: [(&str, u64); 5] =
        [("PB", 1_000_000_000_000_000), ("TB", 1_000_000_000_000), ("GB", 1_000_000_000), ("MB", 1_000_000), ("kB", 1000)];
    let Some((unit, size)) = UNITS.iter().copied().find(|&(_, size)| bytes >= size) else {
        return format!("{bytes}B");
    };
    // Two significant digits: tenths of the unit below 10 units, whole units from 10 up.
    // Integer arithmetic, so an exact 5 GB stays 5.0GB.
    let tenths = bytes.div_ceil(size / 10);
    if tenths < 100 {
        format!("{}.{}{unit}", tenths / 10, tenths % 10)
    } else {
        format!("{}{unit}", bytes.div_ceil(size))
    }
}

/// Three significant digits, no trailing zeros: 4.6123 → `4.61`, 2.10 → `2.1`, 5199.8 → `5200`.
pub fn three_significant(value: f64) -> String {
    let text = if value.abs() >= 99.95 {
        format!("{value:.0}")
    } else if value.abs() >= 9.995 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    // "2.00" reads as "2", "1.50" as "1.5".
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A count with thousands separators: 474610 → `474,610`.
pub fn format_count(count: u64) -> String {
    let digits = count.to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3);
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_decimal_and_binary_units() {
        assert_eq!(parse_bytes("500GB"), Ok(500_000_000_000));
        assert_eq!(parse_bytes("500 gb"), Ok(500_000_000_000));
        assert_eq!(parse_bytes("1TiB"), Ok(1 << 40));
        assert_eq!(parse_bytes("800MiB"), Ok(800 << 20));
        assert_eq!(parse_bytes("1.5TB"), Ok(1_500_000_000_000));
        assert_eq!(parse_bytes("4kB"), Ok(4000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1_000B"), Ok(1000));
    }

    #[test]
    fn sizes_refused() {
        assert!(matches!(parse_bytes("500G"), Err(UnitError::UnknownUnit { .. })), "G alone is ambiguous");
        assert!(matches!(parse_bytes("0GB"), Err(UnitError::NotPositive(_))));
        assert!(matches!(parse_bytes("-5GB"), Err(UnitError::NotANumber(_))));
        assert!(matches!(parse_bytes(""), Err(UnitError::Empty)));
        assert!(matches!(parse_bytes("GB"), Err(UnitError::NotANumber(_))));
        assert!(matches!(parse_bytes("1e9"), Err(UnitError::UnknownUnit { .. })));
        // 16 EiB is 2^64 bytes, one more than a u64 holds.
        assert!(matches!(parse_bytes("16384PiB"), Err(UnitError::TooLarge(_))));
        assert_eq!(parse_bytes("16383PiB"), Ok(16383 << 50));
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration_seconds("30d"), Ok(30.0 * 86_400.0));
        assert_eq!(parse_duration_seconds("12h"), Ok(43_200.0));
        assert_eq!(parse_duration_seconds("90m"), Ok(5400.0));
        assert_eq!(parse_duration_seconds("90min"), Ok(5400.0));
        assert_eq!(parse_duration_seconds("3600s"), Ok(3600.0));
        assert_eq!(parse_duration_seconds("2w"), Ok(14.0 * 86_400.0));
        assert_eq!(parse_duration_seconds("1y"), Ok(365.0 * 86_400.0));
        assert_eq!(parse_duration_seconds("1.5d"), Ok(129_600.0));
        assert!(matches!(parse_duration_seconds("3600"), Err(UnitError::NeedsUnit { .. })));
        assert!(matches!(parse_duration_seconds("3mo"), Err(UnitError::UnknownUnit { .. })));
        assert!(matches!(parse_duration_seconds("0d"), Err(UnitError::NotPositive(_))));
        let four_hundred_digits = format!("{}d", "9".repeat(400));
        assert!(matches!(parse_duration_seconds(&four_hundred_digits), Err(UnitError::TooLarge(_))));
    }

    #[test]
    fn point_rates_per_sensor() {
        assert_eq!(parse_rate("1"), Ok(Rate::PointsPerSensorPerSecond(1.0)));
        assert_eq!(parse_rate("0.1"), Ok(Rate::PointsPerSensorPerSecond(0.1)));
        assert_eq!(parse_rate("6/min"), Ok(Rate::PointsPerSensorPerSecond(0.1)));
        assert_eq!(parse_rate("1/10s"), Ok(Rate::PointsPerSensorPerSecond(0.1)));
        assert_eq!(parse_rate("100/s"), Ok(Rate::PointsPerSensorPerSecond(100.0)));
        assert!(matches!(parse_rate("0"), Err(UnitError::NotPositive(_))));
        assert!(matches!(parse_rate("-1"), Err(UnitError::NotANumber(_))));
        assert!(matches!(parse_rate("1/0s"), Err(UnitError::NotPositive(_))));
    }

    #[test]
    fn byte_rates_for_all_sensors() {
        assert_eq!(parse_rate("2MB/s"), Ok(Rate::TotalBytesPerSecond(2e6)));
        assert_eq!(parse_rate("1MiB/s"), Ok(Rate::TotalBytesPerSecond(1_048_576.0)));
        assert_eq!(parse_rate("3.6GB/h"), Ok(Rate::TotalBytesPerSecond(1e6)));
        assert!(matches!(parse_rate("2MB"), Err(UnitError::NeedsUnit { .. })), "a size is not a rate");
        assert!(matches!(parse_rate("2MB/fortnight"), Err(UnitError::UnknownUnit { .. })));
        assert!(matches!(parse_rate("2XB/s"), Err(UnitError::UnknownUnit { .. })));
    }

    #[test]
    fn block_sizes_in_points_or_bytes() {
        assert_eq!(parse_block_size("16384"), Ok(BlockSize::Points(16384)));
        assert_eq!(parse_block_size("16,384"), Ok(BlockSize::Points(16384)));
        assert_eq!(parse_block_size("4MiB"), Ok(BlockSize::Bytes(4 << 20)));
        assert!(parse_block_size("1.5").is_err());
        assert!(parse_block_size("0").is_err());
    }

    #[test]
    fn fractions_and_counts() {
        assert_eq!(parse_fraction("0.8"), Ok(0.8));
        assert_eq!(parse_fraction("80%"), Ok(0.8));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        assert!(matches!(parse_fraction("0"), Err(UnitError::NotAFraction(_))));
        assert!(matches!(parse_fraction("1.2"), Err(UnitError::NotAFraction(_))));
        assert!(matches!(parse_fraction("80"), Err(UnitError::NotAFraction(_))), "80 is not 80%");
        assert_eq!(parse_share("0"), Ok(0.0));
        assert_eq!(parse_share("25%"), Ok(0.25));
        assert_eq!(parse_positive("0.59"), Ok(0.59));
        assert!(matches!(parse_positive("0"), Err(UnitError::NotPositive(_))));
        assert!(parse_positive("0.59B").is_err());
        assert_eq!(parse_count("10,000"), Ok(10_000));
        assert!(parse_count("0").is_err());
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("10k").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(4_612_345_678.0), "4.61 GB");
        assert_eq!(format_bytes(999_600.0), "1 MB");
        assert_eq!(format_bytes(98_600_000_000.0), "98.6 GB");
        assert_eq!(format_binary_bytes(64 << 20), "64 MiB");
        assert_eq!(format_binary_bytes(1 << 30), "1 GiB");
        assert_eq!(format_binary_bytes(6 << 20), "6 MiB");
        assert_eq!(format_binary_bytes(768 << 20), "768 MiB");
        assert_eq!(format_duration(0.00237), "2.37 ms");
        assert_eq!(format_duration(45.0), "45 s");
        assert_eq!(format_duration(181_440.0), "2.1 days");
        assert_eq!(format_duration(2.0 * 365.0 * 86_400.0), "2 years");
        assert_eq!(format_count(474_610), "474,610");
        assert_eq!(format_count(999), "999");
    }

    #[test]
    fn suggestions_round_towards_safety() {
        assert_eq!(duration_argument_rounded_down(41.7 * 86_400.0), "41d");
        assert_eq!(duration_argument_rounded_down(5.97 * 86_400.0), "143h");
        assert_eq!(duration_argument_rounded_down(5.5 * 3600.0), "330m");
        assert_eq!(duration_argument_rounded_down(599.0), "599s");
        assert_eq!(bytes_argument_rounded_up(5_730_000_000), "5.8GB");
        assert_eq!(bytes_argument_rounded_up(57_300_000_000), "58GB");
        assert_eq!(bytes_argument_rounded_up(5_000_000_000), "5.0GB");
        assert_eq!(bytes_argument_rounded_up(9_950_000_001), "10GB");
        assert_eq!(bytes_argument_rounded_up(999), "999B");
        for text in ["5.8GB", "58GB", "5.0GB", "10GB"] {
            assert!(parse_bytes(text).is_ok(), "{text} reads back");
        }
    }
}
