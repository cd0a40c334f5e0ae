//! Which URLs the tool fetches: pure checks, the same on the host and in the component.
//!
//! A URL is fetched only when it parses (WHATWG URL rules, the `url` crate), its scheme is
//! `http` or `https`, it names a host, and it carries no user name or password (credentials
//! never travel in a URL this tool sends). Its `#fragment` is dropped: it is never sent. The
//! same checks apply to every redirect's `Location`, resolved against the URL that answered.
//! Whether the host may be reached is not decided here: the runtime checks each request
//! against the capsule's `network.allow`.

use url::Url;

/// The URL to request for `text`, or why it is refused (a message for the model).
pub fn check(text: &str) -> Result<Url, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("invalid input: `url` is empty; give an http:// or https:// URL".to_string());
    }
    let url = Url::parse(trimmed).map_err(|e| {
        format!(
            "invalid input: `{trimmed}` is not a valid URL ({e}); give an absolute http:// or \
             https:// URL such as https://example.com/page"
        )
    })?;
    checked(url)
}

/// `location` (a redirect's `Location` header) resolved against `base`, then checked as
/// [`check`] does.
pub fn redirect(base: &Url, location: &str) -> Result<Url, String> {
    let url = base.join(location.trim()).map_err(|e| {
        format!("the redirect from {base} to `{location}` is not a valid URL ({e})")
    })?;
    checked(url).map_err(|why| format!("the redirect from {base} was not followed: {why}"))
}

fn checked(mut url: Url) -> Result<Url, String> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "refused: `{url}` is a {other}: URL; only http:// and https:// URLs are fetched"
            ));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("refused: `{url}` names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "refused: `{}` carries a user name or password; credentials are never sent in a URL",
            redacted(&url)
        ));
    }
    url.set_fragment(None);
    Ok(url)
}

/// `url` with any user name and password removed, for messages.
fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// The `resource_id` of a fetch of `url`: `url:` and the URL as requested, normalized
/// (`HTTP://Example.COM` → `url:http://example.com/`), fragment dropped.
pub fn resource_id(url: &Url) -> String {
    format!("url:{url}")
}

/// The `resource_id` of a call whose `url` was refused before any request: `url:` and the text
/// as given.
pub fn resource_id_of_text(text: &str) -> String {
    format!("url:{}", text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn http_and_https_urls_are_fetched_normalized_without_fragment() {
        let url = check(" HTTP://Example.COM:80/a/../b?q=1#top ").unwrap();
        assert_eq!(url.as_str(), "http://example.com/b?q=1");
        assert_eq!(resource_id(&url), "url:http://example.com/b?q=1");
        let url = check("https://127.0.0.1:8443").unwrap();
        assert_eq!(url.as_str(), "https://127.0.0.1:8443/");
        assert!(check("http://[::1]:8080/x").is_ok());
    }

    #[test]
    fn other_schemes_and_malformed_urls_are_refused_by_name() {
        let refused = check("file:///etc/passwd").unwrap_err();
        assert!(refused.contains("file:"), "{refused}");
        assert!(refused.contains("only http:// and https://"), "{refused}");
        let refused = check("ftp://example.com/pub").unwrap_err();
        assert!(refused.contains("ftp:"), "{refused}");
        assert!(check("data:text/plain,hi").unwrap_err().contains("data:"));
        assert!(check("javascript:alert(1)").is_err());
        let refused = check("example.com/page").unwrap_err();
        assert!(refused.contains("not a valid URL"), "{refused}");
        assert!(refused.contains("example.com/page"), "{refused}");
        assert!(check("").unwrap_err().contains("empty"));
        assert!(check("http://").is_err());
        assert!(check("http://exa mple.com/").is_err());
    }

    #[test]
    fn credentials_in_a_url_are_refused_and_not_echoed() {
        let refused = check("https://user:hunter2@example.com/").unwrap_err();
        assert!(refused.contains("user name or password"), "{refused}");
        assert!(!refused.contains("hunter2"), "{refused}");
    }

    #[test]
    fn redirects_resolve_against_the_answering_url_and_are_checked() {
        let base = check("http://127.0.0.1:8000/docs/a.html").unwrap();
        assert_eq!(
            redirect(&base, "b.html").unwrap().as_str(),
            "http://127.0.0.1:8000/docs/b.html"
        );
        assert_eq!(
            redirect(&base, "//other.test:9/x#f").unwrap().as_str(),
            "http://other.test:9/x"
        );
        let refused = redirect(&base, "file:///etc/passwd").unwrap_err();
        assert!(refused.contains("not followed"), "{refused}");
        assert!(refused.contains("file:"), "{refused}");
    }

    proptest! {
        #[test]
        fn any_text_is_checked_without_panic(text in "\\PC{0,64}", location in "\\PC{0,32}") {
            if let Ok(url) = check(&text) {
                prop_assert!(matches!(url.scheme(), "http" | "https"));
                prop_assert!(url.fragment().is_none());
                let _ = redirect(&url, &location);
            }
        }

        #[test]
        fn url_shaped_text_is_checked_without_panic(
            scheme in "(http|https|file|ftp|HTTP|)",
            rest in "[a-z0-9.:@/?#%\\[\\]-]{0,40}",
        ) {
            let _ = check(&format!("{scheme}://{rest}"));
        }
    }
}
