//! Cheap tests on canonical key texts that let `Catalog::select` pass over keys that cannot
//! match without parsing them. Each test is a necessary condition only: a text that passes is
//! parsed and checked exactly.

use crate::model::{SeriesKey, DEFAULT_DATABASE};

/// What a matching text starts with: the escaped database and measurement.
pub(super) struct Prefix {
    text: Option<String>,
    /// The prefix ends a token (the measurement): the next character must be `,` or ` `.
    ends_token: bool,
}

impl Prefix {
    pub(super) fn new(database: Option<&str>, measurement: Option<&str>) -> Prefix {
        let none = Prefix { text: None, ends_token: false };
        let Some(database) = database else { return none };
        let Ok(key) = SeriesKey::new(measurement.unwrap_or("m"), std::iter::empty::<(&str, &str)>(), "f") else { return none };
        let Ok(key) = key.in_database(database) else { return none };
        let canonical = key.canonical();
        match measurement {
            // `[database ]measurement f`: cut the field.
            Some(_) => Prefix { text: canonical.strip_suffix(" f").map(str::to_string), ends_token: true },
            // The default database has no part of its own in the text.
            None if database == DEFAULT_DATABASE => none,
            // `database m f`: keep `database `.
            None => Prefix { text: canonical.strip_suffix("m f").map(str::to_string), ends_token: false },
        }
    }

    pub(super) fn may_match(&self, text: &str) -> bool {
        let Some(prefix) = &self.text else { return true };
        text.starts_with(prefix.as_str()) && (!self.ends_token || matches!(text.as_bytes().get(prefix.len()), Some(b',' | b' ')))
    }
}

/// The escaped `,key=value` a text holding tag `key` = `value` contains (`None` when the pair
/// cannot be written so, e.g. an empty value, which no key holds).
pub(super) fn pair_text(key: &str, value: &str) -> Option<String> {
    let canonical = SeriesKey::new("m", [(key, value)], "f").ok()?.canonical();
    let pair = canonical.strip_prefix('m')?.strip_suffix(" f")?;
    (!pair.is_empty()).then(|| pair.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(database: &str, measurement: &str, tags: &[(&str, &str)], field: &str) -> SeriesKey {
        SeriesKey::new(measurement, tags.iter().copied(), field).and_then(|k| k.in_database(database)).expect("valid key")
    }

    #[test]
    fn prefix_tells_measurements_apart() {
        let prefix = Prefix::new(Some("db"), Some("cpu"));
        assert!(prefix.may_match(&key("db", "cpu", &[("h", "a")], "u").canonical()));
        assert!(prefix.may_match(&key("db", "cpu", &[], "u").canonical()));
        assert!(!prefix.may_match(&key("db", "cpu2", &[], "u").canonical()));
        assert!(!prefix.may_match(&key("db", "cpu,x", &[], "u").canonical()), "an escaped comma is part of the name");
        assert!(!prefix.may_match(&key("other", "cpu", &[], "u").canonical()));
        assert!(!Prefix::new(Some("db"), None).may_match(&key("dc", "cpu", &[], "u").canonical()));
        assert!(Prefix::new(Some("db"), None).may_match(&key("db", "x", &[], "u").canonical()));
        assert!(Prefix::new(None, Some("cpu")).may_match("anything"), "no database: no prefix test");
    }

    #[test]
    fn pair_text_is_the_escaped_pair() {
        assert_eq!(pair_text("host", "a b").as_deref(), Some(",host=a\\ b"));
        assert_eq!(pair_text("host", ""), None);
    }

    proptest! {
        /// The tests never rule out a key that matches.
        #[test]
        fn never_rules_out_a_match(
            database in "[a-c ,=\\\\]{1,3}",
            measurement in "[a-c ,=\\\\]{1,3}",
            tags in proptest::collection::btree_map("[a-c ,=\\\\]{1,2}", "[a-c ,=\\\\]{1,2}", 0..3),
            field in "[a-c ,=\\\\]{1,2}",
        ) {
            let database = if database == "a" { DEFAULT_DATABASE.to_string() } else { database };
            let key = SeriesKey::new(measurement.clone(), tags.clone(), field).expect("valid").in_database(database.clone()).expect("valid");
            let text = key.canonical();
            prop_assert!(Prefix::new(Some(&database), Some(&measurement)).may_match(&text));
            prop_assert!(Prefix::new(Some(&database), None).may_match(&text));
            for (k, v) in &tags {
                let pair = pair_text(k, v).expect("non-empty value");
                prop_assert!(text.contains(pair.as_str()), "{} in {}", pair, text);
            }
        }
    }
}
