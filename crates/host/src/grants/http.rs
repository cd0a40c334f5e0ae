//! The network grant: outgoing `wasi:http` requests pass here, after the component hands the
//! request over and before any connection is made.
//!
//! - A request is sent only when its scheme, host and port are permitted by an entry of
//!   `capabilities.network.allow` ([`NetworkPolicy`]). No allow list means no request.
//! - A refused request is answered to the guest with the `wasi:http` error `HTTP-request-denied`
//!   and recorded as a [`Refusal`], which the caller turns into a trace event. No byte leaves the
//!   host for it. The body the guest writes after handing the request over (as HTTP clients do)
//!   is read into nothing, up to [`REFUSED_BODY_READ_MAX`], so that its writes succeed and the
//!   guest reads the refusal, not a body stream closed under it.
//! - Raw sockets (`wasi:sockets`) are never granted: every store denies them.
//! - A driver's credential is attached here, to a request the guest has already handed over
//!   and only when it is bound for the gateway's own origin ([`GatewayCredential`]): the header
//!   `upstream_auth` names is set (replacing any value the guest put there), so the key never
//!   enters the sandbox. A credential injected at run time (`control.secrets`) is read from the
//!   [`SecretStore`] on every request, so a rotation applies to the next request; while nothing
//!   is injected, no credential header is attached.
//! - With a cassette ([`super::cassette`]), an allowed request is recorded as it is sent, or
//!   answered from the cassette and not sent at all.

use std::sync::Arc;

use murmur_manifest::network::NetworkRule;

pub use crate::reported::Refusal;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

/// Which hosts a component may reach over `wasi:http`.
#[derive(Debug, Clone, Default)]
pub struct NetworkPolicy {
    rules: Arc<[NetworkRule]>,
}

impl NetworkPolicy {
    /// Reaches nothing.
    pub fn deny_all() -> NetworkPolicy {
        NetworkPolicy::default()
    }

    /// Reaches what `rules` permit.
    pub fn allow(rules: Vec<NetworkRule>) -> NetworkPolicy {
        NetworkPolicy {
            rules: rules.into(),
        }
    }

    /// The entries, in order.
    pub fn rules(&self) -> &[NetworkRule] {
        &self.rules
    }

    /// Whether a request to `uri` may be sent.
    pub fn permits(&self, uri: &http::Uri) -> bool {
        let Some((scheme, host, port)) = origin(uri) else {
            return false;
        };
        self.rules
            .iter()
            .any(|rule| rule.permits(&scheme, host, port))
    }
}

/// The credentials injected at run time through the control plane (`control.secrets`), by
/// name. Cloning shares the store. Values never appear in `Debug` output.
#[derive(Clone, Default)]
pub struct SecretStore(Arc<std::sync::RwLock<std::collections::HashMap<String, String>>>);

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.read().keys().cloned().collect();
        f.debug_struct("SecretStore")
            .field("names", &names)
            .finish()
    }
}

impl SecretStore {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, std::collections::HashMap<String, String>> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, std::collections::HashMap<String, String>> {
        self.0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `name` holds a value now.
    pub fn has(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// Sets `name` (an empty value forgets it).
    pub fn put(&self, name: &str, value: &str) {
        if value.is_empty() {
            self.forget(name);
        } else {
            self.write().insert(name.to_string(), value.to_string());
        }
    }

    /// Forgets `name`; whether it held a value.
    pub fn forget(&self, name: &str) -> bool {
        self.write().remove(name).is_some()
    }

    fn get(&self, name: &str) -> Option<String> {
        self.read().get(name).cloned()
    }

    /// Every name and value held now (what a recording cassette scrubs).
    pub fn entries(&self) -> Vec<(String, String)> {
        self.read()
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }
}

/// What a credential attaches.
#[derive(Clone)]
enum CredentialValue {
    /// Resolved at launch.
    Fixed(http::HeaderValue),
    /// Read from `secrets` on every request: the header value is `template` with `{key}`
    /// replaced by the secret.
    Injected {
        secrets: SecretStore,
        name: String,
        template: String,
    },
}

/// A credential and where it may go: the origin of a driver's gateway.
#[derive(Clone)]
pub struct GatewayCredential {
    scheme: String,
    host: String,
    port: u16,
    header: http::HeaderName,
    value: CredentialValue,
}

impl std::fmt::Debug for GatewayCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = match &self.value {
            CredentialValue::Fixed(_) => "<redacted>".to_string(),
            CredentialValue::Injected { name, .. } => format!("<injected {name}>"),
        };
        f.debug_struct("GatewayCredential")
            .field(
                "origin",
                &format!("{}://{}:{}", self.scheme, self.host, self.port),
            )
            .field("header", &self.header)
            .field("value", &value)
            .finish()
    }
}

impl GatewayCredential {
    /// The credential for `endpoint` (an http(s) URL), attached as `header: value`.
    pub fn new(endpoint: &str, header: &str, value: &str) -> Result<GatewayCredential, String> {
        let mut value = http::HeaderValue::try_from(value)
            .map_err(|_| "the credential holds characters a header cannot carry".to_string())?;
        value.set_sensitive(true);
        GatewayCredential::with_value(endpoint, header, CredentialValue::Fixed(value))
    }

    /// The credential for `endpoint` read from `secrets[name]` on every request, attached as
    /// `header: template` with `{key}` replaced by the secret's value.
    pub fn injected(
        endpoint: &str,
        header: &str,
        template: &str,
        secrets: SecretStore,
        name: &str,
    ) -> Result<GatewayCredential, String> {
        GatewayCredential::with_value(
            endpoint,
            header,
            CredentialValue::Injected {
                secrets,
                name: name.to_string(),
                template: template.to_string(),
            },
        )
    }

    fn with_value(
        endpoint: &str,
        header: &str,
        value: CredentialValue,
    ) -> Result<GatewayCredential, String> {
        let uri: http::Uri = endpoint
            .parse()
            .map_err(|error| format!("the gateway endpoint `{endpoint}` is not a URL: {error}"))?;
        let (scheme, host, port) = origin(&uri)
            .ok_or_else(|| format!("the gateway endpoint `{endpoint}` names no http(s) origin"))?;
        let header = http::HeaderName::try_from(header)
            .map_err(|_| format!("`{header}` is not a valid header name"))?;
        Ok(GatewayCredential {
            scheme,
            host: host.to_string(),
            port,
            header,
            value,
        })
    }

    fn applies_to(&self, uri: &http::Uri) -> bool {
        origin(uri).is_some_and(|(scheme, host, port)| {
            scheme == self.scheme && host.eq_ignore_ascii_case(&self.host) && port == self.port
        })
    }

    /// Whether the credential can produce a value now: always for one resolved at launch; for
    /// an injected one, while its secret holds a value.
    pub fn has_value(&self) -> bool {
        match &self.value {
            CredentialValue::Fixed(_) => true,
            CredentialValue::Injected { secrets, name, .. } => secrets.has(name),
        }
    }

    /// The header value to attach now, if there is one.
    fn header_value(&self) -> Option<http::HeaderValue> {
        match &self.value {
            CredentialValue::Fixed(value) => Some(value.clone()),
            CredentialValue::Injected {
                secrets,
                name,
                template,
            } => {
                let key = secrets.get(name)?;
                let mut value =
                    http::HeaderValue::try_from(template.replace("{key}", &key)).ok()?;
                value.set_sensitive(true);
                Some(value)
            }
        }
    }
}

/// The rule that lets a driver reach exactly its gateway's origin.
pub fn gateway_rule(endpoint: &str) -> Result<NetworkRule, String> {
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|error| format!("the gateway endpoint `{endpoint}` is not a URL: {error}"))?;
    let (scheme, host, port) = origin(&uri)
        .ok_or_else(|| format!("the gateway endpoint `{endpoint}` names no http(s) origin"))?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    NetworkRule::parse(&format!("{scheme}://{host}:{port}"))
}

/// `(scheme, host, port)` of an http(s) URI, the port defaulted by scheme.
fn origin(uri: &http::Uri) -> Option<(String, &str, u16)> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let port = match (uri.port_u16(), scheme.as_str()) {
        (Some(port), "http" | "https") => port,
        (None, "http") => 80,
        (None, "https") => 443,
        _ => return None,
    };
    Some((scheme, uri.host()?, port))
}

/// The per-call state of the network grant.
pub(crate) struct HttpGrant {
    policy: NetworkPolicy,
    credential: Option<GatewayCredential>,
    /// A driver's exchanges recorded or served back ([`super::cassette`]).
    cassette: Option<super::cassette::Cassette>,
    pub(crate) refusals: Vec<Refusal>,
}

impl HttpGrant {
    pub(crate) fn new(
        policy: NetworkPolicy,
        credential: Option<GatewayCredential>,
        cassette: Option<super::cassette::Cassette>,
    ) -> HttpGrant {
        HttpGrant {
            policy,
            credential,
            cassette,
            refusals: Vec::new(),
        }
    }
}

/// The most of a refused request's body read (and discarded); past it the guest's writes fail.
pub const REFUSED_BODY_READ_MAX: u64 = 64 * 1024 * 1024;

/// Reads `body` into nothing until it ends, fails, or passes `max` bytes.
async fn discard(mut body: WasiBody, max: u64) {
    use http_body_util::BodyExt;
    let mut read = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        read += frame.data_ref().map_or(0, |data| data.len() as u64);
        if read > max {
            break;
        }
    }
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for HttpGrant {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        if !self.policy.permits(request.uri()) {
            let uri = request.uri();
            let target = format!(
                "{}://{}{}",
                uri.scheme_str().unwrap_or("?"),
                uri.authority().map(|a| a.as_str()).unwrap_or("?"),
                uri.path()
            );
            self.refusals.push(Refusal {
                grant: "network",
                reason: "not in capabilities.network.allow".to_string(),
                target,
            });
            let body = request.into_body();
            return Box::new(async move {
                tokio::spawn(discard(body, REFUSED_BODY_READ_MAX));
                Err(wasmtime_wasi_http::Error::HttpRequestDenied)
            });
        }
        if let Some(credential) = &self.credential
            && credential.applies_to(request.uri())
        {
            match credential.header_value() {
                Some(value) => {
                    request
                        .headers_mut()
                        .insert(credential.header.clone(), value);
                }
                // Nothing injected: the guest's own value must not go out in its place.
                None => {
                    request.headers_mut().remove(&credential.header);
                }
            }
        }
        if let Some(cassette) = self.cassette.clone() {
            let header = self.credential.as_ref().map(|c| c.header.clone());
            return Box::new(async move {
                let response = cassette.exchange(request, options, header).await?;
                let done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send> =
                    Box::new(async { Ok(()) });
                Ok((response, done))
            });
        }
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: &[&str]) -> NetworkPolicy {
        NetworkPolicy::allow(
            rules
                .iter()
                .map(|rule| NetworkRule::parse(rule).unwrap())
                .collect(),
        )
    }

    fn permits(policy: &NetworkPolicy, uri: &str) -> bool {
        policy.permits(&uri.parse().unwrap())
    }

    #[test]
    fn a_gateway_rule_reaches_its_origin_only() {
        let rule = gateway_rule("https://api.anthropic.com/some/prefix").unwrap();
        let policy = NetworkPolicy::allow(vec![rule]);
        assert!(permits(&policy, "https://api.anthropic.com/v1/messages"));
        assert!(!permits(&policy, "https://api.openai.com/v1/messages"));
        let local = NetworkPolicy::allow(vec![gateway_rule("http://127.0.0.1:4321").unwrap()]);
        assert!(permits(&local, "http://127.0.0.1:4321/v1/chat/completions"));
        assert!(!permits(
            &local,
            "http://127.0.0.1:4322/v1/chat/completions"
        ));
    }

    #[test]
    fn a_credential_applies_to_its_gateway_origin_only_and_is_redacted() {
        let credential =
            GatewayCredential::new("http://127.0.0.1:4321", "x-api-key", "sk-secret").unwrap();
        assert!(credential.applies_to(&"http://127.0.0.1:4321/v1/messages".parse().unwrap()));
        assert!(!credential.applies_to(&"http://127.0.0.1:9999/v1/messages".parse().unwrap()));
        assert!(!credential.applies_to(&"https://127.0.0.1:4321/v1/messages".parse().unwrap()));
        assert!(!format!("{credential:?}").contains("sk-secret"));
    }

    #[test]
    fn an_injected_credential_follows_its_secret_and_never_shows_it() {
        let secrets = SecretStore::default();
        let credential = GatewayCredential::injected(
            "http://127.0.0.1:4321",
            "authorization",
            "Bearer {key}",
            secrets.clone(),
            "OPENAI_API_KEY",
        )
        .unwrap();
        assert!(!credential.has_value());
        assert_eq!(credential.header_value(), None);
        secrets.put("OPENAI_API_KEY", "sk-first");
        assert!(credential.has_value());
        assert_eq!(credential.header_value().unwrap(), "Bearer sk-first");
        secrets.put("OPENAI_API_KEY", "sk-rotated");
        assert_eq!(credential.header_value().unwrap(), "Bearer sk-rotated");
        assert!(!format!("{credential:?}{secrets:?}").contains("sk-rotated"));
        assert!(secrets.forget("OPENAI_API_KEY"));
        assert!(!credential.has_value());
        assert!(!secrets.forget("OPENAI_API_KEY"));
    }

    #[test]
    fn no_rules_reach_nothing() {
        assert!(!permits(
            &NetworkPolicy::deny_all(),
            "https://api.anthropic.com/v1"
        ));
    }

    #[test]
    fn a_request_uses_its_scheme_default_port_when_it_names_none() {
        let policy = policy(&["https://api.anthropic.com"]);
        assert!(permits(&policy, "https://api.anthropic.com/v1/messages"));
        assert!(permits(
            &policy,
            "https://api.anthropic.com:443/v1/messages"
        ));
        assert!(!permits(&policy, "http://api.anthropic.com/v1/messages"));
        assert!(!permits(&policy, "https://api.anthropic.com:8443/"));
        assert!(!permits(&policy, "https://api.anthropic.com.evil.test/"));
    }

    #[test]
    fn loopback_rules_match_by_port_and_ipv6_by_value() {
        let policy = policy(&["127.0.0.1:8080", "[::1]:9090"]);
        assert!(permits(&policy, "http://127.0.0.1:8080/x"));
        assert!(!permits(&policy, "http://127.0.0.1:8081/x"));
        assert!(permits(&policy, "http://[::1]:9090/x"));
        assert!(!permits(&policy, "http://localhost:8080/x"));
    }
}
