//! Access tokens with read and write scopes.
//!
//! A request presents a token (HTTP: `Authorization: Token <t>` or `Bearer <t>`, or the v1 `p`
//! query parameter; native protocol: the handshake). Tokens are compared in constant time.

use serde::Deserialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub token: String,
    pub scopes: Vec<Scope>,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No token, or an unknown one (HTTP 401).
    #[error("missing or unknown token")]
    Unauthenticated,
    /// A known token without the scope (HTTP 403).
    #[error("token lacks the {0:?} scope")]
    Forbidden(Scope),
}

/// The configured tokens. Empty means open access.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    tokens: Vec<TokenConfig>,
}

impl Tokens {
    pub fn new(tokens: Vec<TokenConfig>) -> Self {
        Tokens { tokens }
    }

    pub fn is_open(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Checks that `presented` carries `scope`.
    pub fn check(&self, presented: Option<&str>, scope: Scope) -> Result<(), AuthError> {
        if self.is_open() {
            return Ok(());
        }
        let presented = presented.ok_or(AuthError::Unauthenticated)?;
        // Look at every token, so the time taken does not tell which one matched.
        let mut found: Option<&TokenConfig> = None;
        for token in &self.tokens {
            if constant_time_eq(token.token.as_bytes(), presented.as_bytes()) {
                found = Some(token);
            }
        }
        let token = found.ok_or(AuthError::Unauthenticated)?;
        if token.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(AuthError::Forbidden(scope))
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens::new(vec![
            TokenConfig { token: "writer".into(), scopes: vec![Scope::Write] },
            TokenConfig { token: "reader".into(), scopes: vec![Scope::Read] },
        ])
    }

    #[test]
    fn scopes_are_enforced() {
        let tokens = tokens();
        assert_eq!(tokens.check(Some("writer"), Scope::Write), Ok(()));
        assert_eq!(tokens.check(Some("writer"), Scope::Read), Err(AuthError::Forbidden(Scope::Read)));
        assert_eq!(tokens.check(Some("reader"), Scope::Read), Ok(()));
        assert_eq!(tokens.check(Some("nobody"), Scope::Read), Err(AuthError::Unauthenticated));
        assert_eq!(tokens.check(None, Scope::Write), Err(AuthError::Unauthenticated));
    }

    #[test]
    fn no_tokens_means_open_access() {
        assert_eq!(Tokens::default().check(None, Scope::Write), Ok(()));
    }
}
