//! `capabilities.network.allow` entries: what each form means, which entries are refused,
//! and whether a request matches.
//!
//! An entry takes one of three forms:
//!
//! - a URL, `https://api.anthropic.com` or `http://127.0.0.1:8080`: exactly that scheme, host
//!   and port (the explicit one, or the scheme's default). Only `http` and `https`; no path other
//!   than `/`, no query, no fragment, no user information.
//! - `host:port`, `api.example.com:8443` or `[::1]:8080`: that port, over http or https.
//! - a bare host, `api.example.com`: http on port 80 or https on port 443.
//!
//! A host is a DNS name, an IPv4 address, a bracketed IPv6 address, or `*.example.com`, which
//! matches any subdomain of `example.com` (at any depth) but not `example.com` itself. Hosts
//! match case-insensitively and a trailing dot is ignored; IP addresses match by value.
//!
//! Refused, with the reason: an empty entry, whitespace, a scheme other than http/https, a port
//! that is 0, over 65535 or not a number, a bare `*`, a `*` anywhere but as the whole first label,
//! an unbracketed IPv6 address, and characters a host name cannot have. In a manifest a refused
//! entry is the diagnostic `E-CAP-001`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::diagnostic::{Diagnostic, code, serde_error};

/// One parsed `capabilities.network.allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRule {
    text: String,
    host: HostPattern,
    reach: Reach,
}

/// The host an entry reaches, as [`NetworkRule::host`] gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum EgressHost {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// Any subdomain of this name.
    Subdomains(String),
    Ip(IpAddr),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// `*.suffix`: any name ending in `.suffix`.
    Subdomains(String),
    Ip(IpAddr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The URL form: this scheme on this port.
    Exact(Scheme, u16),
    /// The `host:port` form: either scheme on this port.
    Port(u16),
    /// The bare host form: http on 80, https on 443.
    Defaults,
}

/// The hint every refusal carries.
pub const ACCEPTED_FORMS: &str = "write a URL (`https://api.example.com`, `http://127.0.0.1:8080`), a `host:port` (`api.example.com:8443`, `[::1]:8080`), or a bare host (`api.example.com`, `*.example.com`)";

impl NetworkRule {
    /// Parses one entry; the error says why it is refused.
    pub fn parse(text: &str) -> Result<NetworkRule, String> {
        if text.is_empty() {
            return Err("the entry is empty".into());
        }
        if text.chars().any(char::is_whitespace) {
            return Err("the entry contains whitespace".into());
        }
        let (host, reach) = match text.split_once("://") {
            Some((scheme, _)) => parse_url(text, scheme)?,
            None => parse_authority(text)?,
        };
        Ok(NetworkRule {
            text: text.to_string(),
            host,
            reach,
        })
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The host this entry reaches: a DNS name (lowercase), `*.suffix` for any subdomain of
    /// `suffix`, or an IP address.
    pub fn host(&self) -> EgressHost {
        match &self.host {
            HostPattern::Name(name) => EgressHost::Name(name.clone()),
            HostPattern::Subdomains(suffix) => EgressHost::Subdomains(suffix.clone()),
            HostPattern::Ip(ip) => EgressHost::Ip(*ip),
        }
    }

    /// The TCP ports any of `rules` reaches (what a confined child may `connect` to).
    pub fn ports_of(rules: &[NetworkRule]) -> Vec<u16> {
        rules.iter().flat_map(NetworkRule::ports).collect()
    }

    /// The TCP ports this entry reaches: its port, or 80 and 443 for a bare host.
    pub fn ports(&self) -> Vec<u16> {
        match self.reach {
            Reach::Exact(_, port) | Reach::Port(port) => vec![port],
            Reach::Defaults => vec![80, 443],
        }
    }

    /// Whether a request with this scheme, host and port is allowed by this entry. `host` may be
    /// bracketed (`[::1]`) or not; `scheme` is compared case-insensitively.
    pub fn permits(&self, scheme: &str, host: &str, port: u16) -> bool {
        let scheme = if scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else if scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else {
            return false;
        };
        let reach = match self.reach {
            Reach::Exact(s, p) => s == scheme && p == port,
            Reach::Port(p) => p == port,
            Reach::Defaults => matches!((scheme, port), (Scheme::Http, 80) | (Scheme::Https, 443)),
        };
        reach && self.host.matches(host)
    }

    /// Whether every request this entry permits is also permitted by some entry of `wider`:
    /// each scheme and port it reaches, on every host it matches.
    pub fn within(&self, wider: &[NetworkRule]) -> bool {
        self.reach.pairs().iter().all(|pair| {
            wider
                .iter()
                .any(|rule| rule.host.covers(&self.host) && rule.reach.pairs().contains(pair))
        })
    }

    /// The diagnostic for a refused entry.
    pub(crate) fn refusal(text: &str, reason: &str) -> Diagnostic {
        Diagnostic::new(
            code::E_CAP_001,
            format!("network allow entry `{text}` is malformed: {reason}"),
        )
        .hint(ACCEPTED_FORMS)
    }
}

impl Reach {
    /// Every (scheme, port) this reach permits.
    fn pairs(self) -> Vec<(Scheme, u16)> {
        match self {
            Reach::Exact(scheme, port) => vec![(scheme, port)],
            Reach::Port(port) => vec![(Scheme::Http, port), (Scheme::Https, port)],
            Reach::Defaults => vec![(Scheme::Http, 80), (Scheme::Https, 443)],
        }
    }
}

impl HostPattern {
    /// Whether every host `narrower` matches, this pattern matches too.
    fn covers(&self, narrower: &HostPattern) -> bool {
        match (self, narrower) {
            (HostPattern::Subdomains(_), HostPattern::Name(name)) => self.matches(name),
            (HostPattern::Subdomains(wide), HostPattern::Subdomains(narrow)) => {
                narrow == wide || narrow.ends_with(&format!(".{wide}"))
            }
            _ => self == narrower,
        }
    }

    fn matches(&self, host: &str) -> bool {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        match self {
            HostPattern::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
            HostPattern::Name(name) => host == *name,
            HostPattern::Subdomains(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host[..host.len() - suffix.len()].ends_with('.')
                    && host.parse::<IpAddr>().is_err()
            }
        }
    }
}

fn parse_url(text: &str, scheme: &str) -> Result<(HostPattern, Reach), String> {
    let scheme = if scheme.eq_ignore_ascii_case("http") {
        Scheme::Http
    } else if scheme.eq_ignore_ascii_case("https") {
        Scheme::Https
    } else {
        return Err(format!("scheme `{scheme}` is not http or https"));
    };
    let url = url::Url::parse(text).map_err(|e| format!("not a valid URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a URL entry may not carry user information".into());
    }
    if url.query().is_some() {
        return Err("a URL entry may not have a query".into());
    }
    if url.fragment().is_some() {
        return Err("a URL entry may not have a fragment".into());
    }
    if !matches!(url.path(), "" | "/") {
        return Err(format!(
            "a URL entry may not have a path (`{}`): the allowlist matches scheme, host and port",
            url.path()
        ));
    }
    if url.port() == Some(0) {
        return Err("port 0 is not a port".into());
    }
    let port = url
        .port_or_known_default()
        .ok_or_else(|| "the URL has no port".to_string())?;
    let host = match url.host() {
        Some(url::Host::Domain(name)) => parse_host(name)?,
        Some(url::Host::Ipv4(ip)) => HostPattern::Ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => HostPattern::Ip(IpAddr::V6(ip)),
        None => return Err("the URL has no host".into()),
    };
    Ok((host, Reach::Exact(scheme, port)))
}

fn parse_authority(text: &str) -> Result<(HostPattern, Reach), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| "`[` is never closed with `]`".to_string())?;
        let port =
            match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or_else(|| {
                    format!("`{after}` after the bracketed address is not `:port`")
                })?),
            };
        let ip = inside
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("`[{inside}]` is not an IPv6 address"))?;
        (HostPattern::Ip(IpAddr::V6(ip)), port)
    } else if let Some((host, port)) = text.rsplit_once(':') {
        if host.contains(':') {
            return Err("an IPv6 address must be written in brackets, as `[::1]:8080`".into());
        }
        (parse_host(host)?, Some(port))
    } else {
        (parse_host(text)?, None)
    };
    let reach = match port {
        Some(port) => Reach::Port(parse_port(port)?),
        None => Reach::Defaults,
    };
    Ok((host, reach))
}

fn parse_port(port: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Err("the port after `:` is empty".into());
    }
    if !port.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("port `{port}` is not a number"));
    }
    match port.parse::<u32>() {
        Ok(0) => Err("port 0 is not a port".into()),
        Ok(p) if p <= u32::from(u16::MAX) => Ok(p as u16),
        _ => Err(format!("port `{port}` is over 65535")),
    }
}

fn parse_host(host: &str) -> Result<HostPattern, String> {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host == "*" {
        return Err("a bare `*` would allow every host: name the hosts".into());
    }
    if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.parse::<Ipv4Addr>().is_ok() {
            return Err("`*.` must be followed by a DNS name, not an address".into());
        }
        check_dns_name(suffix)?;
        return Ok(HostPattern::Subdomains(suffix.to_string()));
    }
    if host.contains('*') {
        return Err("`*` is only allowed as the whole first label, as in `*.example.com`".into());
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(HostPattern::Ip(IpAddr::V4(ip)));
    }
    check_dns_name(&host)?;
    Ok(HostPattern::Name(host))
}

fn check_dns_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the host is empty".into());
    }
    if name.len() > 253 {
        return Err("the host name is longer than 253 characters".into());
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(format!("host `{name}` has an empty label"));
        }
        if label.len() > 63 {
            return Err(format!(
                "host `{name}` has a label longer than 63 characters"
            ));
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "host `{name}` contains `{bad}`, which a host name cannot"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!(
                "host `{name}` has a label that starts or ends with `-`"
            ));
        }
    }
    if labels
        .last()
        .is_some_and(|last| last.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!("host `{name}` is not a valid IPv4 address"));
    }
    Ok(())
}

impl fmt::Display for NetworkRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for NetworkRule {
    type Err = String;
    fn from_str(text: &str) -> Result<NetworkRule, String> {
        NetworkRule::parse(text)
    }
}

impl serde::Serialize for NetworkRule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for NetworkRule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl serde::de::Visitor<'_> for Entry {
            type Value = NetworkRule;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a URL, host:port, or host string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<NetworkRule, E> {
                NetworkRule::parse(text)
                    .map_err(|reason| serde_error(&NetworkRule::refusal(text, &reason)))
            }
        }
        deserializer.deserialize_str(Entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> NetworkRule {
        match NetworkRule::parse(text) {
            Ok(rule) => rule,
            Err(reason) => panic!("`{text}` refused: {reason}"),
        }
    }

    fn refused(text: &str, reason_contains: &str) {
        match NetworkRule::parse(text) {
            Ok(rule) => panic!("`{text}` accepted as {rule:?}"),
            Err(reason) => assert!(
                reason.contains(reason_contains),
                "`{text}`: reason `{reason}` lacks `{reason_contains}`"
            ),
        }
    }

    #[test]
    fn url_form_is_exact_scheme_host_and_default_port() {
        let r = rule("https://api.anthropic.com");
        assert!(r.permits("https", "api.anthropic.com", 443));
        assert!(!r.permits("http", "api.anthropic.com", 80));
        assert!(!r.permits("http", "api.anthropic.com", 443));
        assert!(!r.permits("https", "api.anthropic.com", 8443));
        assert!(!r.permits("https", "evil.com", 443));
        assert!(!r.permits("https", "x.api.anthropic.com", 443));
        assert_eq!(r.as_str(), "https://api.anthropic.com");
    }

    #[test]
    fn url_form_with_explicit_port_and_trailing_slash() {
        let r = rule("http://127.0.0.1:8080/");
        assert!(r.permits("http", "127.0.0.1", 8080));
        assert!(!r.permits("https", "127.0.0.1", 8080));
        assert!(!r.permits("http", "127.0.0.1", 80));
        // An explicit default port is the same as none.
        assert!(rule("https://a.example:443").permits("https", "a.example", 443));
    }

    #[test]
    fn url_form_with_ipv6_host() {
        let r = rule("http://[::1]:9000");
        assert!(r.permits("http", "::1", 9000));
        assert!(r.permits("http", "[::1]", 9000));
        assert!(r.permits("http", "0:0:0:0:0:0:0:1", 9000));
        assert!(!r.permits("http", "::2", 9000));
    }

    #[test]
    fn host_port_form_allows_either_scheme_on_that_port() {
        let r = rule("api.example.com:8443");
        assert!(r.permits("https", "api.example.com", 8443));
        assert!(r.permits("http", "api.example.com", 8443));
        assert!(!r.permits("https", "api.example.com", 443));
        assert!(!r.permits("ftp", "api.example.com", 8443));
        let v6 = rule("[::1]:8080");
        assert!(v6.permits("http", "::1", 8080));
        assert!(!v6.permits("http", "::1", 8081));
    }

    #[test]
    fn bare_host_form_allows_default_ports_only() {
        let r = rule("api.example.com");
        assert!(r.permits("https", "api.example.com", 443));
        assert!(r.permits("http", "api.example.com", 80));
        assert!(!r.permits("http", "api.example.com", 443));
        assert!(!r.permits("https", "api.example.com", 80));
        assert!(!r.permits("https", "api.example.com", 8443));
        assert!(rule("10.0.0.1").permits("http", "10.0.0.1", 80));
        assert!(rule("[::1]").permits("https", "::1", 443));
    }

    #[test]
    fn hosts_match_case_insensitively_ignoring_a_trailing_dot() {
        let r = rule("API.Example.com.");
        assert!(r.permits("HTTPS", "api.example.COM", 443));
        assert!(r.permits("https", "api.example.com.", 443));
    }

    #[test]
    fn wildcard_matches_subdomains_not_the_apex() {
        let r = rule("*.example.com");
        assert!(r.permits("https", "api.example.com", 443));
        assert!(r.permits("https", "a.b.example.com", 443));
        assert!(!r.permits("https", "example.com", 443));
        assert!(!r.permits("https", "badexample.com", 443));
        assert!(!r.permits("https", "example.com.evil.org", 443));
        let url = rule("https://*.example.com:8443");
        assert!(url.permits("https", "x.example.com", 8443));
        assert!(!url.permits("https", "x.example.com", 443));
    }

    #[test]
    fn refusals_name_their_reason() {
        refused("", "empty");
        refused(" api.example.com", "whitespace");
        refused("api.example.com ", "whitespace");
        refused("ftp://files.example.com", "scheme `ftp`");
        refused("ws://x.example.com", "scheme `ws`");
        refused("https://api.example.com/v1", "path");
        refused("https://api.example.com/?a=1", "query");
        refused("https://api.example.com/#top", "fragment");
        refused("https://user:pw@api.example.com", "user information");
        refused("https://api.example.com:0", "port 0");
        refused("api.example.com:0", "port 0");
        refused("api.example.com:65536", "over 65535");
        refused("https://api.example.com:70000", "not a valid URL");
        refused("api.example.com:http", "not a number");
        refused("api.example.com:", "empty");
        refused("*", "bare `*`");
        refused("*:443", "bare `*`");
        refused("api.*.com", "first label");
        refused("*api.example.com", "first label");
        refused("api_ex$mple.com", "contains `$`");
        refused("api.example.com/v1", "contains `/`");
        refused("::1", "brackets");
        refused("[::1", "never closed");
        refused("[not-v6]:80", "not an IPv6 address");
        refused("[::1]8080", "not `:port`");
        refused("-api.example.com", "starts or ends with `-`");
        refused("api..example.com", "empty label");
        refused("999.1.1.1", "not a valid IPv4");
        refused("*.10.0.0.1", "not an address");
    }

    #[test]
    fn within_holds_only_for_what_the_wider_rules_permit_too() {
        let wide = |texts: &[&str]| texts.iter().map(|t| rule(t)).collect::<Vec<_>>();
        // The same entry, and narrower reaches of the same host.
        let capsule = wide(&["api.example.com", "http://127.0.0.1:9000"]);
        assert!(rule("api.example.com").within(&capsule));
        assert!(rule("https://api.example.com").within(&capsule));
        assert!(rule("http://api.example.com").within(&capsule));
        assert!(rule("http://127.0.0.1:9000/").within(&capsule));
        // Wider than the capsule: another port, another scheme, another host.
        assert!(!rule("https://api.example.com:8443").within(&capsule));
        assert!(!rule("127.0.0.1:9000").within(&capsule));
        assert!(!rule("https://127.0.0.1:9000").within(&capsule));
        assert!(!rule("other.example.com").within(&capsule));
        assert!(!rule("*.example.com").within(&capsule));
        assert!(!rule("https://api.example.com").within(&[]));
        // `host:port` is covered by both schemes on that port, even from two entries.
        let split = wide(&["http://h.example:8080", "https://h.example:8080"]);
        assert!(rule("h.example:8080").within(&split));
        assert!(!rule("h.example:8080").within(&split[..1]));
        // Wildcards cover names and deeper wildcards below them, never the apex or an address.
        let any = wide(&["*.example.com"]);
        assert!(rule("api.example.com").within(&any));
        assert!(rule("*.eu.example.com").within(&any));
        assert!(rule("*.example.com").within(&any));
        assert!(!rule("example.com").within(&any));
        assert!(!rule("*.com").within(&any));
        assert!(!rule("api.example.com").within(&wide(&["*.api.example.com"])));
        assert!(!rule("10.0.0.1").within(&wide(&["10.0.0.2"])));
        assert!(rule("http://[::1]:80").within(&wide(&["[0:0:0:0:0:0:0:1]"])));
    }

    #[test]
    fn deserializes_and_serializes_as_the_written_string() {
        let r: NetworkRule = serde_json::from_str("\"https://api.anthropic.com\"").unwrap();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            "\"https://api.anthropic.com\""
        );
        let err = serde_json::from_str::<NetworkRule>("\"*\"").unwrap_err();
        let d = crate::diagnostic::from_serde_error(&err.to_string()).unwrap();
        assert_eq!(d.code, "E-CAP-001");
        assert!(d.hint.unwrap().contains("host:port"));
    }
}
