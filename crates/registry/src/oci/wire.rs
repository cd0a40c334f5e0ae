//! The OCI distribution API as Murmur speaks it: every body read bounded, and credentials sent
//! only where they are bound.
//!
//! What this module promises:
//!
//! - **Bounded reads.** An image manifest or index is read to at most [`MAX_MANIFEST_BYTES`]
//!   (4 MiB), a tag list to [`MAX_TAG_LIST_BYTES`], a token endpoint's answer to
//!   [`MAX_TOKEN_BYTES`]: a `Content-Length` over the cap is refused before any byte is read,
//!   a body that grows past it is refused as the byte over the cap arrives and the connection
//!   dropped ([`WireError::TooLarge`]). Error answers are never read; blobs are streamed to the
//!   caller, which reads no further than the size the manifest gives.
//! - **The bearer-token dance, with credentials bound to hosts.** A request is sent with what
//!   the session already holds (a `MURMUR_REGISTRY_TOKEN` as `Bearer` from the first request,
//!   else nothing). On `401` the registry's `WWW-Authenticate` challenge decides: `Basic` gets
//!   the registry's own user name and password; `Bearer realm=…` gets a token from the realm,
//!   asked with a user name and password only when one is bound to the realm's host (the
//!   registry's own, when the realm is on the registry's host and scheme) and the realm is
//!   HTTPS or on loopback; otherwise the token is asked for anonymously. Nothing is sent to a
//!   host the credentials are not bound to, and a redirect to another host carries no
//!   `Authorization`.
//! - **Uploads** go where the registry's `Location` says; a `Location` on another host gets
//!   no credentials.

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::StreamExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use http::{HeaderValue, StatusCode};

use super::credentials::{CredentialSources, Credentials};
use super::host::{host_key, is_loopback_host, url_host_key};

/// The largest image manifest or index read: 4 MiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
/// The largest tag list read.
pub const MAX_TAG_LIST_BYTES: u64 = 4 * 1024 * 1024;
/// The largest token-endpoint answer read.
pub const MAX_TOKEN_BYTES: u64 = 256 * 1024;
/// The most challenges, and parameters of one, read from a `WWW-Authenticate` header.
const MAX_CHALLENGES: usize = 16;
const MAX_PARAMS: usize = 32;

/// Why a request to a registry failed.
#[derive(Debug)]
pub(crate) enum WireError {
    /// `401`/`403`: `sent` names the credentials presented (to the registry or its realm),
    /// `None` when none were.
    Unauthorized {
        sent: Option<&'static str>,
        /// The realm's host, when the registry named a realm on another host and no credential
        /// is bound to it.
        unbound_realm: Option<String>,
    },
    /// A body over its cap.
    TooLarge {
        what: &'static str,
        limit: u64,
        length: Option<u64>,
    },
    /// Another status than the one expected.
    Status { status: u16, what: String },
    /// The answer is not what the API says it is.
    Malformed(String),
    /// No answer: connection, timeout, a broken stream.
    Transport(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Unauthorized { sent: None, .. } => {
                write!(f, "it asks for credentials, and none were sent")
            }
            WireError::Unauthorized {
                sent: Some(origin), ..
            } => write!(f, "it refused the credentials from {origin}"),
            WireError::TooLarge {
                what,
                limit,
                length: Some(length),
            } => write!(f, "its {what} is {length} bytes, over the limit of {limit}"),
            WireError::TooLarge { what, limit, .. } => {
                write!(f, "its {what} runs past the limit of {limit} bytes")
            }
            WireError::Status { status, what } => write!(f, "{what} answered HTTP {status}"),
            WireError::Malformed(detail) | WireError::Transport(detail) => f.write_str(detail),
        }
    }
}

impl From<reqwest::Error> for WireError {
    fn from(error: reqwest::Error) -> WireError {
        WireError::Transport(crate::answer::error_chain(&error))
    }
}

/// One authentication challenge of a `WWW-Authenticate` header: its scheme (lowercase) and
/// parameters (names lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of parameter `name` (lowercase).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The challenges of a `WWW-Authenticate` header value (RFC 9110 §11.6.1: `scheme` then
/// `name=value` or `name="quoted"` parameters, comma-separated; several challenges
/// comma-separated too). What cannot be read is skipped; at most 16 challenges of 32
/// parameters each.
pub fn parse_challenges(value: &str) -> Vec<Challenge> {
    let mut challenges: Vec<Challenge> = Vec::new();
    for item in split_outside_quotes(value) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (head, rest) = match item.find([' ', '\t']) {
            Some(at) => (&item[..at], item[at..].trim_start()),
            None => (item, ""),
        };
        let param = if head.contains('=') {
            Some(item)
        } else {
            if challenges.len() == MAX_CHALLENGES {
                break;
            }
            challenges.push(Challenge {
                scheme: head.to_ascii_lowercase(),
                params: Vec::new(),
            });
            (!rest.is_empty()).then_some(rest)
        };
        let (Some(param), Some(current)) = (param, challenges.last_mut()) else {
            continue;
        };
        if let Some((name, value)) = parse_param(param)
            && current.params.len() < MAX_PARAMS
        {
            current.params.push((name, value));
        }
    }
    challenges
}

/// `text` split at the commas outside double quotes (a `\` escapes the next character inside).
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == ',' && !quoted {
            parts.push(&text[start..at]);
            start = at + 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `name=value` or `name="quoted \" value"`: the name lowercase and the value unescaped.
fn parse_param(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '"') {
        return None;
    }
    let value = value.trim();
    let value = match value.strip_prefix('"') {
        Some(quoted) => {
            let mut out = String::new();
            let mut chars = quoted.chars();
            loop {
                match chars.next()? {
                    '\\' => out.push(chars.next()?),
                    '"' => break,
                    c => out.push(c),
                }
            }
            out
        }
        None => value.to_string(),
    };
    Some((name.to_ascii_lowercase(), value))
}

/// Reads `response`'s body, refusing it past `limit` bytes (see the module docs).
pub(crate) async fn read_bounded(
    response: reqwest::Response,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, WireError> {
    if let Some(length) = response.content_length()
        && length > limit
    {
        return Err(WireError::TooLarge {
            what,
            limit,
            length: Some(length),
        });
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(WireError::TooLarge {
                what,
                limit,
                length: None,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a request is for: pulling, or pushing too (the token scope).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Pull,
    Push,
}

/// A conversation with one registry: its client, its credentials, the authorizations it has
/// earned (by token scope).
pub(crate) struct Session {
    http: reqwest::Client,
    /// `http://HOST` or `https://HOST`.
    base: String,
    /// The registry's host as compared ([`host_key`]).
    key: String,
    scheme: &'static str,
    credentials: Credentials,
    sources: CredentialSources,
    earned: Mutex<HashMap<String, HeaderValue>>,
}

impl Session {
    pub(crate) fn new(
        host: &str,
        credentials: Credentials,
        sources: CredentialSources,
        connect_timeout: std::time::Duration,
        stall_timeout: std::time::Duration,
    ) -> Result<Session, WireError> {
        // reqwest's rustls backend uses the process's default crypto provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = is_loopback_host(host);
        let scheme = if loopback { "http" } else { "https" };
        let key = host_key(host).map_err(WireError::Malformed)?;
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else if attempt.url().scheme() == "http"
                && attempt.previous().iter().any(|u| u.scheme() == "https")
            {
                attempt.error("a redirect from HTTPS to HTTP")
            } else {
                attempt.follow()
            }
        });
        let mut builder = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .read_timeout(stall_timeout)
            .redirect(redirects);
        if loopback {
            builder = builder.no_proxy();
        }
        Ok(Session {
            http: builder.build()?,
            base: format!("{scheme}://{host}"),
            key,
            scheme,
            credentials,
            sources,
            earned: Mutex::new(HashMap::new()),
        })
    }

    fn scope(repository: &str, access: Access) -> String {
        match access {
            Access::Pull => format!("repository:{repository}:pull"),
            Access::Push => format!("repository:{repository}:pull,push"),
        }
    }

    /// What is presented for `scope` now.
    fn authorization(&self, scope: &str) -> Option<HeaderValue> {
        if let Credentials::Bearer { token, .. } = &self.credentials {
            return HeaderValue::from_str(&format!("Bearer {token}"))
                .ok()
                .map(sensitive);
        }
        self.earned
            .lock()
            .ok()
            .and_then(|earned| earned.get(scope).cloned())
    }

    /// Sends the request `make` builds for `repository`, authorizing on a `401` as the
    /// registry's challenge asks and sending it once more.
    async fn send(
        &self,
        repository: &str,
        access: Access,
        make: &(dyn Fn(&reqwest::Client) -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, WireError> {
        let scope = Session::scope(repository, access);
        let presented = self.authorization(&scope);
        let mut request = make(&self.http);
        if let Some(value) = &presented {
            request = request.header(AUTHORIZATION, value.clone());
        }
        let response = request.send().await?;
        if !matches!(
            response.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            return Ok(response);
        }
        let sent = presented.as_ref().map(|_| self.credentials.origin());
        if response.status() == StatusCode::FORBIDDEN || presented.is_some() {
            return Err(WireError::Unauthorized {
                sent,
                unbound_realm: None,
            });
        }
        let challenges: Vec<Challenge> = response
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(parse_challenges)
            .collect();
        drop(response);
        let (value, sent, unbound_realm) = self.authorize(&challenges, &scope).await?;
        if let Ok(mut earned) = self.earned.lock() {
            earned.insert(scope.clone(), value.clone());
        }
        let response = make(&self.http).header(AUTHORIZATION, value).send().await?;
        if matches!(
            response.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            return Err(WireError::Unauthorized {
                sent,
                unbound_realm,
            });
        }
        Ok(response)
    }

    /// The `Authorization` the challenges ask for `scope`, the credentials it carries, and the
    /// realm's host when credentials were held back from it.
    async fn authorize(
        &self,
        challenges: &[Challenge],
        scope: &str,
    ) -> Result<(HeaderValue, Option<&'static str>, Option<String>), WireError> {
        let bearer = challenges
            .iter()
            .find(|c| c.scheme == "bearer" && c.param("realm").is_some());
        let Some(bearer) = bearer else {
            // Basic (or a challenge not understood): the registry's own user name and password.
            return match &self.credentials {
                Credentials::Basic {
                    username,
                    password,
                    origin,
                } => Ok((basic(username, password), Some(*origin), None)),
                _ => Err(WireError::Unauthorized {
                    sent: None,
                    unbound_realm: None,
                }),
            };
        };
        let realm = bearer.param("realm").unwrap_or_default();
        let realm = url::Url::parse(realm)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
            .ok_or_else(|| {
                WireError::Malformed(format!(
                    "its token realm `{}` is not an http(s) URL",
                    realm.escape_debug()
                ))
            })?;
        let realm_key = url_host_key(&realm).unwrap_or_default();
        let realm_loopback = is_loopback_host(&realm_key);
        let safe_channel = realm.scheme() == "https" || realm_loopback;
        let own_host = realm_key == self.key && realm.scheme() == self.scheme;
        let credentials = if !safe_channel {
            Credentials::Anonymous
        } else if own_host {
            self.credentials.clone()
        } else {
            // Bound to the realm's host, or nothing.
            self.sources
                .find(&realm_key)
                .unwrap_or(Credentials::Anonymous)
        };
        let mut query: Vec<(&str, &str)> = vec![("scope", scope)];
        if let Some(service) = bearer.param("service") {
            query.push(("service", service));
        }
        let mut request = self.http.get(realm.clone()).query(&query);
        let sent = match &credentials {
            Credentials::Basic {
                username,
                password,
                origin,
            } => {
                request = request.header(AUTHORIZATION, basic(username, password));
                Some(*origin)
            }
            _ => None,
        };
        let unbound_realm =
            (!own_host && sent.is_none() && self.credentials.is_some()).then(|| realm_key.clone());
        let response = request.send().await?;
        match response.status() {
            status if status.is_success() => {}
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(WireError::Unauthorized {
                    sent,
                    unbound_realm,
                });
            }
            status => {
                return Err(WireError::Status {
                    status: status.as_u16(),
                    what: "its token realm".to_string(),
                });
            }
        }
        let body = read_bounded(response, MAX_TOKEN_BYTES, "token answer").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|e| WireError::Malformed(format!("its token answer is not JSON: {e}")))?;
        let token = token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| WireError::Malformed("its token answer holds no token".to_string()))?;
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| WireError::Malformed("its token is not a header value".to_string()))?;
        Ok((sensitive(value), sent, unbound_realm))
    }

    /// The manifest `reference` (a tag or `sha256:` digest) of `repository`, or `None` when the
    /// registry has none there; at most [`MAX_MANIFEST_BYTES`].
    pub(crate) async fn manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &str,
    ) -> Result<Option<Vec<u8>>, WireError> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let response = self
            .send(repository, Access::Pull, &|http| {
                http.get(&url).header(ACCEPT, accept)
            })
            .await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => read_bounded(response, MAX_MANIFEST_BYTES, "manifest")
                .await
                .map(Some),
            status => Err(WireError::Status {
                status: status.as_u16(),
                what: "the manifest".to_string(),
            }),
        }
    }

    /// The tags of `repository` (none when it has none); at most [`MAX_TAG_LIST_BYTES`].
    pub(crate) async fn tags(&self, repository: &str) -> Result<Vec<String>, WireError> {
        let url = format!("{}/v2/{repository}/tags/list", self.base);
        let response = self
            .send(repository, Access::Pull, &|http| http.get(&url))
            .await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(Vec::new()),
            status if status.is_success() => {
                let body = read_bounded(response, MAX_TAG_LIST_BYTES, "tag list").await?;
                #[derive(serde::Deserialize)]
                struct Tags {
                    tags: Option<Vec<String>>,
                }
                let tags: Tags = serde_json::from_slice(&body)
                    .map_err(|e| WireError::Malformed(format!("its tag list is not one: {e}")))?;
                Ok(tags.tags.unwrap_or_default())
            }
            status => Err(WireError::Status {
                status: status.as_u16(),
                what: "the tag list".to_string(),
            }),
        }
    }

    /// The blob `digest` of `repository`, to be streamed by the caller.
    pub(crate) async fn blob(
        &self,
        repository: &str,
        digest: &str,
    ) -> Result<reqwest::Response, WireError> {
        let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
        let response = self
            .send(repository, Access::Pull, &|http| http.get(&url))
            .await?;
        if !response.status().is_success() {
            return Err(WireError::Status {
                status: response.status().as_u16(),
                what: format!("the blob {digest}"),
            });
        }
        Ok(response)
    }

    /// Uploads `bytes` as blob `digest` of `repository`, unless it is there already.
    pub(crate) async fn push_blob(
        &self,
        repository: &str,
        digest: &str,
        bytes: bytes::Bytes,
    ) -> Result<(), WireError> {
        let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
        let there = self
            .send(repository, Access::Push, &|http| http.head(&url))
            .await?;
        if there.status().is_success() {
            return Ok(());
        }
        let start = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let started = self
            .send(repository, Access::Push, &|http| {
                http.post(&start).header(http::header::CONTENT_LENGTH, "0")
            })
            .await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(WireError::Status {
                status: started.status().as_u16(),
                what: "starting an upload".to_string(),
            });
        }
        let location = started
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| WireError::Malformed("its upload has no Location".to_string()))?;
        let base = url::Url::parse(&start).map_err(|e| WireError::Malformed(e.to_string()))?;
        let mut upload = base
            .join(location)
            .map_err(|e| WireError::Malformed(format!("its upload Location is not a URL: {e}")))?;
        drop(started);
        upload.query_pairs_mut().append_pair("digest", digest);
        let put = |http: &reqwest::Client| {
            http.put(upload.clone())
                .header(CONTENT_TYPE, "application/octet-stream")
                .body(bytes.clone())
        };
        let same_host = url_host_key(&upload).as_deref() == Some(self.key.as_str())
            && upload.scheme() == self.scheme;
        let done = if same_host {
            self.send(repository, Access::Push, &put).await?
        } else {
            put(&self.http).send().await?
        };
        if !done.status().is_success() {
            return Err(WireError::Status {
                status: done.status().as_u16(),
                what: format!("uploading the blob {digest}"),
            });
        }
        Ok(())
    }

    /// Puts `manifest` (of `media_type`) at `tag` of `repository`.
    pub(crate) async fn put_manifest(
        &self,
        repository: &str,
        tag: &str,
        manifest: bytes::Bytes,
        media_type: &str,
    ) -> Result<(), WireError> {
        let url = format!("{}/v2/{repository}/manifests/{tag}", self.base);
        let done = self
            .send(repository, Access::Push, &|http| {
                http.put(&url)
                    .header(CONTENT_TYPE, media_type)
                    .body(manifest.clone())
            })
            .await?;
        if !done.status().is_success() {
            return Err(WireError::Status {
                status: done.status().as_u16(),
                what: format!("putting the manifest at {tag}"),
            });
        }
        Ok(())
    }
}

fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

fn basic(username: &str, password: &str) -> HeaderValue {
    use base64::Engine;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    HeaderValue::from_str(&format!("Basic {encoded}"))
        .map(sensitive)
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_as_registries_send_them() {
        let read = parse_challenges(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].scheme, "bearer");
        assert_eq!(read[0].param("realm"), Some("https://auth.example/token"));
        assert_eq!(read[0].param("service"), Some("registry.example"));
        assert_eq!(read[0].param("scope"), Some("repository:a/b:pull,push"));

        let read = parse_challenges(r#"Basic realm="murmur tests", Bearer Realm=x , error="a\"b""#);
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].scheme, "basic");
        assert_eq!(read[0].param("realm"), Some("murmur tests"));
        assert_eq!(read[1].param("realm"), Some("x"));
        assert_eq!(read[1].param("error"), Some("a\"b"));

        assert!(parse_challenges("").is_empty());
        assert_eq!(parse_challenges("Basic")[0].params, []);
        // An unterminated quote is no parameter.
        assert_eq!(
            parse_challenges(r#"Bearer realm="x"#)[0].param("realm"),
            None
        );
        let many = "Basic, ".repeat(100);
        assert_eq!(parse_challenges(&many).len(), MAX_CHALLENGES);
    }

    proptest::proptest! {
        #[test]
        fn no_header_makes_the_challenge_parser_panic(value in "\\PC{0,200}") {
            let _ = parse_challenges(&value);
        }

        #[test]
        fn quoted_realms_come_back_as_they_were(realm in "[ -~]{0,60}") {
            let escaped = realm.replace('\\', "\\\\").replace('"', "\\\"");
            let read = parse_challenges(&format!("Bearer realm=\"{escaped}\",service=\"s\""));
            proptest::prop_assert_eq!(read.len(), 1);
            proptest::prop_assert_eq!(read[0].param("realm"), Some(realm.as_str()));
            proptest::prop_assert_eq!(read[0].param("service"), Some("s"));
        }
    }
}
