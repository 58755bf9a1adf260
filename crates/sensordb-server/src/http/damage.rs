//! Damaged stored data met while answering a raw read (`/sensordb/points`, `/sensordb/graph`):
//! the answer goes on without the damaged block and names what is missing, in the JSON body
//! (`"damage": [messages]`, present only when something was left out) and in the header
//! `X-Sensordb-Damage` (both formats; CSV has no other place for it). InfluxQL answers carry the
//! same messages as `messages` of their result (see `influxql::engine_storage`).

use axum::http::HeaderValue;

/// The header naming damaged data left out of an answer.
pub const DAMAGE_HEADER: &str = "x-sensordb-damage";

/// Messages kept per answer: one damaged file can touch every series of a read.
const MESSAGES_MAX: usize = 16;

/// Longest header value, in bytes; the body holds the messages in full.
const HEADER_BYTES_MAX: usize = 2_048;

/// The damage one answer stepped over.
#[derive(Debug, Default)]
pub struct Damage {
    messages: Vec<String>,
    /// Damaged blocks left out, messages kept or not.
    count: usize,
}

impl Damage {
    /// Takes a read error of series `series`: damage is noted (the read goes on without the
    /// block); any other error is handed back.
    pub fn note(&mut self, series: &str, error: sensordb_engine::Error) -> Result<(), sensordb_engine::Error> {
        match error {
            sensordb_engine::Error::Corruption { .. } => {
                tracing::warn!(series, error = %error, "damaged block left out of an answer");
                self.count += 1;
                if self.messages.len() < MESSAGES_MAX {
                    self.messages.push(format!("points of {series} left out: {error}"));
                }
                Ok(())
            }
            other => Err(other),
        }
    }

    /// Damaged blocks left out.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn messages(&self) -> &[String] {
        &self.messages
    }

    /// `<n> damaged blocks left out: <message>; <message>…`, printable ASCII only, at most
    /// [`HEADER_BYTES_MAX`] bytes; `None` when nothing was left out.
    pub fn header(&self) -> Option<HeaderValue> {
        if self.is_empty() {
            return None;
        }
        let mut text = format!("{} damaged blocks left out: {}", self.count, self.messages.join("; "));
        text = text.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
        text.truncate(HEADER_BYTES_MAX);
        HeaderValue::from_str(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_is_noted_and_other_errors_handed_back() {
        let mut damage = Damage::default();
        assert!(damage.header().is_none());
        let corruption =
            sensordb_engine::Error::Corruption { path: "/d/segments/1.seg".into(), offset: 8192, detail: "bad\nblock é".into() };
        damage.note("m,s=1 v", corruption).expect("noted");
        assert!(damage.note("m,s=1 v", sensordb_engine::Error::Closed).is_err());
        assert_eq!(damage.messages().len(), 1);
        let header = damage.header().expect("header");
        let header = header.to_str().expect("ascii");
        assert!(
            header.starts_with("1 damaged blocks left out: points of m,s=1 v left out: corruption in /d/segments/1.seg at offset 8192"),
            "{header}"
        );
        assert!(header.ends_with("bad?block ?"), "{header}");
    }
}
