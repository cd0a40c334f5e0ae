//! OpenAI Chat Completions: `POST /v1/chat/completions`.

use serde_json::{Map, Value, json};

use super::script::{Stop, Usage};
use super::wire::{Refusal, Resolved, SseEvent, UsageOut, kind, split_json, split_text};

const TOP_LEVEL: &[&str] = &[
    "model",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

fn missing(param: &str) -> Refusal {
    Refusal::bad(format!("Missing required parameter: '{param}'."))
        .param(param)
        .code("missing_required_parameter")
}

fn invalid_type(param: &str, expected: &str, got: &Value) -> Refusal {
    Refusal::bad(format!(
        "Invalid type for '{param}': expected {expected}, but got {} instead.",
        kind(got)
    ))
    .param(param)
    .code("invalid_type")
}

fn empty_array(param: &str) -> Refusal {
    Refusal::bad(format!(
        "Invalid '{param}': empty array. Expected an array with minimum length 1, but got an \
         empty array instead."
    ))
    .param(param)
    .code("empty_array")
}

fn valid_function_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a request body as Chat Completions does.
pub(crate) fn validate(body: &Value) -> Result<(), Refusal> {
    let Some(obj) = body.as_object() else {
        return Err(invalid_type("body", "an object", body));
    };
    for key in obj.keys() {
        if !TOP_LEVEL.contains(&key.as_str()) {
            return Err(Refusal::bad(format!(
                "Unrecognized request argument supplied: {key}"
            )));
        }
    }
    match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        Some(v @ (Value::Number(_) | Value::Bool(_) | Value::Array(_) | Value::Object(_))) => {
            return Err(invalid_type("model", "a string", v));
        }
        _ => return Err(Refusal::bad("you must provide a model parameter")),
    }
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(invalid_type("stream", "a boolean", v)),
    };
    if let Some(options) = obj.get("stream_options")
        && !options.is_null()
    {
        if !stream {
            return Err(Refusal::bad(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            )
            .param("stream_options"));
        }
        let Some(o) = options.as_object() else {
            return Err(invalid_type("stream_options", "an object", options));
        };
        if let Some(v) = o.get("include_usage")
            && !v.is_boolean()
        {
            return Err(invalid_type("stream_options.include_usage", "a boolean", v));
        }
    }
    for key in ["max_tokens", "max_completion_tokens"] {
        if let Some(v) = obj.get(key)
            && !v.is_null()
        {
            match v.as_i64() {
                Some(n) if n >= 1 => {}
                Some(n) => {
                    return Err(Refusal::bad(format!(
                        "Invalid '{key}': integer below minimum value. Expected a value >= 1, \
                         but got {n} instead."
                    ))
                    .param(key)
                    .code("integer_below_min_value"));
                }
                None => return Err(invalid_type(key, "an integer", v)),
            }
        }
    }
    let has_tools = match obj.get("tools") {
        None | Some(Value::Null) => false,
        Some(tools) => {
            check_tools(tools)?;
            true
        }
    };
    if let Some(choice) = obj.get("tool_choice")
        && !choice.is_null()
        && !has_tools
    {
        return Err(Refusal::bad(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are \
             specified.",
        )
        .param("tool_choice"));
    }
    let messages = match obj.get("messages") {
        None | Some(Value::Null) => return Err(missing("messages")),
        Some(Value::Array(list)) => list,
        Some(v) => return Err(invalid_type("messages", "an array", v)),
    };
    if messages.is_empty() {
        return Err(empty_array("messages"));
    }
    check_messages(messages)
}

fn check_tools(tools: &Value) -> Result<(), Refusal> {
    let Some(list) = tools.as_array() else {
        return Err(invalid_type("tools", "an array", tools));
    };
    if list.is_empty() {
        return Err(empty_array("tools"));
    }
    for (i, tool) in list.iter().enumerate() {
        let Some(t) = tool.as_object() else {
            return Err(invalid_type(&format!("tools[{i}]"), "an object", tool));
        };
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some("custom") => continue,
            Some(other) => {
                return Err(Refusal::bad(format!(
                    "Invalid value: '{other}'. Supported values are: 'function' and 'custom'."
                ))
                .param(format!("tools[{i}].type"))
                .code("invalid_value"));
            }
            None => return Err(missing(&format!("tools[{i}].type"))),
        }
        for key in t.keys() {
            if key != "type" && key != "function" {
                return Err(Refusal::bad(format!(
                    "Unrecognized request argument supplied: tools[{i}].{key}"
                )));
            }
        }
        let Some(function) = t.get("function") else {
            return Err(missing(&format!("tools[{i}].function")));
        };
        let Some(f) = function.as_object() else {
            return Err(invalid_type(
                &format!("tools[{i}].function"),
                "an object",
                function,
            ));
        };
        let name_param = format!("tools[{i}].function.name");
        match f.get("name") {
            None => return Err(missing(&name_param)),
            Some(Value::String(name)) if valid_function_name(name) => {}
            Some(Value::String(_)) => {
                return Err(Refusal::bad(format!(
                    "Invalid '{name_param}': string does not match pattern. Expected a string \
                     that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ))
                .param(name_param)
                .code("invalid_value"));
            }
            Some(v) => return Err(invalid_type(&name_param, "a string", v)),
        }
        if let Some(p) = f.get("parameters")
            && !p.is_object()
        {
            return Err(invalid_type(
                &format!("tools[{i}].function.parameters"),
                "an object",
                p,
            ));
        }
    }
    Ok(())
}

fn allowed_keys(role: &str) -> &'static [&'static str] {
    match role {
        "system" | "developer" => &["role", "content", "name"],
        "user" => &["role", "content", "name"],
        "assistant" => &[
            "role",
            "content",
            "name",
            "tool_calls",
            "refusal",
            "audio",
            "function_call",
        ],
        "tool" => &["role", "content", "tool_call_id"],
        _ => &["role", "content", "name"],
    }
}

fn check_parts(content: &Value, param: &str, allowed: &[&str]) -> Result<(), Refusal> {
    match content {
        Value::String(_) => Ok(()),
        Value::Array(parts) => {
            if parts.is_empty() {
                return Err(empty_array(param));
            }
            for (j, part) in parts.iter().enumerate() {
                let part_param = format!("{param}[{j}]");
                let Some(p) = part.as_object() else {
                    return Err(invalid_type(&part_param, "an object", part));
                };
                let Some(t) = p.get("type").and_then(Value::as_str) else {
                    return Err(missing(&format!("{part_param}.type")));
                };
                if !allowed.contains(&t) {
                    let supported = allowed
                        .iter()
                        .map(|a| format!("'{a}'"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(Refusal::bad(format!(
                        "Invalid value: '{t}'. Supported values are: {supported}."
                    ))
                    .param(format!("{part_param}.type"))
                    .code("invalid_value"));
                }
                if t == "text" {
                    match p.get("text") {
                        Some(Value::String(_)) => {}
                        None => return Err(missing(&format!("{part_param}.text"))),
                        Some(v) => {
                            return Err(invalid_type(&format!("{part_param}.text"), "a string", v));
                        }
                    }
                }
            }
            Ok(())
        }
        other => Err(invalid_type(param, "a string or an array", other)),
    }
}

fn check_messages(messages: &[Value]) -> Result<(), Refusal> {
    // The assistant message whose calls are being answered, and the ids still unanswered.
    let mut open: Option<(usize, Vec<String>)> = None;
    for (i, message) in messages.iter().enumerate() {
        let param = format!("messages[{i}]");
        let Some(m) = message.as_object() else {
            return Err(invalid_type(&param, "an object", message));
        };
        let role = match m.get("role") {
            None => return Err(missing(&format!("{param}.role"))),
            Some(Value::String(r))
                if [
                    "system",
                    "developer",
                    "user",
                    "assistant",
                    "tool",
                    "function",
                ]
                .contains(&r.as_str()) =>
            {
                r.as_str()
            }
            Some(Value::String(r)) => {
                return Err(Refusal::bad(format!(
                    "Invalid value: '{r}'. Supported values are: 'system', 'assistant', 'user', \
                     'function', 'tool', and 'developer'."
                ))
                .param(format!("{param}.role"))
                .code("invalid_value"));
            }
            Some(v) => return Err(invalid_type(&format!("{param}.role"), "a string", v)),
        };
        for key in m.keys() {
            if !allowed_keys(role).contains(&key.as_str()) {
                return Err(Refusal::bad(format!(
                    "Additional properties are not allowed ('{key}' was unexpected) - \
                     'messages.{i}'"
                )));
            }
        }
        let content = m.get("content").filter(|c| !c.is_null());
        let content_param = format!("{param}.content");
        match role {
            "system" | "developer" => match content {
                None => return Err(missing(&content_param)),
                Some(c) => check_parts(c, &content_param, &["text"])?,
            },
            "user" => match content {
                None => return Err(missing(&content_param)),
                Some(c) => check_parts(
                    c,
                    &content_param,
                    &["text", "image_url", "input_audio", "file"],
                )?,
            },
            "assistant" => {
                let calls = m.get("tool_calls").filter(|c| !c.is_null());
                match content {
                    None if calls.is_none() && m.get("function_call").is_none() => {
                        return Err(missing(&content_param));
                    }
                    None => {}
                    Some(c) => check_parts(c, &content_param, &["text", "refusal"])?,
                }
                if let Some(calls) = calls {
                    check_tool_calls(calls, &param)?;
                }
            }
            "tool" => {
                match content {
                    None => return Err(missing(&content_param)),
                    Some(c) => check_parts(c, &content_param, &["text"])?,
                }
                match m.get("tool_call_id") {
                    Some(Value::String(_)) => {}
                    None => return Err(missing(&format!("{param}.tool_call_id"))),
                    Some(v) => {
                        return Err(invalid_type(
                            &format!("{param}.tool_call_id"),
                            "a string",
                            v,
                        ));
                    }
                }
            }
            _ => {}
        }
        // Pairing of calls and answers.
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            let Some((_, ids)) = open.as_mut() else {
                return Err(Refusal::bad(
                    "Invalid parameter: messages with role 'tool' must be a response to a \
                     preceeding message with 'tool_calls'.",
                )
                .param(format!("messages.[{i}].role")));
            };
            let Some(at) = ids.iter().position(|open_id| open_id == id) else {
                return Err(Refusal::bad(format!(
                    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of \
                     previous message."
                ))
                .param(format!("messages.[{i}].tool_call_id")));
            };
            ids.remove(at);
            continue;
        }
        unanswered(open.take())?;
        if role == "assistant"
            && let Some(calls) = m.get("tool_calls").and_then(Value::as_array)
        {
            let ids = calls
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .map(str::to_string)
                .collect();
            open = Some((i, ids));
        }
    }
    unanswered(open)
}

fn unanswered(open: Option<(usize, Vec<String>)>) -> Result<(), Refusal> {
    match open {
        Some((at, ids)) if !ids.is_empty() => Err(Refusal::bad(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages \
             responding to each 'tool_call_id'. The following tool_call_ids did not have \
             response messages: {}",
            ids.join(", ")
        ))
        .param(format!("messages.[{at}].role"))),
        _ => Ok(()),
    }
}

fn check_tool_calls(calls: &Value, param: &str) -> Result<(), Refusal> {
    let calls_param = format!("{param}.tool_calls");
    let Some(list) = calls.as_array() else {
        return Err(invalid_type(&calls_param, "an array", calls));
    };
    if list.is_empty() {
        return Err(empty_array(&calls_param));
    }
    for (k, call) in list.iter().enumerate() {
        let call_param = format!("{calls_param}[{k}]");
        let Some(c) = call.as_object() else {
            return Err(invalid_type(&call_param, "an object", call));
        };
        for key in c.keys() {
            if !["id", "type", "function"].contains(&key.as_str()) {
                return Err(Refusal::bad(format!(
                    "Additional properties are not allowed ('{key}' was unexpected) - \
                     '{call_param}'"
                )));
            }
        }
        match c.get("id") {
            Some(Value::String(_)) => {}
            None => return Err(missing(&format!("{call_param}.id"))),
            Some(v) => return Err(invalid_type(&format!("{call_param}.id"), "a string", v)),
        }
        match c.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(Refusal::bad(format!(
                    "Invalid value: '{other}'. Supported values are: 'function'."
                ))
                .param(format!("{call_param}.type"))
                .code("invalid_value"));
            }
            None => return Err(missing(&format!("{call_param}.type"))),
        }
        let Some(function) = c.get("function") else {
            return Err(missing(&format!("{call_param}.function")));
        };
        for key in ["name", "arguments"] {
            let p = format!("{call_param}.function.{key}");
            match function.get(key) {
                Some(Value::String(_)) => {}
                None => return Err(missing(&p)),
                Some(v) => return Err(invalid_type(&p, "a string", v)),
            }
        }
    }
    Ok(())
}

fn finish_reason(stop: Stop) -> &'static str {
    match stop {
        Stop::EndTurn => "stop",
        Stop::ToolCall => "tool_calls",
        Stop::MaxTokens => "length",
    }
}

fn usage_json(usage: &Usage) -> Value {
    let mut out = Map::new();
    if let Some(n) = usage.input {
        out.insert("prompt_tokens".into(), n.into());
    }
    if let Some(n) = usage.output {
        out.insert("completion_tokens".into(), n.into());
    }
    if let (Some(i), Some(o)) = (usage.input, usage.output) {
        out.insert("total_tokens".into(), (i + o).into());
    }
    if let Some(n) = usage.cache_read {
        out.insert("prompt_tokens_details".into(), json!({"cached_tokens": n}));
    }
    Value::Object(out)
}

fn usage_of(r: &Resolved) -> Value {
    match &r.usage {
        UsageOut::Shaped(u) => usage_json(u),
        UsageOut::Raw(v) => v.clone(),
    }
}

/// The non-streaming response body. Thinking is dropped: Chat Completions has none.
pub(crate) fn reply_body(r: &Resolved) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": r.text,
        "refusal": null,
        "annotations": [],
    });
    if !r.calls.is_empty() {
        message["tool_calls"] = r
            .calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
    }
    json!({
        "id": r.id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(r.stop),
        }],
        "usage": usage_of(r),
        "service_tier": "default",
        "system_fingerprint": "fp_emulator",
    })
}

/// The streaming response: `chat.completion.chunk`s (role, content pieces, each tool call's
/// head then argument pieces, the finish reason), the usage chunk when
/// `stream_options.include_usage`, then `[DONE]`.
pub(crate) fn reply_events(r: &Resolved, request: &Value) -> Vec<SseEvent> {
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let chunk = |choices: Value| {
        let mut chunk = json!({
            "id": r.id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "service_tier": "default",
            "system_fingerprint": "fp_emulator",
            "choices": choices,
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let delta = |delta: Value, finish: Option<&str>| {
        SseEvent::data(&chunk(json!([{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish,
        }])))
    };
    let mut events = vec![delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    if let Some(text) = &r.text {
        for piece in split_text(text) {
            events.push(delta(json!({"content": piece}), None));
        }
    }
    for (k, call) in r.calls.iter().enumerate() {
        events.push(delta(
            json!({"tool_calls": [{
                "index": k,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            None,
        ));
        for piece in split_json(&call.arguments) {
            events.push(delta(
                json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    events.push(delta(json!({}), Some(finish_reason(r.stop))));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage_of(r);
        events.push(SseEvent::data(&last));
    }
    events.push(SseEvent::raw("[DONE]"));
    events
}

/// The in-stream error line.
pub(crate) fn stream_error_event() -> SseEvent {
    SseEvent::data(&json!({"error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": null,
        "code": null,
    }}))
}
