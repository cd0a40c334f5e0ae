//! Who may reach a server behind the front: the `Host` it is named by, the `Origin` of the page
//! that sent the request, and the `Content-Type` of what is sent.
//!
//! The rules, in the order they are checked (the first broken one answers):
//!
//! 1. **Host.** The server answers to the names it can be reached by. Bound to a loopback
//!    address: `localhost`, `127.0.0.1`, `[::1]` or the bound address, with the bound port
//!    (a `Host` without a port names the scheme's default port), or a name listed. Bound to
//!    any other address: any name, unless names are listed, then those and the bound address.
//!    A listed name without a port matches any port; with one, only that port. Names compare
//!    without case and without a trailing dot. A request without a `Host` is refused where
//!    names are checked. Refused: 403, -32600.
//! 2. **Origin.** Without an `Origin` header (not a browser, or a same-origin `GET`) the
//!    request passes. With one, it must be the server's own (the scheme the server speaks and
//!    the `Host` the request named) or one listed (`scheme://host[:port]`, the default port
//!    implied); `null` and anything else are refused: 403, -32600.
//! 3. **Content-Type.** `POST`, `PUT` and `PATCH` carry JSON: `application/json` or
//!    `application/<x>+json`, parameters aside. Anything else, or none: 415, -32005.
//!
//! A request from a listed origin other than the server's own is answered its CORS headers;
//! its preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered by the front.

use std::net::SocketAddr;

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};

/// A name a client may reach the server by, as the operator listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Name {
    host: String,
    /// `None`: any port.
    port: Option<u16>,
}

/// The front's rules for one server.
#[derive(Debug, Clone)]
pub struct Rules {
    bound: SocketAddr,
    tls: bool,
    hosts: Vec<Name>,
    /// Listed origins, normalized (`scheme://host:port`).
    origins: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    /// The JSON-RPC error code of the answer.
    pub code: i64,
    pub message: String,
}

impl Refusal {
    fn forbidden(message: String) -> Refusal {
        Refusal {
            status: StatusCode::FORBIDDEN,
            code: -32600,
            message,
        }
    }

    /// The answer: the refusal as a JSON-RPC error.
    pub fn response(&self) -> Response<Body> {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": self.code, "message": self.message },
        });
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A request the rules let through, with what its answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The listed origin (not the server's own) the request came from, to be answered CORS.
    cross_origin: Option<HeaderValue>,
}

/// The headers a listed origin's page may send.
const CORS_HEADERS: &str = "authorization, content-type, a2a-version, last-event-id, \
     mcp-session-id, mcp-protocol-version, traceparent, x-murmur-task-origin, x-murmur-task-trust";

impl Admitted {
    /// The answer to a CORS preflight from a listed origin; `None` for any other request.
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Response<Body>> {
        let origin = self.cross_origin.as_ref()?;
        if method != Method::OPTIONS || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return None;
        }
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let answer = response.headers_mut();
        answer.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        answer.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, DELETE"),
        );
        answer.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(CORS_HEADERS),
        );
        answer.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        answer.insert(header::VARY, HeaderValue::from_static("origin"));
        Some(response)
    }

    /// Adds the CORS headers a listed origin's answer carries.
    pub fn decorate(&self, answer: &mut HeaderMap) {
        if let Some(origin) = &self.cross_origin {
            answer.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            answer.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("mcp-session-id, www-authenticate"),
            );
            answer.append(header::VARY, HeaderValue::from_static("origin"));
        }
    }
}

impl Rules {
    /// The rules for a server bound at `bound` that answers to `hosts` (`name` or
    /// `name:port`) and the pages of `origins` (`scheme://host[:port]`) besides its own.
    /// Entries that cannot be read as such are left out (the manifest checks them).
    pub fn new(bound: SocketAddr, hosts: &[String], origins: &[String], tls: bool) -> Rules {
        Rules {
            bound,
            tls,
            hosts: hosts.iter().filter_map(|host| listed_name(host)).collect(),
            origins: origins
                .iter()
                .filter_map(|origin| normalized_origin(origin))
                .collect(),
        }
    }

    pub(crate) fn set_tls(&mut self, tls: bool) {
        self.tls = tls;
    }

    fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// Checks a request's method and headers against the rules.
    pub fn admit(&self, method: &Method, headers: &HeaderMap) -> Result<Admitted, Refusal> {
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok());
        self.check_host(host)?;
        let cross_origin = self.check_origin(headers.get(header::ORIGIN), host)?;
        let preflight = method == Method::OPTIONS && cross_origin.is_some();
        if !preflight && [Method::POST, Method::PUT, Method::PATCH].contains(method) {
            check_json(headers.get(header::CONTENT_TYPE))?;
        }
        Ok(Admitted { cross_origin })
    }

    fn check_host(&self, host: Option<&str>) -> Result<(), Refusal> {
        let loopback = self.bound.ip().is_loopback();
        if !loopback && self.hosts.is_empty() {
            return Ok(());
        }
        let refused = |shown: &str| {
            Refusal::forbidden(format!(
                "this server does not answer to the name `{shown}`: reach it by its address{}",
                if loopback {
                    " on loopback (a name the operator listed is taken too)"
                } else {
                    " or a name the operator listed"
                }
            ))
        };
        let Some(host) = host else {
            return Err(refused(""));
        };
        let shown: String = host.chars().take(128).collect();
        let Some((name, port)) = split_host(host) else {
            return Err(refused(&shown));
        };
        let port = port.unwrap_or(self.default_port());
        let listed = self
            .hosts
            .iter()
            .any(|entry| entry.host == name && entry.port.is_none_or(|p| p == port));
        let own_address = port == self.bound.port()
            && (name == bracketed(&self.bound.ip().to_string())
                || loopback && ["localhost", "127.0.0.1", "[::1]"].contains(&name.as_str()));
        if listed || own_address {
            Ok(())
        } else {
            Err(refused(&shown))
        }
    }

    fn check_origin(
        &self,
        origin: Option<&HeaderValue>,
        host: Option<&str>,
    ) -> Result<Option<HeaderValue>, Refusal> {
        let Some(value) = origin else {
            return Ok(None);
        };
        let text = value.to_str().unwrap_or_default();
        let refused = || {
            let shown: String = text.chars().take(128).collect();
            Refusal::forbidden(format!(
                "requests from the page at `{shown}` are not taken: only the server's own pages \
                 and the origins the operator listed may call it"
            ))
        };
        let origin = normalized_origin(text).ok_or_else(refused)?;
        let own = host
            .and_then(split_host)
            .map(|(name, port)| {
                format!(
                    "{}://{name}:{}",
                    self.scheme(),
                    port.unwrap_or(self.default_port())
                )
            })
            .is_some_and(|own| own == origin);
        if own {
            return Ok(None);
        }
        if self.origins.contains(&origin) {
            return Ok(Some(value.clone()));
        }
        Err(refused())
    }
}

/// Refuses a body whose `Content-Type` is not JSON.
fn check_json(content_type: Option<&HeaderValue>) -> Result<(), Refusal> {
    let essence = content_type
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let json = essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|subtype| subtype.ends_with("+json") && subtype.len() > "+json".len());
    if json {
        return Ok(());
    }
    let shown: String = essence.chars().take(64).collect();
    Err(Refusal {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        code: -32005,
        message: if shown.is_empty() {
            "the request has no Content-Type: send its JSON body as application/json".to_string()
        } else {
            format!("the request's Content-Type is {shown}: send its JSON body as application/json")
        },
    })
}

/// An IP address as a `Host` names it: IPv6 in brackets.
fn bracketed(address: &str) -> String {
    if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    }
}

/// A `Host` value split into its name (lower case, no trailing dot; IPv6 in brackets) and
/// port; `None` when it is not a host name, an IPv4 or a bracketed IPv6 address.
fn split_host(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.trim();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        inner.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (format!("[{}]", inner.to_ascii_lowercase()), port)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name.to_string(), Some(port)),
            None => (host.to_string(), None),
        }
    };
    let port = match port {
        None => None,
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            Some(port.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    let name = name.strip_suffix('.').unwrap_or(&name).to_ascii_lowercase();
    let plain = name.starts_with('[')
        || (!name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_'));
    plain.then_some((name, port))
}

/// A listed host, `name` or `name:port`.
fn listed_name(entry: &str) -> Option<Name> {
    let (host, port) = split_host(entry)?;
    Some(Name { host, port })
}

/// `scheme://host:port` (lower case, the scheme's default port written out) for an origin
/// `http(s)://host[:port]` with nothing after it; `None` for anything else (`null` too).
pub fn normalized_origin(origin: &str) -> Option<String> {
    let origin = origin.trim();
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (name, port) = split_host(rest)?;
    Some(format!(
        "{scheme}://{name}:{}",
        port.unwrap_or(default_port)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn loopback() -> Rules {
        Rules::new("127.0.0.1:8123".parse().unwrap(), &[], &[], false)
    }

    fn code(rules: &Rules, method: Method, pairs: &[(&str, &str)]) -> Result<(), (u16, i64)> {
        rules
            .admit(&method, &headers(pairs))
            .map(|_| ())
            .map_err(|refusal| (refusal.status.as_u16(), refusal.code))
    }

    const JSON: (&str, &str) = ("content-type", "application/json");

    #[test]
    fn a_loopback_server_answers_only_to_loopback_names_with_its_port() {
        let rules = loopback();
        for host in [
            "127.0.0.1:8123",
            "localhost:8123",
            "LOCALHOST.:8123",
            "[::1]:8123",
        ] {
            assert_eq!(
                code(&rules, Method::GET, &[("host", host)]),
                Ok(()),
                "{host}"
            );
        }
        for host in [
            "evil.example:8123",
            "127.0.0.1:8124",
            "localhost",
            "127.0.0.1.evil.example:8123",
            "",
            "127.0.0.1:8123:8123",
            "[::1",
        ] {
            assert_eq!(
                code(&rules, Method::GET, &[("host", host)]),
                Err((403, -32600)),
                "{host}"
            );
        }
        assert_eq!(code(&rules, Method::GET, &[]), Err((403, -32600)));
    }

    #[test]
    fn listed_names_are_taken_with_any_port_or_the_one_listed() {
        let rules = Rules::new(
            "127.0.0.1:8123".parse().unwrap(),
            &["agent.internal".into(), "proxy.local:443".into()],
            &[],
            false,
        );
        assert_eq!(
            code(&rules, Method::GET, &[("host", "Agent.Internal:9")]),
            Ok(())
        );
        assert_eq!(
            code(&rules, Method::GET, &[("host", "proxy.local:443")]),
            Ok(())
        );
        assert!(code(&rules, Method::GET, &[("host", "proxy.local:80")]).is_err());
    }

    #[test]
    fn a_server_bound_elsewhere_takes_any_name_unless_names_are_listed() {
        let open = Rules::new("0.0.0.0:80".parse().unwrap(), &[], &[], false);
        assert_eq!(
            code(&open, Method::GET, &[("host", "agent.example.com")]),
            Ok(())
        );
        let listed = Rules::new(
            "10.0.0.5:80".parse().unwrap(),
            &["agent.example.com".into()],
            &[],
            false,
        );
        assert_eq!(
            code(&listed, Method::GET, &[("host", "agent.example.com")]),
            Ok(())
        );
        assert_eq!(code(&listed, Method::GET, &[("host", "10.0.0.5")]), Ok(()));
        assert!(code(&listed, Method::GET, &[("host", "evil.example")]).is_err());
    }

    #[test]
    fn only_the_servers_own_origin_and_listed_ones_are_taken() {
        let rules = Rules::new(
            "127.0.0.1:8123".parse().unwrap(),
            &[],
            &["https://console.example.com".into()],
            false,
        );
        let host = ("host", "127.0.0.1:8123");
        assert_eq!(
            code(
                &rules,
                Method::POST,
                &[host, JSON, ("origin", "http://127.0.0.1:8123")]
            ),
            Ok(())
        );
        assert_eq!(
            code(
                &rules,
                Method::POST,
                &[host, JSON, ("origin", "https://console.example.com:443")]
            ),
            Ok(())
        );
        for origin in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:8124",
            "https://127.0.0.1:8123",
            "https://console.example.com.evil.example",
            "file://",
        ] {
            assert_eq!(
                code(&rules, Method::POST, &[host, JSON, ("origin", origin)]),
                Err((403, -32600)),
                "{origin}"
            );
        }
    }

    #[test]
    fn a_listed_origin_is_answered_its_preflight_and_cors_headers() {
        let rules = Rules::new(
            "127.0.0.1:8123".parse().unwrap(),
            &[],
            &["https://console.example.com".into()],
            false,
        );
        let request = headers(&[
            ("host", "127.0.0.1:8123"),
            ("origin", "https://console.example.com"),
            ("access-control-request-method", "POST"),
        ]);
        let admitted = rules.admit(&Method::OPTIONS, &request).unwrap();
        let preflight = admitted.preflight(&Method::OPTIONS, &request).unwrap();
        assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
        assert_eq!(
            preflight.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://console.example.com"
        );
        let own = rules
            .admit(
                &Method::OPTIONS,
                &headers(&[
                    ("host", "127.0.0.1:8123"),
                    ("origin", "http://127.0.0.1:8123"),
                ]),
            )
            .unwrap();
        assert!(own.preflight(&Method::OPTIONS, &request).is_none());
    }

    #[test]
    fn bodies_must_be_json() {
        let rules = loopback();
        let host = ("host", "127.0.0.1:8123");
        for content_type in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.a2a+json",
        ] {
            assert_eq!(
                code(
                    &rules,
                    Method::POST,
                    &[host, ("content-type", content_type)]
                ),
                Ok(()),
                "{content_type}"
            );
        }
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
            "application/jsonp",
        ] {
            assert_eq!(
                code(&rules, Method::PUT, &[host, ("content-type", content_type)]),
                Err((415, -32005)),
                "{content_type}"
            );
        }
        assert_eq!(code(&rules, Method::POST, &[host]), Err((415, -32005)));
        assert_eq!(code(&rules, Method::GET, &[host]), Ok(()));
        assert_eq!(code(&rules, Method::DELETE, &[host]), Ok(()));
    }

    proptest! {
        #[test]
        fn any_headers_are_judged_without_panic(
            host in proptest::option::of("[ -~]{0,40}"),
            origin in proptest::option::of("[ -~]{0,40}"),
            content_type in proptest::option::of("[ -~]{0,40}"),
            listed in proptest::collection::vec("[ -~]{0,20}", 0..3),
        ) {
            let rules = Rules::new("127.0.0.1:8123".parse().unwrap(), &listed, &listed, false);
            let mut map = HeaderMap::new();
            for (name, value) in [("host", host), ("origin", origin), ("content-type", content_type)] {
                if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    map.insert(name, value);
                }
            }
            let _ = rules.admit(&Method::POST, &map);
            let _ = normalized_origin(map.get("origin").and_then(|v| v.to_str().ok()).unwrap_or(""));
        }
    }
}
