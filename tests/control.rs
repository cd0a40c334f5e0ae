//! The control plane, driven over real HTTP on loopback and through `mur control`: a
//! served capsule with three driver choices (the primary and `fast` on one Anthropic driver, `gpt`
//! on the OpenAI Chat driver keyed by an injected secret), each provider an emulator that records
//! what reached it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use murmur_testkit::door::{Served, client_builder};
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root, shared_home};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-primary";
/// The injected secret: it must never be written anywhere.
const GPT_SECRET: &str = "sk-injected-7d41c0ffee";

const ALL_SETTINGS: &str = "[inference.driver, inference.max_tokens]";

struct Capsule {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    anthropic: Emulator,
    openai: Emulator,
}

/// A murmur home of its own (its own control directory and credentials file) that shares the
/// suite's compiled-component cache.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let cache = shared_home().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, home.path().join("cache")).unwrap();
    home
}

fn capsule(anthropic: &str, openai: &str, settings: &str) -> Capsule {
    let anthropic = Emulator::builder(Script::from_yaml(anthropic).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let openai = Emulator::builder(Script::from_yaml(openai).expect("script"))
        .api_key(GPT_SECRET)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    let text = format!(
        r#"name: steered
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {anthropic_driver}
    gateway: {{ endpoint: "{anthropic_url}", api_key: "${{EMU_KEY}}" }}
  - name: driver-openai-chat
    version: "0.1.0"
    runtime: driver
    path: {openai_driver}
    gateway: {{ endpoint: "{openai_url}", api_key: "${{GPT_KEY}}" }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  alternates:
    - {{ name: fast, driver: driver-anthropic, model: test-model-fast }}
    - {{ name: gpt, driver: driver-openai-chat, model: gpt-test }}
lifecycle: {{ task_acceptance: queue }}
control:
  settings: {settings}
  secrets: [GPT_KEY]
"#,
        anthropic_driver = root.join("artifacts/driver-anthropic").display(),
        anthropic_url = anthropic.url(),
        openai_driver = root.join("artifacts/driver-openai-chat").display(),
        openai_url = openai.url(),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule {
        dir,
        home: home(),
        anthropic,
        openai,
    }
}

impl Capsule {
    fn serve(&self) -> Served {
        Served::start_with_home(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY)],
            self.home.path(),
        )
    }

    fn control_dir(&self) -> PathBuf {
        self.home.path().join("control")
    }

    fn token_file(&self, served: &Served) -> PathBuf {
        let port = served.url.rsplit(':').next().unwrap();
        self.control_dir().join(format!("{port}.json"))
    }

    fn token(&self, served: &Served) -> String {
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(self.token_file(served)).unwrap())
                .unwrap();
        file["token"].as_str().unwrap().to_string()
    }

    /// `mur control …` with this capsule's home.
    fn mur(&self) -> Mur {
        Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", self.home.path())
    }

    /// Every event of the session's trace, and its text.
    fn trace(&self) -> (Vec<Value>, String) {
        let session = murmur_testkit::door::session_dir(self.dir.path());
        let text = std::fs::read_to_string(session.join("trace.jsonl")).unwrap();
        let events = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (events, text)
    }
}

/// One request to the door: the status and the JSON answer (`Null` when it is not JSON).
fn call(
    served: &Served,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let client = client_builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let url = format!("{}{path}", served.url);
    let mut request = client.request(method.parse().unwrap(), url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().expect("the door answers");
    let status = response.status().as_u16();
    let text = response.text().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn put(served: &Served, path: &str, token: &str, value: Value) -> (u16, Value) {
    let body = json!({ "value": value }).to_string();
    call(served, "PUT", path, Some(token), Some(&body))
}

fn send(served: &Served, text: &str) -> Value {
    let (status, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}}));
    assert_eq!(status, 200, "{answer:#}");
    answer["result"]["task"].clone()
}

fn completed_with(task: &Value, text: &str) {
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"], text,
        "{task:#}"
    );
}

fn choices(snapshot: &Value) -> Vec<(String, bool)> {
    snapshot["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["available"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn owned(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs.iter().map(|(n, a)| (n.to_string(), *a)).collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_token_file_is_private_while_serving_and_gone_after() {
    let capsule = capsule("turns: []\n", "turns: []\n", ALL_SETTINGS);
    let mut served = capsule.serve();
    let path = capsule.token_file(&served);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&capsule.control_dir()), 0o700);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["url"], format!("{}/", served.url));
    assert!(file["pid"].as_u64().unwrap() > 0);
    let token = file["token"].as_str().unwrap();
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    // Only the token file is left in the directory: the temporary it was written as is gone.
    let names: Vec<String> = std::fs::read_dir(capsule.control_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![path.file_name().unwrap().to_string_lossy()]);
    // Where it is, on stderr after `listening on` (which stays stdout's first line).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !served.stderr().contains("control: ") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        served
            .stderr()
            .contains(&format!("control: {}", path.display())),
        "{}",
        served.stderr()
    );
    served.stop();
    assert!(!path.exists(), "the token file outlived the capsule");
}

#[test]
fn every_route_wants_the_sessions_token() {
    let capsule = capsule("turns: []\n", "turns: []\n", ALL_SETTINGS);
    let served = capsule.serve();
    let wrong = "0".repeat(64);
    let routes = [
        ("GET", "/control", None),
        (
            "PUT",
            "/control/settings/inference.driver",
            Some(r#"{"value":"fast"}"#),
        ),
        ("PUT", "/control/secrets/GPT_KEY", Some(r#"{"value":"x"}"#)),
        ("DELETE", "/control/secrets/GPT_KEY", None),
    ];
    for (method, path, body) in routes {
        for token in [None, Some(wrong.as_str())] {
            let (status, answer) = call(&served, method, path, token, body);
            assert_eq!(status, 401, "{method} {path} with {token:?}: {answer}");
            assert_eq!(answer["error"], "unauthorized");
            assert!(answer["message"].as_str().is_some());
        }
    }
    // Nothing was changed by any of them.
    let (status, snapshot) = call(
        &served,
        "GET",
        "/control",
        Some(&capsule.token(&served)),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(snapshot["settings"]["inference.driver"], "primary");
    assert_eq!(snapshot["secrets"][0]["injected"], false);
}

/// The whole story over HTTP: a switch refused until its secret is injected, then accepted and
/// followed by the next task; the secret that keys the choice in use cannot be forgotten; every
/// refusal with its status; every change and refusal traced, the secret nowhere.
#[test]
fn a_switch_waits_for_its_secret_and_the_next_task_follows_it() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"fast answer\" }\n",
        "turns:\n  - reply: { text: \"gpt answer\" }\n",
        ALL_SETTINGS,
    );
    let mut served = capsule.serve();
    let token = capsule.token(&served);
    let token = token.as_str();

    let (status, snapshot) = call(&served, "GET", "/control", Some(token), None);
    assert_eq!(status, 200, "{snapshot}");
    assert_eq!(snapshot["settings"]["inference.driver"], "primary");
    assert!(
        snapshot["settings"]["inference.max_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        choices(&snapshot),
        owned(&[("primary", true), ("fast", true), ("gpt", false)])
    );
    assert_eq!(snapshot["choices"][2]["model"], "gpt-test");
    assert_eq!(
        snapshot["secrets"],
        json!([{"name": "GPT_KEY", "injected": false}])
    );

    // No secret yet: the switch to gpt is refused, and nothing changes.
    let (status, refused) = put(
        &served,
        "/control/settings/inference.driver",
        token,
        json!("gpt"),
    );
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"], "credential_unresolvable");
    assert!(refused["message"].as_str().unwrap().contains("GPT_KEY"));

    let (status, secrets) = put(
        &served,
        "/control/secrets/GPT_KEY",
        token,
        json!(GPT_SECRET),
    );
    assert_eq!(status, 200, "{secrets}");
    assert_eq!(
        secrets,
        json!({"secrets": [{"name": "GPT_KEY", "injected": true}]})
    );
    let (_, snapshot) = call(&served, "GET", "/control", Some(token), None);
    assert_eq!(
        choices(&snapshot),
        owned(&[("primary", true), ("fast", true), ("gpt", true)])
    );
    assert!(!snapshot.to_string().contains(GPT_SECRET));

    let (status, settings) = put(
        &served,
        "/control/settings/inference.driver",
        token,
        json!("gpt"),
    );
    assert_eq!(status, 200, "{settings}");
    assert_eq!(settings["settings"]["inference.driver"], "gpt");
    let (status, settings) = put(
        &served,
        "/control/settings/inference.max_tokens",
        token,
        json!(1234),
    );
    assert_eq!(status, 200, "{settings}");
    assert_eq!(
        settings,
        json!({"settings": {"inference.driver": "gpt", "inference.max_tokens": 1234}})
    );

    // The next task goes to the OpenAI emulator, with the injected key, the model and the cap.
    completed_with(&send(&served, "hello gpt"), "gpt answer");
    let requests = capsule.openai.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.status, 200, "{}", request.outcome);
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {GPT_SECRET}").as_str())
    );
    assert_eq!(request.body["model"], "gpt-test");
    assert_eq!(
        request.body["max_completion_tokens"], 1234,
        "{:#}",
        request.body
    );
    assert!(capsule.anthropic.requests().is_empty());

    // The secret keying the choice in use cannot be forgotten.
    let (status, refused) = call(
        &served,
        "DELETE",
        "/control/secrets/GPT_KEY",
        Some(token),
        None,
    );
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"], "in_use");

    // Unknown names: 404.
    let (status, refused) = put(
        &served,
        "/control/settings/inference.temperature",
        token,
        json!(1),
    );
    assert_eq!(
        (status, refused["error"].clone()),
        (404, json!("unknown_setting"))
    );
    let (status, refused) = put(&served, "/control/secrets/NOPE_KEY", token, json!("x"));
    assert_eq!(
        (status, refused["error"].clone()),
        (404, json!("unknown_secret"))
    );
    let (status, refused) = call(
        &served,
        "DELETE",
        "/control/secrets/NOPE_KEY",
        Some(token),
        None,
    );
    assert_eq!(
        (status, refused["error"].clone()),
        (404, json!("unknown_secret"))
    );

    // Values of the wrong kind: 422.
    let (status, refused) = put(
        &served,
        "/control/settings/inference.max_tokens",
        token,
        json!("lots"),
    );
    assert_eq!(
        (status, refused["error"].clone()),
        (422, json!("invalid_value"))
    );
    let (status, refused) = put(
        &served,
        "/control/settings/inference.driver",
        token,
        json!("nope"),
    );
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"], "unknown_choice");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("primary, fast, gpt")
    );
    let path = "/control/settings/inference.max_tokens";
    for body in ["not json", r#"{"val": 5}"#, "[5]"] {
        let (status, refused) = call(&served, "PUT", path, Some(token), Some(body));
        assert_eq!(status, 422, "{body}: {refused}");
        assert_eq!(refused["error"], "invalid_value");
    }
    let (status, refused) = put(&served, "/control/secrets/GPT_KEY", token, json!(42));
    assert_eq!(
        (status, refused["error"].clone()),
        (422, json!("invalid_value"))
    );
    // A body over the door's limit is refused before it is read whole.
    let huge = format!(r#"{{"value": "{}"}}"#, "x".repeat(5 * 1024 * 1024));
    let (status, refused) = call(&served, "PUT", path, Some(token), Some(&huge));
    assert_eq!(
        (status, refused["error"].clone()),
        (413, json!("too_large"))
    );

    // Back on the Anthropic driver, with the other model; then the secret may go.
    let (status, _) = put(
        &served,
        "/control/settings/inference.driver",
        token,
        json!("fast"),
    );
    assert_eq!(status, 200);
    completed_with(&send(&served, "hello fast"), "fast answer");
    let requests = capsule.anthropic.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    assert_eq!(requests[0].body["model"], "test-model-fast");
    assert_eq!(requests[0].body["max_tokens"], 1234);
    let (status, secrets) = call(
        &served,
        "DELETE",
        "/control/secrets/GPT_KEY",
        Some(token),
        None,
    );
    assert_eq!(status, 200, "{secrets}");
    assert_eq!(
        secrets,
        json!({"secrets": [{"name": "GPT_KEY", "injected": false}]})
    );
    let (_, snapshot) = call(&served, "GET", "/control", Some(token), None);
    assert_eq!(
        choices(&snapshot),
        owned(&[("primary", true), ("fast", true), ("gpt", false)])
    );

    served.stop();
    let (events, text) = capsule.trace();
    assert!(!text.contains(GPT_SECRET), "the secret reached the trace");
    let of =
        |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["event_type"] == kind).collect() };
    let changes = of("control_change");
    let refusals = of("control_refused");
    for event in changes.iter().chain(&refusals) {
        assert_eq!(event["principal"], "controller", "{event}");
    }
    let change = |target: &str, action: &str| {
        changes
            .iter()
            .filter(|e| e["target"] == target && e["action"] == action)
            .map(|e| (e["from"].clone(), e["to"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        change("inference.driver", "set"),
        vec![
            (json!("primary"), json!("gpt")),
            (json!("gpt"), json!("fast"))
        ]
    );
    assert_eq!(
        change("inference.max_tokens", "set"),
        vec![(Value::Null, json!(1234))]
    );
    assert_eq!(change("secrets/GPT_KEY", "inject").len(), 1);
    assert_eq!(change("secrets/GPT_KEY", "forget").len(), 1);
    let reasons: Vec<(u64, &str)> = refusals
        .iter()
        .map(|e| (e["status"].as_u64().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    for expected in [
        (409, "credential_unresolvable"),
        (409, "in_use"),
        (404, "unknown_setting"),
        (404, "unknown_secret"),
        (422, "invalid_value"),
        (422, "unknown_choice"),
    ] {
        assert!(
            reasons.contains(&expected),
            "{expected:?} not in {reasons:?}"
        );
    }
}

#[test]
fn a_setting_the_capsule_does_not_grant_is_refused() {
    let capsule = capsule("turns: []\n", "turns: []\n", "[inference.driver]");
    let mut served = capsule.serve();
    let token = capsule.token(&served);
    let (status, refused) = put(
        &served,
        "/control/settings/inference.max_tokens",
        &token,
        json!(8192),
    );
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"], "not_granted");
    let (status, _) = put(
        &served,
        "/control/settings/inference.driver",
        &token,
        json!("fast"),
    );
    assert_eq!(status, 200);
    served.stop();
    let (events, _) = capsule.trace();
    assert!(events.iter().any(|e| e["event_type"] == "control_refused"
        && e["reason"] == "not_granted"
        && e["principal"] == "controller"));
}

fn assert_code(out: &MurOutput, code: i32, diagnostic: &str) {
    assert_eq!(out.code, code, "{out:#?}");
    assert!(
        out.stderr.contains(&format!("error[{diagnostic}]")),
        "{out:#?}"
    );
}

#[test]
fn mur_control_shows_sets_injects_and_forgets() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"fast answer\" }\n",
        "turns: []\n",
        ALL_SETTINGS,
    );
    let mut served = capsule.serve();

    // No URL: the one running capsule of this home.
    let out = capsule.mur().args(["control", "show", "--json"]).run();
    assert_eq!(out.code, 0, "{out:#?}");
    let shown = out.json();
    assert_eq!(shown["settings"]["inference.driver"], "primary");
    assert_eq!(shown["choices"].as_array().unwrap().len(), 3);

    let out = capsule.mur().args(["control", "show"]).run();
    assert_eq!(out.code, 0, "{out:#?}");
    let arrow = out
        .stdout
        .lines()
        .find(|l| l.contains('→'))
        .expect("an arrow on the choice in force");
    assert!(
        arrow.contains("primary") && arrow.contains("test-model"),
        "{}",
        out.stdout
    );
    let gpt = out.stdout.lines().find(|l| l.contains("gpt-test")).unwrap();
    assert!(gpt.trim_end().ends_with("no"), "{}", out.stdout);
    let secret = out.stdout.lines().find(|l| l.contains("GPT_KEY")).unwrap();
    assert!(secret.trim_end().ends_with("no"), "{}", out.stdout);

    let out = capsule
        .mur()
        .args(["control", "set", "inference.driver", "fast"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("inference.driver") && l.trim_end().ends_with("fast")),
        "{}",
        out.stdout
    );
    // VALUE is JSON when it parses: a number.
    let out = capsule
        .mur()
        .args(["control", "set", "inference.max_tokens", "8192", "--json"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["settings"]["inference.max_tokens"], 8192);
    completed_with(&send(&served, "hello"), "fast answer");
    assert_eq!(capsule.anthropic.requests()[0].body["max_tokens"], 8192);

    // Refused by the control plane: exit 1, E-CTL-003 with its reason.
    let out = capsule
        .mur()
        .args(["control", "set", "inference.driver", "gpt"])
        .run();
    assert_code(&out, 1, "E-CTL-003");
    assert!(
        out.stderr.contains("credential_unresolvable"),
        "{}",
        out.stderr
    );
    let out = capsule
        .mur()
        .args(["control", "set", "inference.max_tokens", "lots", "--json"])
        .run();
    assert_code(&out, 1, "E-CTL-003");
    assert_eq!(out.json()["error"]["reason"], "invalid_value");
    assert_eq!(out.json()["error"]["status"], 422);

    // The secret comes from stdin, its trailing newline dropped.
    let out = capsule
        .mur()
        .args(["control", "secret", "GPT_KEY"])
        .stdin(format!("{GPT_SECRET}\n"))
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!out.stdout.contains(GPT_SECRET) && !out.stderr.contains(GPT_SECRET));
    let out = capsule
        .mur()
        .args(["control", "set", "inference.driver", "gpt"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    let out = capsule.mur().args(["control", "forget", "GPT_KEY"]).run();
    assert_code(&out, 1, "E-CTL-003");
    assert!(out.stderr.contains("in_use"), "{}", out.stderr);
    let out = capsule
        .mur()
        .args(["control", "set", "inference.driver", "primary"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    let out = capsule
        .mur()
        .args(["control", "forget", "GPT_KEY", "--json"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.json(),
        json!({"secrets": [{"name": "GPT_KEY", "injected": false}]})
    );
    // Nothing on stdin: nothing is sent.
    let out = capsule
        .mur()
        .args(["control", "secret", "GPT_KEY"])
        .stdin("")
        .run();
    assert_code(&out, 2, "E-CTL-003");

    // With the URL, and with the token file named.
    let url = format!("{}/", served.url);
    let out = capsule
        .mur()
        .args(["control", "show", &url, "--json"])
        .run();
    assert_eq!(out.code, 0, "{out:#?}");
    let token_file = capsule.token_file(&served);
    let out = capsule
        .mur()
        .args(["control", "show", "--json", "--token-file"])
        .arg(&token_file)
        .run();
    assert_eq!(out.code, 0, "{out:#?}");

    // A token that is not this session's: exit 3, E-CTL-004.
    let stranger = capsule.home.path().join("stranger.json");
    std::fs::write(
        &stranger,
        json!({"url": url, "token": "0".repeat(64), "pid": std::process::id()}).to_string(),
    )
    .unwrap();
    let out = capsule
        .mur()
        .args(["control", "show", "--token-file"])
        .arg(&stranger)
        .run();
    assert_code(&out, 3, "E-CTL-004");
    assert!(out.stderr.contains("refused the token"), "{}", out.stderr);

    // Two live capsules and no URL: exit 2, both listed; the URL chooses.
    let other = capsule.control_dir().join("1.json");
    std::fs::write(
        &other,
        json!({"url": "http://127.0.0.1:1/", "token": "0".repeat(64), "pid": std::process::id()})
            .to_string(),
    )
    .unwrap();
    let out = capsule.mur().args(["control", "show"]).run();
    assert_code(&out, 2, "E-CTL-004");
    assert!(out.stderr.contains("1.json"), "{}", out.stderr);
    assert!(
        out.stderr.contains(
            &token_file
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string()
        ),
        "{}",
        out.stderr
    );
    let out = capsule.mur().args(["control", "show", &url]).run();
    assert_eq!(out.code, 0, "{out:#?}");
    // The other one names a port nothing serves: exit 3.
    let out = capsule
        .mur()
        .args(["control", "show", "http://127.0.0.1:1/"])
        .run();
    assert_code(&out, 3, "E-CTL-004");
    std::fs::remove_file(&other).unwrap();

    served.stop();
    // No capsule running: exit 3, E-CTL-004.
    let out = capsule.mur().args(["control", "show"]).run();
    assert_code(&out, 3, "E-CTL-004");
    let (_, text) = capsule.trace();
    assert!(!text.contains(GPT_SECRET), "the secret reached the trace");
}

#[test]
fn a_control_directory_that_cannot_be_written_refuses_to_serve() {
    let capsule = capsule("turns: []\n", "turns: []\n", ALL_SETTINGS);
    // A file where the directory should be.
    std::fs::write(capsule.control_dir(), "not a directory").unwrap();
    let out = capsule
        .mur()
        .env("EMU_KEY", KEY)
        .args(["run", "--serve", "--json"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .run();
    assert_code(&out, 1, "E-CTL-005");
    assert!(!out.stdout.contains("listening on"), "{}", out.stdout);
}

/// The switch check and the forget check are decided under one lock: a switch to `gpt` and a
/// forget of the secret that keys it, raced from two threads again and again, never both take:
/// each round ends on `gpt` with its secret, or off `gpt`, and exactly one of the two was
/// refused `409`.
#[test]
fn a_switch_and_a_forget_raced_never_leave_the_loop_on_a_choice_without_its_credential() {
    let capsule = capsule(
        "turns:\n  - reply: { text: unused }\n",
        "turns:\n  - reply: { text: unused }\n",
        ALL_SETTINGS,
    );
    let served = capsule.serve();
    let token = capsule.token(&served);
    let token = token.as_str();
    for round in 0..60 {
        // Back to the start: on the primary, the secret injected.
        let (status, _) = put(
            &served,
            "/control/settings/inference.driver",
            token,
            json!("primary"),
        );
        assert_eq!(status, 200);
        let (status, _) = put(
            &served,
            "/control/secrets/GPT_KEY",
            token,
            json!(GPT_SECRET),
        );
        assert_eq!(status, 200);
        let barrier = std::sync::Barrier::new(2);
        let (switched, forgot) = std::thread::scope(|scope| {
            let switch = scope.spawn(|| {
                barrier.wait();
                put(
                    &served,
                    "/control/settings/inference.driver",
                    token,
                    json!("gpt"),
                )
                .0
            });
            let forget = scope.spawn(|| {
                barrier.wait();
                call(
                    &served,
                    "DELETE",
                    "/control/secrets/GPT_KEY",
                    Some(token),
                    None,
                )
                .0
            });
            (switch.join().unwrap(), forget.join().unwrap())
        });
        let (_, snapshot) = call(&served, "GET", "/control", Some(token), None);
        let on_gpt = snapshot["settings"]["inference.driver"] == "gpt";
        let injected = snapshot["secrets"][0]["injected"] == true;
        assert!(
            !on_gpt || injected,
            "round {round}: on gpt without its secret (switch {switched}, forget {forgot})"
        );
        let mut codes = [switched, forgot];
        codes.sort();
        assert_eq!(
            codes,
            [200, 409],
            "round {round}: switch {switched}, forget {forgot}"
        );
    }
}
