//! The query string's parameters, in order, as every endpoint reads them (`db`, `q`, `p`, ...).
//!
//! Decoded here in one pass over the bytes rather than by axum's `Query` extractor: its path
//! (`serde_urlencoded` under `serde_path_to_error`, over `form_urlencoded`, which copies each
//! part to replace `+`, then percent-decodes it byte by byte through iterators, then checks its
//! UTF-8) cost about 9,000 instructions a request, a sixth of a one-truck TSBS lookup's whole
//! query work, to decode a 250-byte query string. The decoding is `form_urlencoded`'s exactly
//! (`&`-separated pairs, empty ones skipped, the name ending at the first `=`, `+` a space,
//! `%XX` an escape, a bad escape kept as it is, invalid UTF-8 replaced), as a property test
//! checks against the crate; neither can fail on a string.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use std::convert::Infallible;

/// The decoded `name=value` pairs of a request's query string, in their order (a name may
/// repeat; readers take its first).
#[derive(Debug, Default)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn of_query(query: &str) -> Params {
        let pairs = query
            .as_bytes()
            .split(|&b| b == b'&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (name, value) = match pair.iter().position(|&b| b == b'=') {
                    Some(at) => (&pair[..at], &pair[at + 1..]),
                    None => (pair, &[][..]),
                };
                (decode(name), decode(value))
            })
            .collect();
        Params(pairs)
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// One form-encoded part: `+` is a space, `%` and two hex digits the byte they spell.
fn decode(part: &[u8]) -> String {
    let mut out = Vec::with_capacity(part.len());
    let mut i = 0;
    while i < part.len() {
        let byte = part[i];
        match byte {
            b'+' => out.push(b' '),
            b'%' => match (part.get(i + 1).and_then(|&h| hex(h)), part.get(i + 2).and_then(|&l| hex(l))) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            _ => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Params, Infallible> {
        Ok(Params::of_query(parts.uri.query().unwrap_or("")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_decode_as_a_form_does() {
        let params = Params::of_query("q=SELECT+%22a%22+FROM+m%3B&db=x&db=y&flag&e=%ZZ&u=%C3%A9");
        assert_eq!(params.get("q"), Some("SELECT \"a\" FROM m;"));
        assert_eq!(params.get("db"), Some("x"), "the first of a repeated name");
        assert_eq!(params.get("flag"), Some(""));
        assert_eq!(params.get("e"), Some("%ZZ"), "a bad escape stays as it is");
        assert_eq!(params.get("u"), Some("é"));
        assert_eq!(params.get("missing"), None);
        assert_eq!(params.0.len(), 6);
        // The pairs serde_urlencoded gave for the same text.
        let via_serde: Vec<(String, String)> =
            serde_urlencoded::from_str("q=SELECT+%22a%22+FROM+m%3B&db=x&db=y&flag&e=%ZZ&u=%C3%A9").expect("decodes");
        assert_eq!(params.0, via_serde);
    }

    fn as_form_urlencoded_decodes(query: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(query.as_bytes()).into_owned().collect()
    }

    #[test]
    fn edges_decode_as_form_urlencoded_does() {
        for query in
            ["", "&", "&&a", "=", "==", "a==b", "%", "%4", "%4g", "%%41", "a%3", "+%2B+", "%C3", "%C3%A9%FF", "x=%E2%82", "é=ü&a b=c"]
        {
            assert_eq!(Params::of_query(query).0, as_form_urlencoded_decodes(query), "{query:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_query_string_decodes_as_form_urlencoded_does(query in "([a-zA-Z0-9=&+%éü ]|%[0-9a-fA-FgG]{0,2}){0,40}") {
            proptest::prop_assert_eq!(Params::of_query(&query).0, as_form_urlencoded_decodes(&query));
        }
    }
}
