use super::*;
use murmur_guest::inference::decode_stream;
use serde_json::json;

fn request(value: Value) -> Request {
    Request::parse(Some(&value.to_string())).unwrap()
}

fn example() -> Request {
    request(json!({
        "model": "gpt-5",
        "max_tokens": 8192,
        "system": "[Capsule]\nname: hello",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Write a note."}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me write.", "signature": "c2ln"},
                {"type": "text", "text": "Writing it."},
                {"type": "tool_call", "id": "call_01", "name": "write-file", "input": {"path": "a.md", "content": "x"}},
                {"type": "tool_call", "id": "call_02", "name": "read-file", "input": {"path": "b.md"}}
            ]},
            {"role": "tool", "tool_call_id": "call_01", "is_error": false,
             "content": [{"type": "text", "text": "wrote 1 byte"}]},
            {"role": "tool", "tool_call_id": "call_02", "is_error": true,
             "content": [{"type": "text", "text": "no such file"}]}
        ],
        "tools": [{"name": "write-file", "description": "Write a file.", "input_schema": {"type": "object"}}],
        "prompt_cache_key": "hello:ctx_1:tsk_1",
        "stream": false,
        "unknown_member": 1
    }))
}

#[test]
fn body_of_the_protocol_example() {
    let body = request_body(&example(), &Config::default());
    assert_eq!(
        body,
        json!({
            "model": "gpt-5",
            "messages": [
                {"role": "system", "content": "[Capsule]\nname: hello"},
                {"role": "user", "content": "Write a note."},
                {"role": "assistant", "content": "Writing it.", "tool_calls": [
                    {"id": "call_01", "type": "function",
                     "function": {"name": "write-file", "arguments": "{\"path\":\"a.md\",\"content\":\"x\"}"}},
                    {"id": "call_02", "type": "function",
                     "function": {"name": "read-file", "arguments": "{\"path\":\"b.md\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_01", "content": "wrote 1 byte"},
                {"role": "tool", "tool_call_id": "call_02", "content": "no such file"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "write-file", "description": "Write a file.", "parameters": {"type": "object"}}}],
            "max_completion_tokens": 8192,
            "prompt_cache_key": "hello:ctx_1:tsk_1"
        })
    );
}

#[test]
fn streaming_body_and_config() {
    let mut req = example();
    req.stream = true;
    req.continuation_id = Some("ignored".into());
    let config = Config {
        reasoning_effort: Some("low".into()),
    };
    let body = request_body(&req, &config);
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["reasoning_effort"], json!("low"));
    assert!(!body.to_string().contains("ignored"));

    let bare = request(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(
        request_body(&bare, &Config::default()),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[test]
fn images_and_thinking_only_messages() {
    let req = request(json!({"model": "m", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "only thinking", "signature": "s"}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_call", "id": "c1", "name": "shot", "input": {}},
            {"type": "tool_call", "id": "c2", "name": "shot", "input": "{broken"}
        ]},
        {"role": "tool", "tool_call_id": "c1", "is_error": false, "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "media_type": "image/jpeg", "data": "/9j/"}
        ]},
        {"role": "tool", "tool_call_id": "c2", "is_error": false, "content": []},
        {"role": "user", "content": [{"type": "text", "text": "and?"}]}
    ]}));
    let body = request_body(&req, &Config::default());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": "{broken"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "here"},
            {"role": "tool", "tool_call_id": "c2", "content": ""},
            {"role": "user", "content": [
                {"type": "text", "text": "Images returned by tool call c1:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}}
            ]},
            {"role": "user", "content": "and?"}
        ])
    );
}

#[test]
fn response_with_text_and_tool_calls() {
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-5",
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": "Reading.", "refusal": null,
            "tool_calls": [{"id": "call_abc", "type": "function",
                            "function": {"name": "read-file", "arguments": "{\"path\":\"a.md\"}"}}]
        }, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
                  "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}}
    });
    let response = parse_response(&answer).unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_call", "id": "call_abc", "name": "read-file", "input": {"path": "a.md"}}
            ],
            "usage": {"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 1024}
        })
    );
}

#[test]
fn tool_call_ids_round_trip() {
    let answer = json!({"choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_Z", "type": "function", "function": {"name": "t", "arguments": "{\"a\":[1]}"}}]},
        "finish_reason": "tool_calls"}]});
    let response = parse_response(&answer).unwrap();
    let history = vec![
        Message::Assistant {
            content: response.content,
        },
        Message::Tool {
            tool_call_id: "call_Z".into(),
            is_error: false,
            content: vec![Block::text("ok")],
        },
    ];
    assert_eq!(
        messages(&history),
        vec![
            json!({"role": "assistant", "tool_calls": [
                {"id": "call_Z", "type": "function", "function": {"name": "t", "arguments": "{\"a\":[1]}"}}
            ]}),
            json!({"role": "tool", "tool_call_id": "call_Z", "content": "ok"})
        ]
    );
}

#[test]
fn stop_reasons_and_usage() {
    for (finish, calls, neutral) in [
        ("stop", false, StopReason::EndTurn),
        ("content_filter", false, StopReason::EndTurn),
        ("tool_calls", true, StopReason::ToolCall),
        ("stop", true, StopReason::ToolCall),
        ("length", false, StopReason::MaxTokens),
        ("length", true, StopReason::MaxTokens),
    ] {
        assert_eq!(stop_reason(Some(finish), calls), neutral, "{finish}");
    }
    let answer = json!({"choices": [{"message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 5}});
    assert_eq!(
        serde_json::to_value(parse_response(&answer).unwrap()).unwrap(),
        json!({"stop_reason": "max_tokens", "content": [{"type": "text", "text": "hi"}],
               "usage": {"input_tokens": 3, "output_tokens": 5}})
    );
    let no_usage = json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]});
    assert_eq!(parse_response(&no_usage).unwrap().usage, None);
}

#[test]
fn reasoning_content_of_compatible_servers_is_thinking() {
    let answer = json!({"choices": [{"message": {"role": "assistant", "content": "4",
        "reasoning_content": "2+2"}, "finish_reason": "stop"}]});
    assert_eq!(
        parse_response(&answer).unwrap().content,
        vec![
            Block::Thinking {
                thinking: "2+2".into(),
                signature: None
            },
            Block::text("4")
        ]
    );
}

#[test]
fn malformed_answers_and_errors() {
    let provider = OpenAiChat::default();
    for body in [&b"<html>"[..], b"{}", b"{\"choices\": []}"] {
        let e = provider.parse_response(body).unwrap_err();
        assert_eq!(e.status, None);
        assert_eq!(e.kind.as_deref(), Some("invalid_response"), "{e}");
    }
    let e = provider.parse_error(
        400,
        br#"{"error": {"message": "Invalid 'messages[1].content'", "type": "invalid_request_error", "param": "messages", "code": null}}"#,
    );
    assert_eq!(
        e.summary(),
        "400 invalid_request_error: Invalid 'messages[1].content'"
    );
    assert_eq!(provider.path(), "/v1/chat/completions");
    assert!(provider.headers().is_empty());
}

fn chunk(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn recorded_stream() -> String {
    [
        chunk(
            json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
        ),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "Let me "}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "look."}}]})),
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read-file", "arguments": ""}}]}}]}),
        ),
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":"}}]}}]}),
        ),
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "list", "arguments": "{}"}}]}}]}),
        ),
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \"a.md\"}"}}]}}]}),
        ),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        chunk(
            json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 0}}}),
        ),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

fn decode(chunks: &[&[u8]]) -> (Result<Outcome, InferenceError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |d: Delta<'_>| match d {
        Delta::Text(t) if !t.is_empty() => deltas.push(format!("text:{t}")),
        Delta::Thinking(t) if !t.is_empty() => deltas.push(format!("thinking:{t}")),
        _ => {}
    };
    let outcome = decode_stream(ChunkStream::default(), chunks, &mut sink);
    (outcome, deltas)
}

#[test]
fn stream_accumulates_text_and_tool_calls_by_index() {
    let stream = recorded_stream();
    let bytes = stream.as_bytes();
    for cut in [3, 200, bytes.len() / 2, bytes.len() - 2] {
        let (outcome, deltas) = decode(&[&bytes[..cut], &bytes[cut..]]);
        let outcome = outcome.unwrap();
        assert_eq!(outcome.continuation_id, None);
        assert_eq!(
            serde_json::to_value(&outcome.response).unwrap(),
            json!({
                "stop_reason": "tool_call",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_call", "id": "call_1", "name": "read-file", "input": {"path": "a.md"}},
                    {"type": "tool_call", "id": "call_2", "name": "list", "input": {}}
                ],
                "usage": {"input_tokens": 50, "output_tokens": 20, "cached_tokens": 0}
            })
        );
        assert_eq!(deltas, ["text:Let me ", "text:look."]);
    }
}

#[test]
fn stream_cut_or_failing_is_an_error() {
    let stream = recorded_stream();
    // Cut mid-event.
    let (outcome, _) = decode(&[&stream.as_bytes()[..150]]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));
    // Cut between events, before any finish_reason.
    let finish = stream.find("\"finish_reason\":\"tool_calls\"").unwrap();
    let end = stream[..finish].rfind("data:").unwrap();
    let (outcome, _) = decode(&[&stream.as_bytes()[..end]]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));
    // An error chunk.
    let failing =
        chunk(json!({"error": {"message": "The server had an error", "type": "server_error"}}));
    let (outcome, _) = decode(&[failing.as_bytes()]);
    assert_eq!(
        outcome.unwrap_err().summary(),
        "server_error: The server had an error"
    );
    // Not JSON.
    let (outcome, _) = decode(&[b"data: {oops\n\n"]);
    assert_eq!(
        outcome.unwrap_err().kind.as_deref(),
        Some("invalid_response")
    );
}

#[test]
fn stream_of_plain_text_with_reasoning() {
    let stream = [
        chunk(json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "Hi"}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let (outcome, deltas) = decode(&[stream.as_bytes()]);
    let response = outcome.unwrap().response;
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage, None);
    assert_eq!(deltas, ["thinking:hmm", "text:Hi"]);
}

#[test]
fn a_conversation_rendered_in_parts_is_the_conversation_rendered_whole() {
    // Every cut after an assistant message (where a held conversation ends) renders the same
    // messages as the whole, images of tool results included.
    let whole = request(json!({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Look."}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "tool_call", "id": "c1", "name": "shot", "input": {}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "is_error": false, "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "media_type": "image/png", "data": "iVBO"}
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "A cat."},
            {"type": "tool_call", "id": "c2", "name": "read-file", "input": {"path": "a"}}
        ]},
        {"role": "tool", "tool_call_id": "c2", "is_error": true, "content": [{"type": "text", "text": "no"}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
    ]}));
    let provider = OpenAiChat::default();
    let all = provider.render_messages(&whole.messages);
    for (cut, message) in whole.messages.iter().enumerate() {
        if !matches!(message, Message::Assistant { .. }) {
            continue;
        }
        let (before, after) = whole.messages.split_at(cut + 1);
        let mut parts = provider.render_messages(before);
        parts.extend(provider.render_messages(after));
        assert_eq!(parts, all, "cut after message {cut}");
    }
    // The body puts the system message first and the rendered messages after it.
    let mut without = whole.clone();
    without.system = Some("sys".into());
    without.messages.clear();
    assert_eq!(
        provider.request_body(&without).unwrap()["messages"],
        json!([{"role": "system", "content": "sys"}])
    );
}
