//! `fetch` through the real `mur`: `mur tool invoke` under a capsule whose `network.allow`
//! names a test server on 127.0.0.1 (HTML as text, JSON as is, HEAD, redirects, refusals, an
//! endless body cut at the bound, bad input), and a session whose model (the provider
//! emulator) fetches a page and is refused one outside `network.allow`. Every server is
//! started by the test on 127.0.0.1 and counts the connections it accepted, so "never
//! contacted" is measured, not assumed.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput};
use serde_json::{Value, json};

use super::{KEY, text};

/// The printed result of a call that ended with `status` (`passed` exits 0, `failed` 1), a read.
fn ended(output: &MurOutput, status: &str) -> Value {
    let printed = super::ended(output, status);
    assert_eq!(printed["state_effect"], "read", "{printed:#}");
    printed
}

/// A capsule on the Anthropic driver against `endpoint` with fetch as its one tool, allowed to
/// reach `allow`.
fn session_capsule(dir: &Path, endpoint: &str, allow: &str) -> PathBuf {
    super::capsule(
        dir,
        endpoint,
        "reader",
        &["fetch"],
        &format!(
            "  system_prompt: \"You read pages.\"\n  max_turns: 4\ncapabilities:\n  network: {{ allow: [\"{allow}\"] }}"
        ),
    )
}

const PAGE: &str = "<!doctype html><html><head><title>Notes</title>\
    <style>body { color: red }</style><script>var hidden = 'script text';</script></head>\
    <body><h1>Release notes</h1><p>Version <b>2.0</b> is out.</p>\
    <ul><li>faster</li><li>smaller</li></ul>\
    <p>See <a href=\"https://example.com/changes\">the changes</a>.</p></body></html>";

const JSON_BODY: &str = "{\"name\": \"murmur\", \"tags\": [\"a\", \"b\"], \"n\": 3}";

/// One request a [`Site`] received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
}

#[derive(Default)]
struct SiteState {
    connections: AtomicUsize,
    requests: Mutex<Vec<Seen>>,
    stop: AtomicBool,
    /// Where `/away` redirects to.
    away: Mutex<String>,
}

/// A small HTTP/1.1 server on 127.0.0.1 (an OS-assigned port) with fixed routes; a thread per
/// connection, one request each. Stops when dropped.
struct Site {
    addr: SocketAddr,
    state: Arc<SiteState>,
}

impl Site {
    fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(SiteState::default());
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Site { addr, state }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<Seen> {
        self.state.requests.lock().unwrap().clone()
    }

    fn redirect_away_to(&self, url: &str) {
        *self.state.away.lock().unwrap() = url.to_string();
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag (this connection is not counted after).
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, state: &SiteState) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    if state.stop.load(Ordering::SeqCst) {
        return;
    }
    state.requests.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
    });
    let mut out = stream;
    let head_only = method == "HEAD";
    let send = |out: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]| {
        let mut head = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let _ = out.write_all(head.as_bytes());
        if !head_only {
            let _ = out.write_all(body);
        }
        let _ = out.flush();
    };
    let fixed = |out: &mut TcpStream, status: &str, content_type: &str, body: &[u8]| {
        send(
            out,
            status,
            &[
                ("content-type", content_type.to_string()),
                ("content-length", body.len().to_string()),
                ("x-test", "murmur".to_string()),
            ],
            body,
        )
    };
    match path.as_str() {
        "/page.html" => fixed(
            &mut out,
            "200 OK",
            "text/html; charset=utf-8",
            PAGE.as_bytes(),
        ),
        "/data.json" => fixed(&mut out, "200 OK", "application/json", JSON_BODY.as_bytes()),
        "/missing" => fixed(
            &mut out,
            "404 Not Found",
            "application/json",
            b"{\"error\": \"no such thing\"}",
        ),
        "/logo.png" => fixed(
            &mut out,
            "200 OK",
            "image/png",
            &[0x89, b'P', b'N', b'G', 0, 0, 0, 13, 0xff, 0xfe],
        ),
        "/deep.html" => {
            let body = "<div><table><tr><td><ul><li>".repeat(3000) + "bottom";
            fixed(&mut out, "200 OK", "text/html", body.as_bytes())
        }
        "/moved" => send(
            &mut out,
            "301 Moved Permanently",
            &[
                ("location", "/page.html".to_string()),
                ("content-length", "0".to_string()),
            ],
            b"",
        ),
        "/away" => {
            let to = state.away.lock().unwrap().clone();
            send(
                &mut out,
                "302 Found",
                &[("location", to), ("content-length", "0".to_string())],
                b"",
            )
        }
        p if p.starts_with("/loop/") => {
            let n: u32 = p["/loop/".len()..].parse().unwrap_or(0);
            send(
                &mut out,
                "302 Found",
                &[
                    ("location", format!("/loop/{}", n + 1)),
                    ("content-length", "0".to_string()),
                ],
                b"",
            )
        }
        // A body without end (and, for /huge, announced as 1 GiB): written until the reader
        // hangs up.
        "/endless" | "/huge" => {
            let mut headers = vec![("content-type", "text/plain".to_string())];
            if path == "/huge" {
                headers.push(("content-length", (1u64 << 30).to_string()));
            }
            send(&mut out, "200 OK", &headers, b"");
            if head_only {
                return;
            }
            let chunk = "all work and no play makes a long body\n".repeat(1700);
            let started = Instant::now();
            while !state.stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(60)
            {
                if out.write_all(chunk.as_bytes()).is_err() {
                    return;
                }
            }
        }
        // A body that starts, then stalls without end.
        "/stall" => {
            send(
                &mut out,
                "200 OK",
                &[("content-type", "text/plain".to_string())],
                b"partial",
            );
            let started = Instant::now();
            while !state.stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        _ => fixed(&mut out, "404 Not Found", "text/plain", b"not here"),
    }
}

fn artifact() -> PathBuf {
    super::artifact("fetch")
}

/// A capsule granting fetch `network.allow: [<allow>...]`, written under `dir`.
fn tool_capsule(dir: &Path, allow: &[String]) -> PathBuf {
    let allow: Vec<String> = allow.iter().map(|a| format!("\"{a}\"")).collect();
    let file = dir.join("murmur.yaml");
    std::fs::write(
        &file,
        format!(
            "name: fetcher\nversion: \"0.1.0\"\nartifacts:\n  - {{ name: fetch, version: \"0.1.0\", runtime: tool, path: {} }}\ncapabilities:\n  network: {{ allow: [{}] }}\n",
            artifact().display(),
            allow.join(", ")
        ),
    )
    .unwrap();
    file
}

/// `mur tool invoke` of fetch with `input`, under a capsule allowing `site` only.
fn invoke(site: &Site, input: &Value) -> (MurOutput, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let capsule = tool_capsule(dir.path(), &[format!("127.0.0.1:{}", site.addr.port())]);
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact())
        .arg("--capsule")
        .arg(&capsule)
        .arg("--input")
        .arg(input.to_string())
        .arg("--workdir")
        .arg(&workdir)
        .run();
    (output, dir)
}

#[test]
fn an_html_page_comes_back_as_readable_text_after_status_type_and_url() {
    let site = Site::start();
    let url = site.url("/page.html");
    let (output, _dir) = invoke(&site, &json!({"url": format!("{url}#intro")}));
    let printed = ended(&output, "passed");
    assert_eq!(
        text(&printed),
        format!(
            "HTTP 200 OK\ncontent-type: text/html; charset=utf-8\nurl: {url}\n\n\
             # Release notes\n\nVersion **2.0** is out.\n* faster\n* smaller\n\n\
             See [the changes][1].\n\n[1]: https://example.com/changes\n"
        )
    );
    assert_eq!(printed["resource_id"], format!("url:{url}"));
    assert_eq!(printed["result"]["truncated"], false);
    let requests = site.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/page.html")
    );

    // raw: the page's source as is.
    let (output, _dir) = invoke(&site, &json!({"url": url, "raw": true}));
    let printed = ended(&output, "passed");
    assert!(
        text(&printed).ends_with(&format!("\n\n{PAGE}\n")),
        "{printed:#}"
    );
}

#[test]
fn json_comes_back_as_is_and_an_error_status_is_a_failed_result_with_its_body() {
    let site = Site::start();
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/data.json")}));
    let printed = ended(&output, "passed");
    assert_eq!(
        text(&printed),
        format!(
            "HTTP 200 OK\ncontent-type: application/json\nurl: {}\n\n{JSON_BODY}\n",
            site.url("/data.json")
        )
    );

    let (output, _dir) = invoke(&site, &json!({"url": site.url("/missing")}));
    let printed = ended(&output, "failed");
    assert!(
        text(&printed).starts_with("HTTP 404 Not Found\n"),
        "{printed:#}"
    );
    assert!(
        text(&printed).ends_with("\n\n{\"error\": \"no such thing\"}\n"),
        "{printed:#}"
    );
}

#[test]
fn head_gives_the_status_and_headers_only() {
    let site = Site::start();
    let url = site.url("/page.html");
    let (output, _dir) = invoke(&site, &json!({"url": url, "method": "HEAD"}));
    let printed = ended(&output, "passed");
    let out = text(&printed);
    assert!(
        out.starts_with(&format!(
            "HTTP 200 OK\ncontent-type: text/html; charset=utf-8\nurl: {url}\n\n"
        )),
        "{out}"
    );
    assert!(out.contains("\nx-test: murmur\n"), "{out}");
    assert!(
        out.contains(&format!("\ncontent-length: {}\n", PAGE.len())),
        "{out}"
    );
    assert!(!out.contains("Release notes"), "{out}");
    assert_eq!(site.requests()[0].method, "HEAD");
}

#[test]
fn other_content_types_are_described_not_dumped() {
    let site = Site::start();
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/logo.png")}));
    let printed = ended(&output, "passed");
    let out = text(&printed);
    assert!(
        out.contains(
            "[not shown: the body is image/png, 10 bytes (10 bytes, from content-length);"
        ),
        "{out}"
    );
    assert!(!out.contains("PNG"), "{out}");
}

#[test]
fn a_url_not_in_network_allow_is_refused_and_its_server_never_contacted() {
    let site = Site::start();
    let unlisted = Site::start();
    let url = unlisted.url("/page.html");
    let (output, _dir) = invoke(&site, &json!({"url": url}));
    let printed = ended(&output, "failed");
    assert_eq!(
        printed["result"]["summary"],
        format!("refused: {url} is not in `network.allow`")
    );
    assert!(
        text(&printed).contains("`capabilities.network.allow` does not name"),
        "{printed:#}"
    );
    assert_eq!(printed["resource_id"], format!("url:{url}"));
    assert_eq!(printed["refusals"][0]["grant"], "network", "{printed:#}");
    assert_eq!(unlisted.connections(), 0);
    assert_eq!(site.connections(), 0);
}

#[test]
fn redirects_are_followed_and_one_to_an_unlisted_host_is_refused_uncontacted() {
    let site = Site::start();
    // Followed on the same (allowed) host.
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/moved")}));
    let printed = ended(&output, "passed");
    let out = text(&printed);
    assert!(
        out.contains(&format!(
            "url: {}\nredirected: {} (301) -> {}\n",
            site.url("/page.html"),
            site.url("/moved"),
            site.url("/page.html")
        )),
        "{out}"
    );
    assert!(out.contains("# Release notes"), "{out}");
    assert_eq!(
        printed["resource_id"],
        format!("url:{}", site.url("/moved"))
    );

    // To another host: the runtime refuses that request, its server sees nothing.
    let unlisted = Site::start();
    site.redirect_away_to(&unlisted.url("/secret"));
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/away")}));
    let printed = ended(&output, "failed");
    assert_eq!(
        printed["result"]["summary"],
        format!(
            "refused: {} redirected (302) to {}, which is not in `network.allow`",
            site.url("/away"),
            unlisted.url("/secret")
        )
    );
    assert_eq!(unlisted.connections(), 0);

    // A redirect to a file: URL is not followed.
    site.redirect_away_to("file:///etc/passwd");
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/away")}));
    let printed = ended(&output, "failed");
    assert!(
        text(&printed).contains("was not followed: refused: `file:///etc/passwd` is a file: URL"),
        "{printed:#}"
    );
    assert!(!text(&printed).contains("root:"));

    // At most 5 redirects: the 6th is not followed.
    let before = site.requests().len();
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/loop/0")}));
    let printed = ended(&output, "failed");
    assert!(
        text(&printed).starts_with("too many redirects: more than 5"),
        "{printed:#}"
    );
    assert_eq!(site.requests().len() - before, 6);
}

#[test]
fn an_endless_or_huge_body_is_cut_at_max_bytes_in_bounded_time() {
    let site = Site::start();
    for (path, max_bytes) in [("/endless", None), ("/huge", Some(1024 * 1024))] {
        let mut input = json!({"url": site.url(path)});
        if let Some(max) = max_bytes {
            input["max_bytes"] = json!(max);
        }
        let started = Instant::now();
        let (output, _dir) = invoke(&site, &input);
        let took = started.elapsed();
        let printed = ended(&output, "passed");
        assert!(took < Duration::from_secs(20), "{path}: took {took:?}");
        assert_eq!(printed["result"]["truncated"], true, "{path}");
        let bound = max_bytes.unwrap_or(256 * 1024);
        let out = text(&printed);
        let announced = if path == "/huge" {
            "; the server announced 1073741824 bytes"
        } else {
            ""
        };
        assert!(
            out.ends_with(&format!(
                "\n\n[cut: reading stopped at max_bytes = {bound} bytes of the body{announced}; \
                 ask again with a larger max_bytes (at most 5242880) for more]\n"
            )),
            "{path}: {}",
            &out[out.len().saturating_sub(300)..]
        );
        let body = out.split_once("\n\n").unwrap().1;
        let body = &body[..body.rfind("\n\n[cut:").unwrap()];
        assert_eq!(body.len(), bound, "{path}");
        assert!(body.starts_with("all work and no play"), "{path}");
        if bound > 256 * 1024 {
            // Too large to hand back inline: through a file under the scratch directory.
            let data_path = printed["result"]["data_path"].as_str().unwrap_or_default();
            assert!(
                data_path.starts_with(".murmur-scratch/results/fetch-"),
                "{printed:#}"
            );
        }
        eprintln!("{path}: cut at {bound} bytes in {took:?}");
    }
}

#[test]
fn a_body_that_stalls_is_handed_back_at_the_deadline_with_what_came() {
    let site = Site::start();
    let started = Instant::now();
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/stall")}));
    let took = started.elapsed();
    let printed = ended(&output, "passed");
    assert_eq!(printed["result"]["truncated"], true);
    assert!(
        text(&printed).ends_with(
            "\n\npartial\n\n[stopped: the body did not end within 30 s; 7 bytes were read]\n"
        ),
        "{printed:#}"
    );
    assert!(
        took >= Duration::from_secs(29) && took < Duration::from_secs(45),
        "took {took:?}"
    );
}

#[test]
fn deeply_nested_html_is_converted_without_breaking_the_tool() {
    let site = Site::start();
    // 3000 times div > table > tr > td > ul > li, some 18 000 elements deep: laid out as it is
    // such nesting takes minutes and more memory than a component gets.
    let started = Instant::now();
    let (output, _dir) = invoke(&site, &json!({"url": site.url("/deep.html")}));
    let took = started.elapsed();
    let printed = ended(&output, "passed");
    assert!(
        text(&printed).starts_with("HTTP 200 OK\ncontent-type: text/html\n"),
        "{printed:#}"
    );
    assert!(text(&printed).contains("bottom"), "{printed:#}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    eprintln!("deep.html: {took:?}");
}

#[test]
fn bad_input_is_named_and_nothing_is_fetched() {
    let site = Site::start();
    // No url: the input schema refuses it before the tool runs.
    let (output, _dir) = invoke(&site, &json!({"method": "GET"}));
    assert_eq!(output.code, 2, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["error"]["code"], "E-RUN-009", "{printed:#}");
    assert!(
        printed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"url\" is a required property"),
        "{printed:#}"
    );

    for (url, says) in [
        (
            "file:///etc/passwd",
            "refused: `file:///etc/passwd` is a file: URL; only http:// and https:// URLs are fetched",
        ),
        (
            "ftp://127.0.0.1/pub/file.txt",
            "refused: `ftp://127.0.0.1/pub/file.txt` is a ftp: URL; only http:// and https:// URLs are fetched",
        ),
        (
            "127.0.0.1/page.html",
            "invalid input: `127.0.0.1/page.html` is not a valid URL (relative URL without a base)",
        ),
    ] {
        let (output, _dir) = invoke(&site, &json!({"url": url}));
        let printed = ended(&output, "failed");
        assert!(text(&printed).starts_with(says), "{url}: {printed:#}");
        assert!(!text(&printed).contains("root:"), "{url}");
        assert_eq!(printed["resource_id"], format!("url:{url}"));
    }
    let (output, _dir) = invoke(
        &site,
        &json!({"url": site.url("/page.html"), "max_bytes": 6 * 1024 * 1024}),
    );
    assert_eq!(output.json()["error"]["code"], "E-RUN-009");
    assert_eq!(site.connections(), 0);
}

/// The text of the tool result for `call_id` in a request the model got.
fn tool_result(request: &Value, call_id: &str) -> String {
    let mut found = String::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == call_id {
                found = block.to_string();
            }
        }
    }
    found
}

#[test]
fn in_a_session_the_model_reads_an_allowed_page_and_is_refused_an_unlisted_one() {
    let site = Site::start();
    let unlisted = Site::start();
    let script = format!(
        r#"
turns:
  - reply:
      tool_calls:
        - {{ id: f1, name: fetch, input: {{ url: "{page}" }} }}
        - {{ id: f2, name: fetch, input: {{ url: "{json}" }} }}
        - {{ id: f3, name: fetch, input: {{ url: "{away}" }} }}
        - {{ id: f4, name: fetch, input: {{ url: "file:///etc/passwd" }} }}
  - reply: {{ text: "Version 2.0 is out." }}
"#,
        page = site.url("/page.html"),
        json = site.url("/data.json"),
        away = unlisted.url("/page.html"),
    );
    let emulator = Emulator::builder(Script::from_yaml(&script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = session_capsule(
        &root.path().join("capsule"),
        &emulator.url(),
        &format!("127.0.0.1:{}", site.addr.port()),
    );
    let report = super::run_session(&dir, None, "What is new?");

    // What the model was handed back.
    let requests = emulator.requests();
    let second = &requests[1].body;
    let page = tool_result(second, "f1");
    assert!(page.contains("# Release notes"), "{page}");
    assert!(page.contains("Version **2.0** is out."), "{page}");
    assert!(!page.contains("<h1>"), "{page}");
    let json = tool_result(second, "f2");
    let escaped = serde_json::to_string(JSON_BODY).unwrap();
    assert!(json.contains(&escaped[1..escaped.len() - 1]), "{json}");
    let refused = tool_result(second, "f3");
    assert!(
        refused.contains(&format!(
            "refused: {} is not in `network.allow`",
            unlisted.url("/page.html")
        )),
        "{refused}"
    );
    let file = tool_result(second, "f4");
    assert!(file.contains("only http:// and https://"), "{file}");
    assert!(!file.contains("root:"), "{file}");
    assert_eq!(unlisted.connections(), 0);
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/page.html", "/data.json"]);

    // The trace: every call a read of its URL.
    let calls = super::tool_calls(&report);
    let seen: Vec<(&str, &str, &str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["state_effect"].as_str().unwrap_or_default(),
                c["resource_id"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let page_id = format!("url:{}", site.url("/page.html"));
    let json_id = format!("url:{}", site.url("/data.json"));
    let away_id = format!("url:{}", unlisted.url("/page.html"));
    assert_eq!(
        seen,
        [
            ("f1", "passed", "read", page_id.as_str()),
            ("f2", "passed", "read", json_id.as_str()),
            ("f3", "failed", "read", away_id.as_str()),
            ("f4", "failed", "read", "url:file:///etc/passwd"),
        ],
        "{calls:#?}"
    );
}
