//! The identity of a series: database, measurement, tag set sorted by tag key, field name (the
//! InfluxDB line-protocol model, with databases as separate namespaces), and its canonical text
//! form.

use std::fmt;

/// The database a series belongs to unless told otherwise.
pub const DEFAULT_DATABASE: &str = "default";

/// The identity of a series: database, measurement, tag set sorted by tag key, field name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    database: String,
    measurement: String,
    tags: Vec<(String, String)>,
    field: String,
}

/// Why a series key is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeriesKeyError {
    #[error("empty measurement name")]
    EmptyMeasurement,
    #[error("empty field name")]
    EmptyField,
    #[error("empty database name")]
    EmptyDatabase,
    #[error("empty tag key")]
    EmptyTagKey,
    #[error("tag key {0:?} appears twice")]
    DuplicateTag(String),
    #[error("malformed series key {0:?}")]
    Malformed(String),
}

impl SeriesKey {
    /// Builds a key; tags are sorted by key. Empty tag values are dropped (as InfluxDB does).
    pub fn new(
        measurement: impl Into<String>,
        tags: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
        field: impl Into<String>,
    ) -> Result<Self, SeriesKeyError> {
        let measurement = measurement.into();
        let field = field.into();
        if measurement.is_empty() {
            return Err(SeriesKeyError::EmptyMeasurement);
        }
        if field.is_empty() {
            return Err(SeriesKeyError::EmptyField);
        }
        let mut tags: Vec<(String, String)> = tags.into_iter().map(|(k, v)| (k.into(), v.into())).filter(|(_, v)| !v.is_empty()).collect();
        tags.sort();
        for pair in tags.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(SeriesKeyError::DuplicateTag(pair[0].0.clone()));
            }
        }
        if tags.iter().any(|(k, _)| k.is_empty()) {
            return Err(SeriesKeyError::EmptyTagKey);
        }
        Ok(SeriesKey { database: DEFAULT_DATABASE.to_string(), measurement, tags, field })
    }

    /// The same series in database `database` (databases are separate namespaces).
    pub fn in_database(mut self, database: impl Into<String>) -> Result<Self, SeriesKeyError> {
        let database = database.into();
        if database.is_empty() {
            return Err(SeriesKeyError::EmptyDatabase);
        }
        self.database = database;
        Ok(self)
    }

    pub fn database(&self) -> &str {
        &self.database
    }
    pub fn measurement(&self) -> &str {
        &self.measurement
    }
    pub fn tags(&self) -> &[(String, String)] {
        &self.tags
    }
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The canonical text form, line-protocol style: `measurement,tag=value,... field`,
    /// preceded by `database ` unless the series is in [`DEFAULT_DATABASE`]. Commas, spaces,
    /// equals signs and backslashes inside names are escaped with a backslash.
    pub fn canonical(&self) -> String {
        let mut out = String::with_capacity(64);
        if self.database != DEFAULT_DATABASE {
            escape_into(&self.database, &mut out);
            out.push(' ');
        }
        escape_into(&self.measurement, &mut out);
        for (k, v) in &self.tags {
            out.push(',');
            escape_into(k, &mut out);
            out.push('=');
            escape_into(v, &mut out);
        }
        out.push(' ');
        escape_into(&self.field, &mut out);
        out
    }

    /// The canonical form without the database: `measurement,tag=value,... field`.
    pub fn series_text(&self) -> String {
        let mut out = self.canonical();
        if self.database != DEFAULT_DATABASE {
            // The database part is everything up to the first unescaped space.
            let cut = split_unescaped(&out, ' ')[0].len() + 1;
            out.drain(..cut);
        }
        out
    }

    /// Parses the form written by [`SeriesKey::canonical`].
    pub fn parse(text: &str) -> Result<Self, SeriesKeyError> {
        let malformed = || SeriesKeyError::Malformed(text.to_string());
        let mut parts = split_unescaped(text, ' ');
        let database = match parts.len() {
            2 => None,
            3 => Some(unescape(parts.remove(0))),
            _ => return Err(malformed()),
        };
        let field = unescape(parts[1]);
        let series = split_unescaped(parts[0], ',');
        let measurement = unescape(series[0]);
        let mut tags = Vec::with_capacity(series.len() - 1);
        for tag in &series[1..] {
            let kv = split_unescaped(tag, '=');
            if kv.len() != 2 || kv[1].is_empty() {
                return Err(malformed());
            }
            tags.push((unescape(kv[0]), unescape(kv[1])));
        }
        let key = SeriesKey::new(measurement, tags, field)?;
        match database {
            Some(database) => key.in_database(database),
            None => Ok(key),
        }
    }
}

/// A canonical key text taken apart in place, without copying or unescaping: the parts of the
/// text [`SeriesKey::canonical`] writes, for texts that need no escapes (names without `,`, ` `,
/// `=` or `\`, which is nearly every key). Loading a catalog or listing millions of series
/// parsed every key into seven allocations only to read its database or compare its tags; a
/// caller takes this first and falls back to [`SeriesKey::parse`] when it is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyText<'a> {
    database: &'a str,
    measurement: &'a str,
    /// `,key=value` pairs back to back, sorted by key (empty without tags).
    tags: &'a str,
    field: &'a str,
}

impl<'a> KeyText<'a> {
    /// The parts of `text` when it is the canonical text of a key and holds no backslash;
    /// `None` otherwise (an escaped text, or not a canonical text at all: parse it).
    pub fn split(text: &'a str) -> Option<KeyText<'a>> {
        // Byte loops, one pass over each part: a catalog load and a series list split millions
        // of texts, and a `str` search per separator cost several times the pass.
        let bytes = text.as_bytes();
        let (mut first_space, mut second_space) = (None, None);
        for (at, &byte) in bytes.iter().enumerate() {
            match byte {
                b'\\' => return None,
                b' ' if first_space.is_none() => first_space = Some(at),
                b' ' if second_space.is_none() => second_space = Some(at),
                b' ' => return None,
                _ => {}
            }
        }
        let plain = |name: &[u8]| !name.is_empty() && !name.iter().any(|&b| b == b',' || b == b'=');
        let first_space = first_space?;
        let (database, series, field) = match second_space {
            Some(second_space) => {
                let database = &text[..first_space];
                // The default database is left out of a canonical text.
                if database == DEFAULT_DATABASE || !plain(database.as_bytes()) {
                    return None;
                }
                (database, &text[first_space + 1..second_space], &text[second_space + 1..])
            }
            None => (DEFAULT_DATABASE, &text[..first_space], &text[first_space + 1..]),
        };
        if !plain(field.as_bytes()) {
            return None;
        }
        let series_bytes = series.as_bytes();
        let end = series_bytes.len();
        let mut at = series_bytes.iter().position(|&b| b == b',').unwrap_or(end);
        if !plain(&series_bytes[..at]) {
            return None;
        }
        let (measurement, tags) = series.split_at(at);
        // Each `,key=value`: both parts non-empty, no `=` in the value, keys ascending (as
        // `SeriesKey::new` sorts them) and so distinct.
        let mut key_before: &[u8] = &[];
        while at < end {
            let key_start = at + 1;
            let equals = scan_to(series_bytes, key_start, b'=', b',')?;
            let key = &series_bytes[key_start..equals];
            if equals == end || key.is_empty() || (!key_before.is_empty() && key_before >= key) {
                return None;
            }
            let value_end = scan_to(series_bytes, equals + 1, b',', b'=')?;
            if value_end == equals + 1 {
                return None;
            }
            key_before = key;
            at = value_end;
        }
        Some(KeyText { database, measurement, tags, field })
    }

    pub fn database(&self) -> &'a str {
        self.database
    }
    pub fn measurement(&self) -> &'a str {
        self.measurement
    }
    /// The tag pairs as text, `,key=value` each, sorted by key: equal tag sets have equal
    /// texts.
    pub fn tags_text(&self) -> &'a str {
        self.tags
    }
    /// The tags, sorted by key.
    pub fn tags(&self) -> impl Iterator<Item = (&'a str, &'a str)> + Clone + 'a {
        self.tags.split(',').skip(1).map(|pair| pair.split_once('=').expect("BUG: KeyText::split checked every pair"))
    }
    pub fn field(&self) -> &'a str {
        self.field
    }
}

/// Where the first `stop` at or after `from` lies in `bytes` (their end without one); `None`
/// when `refused` comes first.
fn scan_to(bytes: &[u8], from: usize, stop: u8, refused: u8) -> Option<usize> {
    for (at, &byte) in bytes.iter().enumerate().skip(from) {
        if byte == stop {
            return Some(at);
        }
        if byte == refused {
            return None;
        }
    }
    Some(bytes.len())
}

impl fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        if matches!(c, ',' | ' ' | '=' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
}

fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == separator {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut escaped = false;
    for c in text.chars() {
        if !escaped && c == '\\' {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tags_are_sorted_and_canonical_form_is_stable() {
        let key = SeriesKey::new("readings", [("name", "truck_1"), ("fleet", "South")], "velocity").expect("valid key");
        assert_eq!(key.canonical(), "readings,fleet=South,name=truck_1 velocity");
        assert_eq!(key.tag("name"), Some("truck_1"));
    }

    #[test]
    fn databases_are_namespaces_and_the_default_is_left_out_of_the_text() {
        let plain = SeriesKey::new("m", [("a", "1")], "f").expect("valid key");
        assert_eq!(plain.database(), DEFAULT_DATABASE);
        let other = plain.clone().in_database("plant 7").expect("valid database");
        assert_ne!(plain, other, "the same key in two databases is two series");
        assert_eq!(other.canonical(), "plant\\ 7 m,a=1 f");
        assert_eq!(other.series_text(), "m,a=1 f");
        assert_eq!(plain.series_text(), "m,a=1 f");
        assert_eq!(SeriesKey::parse("plant\\ 7 m,a=1 f"), Ok(other));
        assert_eq!(SeriesKey::parse("default m,a=1 f"), Ok(plain.clone()));
        assert_eq!(plain.clone().in_database(""), Err(SeriesKeyError::EmptyDatabase));
        assert!(SeriesKey::parse("a b c d").is_err());
    }

    #[test]
    fn duplicate_and_empty_parts_are_rejected() {
        assert_eq!(SeriesKey::new("m", [("a", "1"), ("a", "2")], "f"), Err(SeriesKeyError::DuplicateTag("a".into())));
        assert_eq!(SeriesKey::new("", [("a", "1")], "f"), Err(SeriesKeyError::EmptyMeasurement));
        assert_eq!(SeriesKey::new("m", [("a", "1")], ""), Err(SeriesKeyError::EmptyField));
    }

    #[test]
    fn key_text_takes_canonical_texts_apart_and_refuses_the_rest() {
        let text = KeyText::split("plant m,a=1,b=2 f").expect("canonical");
        assert_eq!((text.database(), text.measurement(), text.tags_text(), text.field()), ("plant", "m", ",a=1,b=2", "f"));
        assert_eq!(text.tags().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
        let plain = KeyText::split("m f").expect("canonical");
        assert_eq!((plain.database(), plain.measurement(), plain.tags_text()), (DEFAULT_DATABASE, "m", ""));
        assert_eq!(plain.tags().count(), 0);
        for refused in [
            "default m f", // the default database is left out
            "m,b=1,a=2 f", // tags out of order
            "m,a=1,a=2 f", // a tag twice
            "m,a= f",      // an empty value
            "m,=1 f",      // an empty key
            "m,a=1=2 f",   // an unescaped `=` in a value
            "m=x f",       // ... in a measurement
            "m f=x",       // ... in a field
            "d,x m f",     // an unescaped `,` in a database
            "m f,x",       // ... in a field
            "m, f",        // an empty pair
            "m,a,b=1 f",   // a pair without `=`
            "m\\ x f",     // escaped: parse it
            "a b c d",
            "m",
            " m f",
            "m f ",
        ] {
            assert_eq!(KeyText::split(refused), None, "{refused:?}");
        }
    }

    /// Mostly a plain name, else one of `odd` (`|`-separated choices).
    fn name(odd: &'static str) -> impl Strategy<Value = String> {
        prop_oneof![4 => "[ab]{1,2}", 1 => proptest::string::string_regex(odd).expect("regex")]
    }

    proptest! {
        #[test]
        fn canonical_form_round_trips(
            measurement in "[a-z ,=\\\\]{1,8}",
            tags in proptest::collection::btree_map("[a-z ,=\\\\]{1,6}", "[A-Z0-9 ,=\\\\]{1,6}", 0..4),
            field in "[a-z ,=\\\\]{1,8}",
            database in proptest::option::of("[a-z ,=\\\\]{1,8}"),
        ) {
            let mut key = SeriesKey::new(measurement, tags, field).expect("valid key");
            if let Some(database) = database {
                key = key.in_database(database).expect("valid database");
            }
            prop_assert_eq!(SeriesKey::parse(&key.canonical()).expect("parses"), key);
        }

        /// A text `KeyText::split` takes apart is the canonical text of the key it names, part
        /// for part; and every canonical text without a backslash is taken apart.
        #[test]
        fn key_text_agrees_with_parse(
            database in proptest::option::of(name("default|d|e,")),
            measurement in name("a="),
            tags in proptest::collection::vec((name("a|b|"), name("a=b|")), 0..4),
            field in name("a,|="),
        ) {
            let mut text = database.map(|d| format!("{d} ")).unwrap_or_default() + &measurement;
            for (key, value) in &tags {
                text.push_str(&format!(",{key}={value}"));
            }
            text.push(' ');
            text.push_str(&field);
            let split = KeyText::split(&text);
            let parsed = SeriesKey::parse(&text).ok();
            let canonical = parsed.as_ref().is_some_and(|key| key.canonical() == text);
            prop_assert_eq!(split.is_some(), canonical, "{:?}: {:?} {:?}", text, split, parsed);
            if let (Some(split), Some(key)) = (split, parsed) {
                prop_assert_eq!(split.database(), key.database());
                prop_assert_eq!(split.measurement(), key.measurement());
                prop_assert_eq!(split.field(), key.field());
                let tags: Vec<(String, String)> = split.tags().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                prop_assert_eq!(tags.as_slice(), key.tags());
            }
        }
    }
}
