//! The provider emulator, driven over real HTTP with a hyper client: every provider, streaming
//! and not, every fault kind, the validation refusals, script exhaustion and recording.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use murmur_testkit::emulator::{
    Emulator, Fault, HttpFault, Provider, Reply, Script, Stop, Turn, Usage,
};
use serde_json::{Value, json};

const KEY: &str = "sk-test-key-123456";

// ---------------------------------------------------------------------------------------------
// A small HTTP client that keeps what a driver would see: status, headers, the time to the
// first byte, and the body, or the error that cut it.

struct Answer {
    status: u16,
    headers: hyper::HeaderMap,
    first_byte: Duration,
    body: Vec<u8>,
    body_error: Option<String>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The SSE events: (`event:` value, `data:` value), in order.
    fn events(&self) -> Vec<(Option<String>, String)> {
        sse(&self.text())
    }
}

fn sse(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (event, data)
        })
        .collect()
}

async fn post(
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Result<Answer, String> {
    post_raw(base, path, headers, body.to_string()).await
}

async fn post_raw(
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: String,
) -> Result<Answer, String> {
    let authority = base.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&authority)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = Request::post(path).header("host", &authority);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let first_byte = started.elapsed();
    let (parts, mut incoming) = response.into_parts();
    let mut body = Vec::new();
    let mut body_error = None;
    while let Some(frame) = incoming.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    body.extend_from_slice(data);
                }
            }
            Err(e) => {
                body_error = Some(e.to_string());
                break;
            }
        }
    }
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        first_byte,
        body,
        body_error,
    })
}

fn anthropic_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-api-key", KEY),
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
    ]
}

fn openai_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("authorization", "Bearer sk-test-key-123456"),
        ("content-type", "application/json"),
    ]
}

async fn anthropic(emu: &Emulator, body: &Value) -> Answer {
    post(&emu.url(), "/v1/messages", &anthropic_headers(), body)
        .await
        .expect("an answer")
}

async fn chat(emu: &Emulator, body: &Value) -> Answer {
    post(&emu.url(), "/v1/chat/completions", &openai_headers(), body)
        .await
        .expect("an answer")
}

async fn responses(emu: &Emulator, body: &Value) -> Answer {
    post(&emu.url(), "/v1/responses", &openai_headers(), body)
        .await
        .expect("an answer")
}

fn anthropic_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "system": "You keep notes.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Write a note."}]}],
        "tools": [{"name": "write-file", "description": "Writes a file", "input_schema": {"type": "object"}}],
        "stream": stream,
    })
}

fn chat_request(stream: bool, include_usage: bool) -> Value {
    let mut body = json!({
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You keep notes."},
            {"role": "user", "content": "Write a note."},
        ],
        "tools": [{"type": "function", "function": {"name": "write-file", "parameters": {"type": "object"}}}],
        "prompt_cache_key": "hello:ctx",
    });
    if stream {
        body["stream"] = json!(true);
        if include_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    body
}

fn responses_request(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "instructions": "You keep notes.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Write a note."}]}],
        "tools": [{"type": "function", "name": "write-file", "parameters": {"type": "object"}}],
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "hello:ctx",
        "stream": stream,
    })
}

/// The full reply used by the shape tests.
fn full_reply() -> Reply {
    Reply::text("Writing the note now, as asked.")
        .with_thinking("Let me write it to a file.", "sig-1")
        .with_tool_call(
            "call_1",
            "write-file",
            json!({"path": "a.md", "content": "hello there"}),
        )
        .with_usage(Usage::new(120, 30, 100, 20))
        .with_id("resp_1")
}

fn one_turn(reply: Reply) -> Emulator {
    Emulator::start(Script::new().with_api_key(KEY).with_reply(reply))
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

#[tokio::test]
async fn anthropic_json_reply_has_the_real_shape() {
    let emu = one_turn(full_reply());
    let answer = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert!(answer.header("request-id").is_some());
    assert_eq!(
        answer.json(),
        json!({
            "id": "resp_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "Let me write it to a file.", "signature": "sig-1"},
                {"type": "text", "text": "Writing the note now, as asked."},
                {"type": "tool_use", "id": "call_1", "name": "write-file",
                 "input": {"path": "a.md", "content": "hello there"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {
                "input_tokens": 120,
                "cache_creation_input_tokens": 20,
                "cache_read_input_tokens": 100,
                "output_tokens": 30,
            },
        })
    );
}

#[tokio::test]
async fn anthropic_stream_has_the_real_event_sequence() {
    let emu = one_turn(full_reply());
    let answer = anthropic(&emu, &anthropic_request(true)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let events = answer.events();
    let datas: Vec<Value> = events
        .iter()
        .map(|(name, data)| {
            let value: Value = serde_json::from_str(data).expect("every data line is JSON");
            assert_eq!(
                name.as_deref(),
                value["type"].as_str(),
                "event: matches type"
            );
            value
        })
        .collect();
    let names: Vec<&str> = datas.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    // Three blocks, each start → deltas → stop, indices 0, 1, 2.
    let starts: Vec<&Value> = datas
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .collect();
    assert_eq!(starts.len(), 3);
    assert_eq!(
        starts[0]["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(
        starts[1]["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(
        starts[2]["content_block"],
        json!({"type": "tool_use", "id": "call_1", "name": "write-file", "input": {}})
    );
    let mut thinking = String::new();
    let mut signature = String::new();
    let mut text = String::new();
    let mut json_pieces = Vec::new();
    let mut text_deltas = 0;
    for d in &datas {
        if d["type"] != "content_block_delta" {
            continue;
        }
        let delta = &d["delta"];
        match delta["type"].as_str().unwrap() {
            "thinking_delta" => {
                assert_eq!(d["index"], 0);
                thinking.push_str(delta["thinking"].as_str().unwrap());
            }
            "signature_delta" => signature.push_str(delta["signature"].as_str().unwrap()),
            "text_delta" => {
                assert_eq!(d["index"], 1);
                text_deltas += 1;
                text.push_str(delta["text"].as_str().unwrap());
            }
            "input_json_delta" => {
                assert_eq!(d["index"], 2);
                json_pieces.push(delta["partial_json"].as_str().unwrap().to_string());
            }
            other => panic!("unexpected delta {other}"),
        }
    }
    assert_eq!(thinking, "Let me write it to a file.");
    assert_eq!(signature, "sig-1");
    assert_eq!(text, "Writing the note now, as asked.");
    assert!(text_deltas > 1, "text arrives in several deltas");
    assert!(
        json_pieces.iter().filter(|p| !p.is_empty()).count() >= 2,
        "arguments arrive in several partial_json chunks: {json_pieces:?}"
    );
    let input: Value = serde_json::from_str(&json_pieces.concat()).unwrap();
    assert_eq!(input, json!({"path": "a.md", "content": "hello there"}));
    let stops = datas
        .iter()
        .filter(|d| d["type"] == "content_block_stop")
        .count();
    assert_eq!(stops, 3);
    let start = &datas[0]["message"];
    assert_eq!(start["id"], "resp_1");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["usage"]["input_tokens"], 120);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 100);
    assert_eq!(start["usage"]["cache_creation_input_tokens"], 20);
    let delta = &datas[datas.len() - 2];
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "tool_use", "stop_sequence": null})
    );
    assert_eq!(delta["usage"], json!({"output_tokens": 30}));
}

#[tokio::test]
async fn anthropic_tool_call_without_arguments_streams_an_empty_partial_json() {
    let emu = one_turn(Reply::default().with_tool_call("toolu_1", "list", json!({})));
    let answer = anthropic(&emu, &anthropic_request(true)).await;
    let pieces: Vec<Value> = answer
        .events()
        .iter()
        .map(|(_, d)| serde_json::from_str::<Value>(d).unwrap())
        .filter(|d| d["delta"]["type"] == "input_json_delta")
        .collect();
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0]["delta"]["partial_json"], "");
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

#[tokio::test]
async fn chat_json_reply_has_the_real_shape() {
    let emu = one_turn(full_reply());
    let answer = chat(&emu, &chat_request(false, false)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.header("x-request-id").is_some());
    let body = answer.json();
    assert_eq!(body["id"], "resp_1");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gpt-4.1");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(
        choice["message"]["content"],
        "Writing the note now, as asked."
    );
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "write-file");
    let arguments = call["function"]["arguments"]
        .as_str()
        .expect("arguments is a JSON string");
    assert_eq!(
        serde_json::from_str::<Value>(arguments).unwrap(),
        json!({"path": "a.md", "content": "hello there"})
    );
    assert_eq!(
        body["usage"],
        json!({
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 100},
        })
    );
    assert!(
        !answer.text().contains("Let me write it"),
        "Chat has no thinking"
    );
}

#[tokio::test]
async fn chat_stream_has_chunks_tool_call_pieces_usage_and_done() {
    let emu = one_turn(full_reply());
    let answer = chat(&emu, &chat_request(true, true)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let events = answer.events();
    assert!(
        events.iter().all(|(name, _)| name.is_none()),
        "no event: lines"
    );
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut content = String::new();
    let mut arguments = String::new();
    let mut argument_pieces = 0;
    let mut call_id = None;
    let mut finish = None;
    for chunk in &chunks {
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        if let Some(piece) = choice["delta"]["content"].as_str() {
            content.push_str(piece);
        }
        if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
            assert_eq!(calls[0]["index"], 0);
            if let Some(id) = calls[0]["id"].as_str() {
                call_id = Some(id.to_string());
                assert_eq!(calls[0]["function"]["name"], "write-file");
            }
            if let Some(piece) = calls[0]["function"]["arguments"].as_str()
                && !piece.is_empty()
            {
                argument_pieces += 1;
                arguments.push_str(piece);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_string());
        }
        assert!(chunk["usage"].is_null());
    }
    assert_eq!(content, "Writing the note now, as asked.");
    assert_eq!(call_id.as_deref(), Some("call_1"));
    assert!(argument_pieces >= 2);
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({"path": "a.md", "content": "hello there"})
    );
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 120);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 100);
    // The finish chunk comes before the usage chunk.
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[tokio::test]
async fn chat_stream_without_include_usage_has_no_usage() {
    let emu = one_turn(Reply::text("Hello there friend."));
    let answer = chat(&emu, &chat_request(true, false)).await;
    let events = answer.events();
    assert_eq!(events.last().unwrap().1, "[DONE]");
    for (_, data) in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert!(chunk.get("usage").is_none());
        assert_eq!(chunk["choices"].as_array().unwrap().len(), 1);
    }
    let finish: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses

#[tokio::test]
async fn responses_json_reply_has_the_real_shape() {
    let emu = one_turn(full_reply());
    let answer = responses(&emu, &responses_request(false)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let body = answer.json();
    assert_eq!(body["id"], "resp_1");
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], "gpt-5");
    assert_eq!(body["instructions"], "You keep notes.");
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 3);
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(
        output[0]["summary"],
        json!([{"type": "summary_text", "text": "Let me write it to a file."}])
    );
    assert_eq!(output[0]["encrypted_content"], "sig-1");
    assert_eq!(output[1]["type"], "message");
    assert_eq!(output[1]["role"], "assistant");
    assert_eq!(output[1]["content"][0]["type"], "output_text");
    assert_eq!(
        output[1]["content"][0]["text"],
        "Writing the note now, as asked."
    );
    assert_eq!(output[2]["type"], "function_call");
    assert_eq!(output[2]["call_id"], "call_1");
    assert_eq!(output[2]["name"], "write-file");
    assert!(output[2]["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(
        serde_json::from_str::<Value>(output[2]["arguments"].as_str().unwrap()).unwrap(),
        json!({"path": "a.md", "content": "hello there"})
    );
    assert_eq!(
        body["usage"],
        json!({
            "input_tokens": 120,
            "input_tokens_details": {"cached_tokens": 100},
            "output_tokens": 30,
            "total_tokens": 150,
        })
    );
}

#[tokio::test]
async fn responses_sends_encrypted_content_only_when_included() {
    let emu = one_turn(full_reply());
    let mut request = responses_request(false);
    request.as_object_mut().unwrap().remove("include");
    let body = responses(&emu, &request).await.json();
    assert!(body["output"][0].get("encrypted_content").is_none());
}

#[tokio::test]
async fn responses_stream_has_the_real_event_sequence() {
    let emu = one_turn(full_reply());
    let answer = responses(&emu, &responses_request(true)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let datas: Vec<Value> = answer
        .events()
        .iter()
        .map(|(name, data)| {
            let value: Value = serde_json::from_str(data).unwrap();
            assert_eq!(name.as_deref(), value["type"].as_str());
            value
        })
        .collect();
    for (i, d) in datas.iter().enumerate() {
        assert_eq!(d["sequence_number"], i, "sequence numbers count up");
    }
    // The sequence, with runs of the same delta event counted once.
    let mut names: Vec<&str> = datas.iter().map(|d| d["type"].as_str().unwrap()).collect();
    let deltas = |kind: &str| names.iter().filter(|n| **n == kind).count();
    assert!(deltas("response.reasoning_summary_text.delta") >= 2);
    assert!(deltas("response.output_text.delta") >= 2);
    assert!(deltas("response.function_call_arguments.delta") >= 2);
    names.dedup();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let joined = |kind: &str| -> String {
        datas
            .iter()
            .filter(|d| d["type"] == kind)
            .map(|d| d["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(
        joined("response.reasoning_summary_text.delta"),
        "Let me write it to a file."
    );
    assert_eq!(
        joined("response.output_text.delta"),
        "Writing the note now, as asked."
    );
    assert_eq!(
        serde_json::from_str::<Value>(&joined("response.function_call_arguments.delta")).unwrap(),
        json!({"path": "a.md", "content": "hello there"})
    );
    assert_eq!(datas[0]["response"]["status"], "in_progress");
    let completed = &datas.last().unwrap()["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"].as_array().unwrap().len(), 3);
    assert_eq!(completed["usage"]["input_tokens"], 120);
    assert_eq!(
        completed["usage"]["input_tokens_details"]["cached_tokens"],
        100
    );
    // The function call item: added in progress with no arguments, done complete.
    let added = &datas
        .iter()
        .filter(|d| d["type"] == "response.output_item.added")
        .nth(2)
        .unwrap()["item"];
    assert_eq!(added["type"], "function_call");
    assert_eq!(added["call_id"], "call_1");
    assert_eq!(added["arguments"], "");
    assert_eq!(added["status"], "in_progress");
}

#[tokio::test]
async fn responses_max_tokens_ends_incomplete() {
    let emu = one_turn(Reply::text("Cut here").with_stop(Stop::MaxTokens));
    let answer = responses(&emu, &responses_request(true)).await;
    let last: Value = serde_json::from_str(&answer.events().last().unwrap().1).unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
}

#[tokio::test]
async fn responses_continuation_checks_previous_response_and_call_ids() {
    let script = Script::new()
        .with_api_key(KEY)
        .with_reply(
            Reply::default()
                .with_tool_call("call_1", "write-file", json!({"path": "a.md"}))
                .with_id("resp_1"),
        )
        .with_reply(Reply::text("Done.").with_id("resp_2"));
    let emu = Emulator::start(script);
    assert_eq!(responses(&emu, &responses_request(false)).await.status, 200);

    let unknown_previous = json!({"model": "gpt-5", "previous_response_id": "resp_nope",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]});
    let answer = responses(&emu, &unknown_previous).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["code"],
        "previous_response_not_found"
    );

    let unknown_call = json!({"model": "gpt-5", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_9", "output": "ok"}]});
    let answer = responses(&emu, &unknown_call).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "No tool call found for function call output with call_id call_9."
    );

    let unanswered = json!({"model": "gpt-5", "previous_response_id": "resp_1",
        "input": [{"role": "user", "content": "and?"}]});
    let answer = responses(&emu, &unanswered).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "No tool output found for function call call_1."
    );

    let good = json!({"model": "gpt-5", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "wrote it"}]});
    let answer = responses(&emu, &good).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["previous_response_id"], "resp_1");

    // Refusals used no turn: the two replies went to the two good requests.
    let turns: Vec<Option<usize>> = emu.requests().iter().map(|r| r.turn).collect();
    assert_eq!(turns, [Some(0), None, None, None, Some(1)]);
}

#[tokio::test]
async fn responses_store_false_is_not_remembered() {
    let script = Script::new()
        .with_reply(Reply::text("One.").with_id("resp_a"))
        .with_reply(Reply::text("Two."));
    let emu = Emulator::start(script);
    let mut first = responses_request(false);
    first["store"] = json!(false);
    assert_eq!(responses(&emu, &first).await.status, 200);
    let next = json!({"model": "gpt-5", "previous_response_id": "resp_a", "input": "more"});
    assert_eq!(responses(&emu, &next).await.status, 400);
}

// ---------------------------------------------------------------------------------------------
// Usage

#[tokio::test]
async fn omitted_usage_members_are_omitted_in_every_shape() {
    let reply = || {
        Reply::text("Hi there.").with_usage(Usage {
            input: Some(5),
            ..Usage::default()
        })
    };
    let script = Script::new()
        .with_reply(reply())
        .with_reply(reply())
        .with_reply(reply());
    let emu = Emulator::start(script);
    let a = anthropic(&emu, &anthropic_request(false)).await.json();
    assert_eq!(a["usage"], json!({"input_tokens": 5}));
    let c = chat(&emu, &chat_request(false, false)).await.json();
    assert_eq!(c["usage"], json!({"prompt_tokens": 5}));
    let r = responses(&emu, &responses_request(false)).await.json();
    assert_eq!(r["usage"], json!({"input_tokens": 5}));
}

#[tokio::test]
async fn raw_usage_is_sent_verbatim() {
    let script = Script::new()
        .with_reply(Reply::text("Hi.").with_raw_usage(json!("lots")))
        .with_reply(Reply::text("Hi.").with_raw_usage(json!({"input_tokens": -1})));
    let emu = Emulator::start(script);
    let a = anthropic(&emu, &anthropic_request(false)).await.json();
    assert_eq!(a["usage"], "lots");
    let answer = anthropic(&emu, &anthropic_request(true)).await;
    let start: Value = serde_json::from_str(&answer.events()[0].1).unwrap();
    assert_eq!(start["message"]["usage"], json!({"input_tokens": -1}));
}

// ---------------------------------------------------------------------------------------------
// Faults

#[tokio::test]
async fn rate_limit_with_retry_after_then_success_anthropic() {
    let script = Script::new().with_api_key(KEY).with_turn(
        Turn::reply(Reply::text("Finally."))
            .after_fault(Fault::rate_limited(1))
            .after_fault(Fault::status(500)),
    );
    let emu = Emulator::start(script);
    let first = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(first.status, 429);
    assert_eq!(first.header("retry-after"), Some("1"));
    let error = first.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert!(error["error"]["message"].is_string());
    let second = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(second.status, 500);
    assert_eq!(second.json()["error"]["type"], "api_error");
    assert!(second.header("retry-after").is_none());
    let third = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(third.status, 200);
    assert_eq!(third.json()["content"][0]["text"], "Finally.");
    let attempts: Vec<(Option<usize>, Option<usize>, u16)> = emu
        .requests()
        .iter()
        .map(|r| (r.turn, r.attempt, r.status))
        .collect();
    assert_eq!(
        attempts,
        [
            (Some(0), Some(0), 429),
            (Some(0), Some(1), 500),
            (Some(0), Some(2), 200)
        ]
    );
}

#[tokio::test]
async fn rate_limit_then_success_openai_shape() {
    let script = Script::new()
        .with_turn(Turn::reply(Reply::text("Finally.")).after_fault(Fault::rate_limited(2)))
        .with_turn(
            Turn::reply(Reply::text("Again.")).after_fault(
                HttpFault::status(500)
                    .with_message("boom")
                    .with_type("server_error"),
            ),
        );
    let emu = Emulator::start(script);
    let first = chat(&emu, &chat_request(false, false)).await;
    assert_eq!(first.status, 429);
    assert_eq!(first.header("retry-after"), Some("2"));
    let error = first.json();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert!(error["error"]["message"].is_string());
    assert!(error["error"].get("param").is_some());
    assert_eq!(chat(&emu, &chat_request(false, false)).await.status, 200);
    let failed = responses(&emu, &responses_request(false)).await;
    assert_eq!(failed.status, 500);
    assert_eq!(
        failed.json(),
        json!({"error": {"message": "boom", "type": "server_error", "param": null, "code": null}})
    );
    assert_eq!(responses(&emu, &responses_request(false)).await.status, 200);
}

#[tokio::test]
async fn malformed_json_body_and_stream_line() {
    let script = Script::new()
        .with_turn(Turn::fault(Fault::MalformedJson))
        .with_turn(Turn::fault(Fault::MalformedJson))
        .with_turn(Turn::fault(Fault::MalformedJson));
    let emu = Emulator::start(script);
    let whole = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(whole.status, 200);
    assert!(serde_json::from_slice::<Value>(&whole.body).is_err());
    for answer in [
        anthropic(&emu, &anthropic_request(true)).await,
        chat(&emu, &chat_request(true, true)).await,
    ] {
        assert_eq!(answer.status, 200);
        assert!(answer.body_error.is_none());
        let bad = answer
            .events()
            .iter()
            .filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .count();
        assert_eq!(
            bad,
            1,
            "exactly one data line is not JSON: {}",
            answer.text()
        );
    }
}

#[tokio::test]
async fn cut_stream_closes_mid_event() {
    let script = Script::new()
        .with_turn(Turn::fault(Fault::CutStream))
        .with_turn(
            Turn::reply(Reply::text("one two three four five six")).after_fault(Fault::CutStream),
        )
        .with_turn(Turn::fault(Fault::CutStream));
    let emu = Emulator::start(script);
    let cut = anthropic(&emu, &anthropic_request(true)).await;
    assert_eq!(cut.status, 200);
    assert!(cut.body_error.is_some(), "the body ends in an error");
    let text = cut.text();
    assert!(text.starts_with("event: message_start\n"));
    assert!(!text.ends_with("\n\n"), "cut in the middle of an event");
    assert!(!text.contains("message_stop"));

    let cut = responses(&emu, &responses_request(true)).await;
    assert!(cut.body_error.is_some());
    assert!(cut.text().contains("response.created"));
    assert!(!cut.text().contains("response.completed"));
    let retried = responses(&emu, &responses_request(true)).await;
    assert!(retried.body_error.is_none());
    assert!(retried.text().contains("response.completed"));

    let whole = chat(&emu, &chat_request(false, false)).await;
    assert_eq!(whole.status, 200);
    assert!(whole.body_error.is_some());
    assert!(serde_json::from_slice::<Value>(&whole.body).is_err());
}

#[tokio::test]
async fn slow_first_byte_is_slow() {
    let script =
        Script::new().with_turn(Turn::reply(Reply::text("late")).with_first_byte_delay_ms(400));
    let emu = Emulator::start(script);
    let answer = anthropic(&emu, &anthropic_request(true)).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer.first_byte >= Duration::from_millis(400),
        "first byte after {:?}",
        answer.first_byte
    );
}

#[tokio::test]
async fn dropped_connection_has_no_response_then_the_reply_comes() {
    let script = Script::new()
        .with_turn(Turn::reply(Reply::text("after the drop")).after_fault(Fault::DropConnection));
    let emu = Emulator::start(script);
    let dropped = post(
        &emu.url(),
        "/v1/chat/completions",
        &openai_headers(),
        &chat_request(false, false),
    )
    .await;
    assert!(dropped.is_err(), "no response at all");
    let answer = chat(&emu, &chat_request(false, false)).await;
    assert_eq!(
        answer.json()["choices"][0]["message"]["content"],
        "after the drop"
    );
}

#[tokio::test]
async fn stream_error_event_in_each_provider() {
    let script = Script::new()
        .with_turn(Turn::fault(Fault::StreamError))
        .with_turn(Turn::fault(Fault::StreamError))
        .with_turn(Turn::fault(Fault::StreamError))
        .with_turn(Turn::fault(Fault::StreamError));
    let emu = Emulator::start(script);
    let a = anthropic(&emu, &anthropic_request(true)).await;
    let (name, data) = a.events().pop().unwrap();
    assert_eq!(name.as_deref(), Some("error"));
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data["error"]["type"], "overloaded_error");
    let c = chat(&emu, &chat_request(true, false)).await;
    let (_, data) = c.events().pop().unwrap();
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data["error"]["type"], "server_error");
    let r = responses(&emu, &responses_request(true)).await;
    let (name, _) = r.events().pop().unwrap();
    assert_eq!(name.as_deref(), Some("error"));
    let whole = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(whole.status, 529);
    assert_eq!(whole.json()["error"]["type"], "overloaded_error");
}

// ---------------------------------------------------------------------------------------------
// Strictness

async fn refused_anthropic(body: Value) -> String {
    let emu = one_turn(Reply::text("never"));
    let answer = anthropic(&emu, &body).await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    let error = answer.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(emu.turns_completed(), 0, "a refusal uses no turn");
    error["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn anthropic_refuses_an_unknown_top_level_field() {
    let mut body = anthropic_request(false);
    body["prompt_cache_key"] = json!("hello:ctx");
    assert_eq!(
        refused_anthropic(body).await,
        "prompt_cache_key: Extra inputs are not permitted"
    );
}

#[tokio::test]
async fn anthropic_refuses_missing_or_bad_max_tokens_and_messages() {
    let mut body = anthropic_request(false);
    body.as_object_mut().unwrap().remove("max_tokens");
    assert_eq!(refused_anthropic(body).await, "max_tokens: Field required");
    let mut body = anthropic_request(false);
    body["max_tokens"] = json!(0);
    assert!(refused_anthropic(body).await.starts_with("max_tokens:"));
    let mut body = anthropic_request(false);
    body["messages"] = json!([]);
    assert!(refused_anthropic(body).await.starts_with("messages:"));
    let mut body = anthropic_request(false);
    body["messages"] = json!([{"role": "assistant", "content": "hi"}]);
    assert!(refused_anthropic(body).await.contains("first message"));
    let mut body = anthropic_request(false);
    body["messages"] = json!([{"role": "tool", "content": "hi"}]);
    assert!(
        refused_anthropic(body)
            .await
            .contains("'user' or 'assistant'")
    );
}

#[tokio::test]
async fn anthropic_refuses_unanswered_and_unasked_tool_calls() {
    let mut body = anthropic_request(false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "write-file", "input": {}}
        ]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    ]);
    let message = refused_anthropic(body).await;
    assert!(
        message.contains("`tool_use` ids were found without `tool_result` blocks"),
        "{message}"
    );
    assert!(message.contains("toolu_1"));

    let mut body = anthropic_request(false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]},
    ]);
    let message = refused_anthropic(body).await;
    assert!(message.contains("unexpected `tool_use_id`"), "{message}");
}

#[tokio::test]
async fn anthropic_accepts_a_proper_tool_round_trip_and_refuses_neutral_blocks() {
    let emu = one_turn(Reply::text("Done."));
    let mut body = anthropic_request(false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "…", "signature": "sig"},
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "toolu_1", "name": "write-file", "input": {"path": "a.md"}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "wrote"}]}
        ]},
    ]);
    let answer = anthropic(&emu, &body).await;
    assert_eq!(answer.status, 200, "{}", answer.text());

    // The neutral format's `tool_call` block is not an Anthropic block.
    let mut body = anthropic_request(false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": [
            {"type": "tool_call", "id": "toolu_1", "name": "write-file", "input": {}}
        ]},
    ]);
    let message = refused_anthropic(body).await;
    assert!(message.contains("Input tag 'tool_call'"), "{message}");
}

#[tokio::test]
async fn anthropic_refuses_a_missing_version_header() {
    let emu = one_turn(Reply::text("never"));
    let headers = [("x-api-key", KEY), ("content-type", "application/json")];
    let answer = post(
        &emu.url(),
        "/v1/messages",
        &headers,
        &anthropic_request(false),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "anthropic-version: header is required"
    );
}

#[tokio::test]
async fn missing_or_wrong_credentials_get_401_in_each_shape() {
    let emu = one_turn(Reply::text("never"));
    let no_key = [
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
    ];
    let answer = post(
        &emu.url(),
        "/v1/messages",
        &no_key,
        &anthropic_request(false),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 401);
    let error = answer.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "authentication_error");

    let wrong_key = [
        ("x-api-key", "sk-wrong"),
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
    ];
    let answer = post(
        &emu.url(),
        "/v1/messages",
        &wrong_key,
        &anthropic_request(false),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["message"], "invalid x-api-key");

    let answer = post(
        &emu.url(),
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &chat_request(false, false),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 401);
    let error = answer.json();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("You didn't provide an API key")
    );

    let answer = post(
        &emu.url(),
        "/v1/responses",
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-wrong-key-0000"),
        ],
        &responses_request(false),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["code"], "invalid_api_key");
    assert!(
        !answer.text().contains("sk-wrong-key-0000"),
        "the key is masked"
    );

    assert_eq!(emu.turns_completed(), 0);
    assert!(
        emu.requests()
            .iter()
            .all(|r| r.status == 401 && r.turn.is_none())
    );
}

async fn refused_chat(body: Value) -> Value {
    let emu = one_turn(Reply::text("never"));
    let answer = chat(&emu, &body).await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    answer.json()["error"].clone()
}

#[tokio::test]
async fn chat_refuses_unanswered_and_stray_tool_messages() {
    let mut body = chat_request(false, false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write-file", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "write-file", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "user", "content": "next"},
    ]);
    let error = refused_chat(body).await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("did not have response messages: call_2"),
        "{error}"
    );
    assert_eq!(error["type"], "invalid_request_error");

    let mut body = chat_request(false, false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]);
    let error = refused_chat(body).await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("must be a response to a preceeding message with 'tool_calls'")
    );

    let mut body = chat_request(false, false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write-file", "arguments": {"path": "a"}}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]);
    let error = refused_chat(body).await;
    assert_eq!(error["code"], "invalid_type");

    let mut body = chat_request(false, false);
    body["tools"] = json!([]);
    assert_eq!(refused_chat(body).await["code"], "empty_array");

    let mut body = chat_request(false, false);
    body["system"] = json!("not a chat field");
    assert_eq!(
        refused_chat(body).await["message"],
        "Unrecognized request argument supplied: system"
    );
}

#[tokio::test]
async fn chat_accepts_a_proper_tool_round_trip() {
    let emu = one_turn(Reply::text("Done."));
    let mut body = chat_request(false, false);
    body["messages"] = json!([
        {"role": "user", "content": "Write a note."},
        {"role": "assistant", "content": "Writing.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write-file", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]);
    let answer = chat(&emu, &body).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[tokio::test]
async fn responses_refuses_unknown_parameters_and_chat_style_tools() {
    let emu = one_turn(Reply::text("never"));
    let mut body = responses_request(false);
    body["messages"] = json!([]);
    let answer = responses(&emu, &body).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"],
        json!({"message": "Unknown parameter: 'messages'.", "type": "invalid_request_error",
               "param": "messages", "code": "unknown_parameter"})
    );
    let mut body = responses_request(false);
    body["tools"] = json!([{"type": "function", "function": {"name": "write-file"}}]);
    let answer = responses(&emu, &body).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "Missing required parameter: 'tools[0].name'."
    );
    let mut body = responses_request(false);
    body.as_object_mut().unwrap().remove("input");
    assert_eq!(responses(&emu, &body).await.status, 400);
}

// ---------------------------------------------------------------------------------------------
// Script exhaustion and recording

#[tokio::test]
async fn an_exhausted_script_answers_500_naming_it() {
    let emu = one_turn(Reply::text("only one"));
    assert_eq!(anthropic(&emu, &anthropic_request(false)).await.status, 200);
    let answer = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(answer.status, 500);
    let message = answer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("script is exhausted"), "{message}");
    let last = emu.requests().pop().unwrap();
    assert_eq!(last.outcome, "exhausted");
    assert_eq!(last.turn, None);
}

#[tokio::test]
async fn every_request_is_recorded_and_written_as_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let script = Script::new()
        .with_reply(Reply::text("Hi."))
        .with_reply(Reply::text("Again."));
    let emu = Emulator::builder(script)
        .api_key(KEY)
        .record_to(&log)
        .start()
        .unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let body = anthropic_request(false);
    anthropic(&emu, &body).await;
    post(
        &emu.url(),
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &chat_request(false, false),
    )
    .await
    .unwrap();
    chat(&emu, &chat_request(false, false)).await;
    let after_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let requests = emu.requests();
    assert_eq!(requests.len(), 3);
    // Arrival in microseconds, in order, inside the test's window; handling inside the gaps.
    assert!(requests[0].arrived_us >= before * 1000);
    assert!(
        requests
            .windows(2)
            .all(|pair| pair[0].arrived_us <= pair[1].arrived_us)
    );
    for request in &requests {
        assert!(request.arrived_us / 1000 >= request.unix_ms.saturating_sub(1));
        assert!(
            request.arrived_us + request.handled_us <= after_us,
            "{request:?}"
        );
    }
    let first = &requests[0];
    assert_eq!(first.provider, Provider::Anthropic);
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some(KEY));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body, body);
    assert_eq!(
        (first.turn, first.attempt, first.status),
        (Some(0), Some(0), 200)
    );
    assert_eq!(first.outcome, "reply");
    assert!(first.unix_ms >= before);
    assert_eq!(requests[1].provider, Provider::OpenAiChat);
    assert_eq!((requests[1].turn, requests[1].status), (None, 401));
    assert!(requests[1].outcome.starts_with("refused: "));
    assert_eq!((requests[2].turn, requests[2].status), (Some(1), 200));

    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["provider"], "anthropic");
    assert_eq!(lines[0]["turn"], 0);
    assert_eq!(lines[0]["body"], body);
    assert!(
        lines[0]["headers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h[0] == "x-api-key")
    );
    assert_eq!(lines[1]["provider"], "openai-chat");
    assert_eq!(lines[1]["turn"], Value::Null);
    assert_eq!(lines[1]["status"], 401);
}

#[tokio::test]
async fn unknown_paths_are_404_and_recorded() {
    let emu = one_turn(Reply::text("never"));
    let answer = post(&emu.url(), "/v1/complete", &anthropic_headers(), &json!({}))
        .await
        .unwrap();
    assert_eq!(answer.status, 404);
    assert_eq!(emu.requests()[0].provider, Provider::Unknown);
    assert_eq!(emu.turns_completed(), 0);
}

// ---------------------------------------------------------------------------------------------
// The YAML script and the binary

const EXAMPLE: &str = r#"
api_key: sk-test-key-123456
turns:
  - reply:
      thinking: { text: "Let me write it.", signature: "sig-1" }
      text: "Writing the note."
      tool_calls: [ { id: call_1, name: write-file, input: { path: a.md, content: hi } } ]
      stop: tool_call
      usage: { input: 120, output: 30, cache_read: 100, cache_write: 20 }
      id: resp_1
    faults:
      - { status: 429, retry_after: 1 }
      - { status: 500 }
  - fault: malformed_json
  - fault: cut_stream
  - reply: { text: "late" }
    first_byte_delay_ms: 1500
  - reply: { text: "odd", raw_usage: { prompt_tokens: "many" } }
"#;

#[test]
fn the_yaml_script_reads_as_documented() {
    let script = Script::from_yaml(EXAMPLE).unwrap();
    assert_eq!(script.api_key.as_deref(), Some(KEY));
    assert_eq!(script.turns.len(), 5);
    let first = &script.turns[0];
    assert_eq!(
        first.faults,
        [
            Fault::Http(HttpFault::status(429).with_retry_after(1)),
            Fault::status(500)
        ]
    );
    let expected = Reply::text("Writing the note.")
        .with_thinking("Let me write it.", "sig-1")
        .with_tool_call(
            "call_1",
            "write-file",
            json!({"path": "a.md", "content": "hi"}),
        )
        .with_stop(Stop::ToolCall)
        .with_usage(Usage::new(120, 30, 100, 20))
        .with_id("resp_1");
    assert_eq!(
        first.answer,
        murmur_testkit::emulator::Answer::Reply(expected)
    );
    assert_eq!(
        script.turns[1].answer,
        murmur_testkit::emulator::Answer::Fault(Fault::MalformedJson)
    );
    assert_eq!(script.turns[3].first_byte_delay_ms, Some(1500));
    let murmur_testkit::emulator::Answer::Reply(odd) = &script.turns[4].answer else {
        panic!("a reply");
    };
    assert_eq!(odd.raw_usage, Some(json!({"prompt_tokens": "many"})));
}

#[test]
fn script_mistakes_are_named_with_their_place() {
    let error = Script::from_yaml("turns:\n  - reply: { txt: hi }\n").unwrap_err();
    assert!(error.to_string().contains("turns[0]"), "{error}");
    assert!(error.to_string().contains("txt"), "{error}");
    let error =
        Script::from_yaml("turns:\n  - reply: { text: a }\n    fault: cut_stream\n").unwrap_err();
    assert!(error.to_string().contains("not both"), "{error}");
    let error = Script::from_yaml("turns:\n  - fault: explode\n").unwrap_err();
    assert!(
        error.to_string().contains("unknown fault `explode`"),
        "{error}"
    );
    let error = Script::from_yaml("turns:\n  - {}\n").unwrap_err();
    assert!(
        error.to_string().contains("needs `reply` or `fault`"),
        "{error}"
    );
}

#[tokio::test]
async fn the_binary_prints_its_address_and_records() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        "turns:\n  - reply: { text: \"from the binary\" }\n",
    )
    .unwrap();
    let log = dir.path().join("log.jsonl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_murmur-emulator"))
        .arg("--script")
        .arg(&script)
        .arg("--record")
        .arg(&log)
        .arg("--api-key")
        .arg(KEY)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    let url = first_line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line: {first_line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"));
    let answer = post(
        &url,
        "/v1/messages",
        &anthropic_headers(),
        &anthropic_request(false),
    )
    .await
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["content"][0]["text"], "from the binary");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 1);
    let line: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(line["path"], "/v1/messages");
    assert_eq!(line["outcome"], "reply");
}

#[test]
fn the_binary_refuses_a_bad_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, "turns: [ { reply: { text: a }, extra: 1 } ]\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_murmur-emulator"))
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("extra"), "{stderr}");
}

#[tokio::test]
async fn a_standing_reply_by_model_answers_every_time_without_taking_a_turn() {
    let script = Script::from_yaml(
        "turns:\n  - reply: { text: scripted }\nby_model:\n  summary-model: { text: standing }\n",
    )
    .unwrap();
    let emu = Emulator::builder(script).api_key(KEY).start().unwrap();
    let mut summary = anthropic_request(false);
    summary["model"] = json!("summary-model");
    for _ in 0..2 {
        let answer = anthropic(&emu, &summary).await;
        assert_eq!(answer.json()["content"][0]["text"], "standing");
    }
    let answer = anthropic(&emu, &anthropic_request(false)).await;
    assert_eq!(answer.json()["content"][0]["text"], "scripted");
    let recorded = emu.requests();
    assert_eq!(recorded[0].outcome, "reply (by model)");
    assert_eq!(recorded[0].turn, None);
    assert_eq!(recorded[2].turn, Some(0));
}
