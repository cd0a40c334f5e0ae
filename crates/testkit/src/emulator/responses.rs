//! OpenAI Responses: `POST /v1/responses`.
//!
//! The emulator remembers each response it produced (unless the request said `store: false`)
//! so that `previous_response_id` and `function_call_output.call_id` can be checked as the
//! real API checks them.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::script::{Stop, Usage};
use super::wire::{Refusal, Resolved, SseEvent, UsageOut, kind, split_json, split_text};

const TOP_LEVEL: &[&str] = &[
    "background",
    // Sent by Codex with each request: its turn's ids, as request metadata.
    "client_metadata",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// What the emulator keeps of a response it produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stored {
    /// Every `call_id` of a `function_call` in the conversation up to and including this
    /// response.
    pub known_calls: HashSet<String>,
    /// The `call_id`s of this response's own `function_call`s: the next request must answer
    /// them.
    pub open_calls: Vec<String>,
    /// The text of the first user message of the chain up to this response, if it has one.
    pub first_user: Option<String>,
    /// The model turns in the chain up to and including this response.
    pub model_turns: usize,
}

/// What validation learnt about a request, for remembering its response.
pub(crate) struct Checked {
    pub known_calls: HashSet<String>,
    pub store: bool,
    /// The text of the conversation's first user message: the stored chain's, else this
    /// request's.
    pub first_user: Option<String>,
    /// The model turns the conversation holds before this request's answer: the stored
    /// chain's, plus the runs of output items in `input`.
    pub model_turns: usize,
}

fn missing(param: &str) -> Refusal {
    Refusal::bad(format!("Missing required parameter: '{param}'."))
        .param(param)
        .code("missing_required_parameter")
}

fn unknown(param: &str) -> Refusal {
    Refusal::bad(format!("Unknown parameter: '{param}'."))
        .param(param)
        .code("unknown_parameter")
}

fn invalid_type(param: &str, expected: &str, got: &Value) -> Refusal {
    Refusal::bad(format!(
        "Invalid type for '{param}': expected {expected}, but got {} instead.",
        kind(got)
    ))
    .param(param)
    .code("invalid_type")
}

fn invalid_value(param: &str, got: &str, supported: &str) -> Refusal {
    Refusal::bad(format!(
        "Invalid value: '{got}'. Supported values are: {supported}."
    ))
    .param(param)
    .code("invalid_value")
}

fn check_keys(item: &Map<String, Value>, allowed: &[&str], param: &str) -> Result<(), Refusal> {
    for key in item.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(unknown(&format!("{param}.{key}")));
        }
    }
    Ok(())
}

fn string_member(item: &Map<String, Value>, key: &str, param: &str) -> Result<(), Refusal> {
    match item.get(key) {
        Some(Value::String(_)) => Ok(()),
        None => Err(missing(&format!("{param}.{key}"))),
        Some(v) => Err(invalid_type(&format!("{param}.{key}"), "a string", v)),
    }
}

/// Checks a request body as the Responses API does.
pub(crate) fn validate(body: &Value, stored: &HashMap<String, Stored>) -> Result<Checked, Refusal> {
    let Some(obj) = body.as_object() else {
        return Err(invalid_type("body", "an object", body));
    };
    for key in obj.keys() {
        if !TOP_LEVEL.contains(&key.as_str()) {
            return Err(unknown(key));
        }
    }
    match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        None | Some(Value::Null) => return Err(missing("model")),
        Some(v) => return Err(invalid_type("model", "a string", v)),
    }
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(invalid_type("stream", "a boolean", v)),
    };
    if obj.get("stream_options").is_some_and(|o| !o.is_null()) && !stream {
        return Err(Refusal::bad(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        )
        .param("stream_options"));
    }
    let store = match obj.get("store") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(invalid_type("store", "a boolean", v)),
    };
    if let Some(v) = obj.get("max_output_tokens")
        && !v.is_null()
    {
        match v.as_i64() {
            Some(n) if n >= 16 => {}
            Some(n) => {
                return Err(Refusal::bad(format!(
                    "Invalid 'max_output_tokens': integer below minimum value. Expected a value \
                     >= 16, but got {n} instead."
                ))
                .param("max_output_tokens")
                .code("integer_below_min_value"));
            }
            None => return Err(invalid_type("max_output_tokens", "an integer", v)),
        }
    }
    if let Some(include) = obj.get("include")
        && !include.is_null()
    {
        match include.as_array() {
            Some(list) if list.iter().all(Value::is_string) => {}
            _ => return Err(invalid_type("include", "an array of strings", include)),
        }
    }
    if let Some(tools) = obj.get("tools")
        && !tools.is_null()
    {
        check_tools(tools)?;
    }
    // The conversation so far, as `previous_response_id` names it.
    let mut known: HashSet<String> = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    let mut first_user = None;
    let mut model_turns = 0;
    match obj.get("previous_response_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) => match stored.get(id) {
            Some(previous) => {
                known.clone_from(&previous.known_calls);
                open.clone_from(&previous.open_calls);
                first_user.clone_from(&previous.first_user);
                model_turns = previous.model_turns;
            }
            None => {
                return Err(
                    Refusal::bad(format!("Previous response with id '{id}' not found."))
                        .param("previous_response_id")
                        .code("previous_response_not_found"),
                );
            }
        },
        Some(v) => return Err(invalid_type("previous_response_id", "a string", v)),
    }
    match obj.get("input") {
        None | Some(Value::Null) => return Err(missing("input")),
        Some(Value::String(_)) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                check_item(item, &format!("input[{i}]"), &mut known, &mut open)?;
            }
        }
        Some(v) => return Err(invalid_type("input", "a string or an array", v)),
    }
    if let Some(call_id) = open.first() {
        return Err(
            Refusal::bad(format!("No tool output found for function call {call_id}."))
                .param("input"),
        );
    }
    let (input_user, input_turns) = input_position(obj.get("input").unwrap_or(&Value::Null));
    Ok(Checked {
        known_calls: known,
        store,
        first_user: first_user.or(input_user),
        model_turns: model_turns + input_turns,
    })
}

/// Where a (valid) `input` stands, for the script's conversations: the text of its first user
/// message (a string `input` is one), and the runs of consecutive output items it holds, each
/// a model turn.
fn input_position(input: &Value) -> (Option<String>, usize) {
    let items = match input {
        Value::String(text) => return (Some(text.clone()), 0),
        Value::Array(items) => items,
        _ => return (None, 0),
    };
    let has_role = |item: &Value, r: &str| item.get("role").and_then(Value::as_str) == Some(r);
    let first_user = items
        .iter()
        .find(|item| item_kind(item) == "message" && has_role(item, "user"))
        .map(|item| super::wire::content_text(item.get("content")));
    let mut turns = 0;
    let mut in_output = false;
    for item in items {
        let output = match item_kind(item) {
            "message" => has_role(item, "assistant"),
            // A reference to an earlier item: neither side.
            "item_reference" => continue,
            "reasoning" | "mcp_list_tools" | "mcp_approval_request" => true,
            kind => kind.ends_with("_call"),
        };
        if output && !in_output {
            turns += 1;
        }
        in_output = output;
    }
    (first_user, turns)
}

/// An input item's `type` (a bare `{role, content}` is a message).
fn item_kind(item: &Value) -> &str {
    match item.get("type").and_then(Value::as_str) {
        Some(kind) => kind,
        None if item.get("role").is_some() => "message",
        None => "",
    }
}

fn check_tools(tools: &Value) -> Result<(), Refusal> {
    let Some(list) = tools.as_array() else {
        return Err(invalid_type("tools", "an array", tools));
    };
    for (i, tool) in list.iter().enumerate() {
        let param = format!("tools[{i}]");
        let Some(t) = tool.as_object() else {
            return Err(invalid_type(&param, "an object", tool));
        };
        let Some(kind) = t.get("type").and_then(Value::as_str) else {
            return Err(missing(&format!("{param}.type")));
        };
        if kind != "function" {
            continue; // built-in tools (web_search, file_search, …) have their own shapes
        }
        let name_param = format!("{param}.name");
        match t.get("name") {
            None => return Err(missing(&name_param)),
            Some(Value::String(name))
                if !name.is_empty()
                    && name.len() <= 64
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => {}
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
        check_keys(
            t,
            &["type", "name", "description", "parameters", "strict"],
            &param,
        )?;
        if let Some(p) = t.get("parameters")
            && !p.is_object()
            && !p.is_null()
        {
            return Err(invalid_type(&format!("{param}.parameters"), "an object", p));
        }
    }
    Ok(())
}

fn check_item(
    item: &Value,
    param: &str,
    known: &mut HashSet<String>,
    open: &mut Vec<String>,
) -> Result<(), Refusal> {
    let Some(it) = item.as_object() else {
        return Err(invalid_type(param, "an object", item));
    };
    let kind = match it.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None if it.contains_key("role") => "message",
        None => return Err(missing(&format!("{param}.type"))),
        Some(v) => return Err(invalid_type(&format!("{param}.type"), "a string", v)),
    };
    match kind {
        "message" => check_message(it, param),
        "function_call" => {
            check_keys(
                it,
                &[
                    "type",
                    "id",
                    "call_id",
                    "name",
                    "namespace",
                    "arguments",
                    "status",
                ],
                param,
            )?;
            for key in ["call_id", "name", "arguments"] {
                string_member(it, key, param)?;
            }
            let call_id = it["call_id"].as_str().unwrap_or_default().to_string();
            known.insert(call_id.clone());
            open.push(call_id);
            Ok(())
        }
        "function_call_output" => {
            check_keys(it, &["type", "id", "call_id", "output", "status"], param)?;
            string_member(it, "call_id", param)?;
            match it.get("output") {
                Some(Value::String(_) | Value::Array(_)) => {}
                None => return Err(missing(&format!("{param}.output"))),
                Some(v) => {
                    return Err(invalid_type(
                        &format!("{param}.output"),
                        "a string or an array",
                        v,
                    ));
                }
            }
            let call_id = it["call_id"].as_str().unwrap_or_default();
            if !known.contains(call_id) {
                return Err(Refusal::bad(format!(
                    "No tool call found for function call output with call_id {call_id}."
                ))
                .param("input"));
            }
            open.retain(|id| id != call_id);
            Ok(())
        }
        "reasoning" => {
            check_keys(
                it,
                &[
                    "type",
                    "id",
                    "summary",
                    "encrypted_content",
                    "content",
                    "status",
                ],
                param,
            )?;
            match it.get("summary") {
                Some(Value::Array(_)) => Ok(()),
                None => Err(missing(&format!("{param}.summary"))),
                Some(v) => Err(invalid_type(&format!("{param}.summary"), "an array", v)),
            }
        }
        "item_reference" => {
            check_keys(it, &["type", "id"], param)?;
            string_member(it, "id", param)
        }
        "web_search_call"
        | "file_search_call"
        | "computer_call"
        | "computer_call_output"
        | "image_generation_call"
        | "code_interpreter_call"
        | "local_shell_call"
        | "local_shell_call_output"
        | "mcp_list_tools"
        | "mcp_approval_request"
        | "mcp_approval_response"
        | "mcp_call"
        | "custom_tool_call"
        | "custom_tool_call_output" => Ok(()),
        other => Err(invalid_value(
            &format!("{param}.type"),
            other,
            "'message', 'function_call', 'function_call_output', 'reasoning', \
             'item_reference', 'web_search_call', 'file_search_call', 'computer_call', \
             'computer_call_output', 'custom_tool_call', and 'custom_tool_call_output'",
        )),
    }
}

fn check_message(it: &Map<String, Value>, param: &str) -> Result<(), Refusal> {
    check_keys(it, &["type", "role", "content", "id", "status"], param)?;
    let role = match it.get("role") {
        Some(Value::String(r))
            if ["user", "assistant", "system", "developer"].contains(&r.as_str()) =>
        {
            r.as_str()
        }
        Some(Value::String(r)) => {
            return Err(invalid_value(
                &format!("{param}.role"),
                r,
                "'assistant', 'system', 'developer', and 'user'",
            ));
        }
        None => return Err(missing(&format!("{param}.role"))),
        Some(v) => return Err(invalid_type(&format!("{param}.role"), "a string", v)),
    };
    let content_param = format!("{param}.content");
    let parts = match it.get("content") {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(parts)) => parts,
        None => return Err(missing(&content_param)),
        Some(v) => return Err(invalid_type(&content_param, "a string or an array", v)),
    };
    let (allowed, supported): (&[&str], &str) = if role == "assistant" {
        (&["output_text", "refusal"], "'output_text' and 'refusal'")
    } else {
        (
            &["input_text", "input_image", "input_file"],
            "'input_text', 'input_image', and 'input_file'",
        )
    };
    for (j, part) in parts.iter().enumerate() {
        let part_param = format!("{content_param}[{j}]");
        let Some(p) = part.as_object() else {
            return Err(invalid_type(&part_param, "an object", part));
        };
        let Some(t) = p.get("type").and_then(Value::as_str) else {
            return Err(missing(&format!("{part_param}.type")));
        };
        if !allowed.contains(&t) {
            return Err(invalid_value(&part_param, t, supported));
        }
        match t {
            "input_text" | "output_text" => string_member(p, "text", &part_param)?,
            "refusal" => string_member(p, "refusal", &part_param)?,
            _ => {}
        }
    }
    Ok(())
}

/// What to remember of a response just produced.
pub(crate) fn remember(checked: Checked, r: &Resolved) -> Option<Stored> {
    if !checked.store {
        return None;
    }
    let mut known = checked.known_calls;
    let open: Vec<String> = r.calls.iter().map(|c| c.id.clone()).collect();
    known.extend(open.iter().cloned());
    Some(Stored {
        known_calls: known,
        open_calls: open,
        first_user: checked.first_user,
        model_turns: checked.model_turns + 1,
    })
}

fn usage_json(usage: &Usage) -> Value {
    let mut out = Map::new();
    if let Some(n) = usage.input {
        out.insert("input_tokens".into(), n.into());
    }
    if let Some(n) = usage.cache_read {
        out.insert("input_tokens_details".into(), json!({"cached_tokens": n}));
    }
    if let Some(n) = usage.output {
        out.insert("output_tokens".into(), n.into());
    }
    if let (Some(i), Some(o)) = (usage.input, usage.output) {
        out.insert("total_tokens".into(), (i + o).into());
    }
    Value::Object(out)
}

fn include_encrypted(request: &Value) -> bool {
    request
        .get("include")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|v| v.as_str() == Some("reasoning.encrypted_content"))
        })
}

fn incomplete(r: &Resolved) -> bool {
    r.stop == Stop::MaxTokens
}

fn reasoning_item(r: &Resolved, request: &Value, done: bool) -> Option<Value> {
    let t = r.thinking.as_ref()?;
    let mut item = json!({"id": t.item_id, "type": "reasoning"});
    if done && include_encrypted(request) {
        item["encrypted_content"] = json!(t.signature);
    }
    item["summary"] = if done {
        json!([{"type": "summary_text", "text": t.text}])
    } else {
        json!([])
    };
    Some(item)
}

fn output_text_part(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

fn message_item(r: &Resolved, done: bool) -> Option<Value> {
    let text = r.text.as_ref()?;
    let status = match (done, incomplete(r)) {
        (false, _) => "in_progress",
        (true, true) => "incomplete",
        (true, false) => "completed",
    };
    let content = if done {
        json!([output_text_part(text)])
    } else {
        json!([])
    };
    Some(json!({
        "id": r.message_item_id,
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }))
}

fn call_item(call: &super::wire::ResolvedCall, done: bool) -> Value {
    let mut item = json!({
        "id": call.item_id,
        "type": "function_call",
        "status": if done { "completed" } else { "in_progress" },
        "arguments": if done { call.arguments.as_str() } else { "" },
        "call_id": call.id,
        "name": call.name,
    });
    if let Some(namespace) = &call.namespace {
        item["namespace"] = json!(namespace);
    }
    item
}

fn output(r: &Resolved, request: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    items.extend(reasoning_item(r, request, true));
    items.extend(message_item(r, true));
    items.extend(r.calls.iter().map(|c| call_item(c, true)));
    items
}

/// The response object; `done` false: the `in_progress` form the stream opens with.
fn response_object(r: &Resolved, request: &Value, done: bool) -> Value {
    let get = |key: &str, default: Value| {
        request
            .get(key)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(default)
    };
    let (status, details) = match (done, incomplete(r)) {
        (false, _) => ("in_progress", Value::Null),
        (true, true) => ("incomplete", json!({"reason": "max_output_tokens"})),
        (true, false) => ("completed", Value::Null),
    };
    let reasoning = request.get("reasoning").cloned().unwrap_or(Value::Null);
    json!({
        "id": r.id,
        "object": "response",
        "created_at": r.created,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": details,
        "instructions": get("instructions", Value::Null),
        "max_output_tokens": get("max_output_tokens", Value::Null),
        "max_tool_calls": get("max_tool_calls", Value::Null),
        "model": r.model,
        "output": if done { Value::Array(output(r, request)) } else { json!([]) },
        "parallel_tool_calls": get("parallel_tool_calls", json!(true)),
        "previous_response_id": get("previous_response_id", Value::Null),
        "prompt_cache_key": get("prompt_cache_key", Value::Null),
        "reasoning": {
            "effort": reasoning.get("effort").cloned().unwrap_or(Value::Null),
            "summary": reasoning.get("summary").cloned().unwrap_or(Value::Null),
        },
        "safety_identifier": get("safety_identifier", Value::Null),
        "service_tier": "default",
        "store": get("store", json!(true)),
        "temperature": get("temperature", json!(1.0)),
        "text": get("text", json!({"format": {"type": "text"}, "verbosity": "medium"})),
        "tool_choice": get("tool_choice", json!("auto")),
        "tools": get("tools", json!([])),
        "top_logprobs": get("top_logprobs", json!(0)),
        "top_p": get("top_p", json!(1.0)),
        "truncation": get("truncation", json!("disabled")),
        "usage": if done { usage_of(r) } else { Value::Null },
        "user": get("user", Value::Null),
        "metadata": get("metadata", json!({})),
    })
}

fn usage_of(r: &Resolved) -> Value {
    match &r.usage {
        UsageOut::Shaped(u) => usage_json(u),
        UsageOut::Raw(v) => v.clone(),
    }
}

/// The non-streaming response body.
pub(crate) fn reply_body(r: &Resolved, request: &Value) -> Value {
    response_object(r, request, true)
}

/// The streaming response: `response.created`, `response.in_progress`, per output item
/// `response.output_item.added`, its part/delta/done events, `response.output_item.done`,
/// then `response.completed` (or `response.incomplete` when cut at the output cap).
pub(crate) fn reply_events(r: &Resolved, request: &Value) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut seq: u64 = 0;
    let mut push = |events: &mut Vec<SseEvent>, kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        // `type` first, as the API writes it.
        let mut ordered = Map::new();
        ordered.insert("type".into(), json!(kind));
        if let Value::Object(rest) = data {
            for (k, v) in rest {
                if k != "type" {
                    ordered.insert(k, v);
                }
            }
        }
        events.push(SseEvent::named(kind, &Value::Object(ordered)));
    };
    let opening = response_object(r, request, false);
    push(
        &mut events,
        "response.created",
        json!({"response": opening}),
    );
    push(
        &mut events,
        "response.in_progress",
        json!({"response": opening}),
    );
    let mut index = 0;
    if let (Some(t), Some(added)) = (&r.thinking, reasoning_item(r, request, false)) {
        let id = &t.item_id;
        push(
            &mut events,
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        let part = |text: &str| json!({"type": "summary_text", "text": text});
        push(
            &mut events,
            "response.reasoning_summary_part.added",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part("")}),
        );
        for piece in split_text(&t.text) {
            push(
                &mut events,
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": piece}),
            );
        }
        push(
            &mut events,
            "response.reasoning_summary_text.done",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "text": t.text}),
        );
        push(
            &mut events,
            "response.reasoning_summary_part.done",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part(&t.text)}),
        );
        push(
            &mut events,
            "response.output_item.done",
            json!({"output_index": index, "item": reasoning_item(r, request, true)}),
        );
        index += 1;
    }
    if let (Some(text), Some(added)) = (&r.text, message_item(r, false)) {
        let id = &r.message_item_id;
        push(
            &mut events,
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        push(
            &mut events,
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": output_text_part("")}),
        );
        for piece in split_text(text) {
            push(
                &mut events,
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
            );
        }
        push(
            &mut events,
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
        );
        push(
            &mut events,
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": output_text_part(text)}),
        );
        push(
            &mut events,
            "response.output_item.done",
            json!({"output_index": index, "item": message_item(r, true)}),
        );
        index += 1;
    }
    for call in &r.calls {
        push(
            &mut events,
            "response.output_item.added",
            json!({"output_index": index, "item": call_item(call, false)}),
        );
        for piece in split_json(&call.arguments) {
            push(
                &mut events,
                "response.function_call_arguments.delta",
                json!({"item_id": call.item_id, "output_index": index, "delta": piece}),
            );
        }
        push(
            &mut events,
            "response.function_call_arguments.done",
            json!({"item_id": call.item_id, "output_index": index, "arguments": call.arguments}),
        );
        push(
            &mut events,
            "response.output_item.done",
            json!({"output_index": index, "item": call_item(call, true)}),
        );
        index += 1;
    }
    let last = if incomplete(r) {
        "response.incomplete"
    } else {
        "response.completed"
    };
    push(
        &mut events,
        last,
        json!({"response": response_object(r, request, true)}),
    );
    events
}

/// The in-stream error event.
pub(crate) fn stream_error_event(sequence_number: usize) -> SseEvent {
    SseEvent::named(
        "error",
        &json!({
            "type": "error",
            "code": "server_error",
            "message": "The server had an error while processing your request. Sorry about that!",
            "param": null,
            "sequence_number": sequence_number,
        }),
    )
}
