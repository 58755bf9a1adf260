//! Fuzzes `Databases::decode`, the reader of the data directory's `databases` file (retention
//! per database), with arbitrary UTF-8 text.
//!
//! Asserts: decoding never panics; a file that decodes re-encodes to text that decodes to the
//! same databases (so a save after a load never changes retention).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::Databases;

fuzz_target!(|text: &str| {
    let Ok(databases) = Databases::decode(text) else { return };
    let again = Databases::decode(&databases.encode()).unwrap_or_else(|e| panic!("re-encoded {text:?} does not decode: {e:?}"));
    assert_eq!(again, databases);
});
