//! Push notifications: a task's status changes posted to the webhooks its client registered
//! (the protocol's push notification config methods, or a send's own config).
//!
//! What this module promises:
//!
//! - **Only where the capsule may reach.** A webhook is an `http` or `https` URL whose scheme,
//!   host and port `capabilities.network.allow` permits, and every address its host resolves to
//!   is checked: a loopback, link-local, unspecified, multicast or broadcast address (where a
//!   webhook would reach the door's own machine or a cloud's metadata service) only when the URL
//!   names that address itself (an IP literal, or `localhost` for loopback) and the allowlist
//!   permits it. The check runs when the config is registered (-32602 naming `url` otherwise)
//!   and again before every delivery, which then connects to the very address checked (a second
//!   resolution cannot move it) and never follows a redirect.
//! - **What is sent.** For each status change of the task, to each of its webhooks, one POST:
//!   in A2A 1.0 (a config made with a 1.0 method) a `StreamResponse`, `statusUpdate` (the whole
//!   `task` for its final state), as `application/a2a+json`; in 0.3 the task object, as
//!   `application/json`. Every POST carries the config's token in `X-A2A-Notification-Token`
//!   and, with `authentication`, `Authorization: <scheme> <credentials>`.
//! - **Retries, in order.** A POST that cannot connect, takes over [`DELIVERY_TIMEOUT`], or is
//!   answered 5xx or 429 is tried again after 0.5 s and 2 s ([`TRIES`] in all), then given up
//!   with a warning (`W-A2A-011`). Deliveries go out one at a time, in the order the changes
//!   happened.
//! - **Bounded.** At most [`CONFIGS_PER_TASK`] webhooks a task and [`QUEUE_DEPTH`] deliveries
//!   waiting; a delivery past that is dropped with a warning, never queued without end.
//! - **The webhook's answer is its status only.** Its body is never read: the connection is
//!   closed once the status line and headers have come (their size bounded by the HTTP
//!   client), so an endless body costs nothing. A webhook that never answers holds one POST for
//!   at most [`DELIVERY_TIMEOUT`], then the connection is closed. Deliveries run beside the
//!   door's serving: a webhook that stalls delays only later notifications, never a task.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use murmur_a2a::{PushNotificationConfig, Version};
use murmur_manifest::NetworkRule;
use murmur_runtime::session::Observer;
use serde_json::Value;

/// The most webhooks one task may have.
pub const CONFIGS_PER_TASK: usize = 8;
/// The most deliveries waiting to go out.
pub const QUEUE_DEPTH: usize = 1_000;
/// How long one POST may take.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries per delivery.
pub const TRIES: usize = 3;
/// The pauses before the second and third tries.
const BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];

/// A task's webhook, as registered: its config and the protocol version it was made in.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub config: PushNotificationConfig,
    pub version: Version,
}

/// One POST to make.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub webhook: Webhook,
    pub task_id: String,
    pub payload: Value,
}

/// Where a webhook URL may point, and why not.
#[derive(Debug, Clone)]
pub struct WebhookPolicy {
    allow: Vec<NetworkRule>,
}

impl WebhookPolicy {
    /// Webhooks within `allow` (the capsule's `capabilities.network.allow`).
    pub fn new(allow: Vec<NetworkRule>) -> WebhookPolicy {
        WebhookPolicy { allow }
    }

    /// The address to connect to for `url`, or why the door will not post there.
    pub async fn check(&self, url: &str) -> Result<(url::Url, SocketAddr), String> {
        let parsed = url::Url::parse(url).map_err(|error| format!("not a URL: {error}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "`{}` is not http or https; a webhook is posted to over HTTP",
                parsed.scheme()
            ));
        }
        let Some(host) = parsed.host_str().map(str::to_string) else {
            return Err("names no host".to_string());
        };
        let port = parsed.port_or_known_default().unwrap_or(80);
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if !self
            .allow
            .iter()
            .any(|rule| rule.permits(parsed.scheme(), &bare, port))
        {
            return Err(format!(
                "{}://{host}:{port} is not in the capsule's capabilities.network.allow",
                parsed.scheme()
            ));
        }
        let literal: Option<IpAddr> = bare.parse().ok();
        let addresses: Vec<SocketAddr> = match literal {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => tokio::net::lookup_host((bare.as_str(), port))
                .await
                .map_err(|error| format!("`{host}` does not resolve: {error}"))?
                .collect(),
        };
        let first = named_or_ordinary(&bare, literal, &addresses)?;
        Ok((parsed, first))
    }
}

/// The first of `addresses` (what `host` resolved to), unless one is special ([`is_special`])
/// and `host` does not name it: an IP literal, or `localhost` for a loopback address.
fn named_or_ordinary(
    host: &str,
    literal: Option<IpAddr>,
    addresses: &[SocketAddr],
) -> Result<SocketAddr, String> {
    let Some(first) = addresses.first().copied() else {
        return Err(format!("`{host}` resolves to no address"));
    };
    for address in addresses {
        let ip = address.ip();
        let named =
            literal == Some(ip) || (host.eq_ignore_ascii_case("localhost") && ip.is_loopback());
        if is_special(ip) && !named {
            return Err(format!(
                "`{host}` resolves to {ip}, an address of this machine or its network's own \
                 services; a webhook may go there only by naming it (http://{address}/…) with \
                 the capsule's allowlist permitting it"
            ));
        }
    }
    Ok(first)
}

/// Loopback, link-local, unspecified, multicast, broadcast (IPv4-mapped IPv6 included).
fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_special(IpAddr::V4(v4));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// Posts deliveries, one at a time, in order. Cheap to clone.
#[derive(Clone)]
pub struct Pusher {
    queue: tokio::sync::mpsc::Sender<Delivery>,
    warnings: Arc<dyn Observer>,
}

impl Pusher {
    /// Starts the delivery worker on the current runtime; `warnings` hears what is given up.
    pub fn start(policy: WebhookPolicy, warnings: Arc<dyn Observer>) -> Pusher {
        // reqwest's rustls backend uses the process's default crypto provider; install ring
        // unless someone already installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (queue, mut receiver) = tokio::sync::mpsc::channel::<Delivery>(QUEUE_DEPTH);
        let worker_warnings = warnings.clone();
        tokio::spawn(async move {
            while let Some(delivery) = receiver.recv().await {
                if let Err(why) = deliver(&policy, &delivery).await {
                    warn(
                        worker_warnings.as_ref(),
                        &format!(
                            "task {}: the notification to {} was given up: {why}",
                            delivery.task_id, delivery.webhook.config.url
                        ),
                    );
                }
            }
        });
        Pusher { queue, warnings }
    }

    /// Queues a delivery; one past [`QUEUE_DEPTH`] is dropped with a warning.
    pub fn send(&self, delivery: Delivery) {
        use tokio::sync::mpsc::error::TrySendError;
        if let Err(error) = self.queue.try_send(delivery) {
            let (delivery, why) = match error {
                TrySendError::Full(d) => (d, format!("{QUEUE_DEPTH} are waiting")),
                TrySendError::Closed(d) => (d, "the door is stopping".to_string()),
            };
            warn(
                self.warnings.as_ref(),
                &format!(
                    "task {}: the notification to {} was dropped: {why}",
                    delivery.task_id, delivery.webhook.config.url
                ),
            );
        }
    }
}

fn warn(observer: &dyn Observer, message: &str) {
    observer.warning(
        &murmur_manifest::Diagnostic::new(
            murmur_manifest::diagnostic::code::W_A2A_011,
            message.to_string(),
        )
        .hint("check that the webhook answers 2xx within 10 s"),
    );
}

/// One delivery, tried up to [`TRIES`] times.
async fn deliver(policy: &WebhookPolicy, delivery: &Delivery) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..TRIES {
        if attempt > 0 {
            tokio::time::sleep(BACKOFF[attempt - 1]).await;
        }
        match post_once(policy, delivery).await {
            Ok(()) => return Ok(()),
            Err((why, retry)) => {
                last = why;
                if !retry {
                    break;
                }
            }
        }
    }
    Err(last)
}

/// One POST: `Err((why, worth retrying))`.
async fn post_once(policy: &WebhookPolicy, delivery: &Delivery) -> Result<(), (String, bool)> {
    let config = &delivery.webhook.config;
    // Checked again now: the name may resolve elsewhere than when it was registered.
    let (url, address) = policy
        .check(&config.url)
        .await
        .map_err(|why| (why, false))?;
    let host = url.host_str().unwrap_or_default().to_string();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DELIVERY_TIMEOUT)
        .resolve(&host, address)
        .build()
        .map_err(|error| (format!("the HTTP client cannot start: {error}"), false))?;
    let content_type = match delivery.webhook.version {
        Version::V1_0 => "application/a2a+json",
        Version::V0_3 => "application/json",
    };
    let mut request = client
        .post(url)
        .header("content-type", content_type)
        .body(delivery.payload.to_string());
    if let Some(token) = &config.token {
        request = request.header("x-a2a-notification-token", token);
    }
    if let Some(auth) = &config.authentication {
        let value = match &auth.credentials {
            Some(credentials) => format!("{} {credentials}", auth.scheme),
            None => auth.scheme.clone(),
        };
        request = request.header("authorization", value);
    }
    let response = request
        .send()
        .await
        .map_err(|error| (format!("cannot post: {error}"), true))?;
    let status = response.status();
    // The body is not read: dropping the answer closes its connection.
    drop(response);
    if status.is_success() {
        Ok(())
    } else {
        let retry = status.is_server_error() || status.as_u16() == 429;
        Err((format!("answered HTTP {}", status.as_u16()), retry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> WebhookPolicy {
        WebhookPolicy::new(
            allow
                .iter()
                .map(|rule| NetworkRule::parse(rule).unwrap())
                .collect(),
        )
    }

    #[tokio::test]
    async fn a_webhook_goes_only_where_the_allowlist_names_it() {
        let allowed = policy(&[
            "http://127.0.0.1:9000",
            "http://[::1]:9000",
            "localhost:9001",
        ]);
        assert!(allowed.check("http://127.0.0.1:9000/hook").await.is_ok());
        assert!(allowed.check("http://[::1]:9000/hook").await.is_ok());
        assert!(allowed.check("http://localhost:9001/hook").await.is_ok());
        for (url, why) in [
            ("http://127.0.0.1:9001/hook", "not in the capsule's"),
            ("ftp://127.0.0.1:9000/", "not http or https"),
            ("not a url", "not a URL"),
        ] {
            let refused = allowed.check(url).await.unwrap_err();
            assert!(refused.contains(why), "{url}: {refused}");
        }
        // A name that resolves to a special address is refused: only a URL naming the address
        // itself may go there (what a name resolves to can change under the door).
        let at = |ip: &str| vec![SocketAddr::new(ip.parse().unwrap(), 9000)];
        for (host, ip) in [
            ("hooks.example", "127.0.0.1"),
            ("hooks.example", "169.254.169.254"),
            ("hooks.example", "::1"),
            ("localhost", "169.254.169.254"),
        ] {
            let refused = named_or_ordinary(host, None, &at(ip)).unwrap_err();
            assert!(refused.contains("resolves to"), "{refused}");
        }
        assert!(named_or_ordinary("localhost", None, &at("127.0.0.1")).is_ok());
        assert!(named_or_ordinary("hooks.example", None, &at("192.0.2.7")).is_ok());
        let mixed = [at("192.0.2.7"), at("127.0.0.1")].concat();
        assert!(named_or_ordinary("hooks.example", None, &mixed).is_err());
        assert!(named_or_ordinary("hooks.example", None, &[]).is_err());
        // Link-local and unspecified addresses are special.
        for ip in [
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_special(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "192.0.2.1", "2001:db8::1"] {
            assert!(!is_special(ip.parse().unwrap()), "{ip}");
        }
    }
}
