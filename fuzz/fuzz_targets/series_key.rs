//! Fuzzes `SeriesKey::parse`, the parser of the canonical series key text (catalog records),
//! with arbitrary UTF-8 strings.
//!
//! Asserts: parsing never panics; a key that parses has a non-empty measurement and field, and
//! its canonical form parses back to the same key and is a fixed point
//! (`canonical(parse(canonical(k))) == canonical(k)`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::SeriesKey;

fuzz_target!(|text: &str| {
    let Ok(key) = SeriesKey::parse(text) else { return };
    assert!(!key.measurement().is_empty(), "empty measurement accepted");
    assert!(!key.field().is_empty(), "empty field accepted");
    let canonical = key.canonical();
    let again = SeriesKey::parse(&canonical).unwrap_or_else(|e| panic!("canonical form {canonical:?} of {text:?} does not parse: {e}"));
    assert_eq!(again, key, "canonical form {canonical:?} parses to another key");
    assert_eq!(again.canonical(), canonical);
});
