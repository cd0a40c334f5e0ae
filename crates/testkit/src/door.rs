//! Serving a capsule from a test: `mur run DIR --serve` as a child process, and a small client
//! for its door (JSON-RPC bodies and SSE streams).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The workdir of the session a capsule served from `capsule_dir` runs (`<capsule_dir>/work/ses_…`).
pub fn session_dir(capsule_dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(capsule_dir.join("work"))
        .expect("the served capsule's work directory")
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("ses_"))
        .expect("a session directory")
        .path()
}

/// A capsule being served. Stops (SIGTERM, then waits) when dropped.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    output: std::sync::Arc<std::sync::Mutex<String>>,
    errors: std::sync::Arc<std::sync::Mutex<String>>,
    /// The threads reading its stdout and stderr, each done at its pipe's end.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Runs `mur run <dir> --serve --port 0 --json` with `env` (and `MURMUR_HOME` shared),
    /// and waits for it to say where it listens.
    pub fn start(bin: &Path, dir: &Path, env: &[(&str, &str)]) -> Served {
        Served::start_with_home(bin, dir, env, &crate::shared_home())
    }

    /// [`Served::start`] with `MURMUR_HOME` set to `home`: its own credentials file and control
    /// directory (and its own compiled-component cache, unless `home/cache` links to the shared
    /// one).
    pub fn start_with_home(bin: &Path, dir: &Path, env: &[(&str, &str)], home: &Path) -> Served {
        Served::start_with_args(bin, dir, env, home, &[])
    }

    /// [`Served::start_with_home`] with `extra` arguments to `mur run`.
    pub fn start_with_args(
        bin: &Path,
        dir: &Path,
        env: &[(&str, &str)],
        home: &Path,
        extra: &[&str],
    ) -> Served {
        let mut command = Command::new(bin);
        command.env_clear();
        for name in [
            "PATH",
            "HOME",
            "CARGO",
            "RUSTUP_HOME",
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
        ] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.env("MURMUR_HOME", home);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .args(["run", "--serve", "--json"])
            .arg(dir)
            .arg("--workdir")
            .arg(dir.join("work"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting mur run --serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        lines
            .read_line(&mut first)
            .expect("reading mur's first line");
        let Some(url) = first.trim().strip_prefix("listening on ") else {
            let mut rest = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut rest));
            panic!("mur did not start serving: {first}{rest}");
        };
        let url = url.to_string();
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = output.clone();
        let mut readers = vec![std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = lines.read_to_string(&mut rest);
            sink.lock().unwrap().push_str(&rest);
        })];
        let errors = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            let sink = errors.clone();
            readers.push(std::thread::spawn(move || {
                let mut reader = BufReader::new(stderr);
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    sink.lock().unwrap().push_str(&line);
                    line.clear();
                }
            }));
        }
        Served {
            child,
            url,
            output,
            errors,
            readers,
        }
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.errors.lock().unwrap().clone()
    }

    /// Waits for the process to end by itself (at most `timeout`); its exit code. Once it has
    /// ended, what it printed is all in [`Served::stderr`] and [`Served::stop`]'s answer.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let started = std::time::Instant::now();
        while started.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.read_to_the_end();
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Lets the readers take the last of what the ended process printed: each is done at its
    /// pipe's end (at most 10 s, should a child of the process still hold a pipe open).
    fn read_to_the_end(&self) {
        let started = std::time::Instant::now();
        while self.readers.iter().any(|reader| !reader.is_finished())
            && started.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asks it to stop (SIGTERM) and returns what it printed after `listening on`.
    pub fn stop(&mut self) -> String {
        terminate(self.child.id());
        let _ = self.wait(Duration::from_secs(20));
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.read_to_the_end();
        self.output.lock().unwrap().clone()
    }

    /// POSTs a JSON-RPC body to the door; the HTTP status and the JSON answer.
    pub fn rpc(&self, body: &Value) -> (u16, Value) {
        post(
            &format!("{}/", self.url),
            body.to_string().into_bytes(),
            &[],
        )
    }

    /// POSTs a request whose answer is an SSE stream, and reads events until it ends.
    pub fn stream(&self, body: &Value, headers: &[(&str, &str)]) -> Vec<SseEvent> {
        self.open_stream(body, headers).collect()
    }

    /// POSTs a request whose answer is an SSE stream, to be read event by event.
    pub fn open_stream(&self, body: &Value, headers: &[(&str, &str)]) -> SseStream {
        let mut request = shared_client()
            .post(format!("{}/", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().expect("the door answers");
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream"),
            "not a stream"
        );
        SseStream {
            reader: BufReader::new(response),
        }
    }

    /// GETs a path of the door.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut request = shared_client().get(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().expect("the door answers");
        let status = response.status().as_u16();
        (status, response.json().unwrap_or(Value::Null))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGTERM, as an operator stopping the capsule would.
fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

/// POSTs raw bytes as JSON; the status and the JSON answer (`Null` when it is not JSON).
pub fn post(url: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> (u16, Value) {
    let answer = post_answer(url, body, headers);
    (answer.status, answer.body)
}

/// What the door answered a POST: its status, its `WWW-Authenticate` header, its JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub www_authenticate: Option<String>,
    pub body: Value,
}

/// POSTs raw bytes as JSON; the whole [`Answer`].
pub fn post_answer(url: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Answer {
    let mut request = shared_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().expect("the door answers");
    let status = response.status().as_u16();
    let www_authenticate = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = response.text().unwrap_or_default();
    Answer {
        status,
        www_authenticate,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

/// One SSE event: its id and its data as JSON.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: Value,
}

/// The events of an SSE response, as they arrive.
pub struct SseStream {
    reader: BufReader<reqwest::blocking::Response>,
}

impl Iterator for SseStream {
    type Item = SseEvent;

    fn next(&mut self) -> Option<SseEvent> {
        let mut id = None;
        let mut data = String::new();
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if data.is_empty() {
                    continue;
                }
                return Some(SseEvent {
                    id,
                    data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
                });
            }
            if let Some(value) = line.strip_prefix("id:") {
                id = Some(value.trim().to_string());
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
    }
}

/// A blocking HTTP client builder. The workspace's reqwest takes its TLS crypto from the
/// process default, so ring is installed first (a no-op when one is already installed).
pub fn client_builder() -> reqwest::blocking::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
}

/// The one client of [`Served`]'s requests and [`post`]: a request gives up after 60 s, and
/// every request opens a connection of its own (none is kept between requests, so a door
/// stopped and another started on its port is never sent a stale one). Built once: a client
/// reads the system's root certificates and starts a thread, which thousands of requests
/// would otherwise pay for each.
fn shared_client() -> &'static reqwest::blocking::Client {
    static CLIENT: std::sync::OnceLock<reqwest::blocking::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        client_builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(0)
            .build()
            .expect("http client")
    })
}
