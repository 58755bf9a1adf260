//! Databases and their retention: a storage period and/or a capacity in bytes per database, and
//! per-series overrides of the period (by measurement and tags). Persisted in the data
//! directory's `databases` file, rewritten whole (temporary file, fsync, rename) on each change.
//!
//! File format, version 1 (UTF-8 text, one record per line; names are percent-encoded: every
//! byte outside `[A-Za-z0-9_.]` is written `%XX`):
//! ```text
//! sensordb-databases 1
//! database <name> period=<seconds or -> capacity=<bytes or ->
//! override <database> period=<seconds> measurement=<name or -> tags=<k>=<v>,... (or -)
//! crc32c <8 hex digits: CRC32C of every byte above this line>
//! ```

use crate::checksum::crc32c;

/// The file's name in the data directory.
pub const DATABASES_FILE: &str = "databases";
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::model::SeriesKey;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const HEADER: &str = "sensordb-databases 1";

/// A storage-period override for the series of one measurement and tag set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodOverride {
    /// `None` matches every measurement.
    pub measurement: Option<String>,
    /// Every `(key, value)` must be among the series' tags.
    pub tags: Vec<(String, String)>,
    pub period: Duration,
}

impl PeriodOverride {
    pub fn matches(&self, key: &SeriesKey) -> bool {
        self.measurement.as_deref().is_none_or(|m| key.measurement() == m) && self.tags.iter().all(|(k, v)| key.tag(k) == Some(v))
    }
}

/// Retention of one database. Data older than the period is dead; when the database holds more
/// than its capacity, its oldest data is dead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabasePolicy {
    pub period: Option<Duration>,
    pub capacity_bytes: Option<u64>,
    /// The first matching override decides a series' period.
    pub overrides: Vec<PeriodOverride>,
}

impl DatabasePolicy {
    /// The storage period of `key` (in this database): the first matching override, else the
    /// database's period; `None` keeps data until capacity runs out.
    pub fn period_of(&self, key: &SeriesKey) -> Option<Duration> {
        self.overrides.iter().find(|o| o.matches(key)).map(|o| o.period).or(self.period)
    }
}

/// All databases by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Databases {
    pub policies: BTreeMap<String, DatabasePolicy>,
}

impl Databases {
    pub fn encode(&self) -> String {
        let mut out = String::from(HEADER);
        out.push('\n');
        let optional = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        for (name, policy) in &self.policies {
            out.push_str(&format!(
                "database {} period={} capacity={}\n",
                encode_name(name),
                optional(policy.period.map(|p| p.as_secs())),
                optional(policy.capacity_bytes)
            ));
            for o in &policy.overrides {
                let tags = if o.tags.is_empty() {
                    "-".to_string()
                } else {
                    o.tags.iter().map(|(k, v)| format!("{}={}", encode_name(k), encode_name(v))).collect::<Vec<_>>().join(",")
                };
                out.push_str(&format!(
                    "override {} period={} measurement={} tags={}\n",
                    encode_name(name),
                    o.period.as_secs(),
                    o.measurement.as_deref().map_or("-".to_string(), encode_name),
                    tags
                ));
            }
        }
        let checksum = crc32c(out.as_bytes());
        out.push_str(&format!("crc32c {checksum:08x}\n"));
        out
    }

    /// Parses [`Databases::encode`]'s output; the error says what is wrong and at which byte.
    pub fn decode(text: &str) -> std::result::Result<Databases, (u64, String)> {
        let checksum_at = text.rfind("crc32c ").ok_or((0, "checksum line missing".to_string()))?;
        let stored = text[checksum_at + 7..].trim();
        let stored = u32::from_str_radix(stored, 16).map_err(|_| (checksum_at as u64, format!("bad checksum {stored:?}")))?;
        let body = &text[..checksum_at];
        if crc32c(body.as_bytes()) != stored {
            return Err((checksum_at as u64, "checksum mismatch".to_string()));
        }
        let mut databases = Databases::default();
        let mut offset = 0u64;
        for (number, line) in body.lines().enumerate() {
            let at = offset;
            offset += line.len() as u64 + 1;
            let bad = |what: &str| (at, format!("line {}: {what}: {line:?}", number + 1));
            if number == 0 {
                if line != HEADER {
                    return Err(bad("unknown header or version"));
                }
                continue;
            }
            let words: Vec<&str> = line.split(' ').collect();
            let field = |name: &str| words.iter().find_map(|w| w.strip_prefix(name).and_then(|w| w.strip_prefix('=')));
            let number_or_none = |name: &str| -> std::result::Result<Option<u64>, (u64, String)> {
                match field(name) {
                    Some("-") => Ok(None),
                    Some(v) => v.parse().map(Some).map_err(|_| bad(&format!("bad {name}"))),
                    None => Err(bad(&format!("{name} missing"))),
                }
            };
            match words.first().copied() {
                Some("database") if words.len() == 4 => {
                    let name = decode_name(words[1]).ok_or_else(|| bad("bad name"))?;
                    let policy = DatabasePolicy {
                        period: number_or_none("period")?.map(Duration::from_secs),
                        capacity_bytes: number_or_none("capacity")?,
                        overrides: Vec::new(),
                    };
                    databases.policies.insert(name, policy);
                }
                Some("override") if words.len() == 5 => {
                    let name = decode_name(words[1]).ok_or_else(|| bad("bad name"))?;
                    let period = number_or_none("period")?.ok_or_else(|| bad("an override needs a period"))?;
                    let measurement = match field("measurement") {
                        Some("-") => None,
                        Some(m) => Some(decode_name(m).ok_or_else(|| bad("bad measurement"))?),
                        None => return Err(bad("measurement missing")),
                    };
                    let tags = match field("tags") {
                        Some("-") => Vec::new(),
                        Some(list) => list
                            .split(',')
                            .map(|pair| {
                                let (k, v) = pair.split_once('=')?;
                                Some((decode_name(k)?, decode_name(v)?))
                            })
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| bad("bad tags"))?,
                        None => return Err(bad("tags missing")),
                    };
                    let policy = databases.policies.get_mut(&name).ok_or_else(|| bad("override of an unknown database"))?;
                    policy.overrides.push(PeriodOverride { measurement, tags, period: Duration::from_secs(period) });
                }
                _ => return Err(bad("unknown record")),
            }
        }
        Ok(databases)
    }

    /// Reads the file at `path`; an absent file is an empty set of databases.
    pub fn load(fs: &dyn FileSystem, path: &Path) -> Result<Databases> {
        if !fs.exists(path) {
            return Ok(Databases::default());
        }
        let file = fs.open_read(path).map_err(|e| Error::io(path, e))?;
        let bytes = file.read_all().map_err(|e| Error::io(path, e))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| Error::corruption(path, e.utf8_error().valid_up_to() as u64, "databases file is not UTF-8"))?;
        Databases::decode(&text).map_err(|(offset, what)| Error::corruption(path, offset, what))
    }

    /// Replaces the file at `path` atomically and durably.
    pub fn save(&self, fs: &dyn FileSystem, path: &Path) -> Result<()> {
        let temporary = path.with_extension("tmp");
        let text = self.encode();
        if fs.exists(&temporary) {
            fs.remove(&temporary).map_err(|e| Error::io(&temporary, e))?;
        }
        let file = fs.create(&temporary).map_err(|e| Error::io(&temporary, e))?;
        file.write_all_at(text.as_bytes(), 0).and_then(|()| file.sync_data()).map_err(|e| Error::io(&temporary, e))?;
        drop(file);
        fs.rename(&temporary, path).map_err(|e| Error::io(path, e))?;
        if let Some(dir) = path.parent() {
            fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }
}

fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        // '-' is escaped too: alone it means "none".
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    if out.is_empty() {
        // Never written (names are not empty), but keeps the line parseable.
        out.push('%');
    }
    out
}

fn decode_name(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Databases {
        let mut databases = Databases::default();
        databases.policies.insert("default".into(), DatabasePolicy::default());
        databases.policies.insert(
            "plant 7/ß".into(),
            DatabasePolicy {
                period: Some(Duration::from_secs(30 * 86_400)),
                capacity_bytes: Some(10 << 30),
                overrides: vec![
                    PeriodOverride { measurement: Some("debug".into()), tags: vec![], period: Duration::from_secs(3600) },
                    PeriodOverride { measurement: None, tags: vec![("line".into(), "a=b,c".into())], period: Duration::from_secs(60) },
                ],
            },
        );
        databases
    }

    #[test]
    fn databases_round_trip_through_the_text_form_and_the_file() {
        let databases = sample();
        assert_eq!(Databases::decode(&databases.encode()), Ok(databases.clone()));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("databases");
        assert_eq!(Databases::load(&crate::fs::RealFs, &path).expect("absent"), Databases::default());
        databases.save(&crate::fs::RealFs, &path).expect("save");
        assert_eq!(Databases::load(&crate::fs::RealFs, &path).expect("load"), databases);
    }

    #[test]
    fn a_changed_byte_is_reported_as_damage() {
        let text = sample().encode();
        let damaged = text.replacen("period=2592000", "period=2592001", 1);
        let (offset, what) = Databases::decode(&damaged).expect_err("damage detected");
        assert!(what.contains("checksum"), "{what}");
        assert_eq!(offset as usize, text.rfind("crc32c").expect("checksum line"));
    }

    #[test]
    fn the_first_matching_override_decides_the_period() {
        let policy = sample().policies["plant 7/ß"].clone();
        let key = |m: &str, tags: &[(&str, &str)]| SeriesKey::new(m, tags.iter().copied(), "f").expect("key");
        assert_eq!(policy.period_of(&key("debug", &[("line", "a=b,c")])), Some(Duration::from_secs(3600)));
        assert_eq!(policy.period_of(&key("temp", &[("line", "a=b,c")])), Some(Duration::from_secs(60)));
        assert_eq!(policy.period_of(&key("temp", &[("line", "x")])), Some(Duration::from_secs(30 * 86_400)));
    }

    proptest! {
        #[test]
        fn any_names_round_trip(name in "\\PC{1,12}", tag in "\\PC{1,6}", value in "\\PC{1,6}") {
            let mut databases = Databases::default();
            databases.policies.insert(name.clone(), DatabasePolicy {
                period: None,
                capacity_bytes: Some(1),
                overrides: vec![PeriodOverride { measurement: Some(name), tags: vec![(tag, value)], period: Duration::from_secs(1) }],
            });
            prop_assert_eq!(Databases::decode(&databases.encode()), Ok(databases));
        }

        #[test]
        fn garbage_never_panics(text in "\\PC{0,200}") {
            let _ = Databases::decode(&text);
        }
    }
}
