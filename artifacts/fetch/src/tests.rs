//! The tool's input checks and the text of its results, on the host.

use super::*;
use murmur_guest::tool::{RESOURCE_ID, STATE_EFFECT, ToolInput};

fn call(json: &str) -> Result<Call, ToolResult> {
    let args: Args = ToolInput::new(json).json()?;
    Call::of(&args)
}

fn ok_call(json: &str) -> Call {
    call(json).unwrap_or_else(|f| panic!("{f:?}"))
}

fn response(status: u16, headers: &[(&str, &str)], body: Option<(&[u8], Ending)>) -> Response {
    Response {
        url: Url::parse("http://127.0.0.1:8080/page").unwrap(),
        hops: Vec::new(),
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: body.map(|(b, e)| (b.to_vec(), e)),
    }
}

fn data(result: &ToolResult) -> &str {
    result.data.as_deref().unwrap_or_default()
}

#[test]
fn input_is_checked_before_any_request() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/page#frag"}"#);
    assert_eq!(c.url.as_str(), "http://127.0.0.1:8080/page");
    assert_eq!(c.method, Method::Get);
    assert_eq!(c.max_bytes, 256 * 1024);
    assert!(!c.raw);
    let c = ok_call(
        r#"{"url": "https://example.com", "method": "HEAD", "max_bytes": 10, "raw": true}"#,
    );
    assert_eq!(c.method, Method::Head);
    assert_eq!(c.max_bytes, 10);

    let refused = call(r#"{"url": "file:///etc/passwd"}"#).unwrap_err();
    assert_eq!(refused.status, Status::Failed);
    assert!(data(&refused).contains("file:"), "{refused:?}");
    assert_eq!(refused.metadata_value(STATE_EFFECT), Some("read"));
    assert_eq!(
        refused.metadata_value(RESOURCE_ID),
        Some("url:file:///etc/passwd")
    );
    assert!(data(&call(r#"{"url": "ftp://example.com/"}"#).unwrap_err()).contains("ftp:"));
    assert!(data(&call(r#"{}"#).unwrap_err()).contains("missing field `url`"));
    assert!(data(&call(r#"{"url": "http://a/", "method": "POST"}"#).unwrap_err()).contains("POST"));
    for bad in [0, MAX_MAX_BYTES + 1] {
        let refused = call(&format!(r#"{{"url": "http://a/", "max_bytes": {bad}}}"#)).unwrap_err();
        assert!(data(&refused).contains("max_bytes"), "{refused:?}");
    }
}

#[test]
fn described_types_are_not_read() {
    let c = ok_call(r#"{"url": "http://a/"}"#);
    let h = |ct: &str| vec![("content-type".to_string(), ct.to_string())];
    assert_eq!(c.body_bound(&h("image/png")), None);
    assert_eq!(
        c.body_bound(&h("text/html; charset=utf-8")),
        Some(256 * 1024)
    );
    assert_eq!(c.body_bound(&h("application/json")), Some(256 * 1024));
    assert_eq!(c.body_bound(&[]), Some(256 * 1024));
}

#[test]
fn an_html_page_comes_back_as_text_after_the_status_type_and_url() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/page"}"#);
    let html = b"<html><body><h1>Hello</h1><p>A <em>small</em> page.</p></body></html>";
    let r = c.report(&response(
        200,
        &[("content-type", "text/html; charset=utf-8")],
        Some((html, Ending::Complete)),
    ));
    assert_eq!(r.status, Status::Passed);
    let text = data(&r);
    assert!(
        text.starts_with(
            "HTTP 200 OK\ncontent-type: text/html; charset=utf-8\nurl: http://127.0.0.1:8080/page\n\n"
        ),
        "{text}"
    );
    assert!(text.contains("# Hello"), "{text}");
    assert!(text.contains("A *small* page."), "{text}");
    assert!(!text.contains("<p>"), "{text}");
    assert!(!r.truncated);
    assert_eq!(r.metadata_value(STATE_EFFECT), Some("read"));
    assert_eq!(
        r.metadata_value(RESOURCE_ID),
        Some("url:http://127.0.0.1:8080/page")
    );
    assert_eq!(
        r.summary.as_deref(),
        Some("GET http://127.0.0.1:8080/page: 200 OK, text/html, 69 bytes read")
    );

    let raw = ok_call(r#"{"url": "http://127.0.0.1:8080/page", "raw": true}"#).report(&response(
        200,
        &[("content-type", "text/html")],
        Some((html, Ending::Complete)),
    ));
    assert!(data(&raw).contains("<h1>Hello</h1>"), "{raw:?}");
}

#[test]
fn json_comes_back_as_is_and_an_error_status_fails() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/page"}"#);
    let json = br#"{"error": "not found", "id": 7}"#;
    let r = c.report(&response(
        404,
        &[("content-type", "application/json")],
        Some((json, Ending::Complete)),
    ));
    assert_eq!(r.status, Status::Failed);
    assert!(data(&r).starts_with("HTTP 404 Not Found\n"), "{r:?}");
    assert!(
        data(&r).ends_with("\n\n{\"error\": \"not found\", \"id\": 7}\n"),
        "{r:?}"
    );
}

#[test]
fn head_lists_every_header_and_no_body() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/page", "method": "HEAD"}"#);
    let r = c.report(&response(
        200,
        &[("content-type", "text/plain"), ("x-served-by", "test")],
        None,
    ));
    assert_eq!(
        data(&r),
        "HTTP 200 OK\ncontent-type: text/plain\nurl: http://127.0.0.1:8080/page\n\n\
         content-type: text/plain\nx-served-by: test\n"
    );
}

#[test]
fn a_cut_body_says_so() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/page", "max_bytes": 5}"#);
    let r = c.report(&response(
        200,
        &[("content-type", "text/plain"), ("content-length", "1000")],
        Some((b"abcde", Ending::Cut)),
    ));
    assert!(r.truncated);
    let text = data(&r);
    assert!(text.contains("\n\nabcde\n\n[cut: reading stopped at max_bytes = 5 bytes of the body; the server announced 1000 bytes;"), "{text}");
    let r = c.report(&response(
        200,
        &[("content-type", "text/plain")],
        Some((b"ab", Ending::TimedOut)),
    ));
    assert!(r.truncated);
    assert!(data(&r).contains("[stopped: the body did not end within 30 s; 2 bytes were read]"));
}

#[test]
fn other_types_are_described_not_dumped() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/logo.png"}"#);
    let r = c.report(&response(
        200,
        &[("content-type", "image/png"), ("content-length", "20480")],
        None,
    ));
    assert_eq!(r.status, Status::Passed);
    assert!(
        data(&r).contains(
            "[not shown: the body is image/png, 20.0 KiB (20480 bytes, from content-length);"
        ),
        "{r:?}"
    );
    let sniffed = c.report(&response(
        200,
        &[],
        Some((b"\x89PNG\0\0\x01", Ending::Complete)),
    ));
    assert!(
        data(&sniffed).contains("content-type: (none given)"),
        "{sniffed:?}"
    );
    assert!(data(&sniffed).contains("is not text"), "{sniffed:?}");
    assert!(!data(&sniffed).contains("PNG"), "{sniffed:?}");
}

#[test]
fn redirects_taken_are_listed() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:8080/old"}"#);
    let mut answer = response(
        200,
        &[("content-type", "text/plain")],
        Some((b"x", Ending::Complete)),
    );
    answer.hops = vec![Hop {
        from: Url::parse("http://127.0.0.1:8080/old").unwrap(),
        status: 301,
    }];
    let r = c.report(&answer);
    assert!(
        data(&r).contains(
            "redirected: http://127.0.0.1:8080/old (301) -> http://127.0.0.1:8080/page\n"
        ),
        "{r:?}"
    );
    // The resource is the URL asked for.
    assert_eq!(
        r.metadata_value(RESOURCE_ID),
        Some("url:http://127.0.0.1:8080/old")
    );
}

#[test]
fn refusals_say_the_url_is_not_in_network_allow() {
    let c = ok_call(r#"{"url": "http://127.0.0.1:9/x"}"#);
    let r = c.failure(net::Failure::NotAllowed {
        url: c.url.clone(),
        via: None,
    });
    assert_eq!(r.status, Status::Failed);
    assert!(
        data(&r).starts_with("refused: http://127.0.0.1:9/x is not in `network.allow`"),
        "{r:?}"
    );
    let r = c.failure(net::Failure::NotAllowed {
        url: Url::parse("http://127.0.0.2:9/y").unwrap(),
        via: Some(Hop {
            from: c.url.clone(),
            status: 302,
        }),
    });
    assert!(
        data(&r).starts_with(
            "refused: http://127.0.0.1:9/x redirected (302) to http://127.0.0.2:9/y, which is not in `network.allow`"
        ),
        "{r:?}"
    );
    assert_eq!(
        r.metadata_value(RESOURCE_ID),
        Some("url:http://127.0.0.1:9/x")
    );
}
