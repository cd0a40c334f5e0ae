//! Registry hosts: what names one, how it is spoken to, and how two are compared.
//!
//! - A host is `NAME[:PORT]` or `[IPv6][:PORT]`, with no user name, password, path, query or
//!   fragment ([`check_host`]).
//! - A host on loopback (`localhost`, `127.0.0.0/8`, `::1`) is spoken to over HTTP, any other
//!   over HTTPS ([`is_loopback_host`]).
//! - Two hosts are the same when their [`host_key`]s are: lowercase, port included, the default
//!   port of the scheme they are spoken to in the same as none.

/// The scheme that names an OCI registry.
pub const SCHEME: &str = "oci://";

/// Whether `host` is on loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `host` is `NAME[:PORT]` or `[IPv6][:PORT]`.
pub fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("it names no host".to_string());
    }
    let parsed = url::Url::parse(&format!("https://{host}/"))
        .map_err(|e| format!("`{host}` is not a host (and port): {e}"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "it holds a user name or password; registry credentials come from \
             MURMUR_REGISTRY_USERNAME/PASSWORD or the Docker credential file"
                .to_string(),
        );
    }
    if host.contains(['?', '#']) || parsed.host_str().is_none() {
        return Err(format!("`{host}` is not a host (and port)"));
    }
    Ok(())
}

/// `host` (`NAME[:PORT]` or `[IPv6][:PORT]`) as hosts are compared: lowercase, the port kept
/// unless it is the default of the scheme the registry is spoken to in (HTTP on loopback,
/// HTTPS elsewhere); or why it is not a host.
pub fn host_key(host: &str) -> Result<String, String> {
    if host.contains(['/', '\\']) {
        return Err(format!(
            "`{}` is not a host (and port)",
            host.escape_debug()
        ));
    }
    check_host(host)?;
    let scheme = if is_loopback_host(host) {
        "http"
    } else {
        "https"
    };
    let url = url::Url::parse(&format!("{scheme}://{host}/"))
        .map_err(|e| format!("`{}` is not a host (and port): {e}", host.escape_debug()))?;
    url_host_key(&url).ok_or_else(|| format!("`{}` is not a host (and port)", host.escape_debug()))
}

/// The host of `url` as [`host_key`] gives it (the URL's own scheme's default port dropped).
pub fn url_host_key(url: &url::Url) -> Option<String> {
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}
