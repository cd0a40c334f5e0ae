//! Secrets presented to a server, compared so that the time taken tells nothing.
//!
//! What this module promises: [`same_secret`] compares the sha256 digests of both values in
//! constant time, so neither how long it takes nor whether the lengths differ tells a client
//! how close its guess came or how long the secret is. Every server behind the front compares
//! a presented credential through it alone.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The sha256 of a secret's value, the form a server may keep it in.
pub fn digest(value: &[u8]) -> [u8; 32] {
    Sha256::digest(value).into()
}

/// Whether `presented` is `expected`, in a time that depends on neither value nor length.
pub fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    same_digest(&digest(presented), &digest(expected))
}

/// Whether two digests of [`digest`] are equal, compared in constant time.
pub fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    bool::from(a.ct_eq(b))
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case); `None`
/// for another scheme or an empty token.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_value_is_the_same_secret_whatever_the_lengths() {
        assert!(same_secret(b"s3cret-token", b"s3cret-token"));
        assert!(!same_secret(b"s3cret-token", b"s3cret-tokem"));
        assert!(!same_secret(b"s3cret", b"s3cret-token"));
        assert!(!same_secret(b"", b"s3cret-token"));
    }

    #[test]
    fn a_bearer_token_is_read_from_its_scheme_only() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("  bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
