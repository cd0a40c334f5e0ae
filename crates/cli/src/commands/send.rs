//! `mur send URL --text T [--stream] [--task ID] [--context ID] [--json] [--a2a-version V]`:
//! send one message to an A2A agent (a served capsule, or any A2A 1.0 / 0.3 JSON-RPC agent)
//! and show what it answers.
//!
//! - Without `--stream` the message is sent with `SendMessage`, which waits until the task ends
//!   or asks for input; the answer text goes to stdout, the task's id and state to stderr.
//! - `--stream` uses `SendStreamingMessage`: the answer text is printed as it arrives (thinking
//!   and tool results on stderr), status changes on stderr.
//! - Files and data the task gives back are named on stderr (`[file] report.csv (text/csv, 8
//!   bytes)`, `[file] big.bin (application/octet-stream): URL`, `[data] result: {…}`).
//! - `--task ID` continues a task (the reply a task in `input-required` waits for);
//!   `--context ID` starts a task in an existing conversation.
//! - `--json`: the final task as the agent sent it, or with `--stream` one JSON line per event.
//! - What the agent sends is printed with its control characters and bidi overrides escaped
//!   (`\u{1b}`, [`crate::render::text`]); in `--json` they are JSON escapes.
//! - Credentials: `--capsule DIR` presents the credential that capsule's `peers:` entry for the
//!   URL's origin names; `--credential NAME` presents credential NAME as a bearer token (or in
//!   `--header`). A value is looked up where a run looks (the environment, the capsule's `.env`,
//!   the user's credentials file) and is never printed.
//! - Exit: 0 completed; 1 failed, rejected or canceled; 2 bad arguments; 3 the agent could not
//!   be reached, answered an error, or answered something that is not A2A; 4 the task waits for
//!   input (the prompt is printed, with the command that answers it).

use std::io::Write;

use murmur_a2a::client::{PeerClient, PeerError};
use murmur_a2a::{
    Message, PartContent, Role, SendMessageParams, SendMessageResult, StreamEvent, Task, TaskState,
    Version, Wire,
};

use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct SendArgs {
    /// The agent's JSON-RPC endpoint: for a served capsule, the `http://HOST:PORT/` it printed.
    url: String,
    /// The message text.
    #[arg(long)]
    text: String,
    /// Print the answer as it arrives (SSE).
    #[arg(long)]
    stream: bool,
    /// Continue this task: the reply a task in `input-required` waits for.
    #[arg(long = "task")]
    task_id: Option<String>,
    /// Start the task in this conversation.
    #[arg(long = "context")]
    context_id: Option<String>,
    /// Print the task (with --stream: every event, one JSON line each) instead of text.
    #[arg(long)]
    json: bool,
    /// Present the credential this capsule's `peers:` entry names for the URL's origin.
    #[arg(long, value_name = "DIR")]
    capsule: Option<std::path::PathBuf>,
    /// Present credential NAME (its value from the environment or the credentials file) as
    /// `Authorization: Bearer`, or in --header.
    #[arg(long, value_name = "NAME", conflicts_with = "capsule")]
    credential: Option<String>,
    /// With --credential: send it in this header (an API key) instead of as a bearer token.
    #[arg(long, value_name = "HEADER", requires = "credential")]
    header: Option<String>,
    /// The A2A protocol version to speak: 1.0 or 0.3.
    #[arg(long = "a2a-version", default_value = "1.0", value_parser = parse_version)]
    version: Version,
    /// Trust the certificates in this PEM file for an https URL, beside the system's roots
    /// (a private CA, or the door's own certificate). Default: `$MURMUR_CA_FILE`.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<std::path::PathBuf>,
}

fn parse_version(value: &str) -> Result<Version, String> {
    match value {
        "1.0" => Ok(Version::V1_0),
        "0.3" => Ok(Version::V0_3),
        other => Err(format!(
            "`{other}` is not a version this client speaks: 1.0 or 0.3"
        )),
    }
}

pub fn run(args: SendArgs) -> Exit {
    let url = match endpoint(&args.url) {
        Ok(url) => url,
        Err(message) => {
            return refuse(
                args.json,
                "E-A2A-003",
                &message,
                "give the agent's URL, e.g. http://127.0.0.1:8080/",
            );
        }
    };
    if args.text.trim().is_empty() {
        return refuse(
            args.json,
            "E-A2A-003",
            "the message text is empty",
            "pass the message with --text",
        );
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return refuse(
                args.json,
                "E-A2A-003",
                &format!("the async runtime could not start: {error}"),
                "check the process's thread limits",
            );
        }
    };
    let headers = match credential_headers(&args, &url) {
        Ok(headers) => headers,
        Err(exit) => return exit,
    };
    let ca_file = args
        .ca_file
        .clone()
        .or_else(|| std::env::var_os("MURMUR_CA_FILE").map(std::path::PathBuf::from));
    let client = match PeerClient::trusting(args.version, ca_file.as_deref()) {
        Ok(client) => client,
        Err(error) => return peer_failed(args.json, &error),
    };
    let mut message = Message::text(message_id(), Role::User, args.text.clone());
    message.task_id = args.task_id.clone();
    message.context_id = args.context_id.clone();
    let params = SendMessageParams {
        message,
        configuration: None,
        metadata: None,
    };
    runtime.block_on(async {
        if args.stream {
            stream(&client, &url, &params, &headers, &args).await
        } else {
            match client.send_message(&url, &params, &headers).await {
                Ok(SendMessageResult::Task(task)) => finished(&task, &url, &args),
                Ok(SendMessageResult::Message(reply)) => {
                    if args.json {
                        println!("{}", render::json(&reply.to_wire(args.version)));
                    } else {
                        println!("{}", render::text(&reply.joined_text()));
                    }
                    Exit::Ok
                }
                Err(error) => peer_failed(args.json, &error),
            }
        }
    })
}

/// The agent's endpoint: an absolute http or https URL with a host (a missing path is `/`).
fn endpoint(given: &str) -> Result<String, String> {
    let url = url::Url::parse(given)
        .map_err(|error| format!("`{given}` is not an absolute URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`{given}` uses `{}`; an A2A agent is reached over http or https",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{given}` names no host"));
    }
    Ok(url.to_string())
}

/// The header that presents the credential `--capsule` or `--credential` asks for (none
/// without either). A credential set nowhere, or a capsule with no `peers:` entry for the URL,
/// is reported and its exit returned.
fn credential_headers(args: &SendArgs, url: &str) -> Result<Vec<(String, String)>, Exit> {
    use murmur_manifest::door::Presented;
    let (presented, manifest_file) = if let Some(dir) = &args.capsule {
        let (file, _) = crate::environment::capsule_paths(Some(dir.as_path()));
        let loaded = murmur_manifest::load_capsule(&file, &crate::environment::host_env);
        let Some(capsule) = loaded.manifest else {
            render::diagnostics_human(&loaded.diagnostics);
            return Err(Exit::BadInput);
        };
        let Some(presented) =
            murmur_manifest::door::peer_for(&capsule.peers, url).and_then(|p| p.presented())
        else {
            return Err(refuse(
                args.json,
                "E-A2A-003",
                &format!("{} has no `peers:` entry for {url}", file.display()),
                "add `peers: [ { url: \"<the agent's origin>\", bearer: \"${TOKEN}\" } ]` to the capsule, or pass --credential NAME",
            ));
        };
        (presented, file)
    } else if let Some(name) = &args.credential {
        let presented = match &args.header {
            Some(header) => Presented::ApiKey {
                header: header.clone(),
                credential: name.clone(),
            },
            None => Presented::Bearer {
                credential: name.clone(),
            },
        };
        (presented, std::path::PathBuf::from("murmur.yaml"))
    } else {
        return Ok(Vec::new());
    };
    let credentials = crate::environment::user_credentials_warned()
        .map_err(|diagnostic| render::coded(args.json, &*diagnostic, Exit::BadInput))?;
    let name = presented.credential();
    let Some((value, _)) = murmur_manifest::credentials::resolve(
        name,
        &manifest_file,
        &crate::environment::host_env,
        &|name| credentials.get(name),
    ) else {
        return Err(refuse(
            args.json,
            "E-RUN-012",
            &format!("the credential {name} is set nowhere"),
            &format!(
                "set {name} in the environment or in {}",
                crate::environment::credentials_file().display()
            ),
        ));
    };
    let (header, value) = presented.header(&value);
    if is_header(&header, &value) {
        Ok(vec![(header, value)])
    } else {
        Err(refuse(
            args.json,
            "E-A2A-003",
            &format!("the credential {name} cannot travel in the header `{header}`"),
            "name a header of letters, digits and `-`, and a credential without line breaks",
        ))
    }
}

/// Whether `name: value` is a header HTTP can carry.
fn is_header(name: &str, value: &str) -> bool {
    http::HeaderName::from_bytes(name.as_bytes()).is_ok()
        && http::HeaderValue::from_str(value).is_ok()
}

/// A fresh message id.
fn message_id() -> String {
    format!("msg-{}", uuid::Uuid::new_v4())
}

/// The task's answer: the text of its `response` artifact, else of every artifact that is not
/// a tool result or thinking, else the status message.
fn answer_text(task: &Task) -> String {
    let text_of = |parts: &[murmur_a2a::Part]| -> String {
        parts
            .iter()
            .filter_map(|part| match &part.content {
                PartContent::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    };
    if let Some(response) = task.artifacts.iter().find(|a| a.artifact_id == "response") {
        return text_of(&response.parts);
    }
    let others: Vec<String> = task
        .artifacts
        .iter()
        .filter(|a| !a.artifact_id.starts_with("tool-") && a.artifact_id != "thinking")
        .map(|a| text_of(&a.parts))
        .collect();
    if !others.is_empty() {
        return others.join("\n");
    }
    task.status
        .message
        .as_ref()
        .map(Message::joined_text)
        .unwrap_or_default()
}

/// Prints a task the agent finished with (or that waits for input) and picks the exit.
fn finished(task: &Task, url: &str, args: &SendArgs) -> Exit {
    if args.json {
        println!("{}", render::json(&task.to_wire(args.version)));
    } else {
        let text = answer_text(task);
        if task.status.state == TaskState::InputRequired {
            let prompt = task
                .status
                .message
                .as_ref()
                .map(Message::joined_text)
                .unwrap_or_default();
            println!("{}", render::text(&prompt));
        } else if !text.is_empty() {
            println!("{}", render::text(&text));
        }
        for line in outputs(task) {
            eprintln!("{}", render::line(&line));
        }
    }
    state_exit(task, url, args)
}

/// A line for each file or data part the task's artifacts carry: `[file] NAME (TYPE, N bytes)`
/// inline, `[file] NAME (TYPE): URL` by reference, `[data] NAME: JSON`.
fn outputs(task: &Task) -> Vec<String> {
    let mut lines = Vec::new();
    for artifact in &task.artifacts {
        for part in &artifact.parts {
            let name = part
                .filename
                .clone()
                .or_else(|| artifact.name.clone())
                .unwrap_or_else(|| artifact.artifact_id.clone());
            let media_type = part.media_type.as_deref().unwrap_or("unknown type");
            match &part.content {
                PartContent::File(murmur_a2a::FileContent::Bytes(bytes)) => lines.push(format!(
                    "[file] {name} ({media_type}, {} bytes)",
                    bytes.len()
                )),
                PartContent::File(murmur_a2a::FileContent::Uri(uri)) => {
                    lines.push(format!("[file] {name} ({media_type}): {uri}"))
                }
                PartContent::Data(value) => lines.push(format!("[data] {name}: {value}")),
                PartContent::Text(_) => {}
            }
        }
    }
    lines
}

fn state_exit(task: &Task, url: &str, args: &SendArgs) -> Exit {
    let state = task.status.state;
    eprintln!(
        "task {} ({}): {state}",
        render::line(&task.id),
        render::line(&task.context_id)
    );
    match state {
        TaskState::Completed => Exit::Ok,
        TaskState::InputRequired | TaskState::AuthRequired => {
            eprintln!(
                "the task waits for input; answer it with: mur send {} --task {} --text '…'",
                render::line(url),
                render::line(&task.id)
            );
            Exit::Waiting
        }
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            if !args.json
                && let Some(message) = &task.status.message
            {
                eprintln!("{}", render::text(&message.joined_text()));
            }
            Exit::Failed
        }
        // A blocking send returns at a terminal or interrupted state only; an agent that
        // answers earlier is treated as having accepted the task.
        TaskState::Submitted | TaskState::Working | TaskState::Unknown => Exit::Ok,
    }
}

async fn stream(
    client: &PeerClient,
    url: &str,
    params: &SendMessageParams,
    headers: &[(String, String)],
    args: &SendArgs,
) -> Exit {
    let mut events = match client.stream_message(url, params, headers).await {
        Ok(events) => events,
        Err(error) => return peer_failed(args.json, &error),
    };
    let mut last: Option<Task> = None;
    let mut lines = Lines::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => return peer_failed(args.json, &error),
        };
        if args.json {
            println!("{}", render::json_line(&event.event.to_wire(args.version)));
        }
        match &event.event {
            StreamEvent::Task(task) => {
                last = Some(task.clone());
                if !args.json && !task.status.state.is_terminal() {
                    lines.note(&format!("[{}]", task.status.state));
                }
            }
            StreamEvent::Message(reply) => {
                if !args.json {
                    lines.answer(&reply.joined_text());
                    lines.finish();
                }
                return Exit::Ok;
            }
            StreamEvent::StatusUpdate(update) => {
                let task = last.get_or_insert_with(|| {
                    Task::new(&update.task_id, &update.context_id, update.status.clone())
                });
                task.status = update.status.clone();
                if !args.json && !update.status.state.is_terminal() {
                    lines.note(&format!("[{}]", update.status.state));
                }
            }
            StreamEvent::ArtifactUpdate(update) => {
                if args.json {
                    continue;
                }
                let text: String = update
                    .artifact
                    .parts
                    .iter()
                    .filter_map(|p| match &p.content {
                        PartContent::Text(text) => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                match update.artifact.artifact_id.as_str() {
                    "response" => lines.answer(&text),
                    "thinking" => lines.thinking(&text),
                    other => {
                        let name = update.artifact.name.as_deref().unwrap_or(other);
                        // A Murmur capsule's tool result comes inside the fence the model
                        // saw; the line worth showing is the first one of the content.
                        let first = text
                            .lines()
                            .map(str::trim)
                            .find(|line| {
                                !line.is_empty() && !line.starts_with("<untrusted-content")
                            })
                            .unwrap_or("");
                        lines.note(&format!("[{name}] {first}"));
                    }
                }
            }
        }
        if event.event.ends_stream() {
            break;
        }
    }
    lines.finish();
    match last {
        Some(task) => {
            if !args.json && task.status.state == TaskState::InputRequired {
                let prompt = task
                    .status
                    .message
                    .as_ref()
                    .map(Message::joined_text)
                    .unwrap_or_default();
                println!("{}", render::text(&prompt));
            }
            state_exit(&task, url, args)
        }
        None => peer_failed(
            args.json,
            &PeerError::Invalid("the stream ended before any task event".into()),
        ),
    }
}

/// Streamed output: the answer on stdout, thinking and notes on stderr, each note on a line of
/// its own even when the text before it stopped mid-line.
#[derive(Default)]
struct Lines {
    answer_open: bool,
    thinking_open: bool,
}

impl Lines {
    fn answer(&mut self, text: &str) {
        self.close_thinking();
        print!("{}", render::text(text));
        let _ = std::io::stdout().flush();
        if !text.is_empty() {
            self.answer_open = !text.ends_with('\n');
        }
    }

    fn thinking(&mut self, text: &str) {
        self.close_answer();
        eprint!("{}", render::text(text));
        self.thinking_open = !text.ends_with('\n');
    }

    fn note(&mut self, line: &str) {
        self.close_answer();
        self.close_thinking();
        eprintln!("{}", render::line(line));
    }

    fn close_answer(&mut self) {
        if self.answer_open {
            println!();
            self.answer_open = false;
        }
    }

    fn close_thinking(&mut self) {
        if self.thinking_open {
            eprintln!();
            self.thinking_open = false;
        }
    }

    fn finish(&mut self) {
        self.close_answer();
        self.close_thinking();
    }
}

fn peer_failed(json: bool, error: &PeerError) -> Exit {
    render::coded(json, error, Exit::Stopped)
}

fn refuse(json: bool, code: &str, message: &str, hint: &str) -> Exit {
    render::failure(json, code, message, hint, Exit::BadInput)
}
