//! `fetch`: an HTTP(S) GET or HEAD of a URL, through the runtime's `wasi:http` grant, the
//! answer handed back as text a model can read.
//!
//! What the tool promises:
//!
//! - **Only what the capsule allows is reached.** Every request, the first and each
//!   redirect's, goes through `wasi:http`, where the runtime checks it against the capsule's
//!   `network.allow`; a refused request never leaves the host, and the result says the URL
//!   is not in `network.allow`. Credentials the runtime holds never enter the tool.
//! - **Only http:// and https:// URLs**, with a host and without a user name or password
//!   ([`target`]); anything else (`file:`, `ftp:`, a malformed URL) is refused by the tool
//!   before any request. Redirects are followed, at most 5, each checked the same way.
//! - **Text out.** HTML becomes readable text (html2text; `raw: true` keeps the source),
//!   `text/*`, JSON, XML and the like come back as they are, any other type is described (type
//!   and size) and its body is not read ([`content`]).
//! - **Bounded.** At most `max_bytes` of the body are read (default 256 KiB, at most 5 MiB), and
//!   the text handed back is at most `max_bytes` too; the whole call ends within 30 s. A body
//!   cut by either bound says so in a note and the result is marked `truncated`. A result
//!   larger than 256 KiB goes back through a file under `.murmur-scratch/results/`.
//! - **The result** starts with the status line, the `content-type` and the final URL (and the
//!   redirects taken), then the text. HEAD returns the status line and every header. An HTTP
//!   status of 400 or more is a `failed` result (its body is still shown).
//! - Every result sets `state_effect: read` and `resource_id: url:<url>` (the URL as
//!   requested, normalized, without its fragment).

pub mod answer;
pub mod content;
pub mod net;
pub mod target;

use murmur_guest::tool::{StateEffect, Status, ToolResult};
use serde::Deserialize;
use url::Url;

use answer::header;
pub use answer::{Ending, Hop, Method, Response};
use content::Kind;

/// The default bound on the body read.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024;
/// The largest `max_bytes` accepted.
pub const MAX_MAX_BYTES: u64 = 5 * 1024 * 1024;
/// A result larger than this goes back through a file, not inline.
pub const INLINE_MAX: usize = 256 * 1024;

/// The tool's input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pub url: String,
    #[serde(default)]
    pub method: Method,
    #[serde(default)]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub raw: bool,
}

/// The checked input: the URL to request and the bound.
#[derive(Debug, Clone)]
pub struct Call {
    pub url: Url,
    pub method: Method,
    pub max_bytes: usize,
    pub raw: bool,
}

impl Call {
    /// The call `args` asks for, or a `failed` result naming what is wrong.
    pub fn of(args: &Args) -> Result<Call, ToolResult> {
        let with_meta = |r: ToolResult| {
            r.state_effect(StateEffect::Read)
                .resource_id(target::resource_id_of_text(&args.url))
        };
        let url = target::check(&args.url).map_err(|why| with_meta(ToolResult::failed(why)))?;
        let max_bytes = args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        if max_bytes == 0 || max_bytes > MAX_MAX_BYTES {
            return Err(with_meta(ToolResult::failed(format!(
                "invalid input: `max_bytes` is {max_bytes}; give a number from 1 to \
                 {MAX_MAX_BYTES} (5 MiB)"
            ))));
        }
        Ok(Call {
            url,
            method: args.method,
            max_bytes: max_bytes as usize,
            raw: args.raw,
        })
    }

    /// How many bytes of a body with these headers to read: `None` for a type that is
    /// described, not shown.
    pub fn body_bound(&self, headers: &[(String, String)]) -> Option<usize> {
        let essence = header(headers, "content-type").map(content::essence);
        match Kind::of(essence.as_deref()) {
            Some(Kind::Other) => None,
            _ => Some(self.max_bytes),
        }
    }

    fn meta(&self, result: ToolResult) -> ToolResult {
        result
            .state_effect(StateEffect::Read)
            .resource_id(target::resource_id(&self.url))
    }

    /// The result for a fetch that got no answer.
    pub fn failure(&self, failure: net::Failure) -> ToolResult {
        let message = match failure {
            net::Failure::NotAllowed { url, via: None } => format!(
                "refused: {url} is not in `network.allow`\nThe capsule's \
                 `capabilities.network.allow` does not name {}, so the runtime did not send \
                 the request. Fetch a URL on an allowed host, or ask for it to be added to \
                 `network.allow`.",
                origin(&url)
            ),
            net::Failure::NotAllowed {
                url,
                via: Some(hop),
            } => format!(
                "refused: {} redirected ({}) to {url}, which is not in `network.allow`\nThe \
                 runtime did not send that request: only hosts the capsule's \
                 `capabilities.network.allow` names are fetched.",
                hop.from, hop.status
            ),
            net::Failure::TooManyRedirects { hops } => format!(
                "too many redirects: more than {} ({}); the last was not followed",
                net::MAX_REDIRECTS,
                hops.iter()
                    .map(|h| format!("{} ({})", h.from, h.status))
                    .collect::<Vec<_>>()
                    .join(" -> ")
            ),
            net::Failure::BadRedirect(why) => why,
            net::Failure::Unreachable { url, why } => format!("cannot fetch {url}: {why}"),
            net::Failure::TimedOut { url } => format!(
                "cannot fetch {url}: no answer within {} s",
                net::DEADLINE.as_secs()
            ),
        };
        self.meta(ToolResult::failed(message))
    }

    /// The result for the answer `response` (pure: the same on the host).
    pub fn report(&self, response: &Response) -> ToolResult {
        let reason = http_reason(response.status);
        let content_type = response.header("content-type");
        let mut out = format!("HTTP {} {reason}\n", response.status);
        out.push_str(&format!(
            "content-type: {}\n",
            content_type.unwrap_or("(none given)")
        ));
        out.push_str(&format!("url: {}\n", response.url));
        if !response.hops.is_empty() {
            let chain: Vec<String> = response
                .hops
                .iter()
                .map(|h| format!("{} ({})", h.from, h.status))
                .collect();
            out.push_str(&format!(
                "redirected: {} -> {}\n",
                chain.join(" -> "),
                response.url
            ));
        }
        out.push('\n');

        let mut truncated = false;
        let shape = match (self.method, &response.body) {
            (Method::Head, _) => {
                for (name, value) in &response.headers {
                    out.push_str(&format!("{name}: {value}\n"));
                }
                format!("{} headers", response.headers.len())
            }
            (Method::Get, None) => {
                let essence = content_type.map(content::essence).unwrap_or_default();
                let length = response
                    .header("content-length")
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let size = match length {
                    Some(n) => format!("{} ({n} bytes, from content-length)", content::size(n)),
                    None => "size not given by the server".to_string(),
                };
                out.push_str(&format!(
                    "[not shown: the body is {essence}, {size}; this tool shows HTML, text and \
                     JSON only, so the body was not read]\n"
                ));
                format!("{essence} not shown")
            }
            (Method::Get, Some((bytes, ending))) => {
                let essence = content_type.map(content::essence);
                let kind = Kind::of(essence.as_deref()).unwrap_or_else(|| Kind::sniff(bytes));
                let mut notes: Vec<String> = Vec::new();
                let text = match kind {
                    Kind::Other => {
                        notes.push(format!(
                            "[not shown: the body ({}, no content-type given) is not text]",
                            content::size(bytes.len() as u64)
                        ));
                        String::new()
                    }
                    Kind::Html | Kind::Text => {
                        let charset = content_type.and_then(content::charset);
                        let decoded = content::decode(bytes, charset.as_deref());
                        if decoded.lossy {
                            notes.push(format!(
                                "[note: the body is not valid {}; bytes that could not be \
                                 decoded are shown as U+FFFD]",
                                charset.as_deref().unwrap_or("utf-8")
                            ));
                        }
                        let (text, was_cut) = if kind == Kind::Html && !self.raw {
                            content::html_to_text(&decoded.text, self.max_bytes)
                        } else {
                            let (t, c) = content::cut(&decoded.text, self.max_bytes);
                            (t.to_string(), c)
                        };
                        if was_cut {
                            truncated = true;
                            notes.push(format!(
                                "[cut: the text is cut at max_bytes = {} bytes]",
                                self.max_bytes
                            ));
                        }
                        if text.trim().is_empty() && ending == &Ending::Complete {
                            notes.push("[the body is empty]".to_string());
                        }
                        text
                    }
                };
                match ending {
                    Ending::Complete => {}
                    Ending::Cut => {
                        truncated = true;
                        let announced = response
                            .header("content-length")
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .map(|n| format!("; the server announced {n} bytes"))
                            .unwrap_or_default();
                        notes.push(format!(
                            "[cut: reading stopped at max_bytes = {} bytes of the body{announced}; \
                             ask again with a larger max_bytes (at most {MAX_MAX_BYTES}) for more]",
                            self.max_bytes
                        ));
                    }
                    Ending::TimedOut => {
                        truncated = true;
                        notes.push(format!(
                            "[stopped: the body did not end within {} s; {} bytes were read]",
                            net::DEADLINE.as_secs(),
                            bytes.len()
                        ));
                    }
                    Ending::Broke(why) => {
                        truncated = true;
                        notes.push(format!(
                            "[the body broke off after {} bytes: {why}]",
                            bytes.len()
                        ));
                    }
                }
                out.push_str(&text);
                if !text.is_empty() && !text.ends_with('\n') {
                    out.push('\n');
                }
                if !notes.is_empty() {
                    if !text.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&notes.join("\n"));
                    out.push('\n');
                }
                format!(
                    "{}, {} read{}",
                    essence.unwrap_or_else(|| "no content-type".to_string()),
                    content::size(bytes.len() as u64),
                    if truncated { ", cut" } else { "" }
                )
            }
        };
        let status = if response.status >= 400 {
            Status::Failed
        } else {
            Status::Passed
        };
        let summary = format!(
            "{} {}: {} {reason}, {shape}",
            self.method.as_str(),
            response.url,
            response.status
        );
        let mut result = ToolResult::new(status)
            .summary(summary)
            .truncated(truncated);
        result.data = Some(out);
        self.meta(result)
    }
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The reason phrase of `status`, or `""` for a code without one.
fn http_reason(status: u16) -> &'static str {
    wstd::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}

#[cfg(target_arch = "wasm32")]
mod export {
    use murmur_guest::tool::{Tool, ToolInput, ToolResult};

    use super::{Args, Call, INLINE_MAX, content, net};

    struct Fetch;

    impl Tool for Fetch {
        fn run(input: ToolInput) -> ToolResult {
            let args: Args = match input.json() {
                Ok(args) => args,
                Err(failed) => return failed,
            };
            let call = match Call::of(&args) {
                Ok(call) => call,
                Err(failed) => return failed,
            };
            let fetched = wstd::runtime::block_on(net::fetch(call.method, call.url.clone(), |h| {
                call.body_bound(h)
            }));
            let result = match fetched {
                Ok(response) => call.report(&response),
                Err(failure) => call.failure(failure),
            };
            deliver(result)
        }
    }

    /// `result` as the runtime will take it: inline up to [`INLINE_MAX`], larger through a file
    /// under `.murmur-scratch/results/` (or, should that file not be written, cut inline with a
    /// note).
    fn deliver(result: ToolResult) -> ToolResult {
        let Some(data) = result.data.as_deref() else {
            return result;
        };
        if data.len() <= INLINE_MAX {
            return result;
        }
        let dir = format!("{}/results", murmur_guest::workdir::SCRATCH);
        let name = format!("{dir}/fetch-{}.txt", unique());
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&name, data));
        match written {
            Ok(()) => result.data_path(name),
            Err(e) => {
                let (kept, _) = content::cut(data, INLINE_MAX - 200);
                let text = format!(
                    "{kept}\n\n[cut: the result is larger than {INLINE_MAX} bytes and could not be \
                     written to {dir} ({e}); ask again with a smaller max_bytes]\n"
                );
                let mut result = result.truncated(true);
                result.data = Some(text);
                result
            }
        }
    }

    /// A name part no other call of this process or another will pick: the wall clock in
    /// nanoseconds and a per-process counter.
    fn unique() -> String {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{nanos}-{}", COUNT.fetch_add(1, Ordering::Relaxed))
    }

    murmur_guest::export_tool!(Fetch);
}

#[cfg(test)]
mod tests;
