use super::*;
use murmur_guest::inference::decode_stream;
use serde_json::json;

fn request(value: Value) -> Request {
    Request::parse(Some(&value.to_string())).unwrap()
}

fn example() -> Request {
    request(json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "system": "[Capsule]\nname: hello",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Write a note."}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me write.", "signature": "c2ln"},
                {"type": "text", "text": "Writing it."},
                {"type": "tool_call", "id": "toolu_01", "name": "write-file", "input": {"path": "a.md", "content": "x"}},
                {"type": "tool_call", "id": "toolu_02", "name": "read-file", "input": {"path": "b.md"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_01", "is_error": false,
             "content": [{"type": "text", "text": "wrote 1 byte"}]},
            {"role": "tool", "tool_call_id": "toolu_02", "is_error": true,
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
            "model": "claude-sonnet-4-5",
            "max_tokens": 8192,
            "system": "[Capsule]\nname: hello",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Write a note."}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Let me write.", "signature": "c2ln"},
                    {"type": "text", "text": "Writing it."},
                    {"type": "tool_use", "id": "toolu_01", "name": "write-file", "input": {"path": "a.md", "content": "x"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "read-file", "input": {"path": "b.md"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01",
                     "content": [{"type": "text", "text": "wrote 1 byte"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_02",
                     "content": [{"type": "text", "text": "no such file"}], "is_error": true}
                ]}
            ],
            "tools": [{"name": "write-file", "description": "Write a file.", "input_schema": {"type": "object"}}]
        })
    );
}

#[test]
fn only_fields_the_messages_api_defines() {
    let mut req = example();
    req.stream = true;
    req.continuation_id = Some("resp_1".into());
    let config = Config {
        thinking: Some(Thinking {
            budget_tokens: 2048,
        }),
        ..Config::default()
    };
    let body = request_body(&req, &config);
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "max_tokens",
            "system",
            "messages",
            "tools",
            "thinking",
            "stream"
        ]
    );
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["stream"], json!(true));
    let text = body.to_string();
    assert!(!text.contains("prompt_cache_key") && !text.contains("hello:ctx_1"));
    assert!(!text.contains("continuation"));

    // No system, no tools, no max_tokens: the defaults.
    let bare = request(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(
        request_body(&bare, &Config::default()),
        json!({"model": "m", "max_tokens": 4096,
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
    );
    let config = Config {
        default_max_tokens: Some(100),
        ..Config::default()
    };
    assert_eq!(request_body(&bare, &config)["max_tokens"], json!(100));
}

#[test]
fn images_tool_result_images_and_dropped_blocks() {
    let req = request(json!({"model": "m", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
            {"type": "text", "text": ""}
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "no signature"},
            {"type": "text", "text": ""},
            {"type": "tool_call", "id": "t1", "name": "shot", "input": "not json{"}
        ]},
        {"role": "tool", "tool_call_id": "t1", "is_error": false, "content": [
            {"type": "image", "media_type": "image/jpeg", "data": "/9j/"}
        ]},
        {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]}
    ]}));
    let body = request_body(&req, &Config::default());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "shot", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}}
                ]},
                {"type": "text", "text": "and?"}
            ]}
        ])
    );
}

#[test]
fn prompt_caching_marks_breakpoints() {
    let config = Config {
        prompt_caching: true,
        ..Config::default()
    };
    let body = request_body(&example(), &config);
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "[Capsule]\nname: hello", "cache_control": ephemeral}])
    );
    assert_eq!(body["tools"][0]["cache_control"], ephemeral);
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][1]["cache_control"], ephemeral);
    assert!(last["content"][0].get("cache_control").is_none());
}

#[test]
fn response_with_every_block_kind() {
    let answer = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "I should read it.", "signature": "EqQBCgIYAh"},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_9", "name": "read-file", "input": {"path": "a.md"}},
            {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 503,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1800}
    });
    let response = parse_response(&answer).unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "EqQBCgIYAh"},
                {"type": "thinking", "thinking": "", "signature": "redacted_thinking:EmwKAhgB"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_call", "id": "toolu_9", "name": "read-file", "input": {"path": "a.md"}}
            ],
            "usage": {"input_tokens": 2095, "output_tokens": 503, "cached_tokens": 1800, "cache_write_tokens": 0}
        })
    );
}

#[test]
fn thinking_and_tool_ids_round_trip() {
    let answer = json!({"type": "message", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "toolu_X", "name": "t", "input": {"a": [1]}}
    ], "stop_reason": "tool_use", "usage": {}});
    let response = parse_response(&answer).unwrap();
    let mut history = vec![Message::Assistant {
        content: response.content,
    }];
    history.push(Message::Tool {
        tool_call_id: "toolu_X".into(),
        is_error: false,
        content: vec![Block::text("ok")],
    });
    let sent = messages(&history);
    assert_eq!(
        sent,
        vec![
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "toolu_X", "name": "t", "input": {"a": [1]}}
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_X", "content": [{"type": "text", "text": "ok"}]}
            ]})
        ]
    );
}

#[test]
fn stop_reasons() {
    for (anthropic, neutral) in [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::EndTurn),
        ("refusal", StopReason::EndTurn),
        ("pause_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolCall),
        ("max_tokens", StopReason::MaxTokens),
        ("model_context_window_exceeded", StopReason::MaxTokens),
    ] {
        assert_eq!(stop_reason(Some(anthropic)), neutral, "{anthropic}");
    }
}

#[test]
fn usage_omits_absent_members() {
    let response = parse_response(
        &json!({"content": [], "stop_reason": "end_turn", "usage": {"output_tokens": 3}}),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"stop_reason": "end_turn", "content": [], "usage": {"output_tokens": 3}})
    );
    let response = parse_response(&json!({"content": [], "stop_reason": "end_turn"})).unwrap();
    assert_eq!(response.usage, None);
}

#[test]
fn malformed_answers_are_errors_without_status() {
    let provider = Anthropic::default();
    for body in [&b"not json"[..], b"{\"content\": 3}", b"[]"] {
        let e = provider.parse_response(body).unwrap_err();
        assert_eq!(e.status, None);
        assert_eq!(e.kind.as_deref(), Some("invalid_response"));
    }
}

#[test]
fn provider_errors_carry_status_type_and_message() {
    let provider = Anthropic::default();
    let e = provider.parse_error(
        400,
        br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    );
    assert_eq!(
        e.summary(),
        "400 invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum"
    );
    let result = e.into_result();
    let data: Value = serde_json::from_str(result.data.as_deref().unwrap()).unwrap();
    assert_eq!(data["stop_reason"], "error");
    assert_eq!(data["error"]["status"], 400);
    assert_eq!(data["error"]["type"], "invalid_request_error");
}

#[test]
fn headers_and_path() {
    let provider = Anthropic::default();
    assert_eq!(provider.path(), "/v1/messages");
    assert_eq!(
        provider.headers(),
        vec![("anthropic-version".to_string(), "2023-06-01".to_string())]
    );
    let env = DriverEnv {
        config: json!({"thinking": {"budget_tokens": 1024}, "max_retries": 1}),
        ..DriverEnv::default()
    };
    assert_eq!(
        Anthropic::from_env(&env).unwrap().config.thinking,
        Some(Thinking {
            budget_tokens: 1024
        })
    );
    let env = DriverEnv {
        config: json!({"thinking": {"budget": 1024}}),
        ..DriverEnv::default()
    };
    assert!(Anthropic::from_env(&env).is_err());
}

/// A recorded stream: thinking, text and a tool call, with `ping`, split at awkward places.
const STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":2000,\"output_tokens\":2}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: ping\n",
    "data: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"check.\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay, \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"reading.\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x\",\"name\":\"read-file\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\".md\\\"}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

fn decode(chunks: &[&[u8]]) -> (Result<Outcome, InferenceError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |d: Delta<'_>| match d {
        Delta::Text(t) if !t.is_empty() => deltas.push(format!("text:{t}")),
        Delta::Thinking(t) if !t.is_empty() => deltas.push(format!("thinking:{t}")),
        _ => {}
    };
    let outcome = decode_stream(MessageStream::default(), chunks, &mut sink);
    (outcome, deltas)
}

#[test]
fn stream_decodes_like_the_whole_answer() {
    let bytes = STREAM.replace('\n', "\r\n");
    let bytes = bytes.as_bytes();
    for cut in [1, 97, 500, bytes.len() / 2, bytes.len() - 3] {
        let (outcome, deltas) = decode(&[&bytes[..cut], &bytes[cut..]]);
        let outcome = outcome.unwrap();
        assert_eq!(outcome.continuation_id, None);
        assert_eq!(
            serde_json::to_value(&outcome.response).unwrap(),
            json!({
                "stop_reason": "tool_call",
                "content": [
                    {"type": "thinking", "thinking": "Let me check.", "signature": "EqQBCgIYAhIM"},
                    {"type": "text", "text": "Okay, reading."},
                    {"type": "tool_call", "id": "toolu_01T1x", "name": "read-file", "input": {"path": "a.md"}}
                ],
                "usage": {"input_tokens": 472, "output_tokens": 89, "cached_tokens": 2000, "cache_write_tokens": 10}
            })
        );
        assert_eq!(
            deltas,
            [
                "thinking:Let me ",
                "thinking:check.",
                "text:Okay, ",
                "text:reading."
            ]
        );
    }
}

#[test]
fn a_tool_call_without_input_deltas_keeps_its_start_input() {
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (outcome, _) = decode(&[stream.as_bytes()]);
    let response = outcome.unwrap().response;
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        response.content,
        vec![Block::ToolCall {
            id: "t".into(),
            name: "n".into(),
            input: json!({})
        }]
    );
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: Some(5),
            output_tokens: Some(1),
            ..Usage::default()
        })
    );
}

#[test]
fn a_cut_stream_is_an_error() {
    // Cut mid-event.
    let cut = &STREAM.as_bytes()[..STREAM.len() - 10];
    let (outcome, _) = decode(&[cut]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));
    // Cut on an event boundary, before message_stop.
    let end = STREAM.find("event: message_stop").unwrap();
    let (outcome, _) = decode(&[&STREAM.as_bytes()[..end]]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));
    assert!(e.message.contains("message_stop"), "{e}");
}

#[test]
fn a_stream_error_event_is_an_error() {
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    );
    let (outcome, _) = decode(&[stream.as_bytes()]);
    let e = outcome.unwrap_err();
    assert_eq!(e.summary(), "overloaded_error: Overloaded");
    assert_eq!(e.status, None);
}

#[test]
fn malformed_event_data_is_an_error() {
    let (outcome, _) = decode(&[b"event: message_start\ndata: {nope\n\n"]);
    assert_eq!(
        outcome.unwrap_err().kind.as_deref(),
        Some("invalid_response")
    );
}
