//! What one fetch asked for and what came back: the types the requests ([`crate::net`]) fill
//! in and the report ([`crate::Call::report`]) reads.

use serde::Deserialize;
use url::Url;

/// The request's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Method {
    #[default]
    #[serde(rename = "GET", alias = "get")]
    Get,
    #[serde(rename = "HEAD", alias = "head")]
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// One redirect taken: `from` answered `status` with a `Location`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub from: Url,
    pub status: u16,
}

/// How reading a body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The whole body was read.
    Complete,
    /// The body went on past `max_bytes`; reading stopped there.
    Cut,
    /// The call's deadline came first.
    TimedOut,
    /// The body broke off (the reason).
    Broke(String),
}

/// The final answer of a fetch.
#[derive(Debug, Clone)]
pub struct Response {
    /// The URL that answered (after redirects).
    pub url: Url,
    pub hops: Vec<Hop>,
    pub status: u16,
    /// Names lowercase, in the order received.
    pub headers: Vec<(String, String)>,
    /// The bytes read and how reading ended; `None` when the body was not read (HEAD, or a
    /// type that is described, not shown).
    pub body: Option<(Vec<u8>, Ending)>,
}

impl Response {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}
