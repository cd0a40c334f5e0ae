//! The network grant: outgoing `wasi:http` requests pass here, after the component hands the
//! request over and before any connection is made.
//!
//! - A request is sent only when its scheme, host and port are permitted by an entry of
//!   `capabilities.network.allow` ([`NetworkPolicy`]). No allow list means no request.
//! - A refused request is answered to the guest with the `wasi:http` error `HTTP-request-denied`
//!   and recorded as a [`Refusal`], which the caller turns into a trace event. No byte leaves the
//!   host for it.
//! - Raw sockets (`wasi:sockets`) are never granted: every store denies them.

use std::sync::Arc;

use murmur_manifest::network::NetworkRule;
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

    /// Whether a request to `uri` may be sent.
    pub fn permits(&self, uri: &http::Uri) -> bool {
        let Some(scheme) = uri.scheme_str() else {
            return false;
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let port = match (uri.port_u16(), scheme) {
            (Some(port), _) => port,
            (None, "http") => 80,
            (None, "https") => 443,
            (None, _) => return false,
        };
        self.rules
            .iter()
            .any(|rule| rule.permits(scheme, host, port))
    }
}

/// A request a grant refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// Which grant refused: `network`.
    pub grant: &'static str,
    /// What was asked for: the request's URL without its query.
    pub target: String,
    pub reason: String,
}

/// The per-call state of the network grant.
pub(crate) struct HttpGrant {
    policy: NetworkPolicy,
    pub(crate) refusals: Vec<Refusal>,
}

impl HttpGrant {
    pub(crate) fn new(policy: NetworkPolicy) -> HttpGrant {
        HttpGrant {
            policy,
            refusals: Vec::new(),
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
        request: http::Request<WasiBody>,
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
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
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
