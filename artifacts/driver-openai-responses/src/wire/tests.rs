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
                {"type": "thinking", "thinking": "Plan: write.", "signature": "gAAAAABenc"},
                {"type": "thinking", "thinking": "no encrypted content"},
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
            "instructions": "[Capsule]\nname: hello",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write a note."}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan: write."}],
                 "encrypted_content": "gAAAAABenc"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Writing it."}]},
                {"type": "function_call", "call_id": "call_01", "name": "write-file",
                 "arguments": "{\"path\":\"a.md\",\"content\":\"x\"}"},
                {"type": "function_call", "call_id": "call_02", "name": "read-file",
                 "arguments": "{\"path\":\"b.md\"}"},
                {"type": "function_call_output", "call_id": "call_01", "output": "wrote 1 byte"},
                {"type": "function_call_output", "call_id": "call_02", "output": "no such file"}
            ],
            "tools": [{"type": "function", "name": "write-file", "description": "Write a file.",
                       "parameters": {"type": "object"}}],
            "max_output_tokens": 8192,
            "prompt_cache_key": "hello:ctx_1:tsk_1",
            "store": true
        })
    );
}

#[test]
fn continuation_store_and_config() {
    let req = request(json!({
        "model": "gpt-5",
        "messages": [{"role": "tool", "tool_call_id": "call_9", "is_error": false, "content": "done"}],
        "prompt_cache_key": "k",
        "stream": true,
        "continuation_id": "resp_abc"
    }));
    let config = Config {
        store: false,
        reasoning: Some(json!({"effort": "low", "summary": "auto"})),
        include: Some(vec!["reasoning.encrypted_content".into()]),
    };
    assert_eq!(
        request_body(&req, &config),
        json!({
            "model": "gpt-5",
            "input": [{"type": "function_call_output", "call_id": "call_9", "output": "done"}],
            "prompt_cache_key": "k",
            "store": false,
            "previous_response_id": "resp_abc",
            "reasoning": {"effort": "low", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "stream": true
        })
    );
    let env = DriverEnv {
        config: json!({"store": false, "max_retries": 2}),
        ..DriverEnv::default()
    };
    assert!(!OpenAiResponses::from_env(&env).unwrap().config.store);
    assert!(
        OpenAiResponses::from_env(&DriverEnv::default())
            .unwrap()
            .config
            .store
    );
}

#[test]
fn images_in_user_messages_and_tool_results() {
    let req = request(json!({"model": "m", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}
        ]},
        {"role": "tool", "tool_call_id": "c1", "is_error": false, "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "media_type": "image/jpeg", "data": "/9j/"}
        ]}
    ]}));
    assert_eq!(
        request_body(&req, &Config::default())["input"],
        json!([
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
            ]},
            {"type": "function_call_output", "call_id": "c1", "output": [
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/"}
            ]}
        ])
    );
}

fn completed_response() -> Value {
    json!({
        "id": "resp_123", "object": "response", "status": "completed", "model": "gpt-5",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [
                {"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}
            ], "encrypted_content": "gAAAAABxyz"},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": "Reading.", "annotations": []}
            ]},
            {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_abc",
             "name": "read-file", "arguments": "{\"path\":\"a.md\"}"},
            {"id": "ws_1", "type": "web_search_call", "status": "completed"}
        ],
        "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2048},
                  "output_tokens": 120, "output_tokens_details": {"reasoning_tokens": 64},
                  "total_tokens": 3120}
    })
}

#[test]
fn response_with_every_item_kind() {
    let outcome = outcome(&completed_response(), true).unwrap();
    assert_eq!(outcome.continuation_id.as_deref(), Some("resp_123"));
    assert_eq!(
        serde_json::to_value(&outcome.response).unwrap(),
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "thinking", "thinking": "First.\n\nSecond.", "signature": "gAAAAABxyz"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_call", "id": "call_abc", "name": "read-file", "input": {"path": "a.md"}}
            ],
            "usage": {"input_tokens": 3000, "output_tokens": 120, "cached_tokens": 2048}
        })
    );
    // Without store the provider holds nothing: no continuation.
    assert_eq!(
        super::outcome(&completed_response(), false)
            .unwrap()
            .continuation_id,
        None
    );
}

#[test]
fn reasoning_and_call_ids_round_trip() {
    let response = outcome(&completed_response(), true).unwrap().response;
    let history = vec![
        Message::Assistant {
            content: response.content,
        },
        Message::Tool {
            tool_call_id: "call_abc".into(),
            is_error: false,
            content: vec![Block::text("ok")],
        },
    ];
    assert_eq!(
        input(&history),
        vec![
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "First.\n\nSecond."}],
                   "encrypted_content": "gAAAAABxyz"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]}),
            json!({"type": "function_call", "call_id": "call_abc", "name": "read-file", "arguments": "{\"path\":\"a.md\"}"}),
            json!({"type": "function_call_output", "call_id": "call_abc", "output": "ok"})
        ]
    );
}

#[test]
fn stop_reasons_and_usage() {
    let text_only = json!({"id": "r", "status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]});
    let o = outcome(&text_only, true).unwrap();
    assert_eq!(o.response.stop_reason, StopReason::EndTurn);
    assert_eq!(o.response.usage, None);

    let cut = json!({"id": "r", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "hal"}]}],
        "usage": {"input_tokens": 9, "output_tokens": 16}});
    let o = outcome(&cut, true).unwrap();
    assert_eq!(o.response.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        serde_json::to_value(o.response.usage).unwrap(),
        json!({"input_tokens": 9, "output_tokens": 16})
    );

    let filtered = json!({"id": "r", "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"}, "output": []});
    assert_eq!(
        outcome(&filtered, true).unwrap().response.stop_reason,
        StopReason::EndTurn
    );
}

#[test]
fn failures_and_malformed_answers() {
    let failed = json!({"id": "r", "status": "failed",
        "error": {"code": "server_error", "message": "Something broke"}, "output": []});
    let e = outcome(&failed, true).unwrap_err();
    assert_eq!(e.summary(), "server_error: Something broke");
    assert_eq!(e.status, None);

    let provider = OpenAiResponses::default();
    for body in [&b"nope"[..], b"{\"id\": \"r\"}"] {
        let e = provider.parse_response(body).unwrap_err();
        assert_eq!(
            (e.status, e.kind.as_deref()),
            (None, Some("invalid_response"))
        );
    }
    let e = provider.parse_error(
        404,
        br#"{"error": {"message": "Previous response with id 'resp_x' not found.", "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}"#,
    );
    assert_eq!(
        e.summary(),
        "404 invalid_request_error: Previous response with id 'resp_x' not found."
    );
    assert_eq!(provider.path(), "/v1/responses");
}

fn event(kind: &str, mut data: Value) -> String {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

fn recorded_stream(final_output: bool) -> String {
    let mut final_response = completed_response();
    if !final_output {
        final_response["output"] = json!([]);
    }
    let output = completed_response()["output"].clone();
    [
        event("response.created", json!({"response": {"id": "resp_123", "status": "in_progress", "output": []}})),
        event("response.in_progress", json!({"response": {"id": "resp_123", "status": "in_progress"}})),
        event("response.output_item.added", json!({"output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}})),
        event("response.reasoning_summary_part.added", json!({"output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}})),
        event("response.reasoning_summary_text.delta", json!({"output_index": 0, "summary_index": 0, "delta": "First."})),
        event("response.reasoning_summary_text.delta", json!({"output_index": 0, "summary_index": 1, "delta": "Second."})),
        event("response.output_item.done", json!({"output_index": 0, "item": output[0]})),
        event("response.output_item.added", json!({"output_index": 1, "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}})),
        event("response.output_text.delta", json!({"output_index": 1, "content_index": 0, "delta": "Read"})),
        event("response.output_text.delta", json!({"output_index": 1, "content_index": 0, "delta": "ing."})),
        event("response.output_text.done", json!({"output_index": 1, "content_index": 0, "text": "Reading."})),
        event("response.output_item.done", json!({"output_index": 1, "item": output[1]})),
        event("response.output_item.added", json!({"output_index": 2, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_abc", "name": "read-file", "arguments": ""}})),
        event("response.function_call_arguments.delta", json!({"output_index": 2, "item_id": "fc_1", "delta": "{\"path\":"})),
        event("response.function_call_arguments.delta", json!({"output_index": 2, "item_id": "fc_1", "delta": "\"a.md\"}"})),
        event("response.function_call_arguments.done", json!({"output_index": 2, "item_id": "fc_1", "arguments": "{\"path\":\"a.md\"}"})),
        event("response.completed", json!({"response": final_response})),
    ]
    .concat()
}

fn decode(store: bool, chunks: &[&[u8]]) -> (Result<Outcome, InferenceError>, Vec<String>) {
    let mut deltas = Vec::new();
    let mut sink = |d: Delta<'_>| match d {
        Delta::Text(t) if !t.is_empty() => deltas.push(format!("text:{t}")),
        Delta::Thinking(t) if !t.is_empty() => deltas.push(format!("thinking:{t}")),
        _ => {}
    };
    let outcome = decode_stream(EventStream::new(store), chunks, &mut sink);
    (outcome, deltas)
}

#[test]
fn stream_decodes_like_the_whole_answer() {
    let whole = outcome(&completed_response(), true).unwrap();
    let stream = recorded_stream(true);
    let bytes = stream.as_bytes();
    for cut in [5, 333, bytes.len() / 2, bytes.len() - 1] {
        let (outcome, deltas) = decode(true, &[&bytes[..cut], &bytes[cut..]]);
        assert_eq!(outcome.unwrap(), whole);
        assert_eq!(
            deltas,
            [
                "thinking:First.",
                "thinking:Second.",
                "text:Read",
                "text:ing."
            ]
        );
    }
    let (outcome, _) = decode(false, &[bytes]);
    assert_eq!(outcome.unwrap().continuation_id, None);
}

#[test]
fn stream_without_final_output_uses_the_streamed_items() {
    let whole = outcome(&completed_response(), true).unwrap();
    let stream = recorded_stream(false);
    let (outcome, _) = decode(true, &[stream.as_bytes()]);
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.response.content,
        whole.response.content[..3].to_vec()
    );
    assert_eq!(outcome.continuation_id.as_deref(), Some("resp_123"));

    // Arguments grown from deltas when no done item came.
    let stream = [
        event("response.output_item.added", json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "n", "arguments": ""}})),
        event("response.function_call_arguments.delta", json!({"output_index": 0, "delta": "{\"a\":"})),
        event("response.function_call_arguments.delta", json!({"output_index": 0, "delta": "1}"})),
        event("response.completed", json!({"response": {"id": "r2", "status": "completed", "output": []}})),
    ]
    .concat();
    let (outcome, _) = decode(true, &[stream.as_bytes()]);
    let response = outcome.unwrap().response;
    assert_eq!(response.stop_reason, StopReason::ToolCall);
    assert_eq!(
        response.content,
        vec![Block::ToolCall {
            id: "c".into(),
            name: "n".into(),
            input: json!({"a": 1})
        }]
    );
}

#[test]
fn stream_cut_failed_or_erroring_is_an_error() {
    let stream = recorded_stream(true);
    let (outcome, _) = decode(true, &[&stream.as_bytes()[..stream.len() - 20]]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));

    let end = stream.find("event: response.completed").unwrap();
    let (outcome, _) = decode(true, &[&stream.as_bytes()[..end]]);
    let e = outcome.unwrap_err();
    assert_eq!((e.status, e.kind.as_deref()), (None, Some("stream_error")));
    assert!(e.message.contains("response.completed"));

    let failed = event(
        "response.failed",
        json!({"response": {"id": "r", "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "Slow down"}}}),
    );
    let (outcome, _) = decode(true, &[failed.as_bytes()]);
    assert_eq!(
        outcome.unwrap_err().summary(),
        "rate_limit_exceeded: Slow down"
    );

    let error = event(
        "error",
        json!({"code": "invalid_prompt", "message": "Bad prompt", "param": null}),
    );
    let (outcome, _) = decode(true, &[error.as_bytes()]);
    assert_eq!(outcome.unwrap_err().summary(), "invalid_prompt: Bad prompt");

    let incomplete = event(
        "response.incomplete",
        json!({"response": {"id": "r", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}}),
    );
    let (outcome, _) = decode(true, &[incomplete.as_bytes()]);
    assert_eq!(outcome.unwrap().response.stop_reason, StopReason::MaxTokens);
}
