//! The single-pass line reader of the hot path.
//!
//! It accepts a subset of what the `influxdb-line-protocol` crate accepts, as read with the
//! InfluxDB 1.8 rules of [`super::influxdb_1_8`] (every line a client normally sends: escapes
//! included) and yields the same measurement, tags, fields and timestamp for it; for anything else (bad lines, and rare valid shapes such as a newline inside a quoted
//! string) it answers `None` and the caller hands the record to the crate, which then decides and
//! words the error. The property test `fast_parser_agrees_with_the_crate` holds the two together.
//!
//! The grammar, as the crate (and the Go parser) reads it:
//! * measurement: bytes other than space, tab, newline, NUL, comma, backslash; a backslash escapes
//!   the next character (`\,` `\ ` `\\` give the character, any other pair is kept as is);
//! * `,key=value` tags, at least one after a comma: a key holds anything but space, tab, newline,
//!   `=` and backslash (so a comma may be in it), a value anything but space, tab, newline, comma
//!   and backslash (so `=` may be in it); `\,` `\=` `\ ` `\\` give the character;
//! * one or more spaces, then `key=value` fields separated by commas (keys as tag keys, but
//!   without an unescaped comma); values `-?\d+i`, `\d+u`, `-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?`
//!   (a finite float), `"..."` (with `\"` and `\\`), `t T true True TRUE f F false False FALSE`;
//! * optionally one or more spaces and a `-?\d+` timestamp, then only spaces;
//! * no unescaped text may end with a backslash.

use sensordb_engine::ValueKind;
use std::borrow::Cow;

/// A field value as read from a line.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue<'a> {
    F64(f64),
    I64(i64),
    U64(u64),
    Bool(bool),
    String(Cow<'a, str>),
}

impl FieldValue<'_> {
    /// The engine kind of this value.
    pub fn kind(&self) -> ValueKind {
        match self {
            FieldValue::F64(_) => ValueKind::F64,
            FieldValue::I64(_) => ValueKind::I64,
            FieldValue::U64(_) => ValueKind::U64,
            FieldValue::Bool(_) => ValueKind::Bool,
            FieldValue::String(_) => ValueKind::Bytes,
        }
    }
}

/// One field of a line: the unescaped key and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Field<'a> {
    pub key: Cow<'a, str>,
    pub value: FieldValue<'a>,
}

/// What the fast reader gives for a line: the raw series text and the timestamp (the fields go to
/// the caller's buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastLine<'a> {
    /// Measurement and tags, still escaped, as written.
    pub series_text: &'a str,
    pub timestamp: Option<i64>,
}

/// Reads `line` (no leading whitespace, no comment). `None` when the line is not in the subset this
/// reader accepts: then `fields` holds garbage and the crate must judge the line.
#[cfg(test)]
pub fn parse_line<'a>(line: &'a str, fields: &mut Vec<Field<'a>>) -> Option<FastLine<'a>> {
    parse_line_knowing(line, fields, &|_| false)
}

/// [`parse_line`], taking the series text as read when `known` says this reader accepted it
/// before (`known` must answer true only for series texts this reader returned).
///
/// Why: checking a line's measurement and tags byte by byte was a third of this reader's work
/// (TSBS IoT: 150 of a line's 230 bytes), done again for every line of a series a writer has
/// seen many times. A text without backslashes ends at the line's first space, found by
/// `memchr`; if it is known, the check would find the same end, since the check reads nothing
/// but the text and the space after it.
pub fn parse_line_knowing<'a>(line: &'a str, fields: &mut Vec<Field<'a>>, known: &dyn Fn(&str) -> bool) -> Option<FastLine<'a>> {
    fields.clear();
    let b = line.as_bytes();
    let series_end = match known_series_end(line, known) {
        Some(end) => end,
        None => scan_series(b)?,
    };
    let mut i = series_end;
    // One or more spaces.
    i = skip_spaces(b, i);
    if i == series_end {
        return None;
    }
    loop {
        // Field key: up to '='. An unescaped comma cannot be in it (InfluxDB 1.8).
        let key_start = i;
        let mut escaped = false;
        loop {
            match *b.get(i)? {
                b'=' => break,
                b'\\' => {
                    escaped = true;
                    b.get(i + 1)?;
                    i += 2;
                }
                b' ' | b'\t' | b'\n' | b',' => return None,
                _ => i += 1,
            }
        }
        if i == key_start {
            return None;
        }
        let key = unescape_key(&line[key_start..i], escaped)?;
        i += 1;
        let (value, next) = parse_value(line, i)?;
        fields.push(Field { key, value });
        i = next;
        match b.get(i) {
            None => return Some(FastLine { series_text: &line[..series_end], timestamp: None }),
            Some(b',') => i += 1,
            Some(b' ') => break,
            Some(_) => return None,
        }
    }
    // Timestamp.
    i = skip_spaces(b, i);
    let start = i;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let digits = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == digits {
        return None;
    }
    let timestamp = parse_i64(&line[start..i], &b[digits..i], digits > start)?;
    if skip_spaces(b, i) != b.len() {
        return None;
    }
    Some(FastLine { series_text: &line[..series_end], timestamp: Some(timestamp) })
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    i
}

/// The end of the series text of `line` when it has no backslash and `known` knows it.
fn known_series_end(line: &str, known: &dyn Fn(&str) -> bool) -> Option<usize> {
    let b = line.as_bytes();
    let end = memchr::memchr(b' ', b)?;
    if end == 0 || memchr::memchr(b'\\', &b[..end]).is_some() {
        return None;
    }
    known(&line[..end]).then_some(end)
}

/// The end of a valid measurement + tag set starting `b` (the index of the space after it).
fn scan_series(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut escaped = false;
    // Measurement.
    loop {
        match *b.get(i)? {
            b' ' | b',' => break,
            b'\\' => {
                escaped = true;
                b.get(i + 1)?;
                i += 2;
            }
            b'\t' | b'\n' | 0 => return None,
            _ => i += 1,
        }
    }
    if i == 0 || (escaped && ends_with_backslash(&b[..i], MEASUREMENT_ESCAPES)) {
        return None;
    }
    while b[i] == b',' {
        i += 1;
        // Tag key.
        let start = i;
        let mut escaped = false;
        loop {
            match *b.get(i)? {
                b'=' => break,
                b'\\' => {
                    escaped = true;
                    b.get(i + 1)?;
                    i += 2;
                }
                b' ' | b'\t' | b'\n' => return None,
                _ => i += 1,
            }
        }
        if i == start || (escaped && ends_with_backslash(&b[start..i], KEY_ESCAPES)) {
            return None;
        }
        i += 1;
        // Tag value.
        let start = i;
        let mut escaped = false;
        loop {
            match b.get(i) {
                Some(b' ' | b',') => break,
                Some(b'\\') => {
                    escaped = true;
                    b.get(i + 1)?;
                    i += 2;
                }
                Some(b'\t' | b'\n') | None => return None,
                Some(_) => i += 1,
            }
        }
        if i == start || (escaped && ends_with_backslash(&b[start..i], KEY_ESCAPES)) {
            return None;
        }
    }
    Some(i)
}

const MEASUREMENT_ESCAPES: &[u8] = b", \\";
const KEY_ESCAPES: &[u8] = b",= \\";

/// Whether the unescaped form of `raw` (whose backslashes each come with a following byte) ends
/// with a backslash: only when its last unit is the pair `\\` (a kept pair `\x` ends with `x`).
fn ends_with_backslash(raw: &[u8], escapes: &[u8]) -> bool {
    // Walk the pairs to find where the last unit starts.
    let mut i = 0;
    let mut last_pair = None;
    while i < raw.len() {
        if raw[i] == b'\\' {
            last_pair = Some(raw[i + 1]);
            i += 2;
        } else {
            last_pair = None;
            i += 1;
        }
    }
    // `\\` yields `\` (when backslash is an escape, which it always is here).
    debug_assert!(escapes.contains(&b'\\'));
    last_pair == Some(b'\\')
}

/// Unescapes raw measurement or key text (already checked: every backslash has a byte after it).
fn unescape(raw: &str, escapes: &[u8]) -> String {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && escapes.contains(&b[i + 1]) {
            out.push(b[i + 1]);
            i += 2;
        } else if b[i] == b'\\' {
            out.extend_from_slice(&b[i..i + 2]);
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII bytes were removed, each before another byte that stays: still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

fn unescape_key(raw: &str, escaped: bool) -> Option<Cow<'_, str>> {
    if !escaped {
        return Some(Cow::Borrowed(raw));
    }
    if ends_with_backslash(raw.as_bytes(), KEY_ESCAPES) {
        return None;
    }
    Some(Cow::Owned(unescape(raw, KEY_ESCAPES)))
}

/// The unescaped measurement and tags of series text accepted by [`parse_line`].
pub fn parse_series(series_text: &str) -> Option<(String, Vec<(String, String)>)> {
    let b = series_text.as_bytes();
    if scan_series_complete(b)? != b.len() {
        return None;
    }
    let mut i = 0;
    while i < b.len() && b[i] != b',' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    let measurement = unescape(&series_text[..i], MEASUREMENT_ESCAPES);
    let mut tags = Vec::new();
    while i < b.len() {
        i += 1;
        let start = i;
        while b[i] != b'=' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        let key = unescape(&series_text[start..i], KEY_ESCAPES);
        i += 1;
        let start = i;
        while i < b.len() && b[i] != b',' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        tags.push((key, unescape(&series_text[start..i], KEY_ESCAPES)));
    }
    Some((measurement, tags))
}

/// [`scan_series`] for text that ends where the series ends (no space after it).
fn scan_series_complete(b: &[u8]) -> Option<usize> {
    let mut with_space = Vec::with_capacity(b.len() + 1);
    with_space.extend_from_slice(b);
    with_space.push(b' ');
    scan_series(&with_space)
}

/// A field value starting at `i`; also the index after it.
fn parse_value(line: &str, mut i: usize) -> Option<(FieldValue<'_>, usize)> {
    let b = line.as_bytes();
    match *b.get(i)? {
        b'"' => {
            let start = i + 1;
            i = start;
            let mut escaped = false;
            loop {
                match *b.get(i)? {
                    b'"' => break,
                    b'\\' => {
                        escaped = true;
                        // `\"` and `\\` are pairs; any other backslash stands alone, and the byte
                        // after it is an ordinary one (neither quote nor backslash) either way.
                        b.get(i + 1)?;
                        i += 2;
                    }
                    b'\n' => return None,
                    _ => i += 1,
                }
            }
            let raw = &line[start..i];
            let value = if escaped { Cow::Owned(unescape_string(raw)) } else { Cow::Borrowed(raw) };
            Some((FieldValue::String(value), i + 1))
        }
        b't' | b'T' | b'f' | b'F' => {
            let start = i;
            while i < b.len() && b[i] != b',' && b[i] != b' ' {
                i += 1;
            }
            let value = match &b[start..i] {
                b"t" | b"T" | b"true" | b"True" | b"TRUE" => true,
                b"f" | b"F" | b"false" | b"False" | b"FALSE" => false,
                _ => return None,
            };
            Some((FieldValue::Bool(value), i))
        }
        b'-' | b'.' | b'0'..=b'9' => parse_number(line, i),
        _ => None,
    }
}

fn unescape_string(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() && (b[i + 1] == b'"' || b[i + 1] == b'\\') {
            out.push(b[i + 1]);
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Powers of ten exactly representable as `f64`.
const POW10: [f64; 23] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

fn parse_number(line: &str, start: usize) -> Option<(FieldValue<'_>, usize)> {
    let b = line.as_bytes();
    let mut i = start;
    let negative = b[i] == b'-';
    if negative {
        i += 1;
    }
    let int_start = i;
    let mut mantissa: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    let int_digits = i - int_start;
    let value = match b.get(i) {
        Some(b'i' | b'u') if int_digits == 0 => return None,
        Some(b'i') => {
            let value = parse_i64(&line[start..i], &b[int_start..i], negative)?;
            i += 1;
            FieldValue::I64(value)
        }
        Some(b'u') => {
            if negative {
                return None;
            }
            let value = if int_digits <= 19 { mantissa } else { line[int_start..i].parse().ok()? };
            i += 1;
            FieldValue::U64(value)
        }
        _ => {
            let mut frac_digits = 0;
            if b.get(i) == Some(&b'.') {
                let frac_start = i + 1;
                i = frac_start;
                while i < b.len() && b[i].is_ascii_digit() {
                    mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
                    i += 1;
                }
                frac_digits = i - frac_start;
                // `1.` and `.5` are floats (InfluxDB 1.8), `.` alone is not.
                if int_digits + frac_digits == 0 {
                    return None;
                }
            } else if int_digits == 0 {
                return None;
            }
            let mut exponent = false;
            if matches!(b.get(i), Some(b'e' | b'E')) {
                exponent = true;
                i += 1;
                if matches!(b.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
                let exp_start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i == exp_start {
                    return None;
                }
            }
            let value = if !exponent && int_digits + frac_digits <= 19 && mantissa <= (1u64 << 53) && frac_digits < POW10.len() {
                // Clinger's fast path: both operands exact, so one correctly rounded division.
                let x = mantissa as f64 / POW10[frac_digits];
                if negative {
                    -x
                } else {
                    x
                }
            } else {
                line[start..i].parse::<f64>().ok()?
            };
            // `1e309` reads as +Inf: refused, as `inf` is (InfluxDB 1.8: out of range).
            if !super::influxdb_1_8::finite_float(value) {
                return None;
            }
            FieldValue::F64(value)
        }
    };
    match b.get(i) {
        None | Some(b',' | b' ') => Some((value, i)),
        Some(_) => None,
    }
}

/// `-?digits` as `i64`; `None` on overflow.
fn parse_i64(text: &str, digits: &[u8], negative: bool) -> Option<i64> {
    if digits.len() <= 18 {
        let mut v: i64 = 0;
        for &d in digits {
            v = v * 10 + i64::from(d - b'0');
        }
        Some(if negative { -v } else { v })
    } else {
        text.parse().ok()
    }
}

#[cfg(test)]
mod tests;
