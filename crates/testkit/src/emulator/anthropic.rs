//! Anthropic Messages: `POST /v1/messages`.
//!
//! Validation follows the real API's rules and wording (pydantic-style `path: message`),
//! rendering its JSON and its SSE event sequence.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::script::{Stop, Usage};
use super::wire::{Refusal, Resolved, SseEvent, UsageOut, split_json, split_text};

const TOP_LEVEL: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
];

/// Block types the API knows, and which role may send each.
const USER_BLOCKS: &[&str] = &[
    "text",
    "image",
    "document",
    "search_result",
    "tool_result",
    "container_upload",
];
const ASSISTANT_BLOCKS: &[&str] = &[
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
];

fn bad(message: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal::bad(message))
}

/// The `anthropic-version` header.
pub(crate) fn check_headers(version: Option<&str>) -> Result<(), Refusal> {
    match version {
        Some(v) if !v.trim().is_empty() => Ok(()),
        _ => bad("anthropic-version: header is required"),
    }
}

/// Checks a request body as the Messages API does.
pub(crate) fn validate(body: &Value) -> Result<(), Refusal> {
    let Some(obj) = body.as_object() else {
        return bad("Input should be a valid dictionary");
    };
    for key in obj.keys() {
        if !TOP_LEVEL.contains(&key.as_str()) {
            return bad(format!("{key}: Extra inputs are not permitted"));
        }
    }
    match obj.get("model") {
        None => return bad("model: Field required"),
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(_) => return bad("model: Input should be a valid string"),
    }
    let max_tokens = match obj.get("max_tokens") {
        None => return bad("max_tokens: Field required"),
        Some(v) => match v.as_i64() {
            Some(n) if n >= 1 => n,
            Some(_) => return bad("max_tokens: Input should be greater than or equal to 1"),
            None => return bad("max_tokens: Input should be a valid integer"),
        },
    };
    if let Some(stream) = obj.get("stream")
        && !stream.is_boolean()
    {
        return bad("stream: Input should be a valid boolean");
    }
    let thinking_enabled = match obj.get("thinking") {
        None => false,
        Some(thinking) => check_thinking(thinking, max_tokens)?,
    };
    if let Some(t) = obj.get("temperature") {
        match t.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => {
                if thinking_enabled && t != 1.0 {
                    return bad(
                        "`temperature` may only be set to 1 when thinking is enabled. Please \
                         consult our documentation at \
                         https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
                    );
                }
            }
            Some(_) => return bad("temperature: Input should be less than or equal to 1"),
            None => return bad("temperature: Input should be a valid number"),
        }
    }
    if let Some(p) = obj.get("top_p")
        && !p.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p))
    {
        return bad("top_p: Input should be a number between 0 and 1");
    }
    if let Some(k) = obj.get("top_k")
        && k.as_u64().is_none()
    {
        return bad("top_k: Input should be a valid integer greater than or equal to 0");
    }
    if let Some(stops) = obj.get("stop_sequences") {
        match stops.as_array() {
            Some(list) if list.iter().all(Value::is_string) => {}
            _ => return bad("stop_sequences: Input should be a valid list of strings"),
        }
    }
    if let Some(metadata) = obj.get("metadata") {
        let Some(metadata) = metadata.as_object() else {
            return bad("metadata: Input should be a valid dictionary");
        };
        for key in metadata.keys() {
            if key != "user_id" {
                return bad(format!("metadata.{key}: Extra inputs are not permitted"));
            }
        }
    }
    let mut cache_controls = 0;
    if let Some(system) = obj.get("system") {
        check_system(system, &mut cache_controls)?;
    }
    if let Some(tools) = obj.get("tools") {
        check_tools(tools, &mut cache_controls)?;
    }
    if let Some(choice) = obj.get("tool_choice") {
        check_tool_choice(choice)?;
    }
    let messages = match obj.get("messages") {
        None => return bad("messages: Field required"),
        Some(Value::Array(list)) => list,
        Some(_) => return bad("messages: Input should be a valid list"),
    };
    check_messages(messages, thinking_enabled, &mut cache_controls)?;
    if cache_controls > 4 {
        return bad(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {cache_controls}."
        ));
    }
    Ok(())
}

/// Whether thinking is enabled.
fn check_thinking(thinking: &Value, max_tokens: i64) -> Result<bool, Refusal> {
    let Some(obj) = thinking.as_object() else {
        return Err(Refusal::bad("thinking: Input should be a valid dictionary"));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("enabled") => {
            // `display` ("summarized", "omitted", "updates") is how much thinking is shown.
            for key in obj.keys() {
                if key != "type" && key != "budget_tokens" && key != "display" {
                    return Err(Refusal::bad(format!(
                        "thinking.enabled.{key}: Extra inputs are not permitted"
                    )));
                }
            }
            let budget = match obj.get("budget_tokens") {
                None => {
                    return Err(Refusal::bad(
                        "thinking.enabled.budget_tokens: Field required",
                    ));
                }
                Some(v) => v.as_i64().ok_or_else(|| {
                    Refusal::bad("thinking.enabled.budget_tokens: Input should be a valid integer")
                })?,
            };
            if budget < 1024 {
                return Err(Refusal::bad(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                ));
            }
            if max_tokens <= budget {
                return Err(Refusal::bad(
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult \
                     our documentation at https://docs.claude.com/en/docs/build-with-claude/\
                     extended-thinking#max-tokens-and-context-window-size",
                ));
            }
            Ok(true)
        }
        Some("adaptive") => Ok(true),
        Some("disabled") => Ok(false),
        Some(other) => Err(Refusal::bad(format!(
            "thinking: Input tag '{other}' found using 'type' does not match any of the expected \
             tags: 'enabled', 'disabled', 'adaptive'"
        ))),
        None => Err(Refusal::bad(
            "thinking: Unable to extract tag using discriminator 'type'",
        )),
    }
}

fn check_cache_control(value: &Value, path: &str, count: &mut usize) -> Result<(), Refusal> {
    if value.is_null() {
        return Ok(());
    }
    let ok = value.as_object().is_some_and(|o| {
        o.get("type").and_then(Value::as_str) == Some("ephemeral")
            && o.keys().all(|k| k == "type" || k == "ttl")
            && o.get("ttl")
                .is_none_or(|t| matches!(t.as_str(), Some("5m" | "1h")))
    });
    if !ok {
        return Err(Refusal::bad(format!(
            "{path}.cache_control: Input should be {{\"type\": \"ephemeral\"}} with an optional \
             `ttl` of '5m' or '1h'"
        )));
    }
    *count += 1;
    Ok(())
}

fn check_system(system: &Value, cache_controls: &mut usize) -> Result<(), Refusal> {
    match system {
        Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (j, block) in blocks.iter().enumerate() {
                let path = format!("system.{j}");
                let Some(b) = block.as_object() else {
                    return bad(format!("{path}: Input should be a valid dictionary"));
                };
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    return bad(format!("{path}.type: Input should be 'text'"));
                }
                check_keys(b, &["type", "text", "cache_control", "citations"], &path)?;
                check_text(b, &path)?;
                if let Some(cc) = b.get("cache_control") {
                    check_cache_control(cc, &path, cache_controls)?;
                }
            }
            Ok(())
        }
        _ => bad("system: Input should be a valid string or a list of text blocks"),
    }
}

fn check_keys(obj: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), Refusal> {
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            return bad(format!("{path}.{key}: Extra inputs are not permitted"));
        }
    }
    Ok(())
}

fn check_text(block: &Map<String, Value>, path: &str) -> Result<(), Refusal> {
    let root = path.split('.').next().unwrap_or(path);
    match block.get("text") {
        None => bad(format!("{path}.text: Field required")),
        Some(Value::String(s)) if s.is_empty() => {
            bad(format!("{root}: text content blocks must be non-empty"))
        }
        Some(Value::String(s)) if s.trim().is_empty() => bad(format!(
            "{root}: text content blocks must contain non-whitespace text"
        )),
        Some(Value::String(_)) => Ok(()),
        Some(_) => bad(format!("{path}.text: Input should be a valid string")),
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_tools(tools: &Value, cache_controls: &mut usize) -> Result<(), Refusal> {
    let Some(tools) = tools.as_array() else {
        return bad("tools: Input should be a valid list");
    };
    let mut names = HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let Some(t) = tool.as_object() else {
            return bad(format!("tools.{i}: Input should be a valid dictionary"));
        };
        let kind = t.get("type").and_then(Value::as_str);
        let name = t.get("name").and_then(Value::as_str);
        if kind.is_some_and(|k| k != "custom") {
            // A server tool (web_search_…, bash_…): its own schema; only the name is shared.
            if name.is_none() {
                return bad(format!("tools.{i}.name: Field required"));
            }
        } else {
            let path = format!("tools.{i}.custom");
            check_keys(
                t,
                &[
                    "type",
                    "name",
                    "description",
                    "input_schema",
                    "cache_control",
                ],
                &path,
            )?;
            let Some(name) = name else {
                return bad(format!("{path}.name: Field required"));
            };
            if !valid_tool_name(name) {
                return bad(format!(
                    "{path}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                ));
            }
            match t.get("input_schema") {
                None => return bad(format!("{path}.input_schema: Field required")),
                Some(Value::Object(schema)) => match schema.get("type") {
                    Some(Value::String(s)) if s == "object" => {}
                    None => return bad(format!("{path}.input_schema.type: Field required")),
                    Some(_) => {
                        return bad(format!(
                            "{path}.input_schema.type: Input should be 'object'"
                        ));
                    }
                },
                Some(_) => {
                    return bad(format!(
                        "{path}.input_schema: Input should be a valid dictionary"
                    ));
                }
            }
            if let Some(d) = t.get("description")
                && !d.is_string()
            {
                return bad(format!(
                    "{path}.description: Input should be a valid string"
                ));
            }
            if let Some(cc) = t.get("cache_control") {
                check_cache_control(cc, &format!("tools.{i}"), cache_controls)?;
            }
        }
        if let Some(name) = name
            && !names.insert(name.to_string())
        {
            return bad("tools: Tool names must be unique.");
        }
    }
    Ok(())
}

fn check_tool_choice(choice: &Value) -> Result<(), Refusal> {
    let Some(c) = choice.as_object() else {
        return bad("tool_choice: Input should be a valid dictionary");
    };
    match c.get("type").and_then(Value::as_str) {
        Some("auto" | "any" | "none") => {}
        Some("tool") => {
            if !c.get("name").is_some_and(Value::is_string) {
                return bad("tool_choice.tool.name: Field required");
            }
        }
        _ => {
            return bad(
                "tool_choice: Input tag found using 'type' does not match any of the expected \
                 tags: 'auto', 'any', 'tool', 'none'",
            );
        }
    }
    for key in c.keys() {
        if !["type", "name", "disable_parallel_tool_use"].contains(&key.as_str()) {
            return bad(format!("tool_choice.{key}: Extra inputs are not permitted"));
        }
    }
    Ok(())
}

fn blocks_of(message: &Value) -> &[Value] {
    message
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn ids_of<'a>(message: &'a Value, block_type: &str, key: &str) -> Vec<&'a str> {
    blocks_of(message)
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(block_type))
        .filter_map(|b| b.get(key).and_then(Value::as_str))
        .collect()
}

fn check_messages(
    messages: &[Value],
    thinking_enabled: bool,
    cache_controls: &mut usize,
) -> Result<(), Refusal> {
    if messages.is_empty() {
        return bad("messages: at least one message is required");
    }
    let last = messages.len() - 1;
    for (i, message) in messages.iter().enumerate() {
        let Some(m) = message.as_object() else {
            return bad(format!("messages.{i}: Input should be a valid dictionary"));
        };
        check_keys(m, &["role", "content"], &format!("messages.{i}"))?;
        let role = match m.get("role") {
            None => return bad(format!("messages.{i}.role: Field required")),
            Some(Value::String(r)) if r == "user" || r == "assistant" => r.as_str(),
            Some(_) => {
                return bad(format!(
                    "messages.{i}.role: Input should be 'user' or 'assistant'"
                ));
            }
        };
        if i == 0 && role != "user" {
            return bad("messages: first message must use the \"user\" role");
        }
        let final_assistant = i == last && role == "assistant";
        match m.get("content") {
            None => return bad(format!("messages.{i}.content: Field required")),
            Some(Value::String(s)) => {
                if s.is_empty() && !final_assistant {
                    return bad(format!(
                        "messages.{i}: all messages must have non-empty content except for the \
                         optional final assistant message"
                    ));
                }
            }
            Some(Value::Array(blocks)) => {
                if blocks.is_empty() && !final_assistant {
                    return bad(format!(
                        "messages.{i}: all messages must have non-empty content except for the \
                         optional final assistant message"
                    ));
                }
                for (j, block) in blocks.iter().enumerate() {
                    check_block(
                        block,
                        &format!("messages.{i}.content.{j}"),
                        role,
                        cache_controls,
                    )?;
                }
            }
            Some(_) => {
                return bad(format!(
                    "messages.{i}.content: Input should be a valid string or a list of content \
                     blocks"
                ));
            }
        }
    }
    // Tool calls and their results pair up across neighbouring messages.
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str);
        if role == Some("user") {
            let asked: Vec<&str> = match i.checked_sub(1).map(|p| &messages[p]) {
                Some(prev) if prev.get("role").and_then(Value::as_str) == Some("assistant") => {
                    ids_of(prev, "tool_use", "id")
                }
                _ => Vec::new(),
            };
            for (j, block) in blocks_of(message).iter().enumerate() {
                if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let id = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !asked.contains(&id) {
                    return bad(format!(
                        "messages.{i}.content.{j}: unexpected `tool_use_id` found in \
                         `tool_result` blocks: {id}. Each `tool_result` block must have a \
                         corresponding `tool_use` block in the previous message."
                    ));
                }
            }
        }
        if role == Some("assistant") {
            let asked = ids_of(message, "tool_use", "id");
            if asked.is_empty() {
                continue;
            }
            let answered = match messages.get(i + 1) {
                Some(next) if next.get("role").and_then(Value::as_str) == Some("user") => {
                    ids_of(next, "tool_result", "tool_use_id")
                }
                _ => Vec::new(),
            };
            let missing: Vec<&str> = asked
                .iter()
                .copied()
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() {
                return bad(format!(
                    "messages.{}: `tool_use` ids were found without `tool_result` blocks \
                     immediately after: {}. Each `tool_use` block must have a corresponding \
                     `tool_result` block in the next message.",
                    i + 1,
                    missing.join(", ")
                ));
            }
        }
    }
    // With thinking on, the assistant turn being continued with tool results must keep its
    // thinking block first.
    if thinking_enabled && messages.len() >= 2 {
        let tail = &messages[last];
        let prev = &messages[last - 1];
        if tail.get("role").and_then(Value::as_str) == Some("user")
            && !ids_of(tail, "tool_result", "tool_use_id").is_empty()
            && prev.get("role").and_then(Value::as_str) == Some("assistant")
        {
            let first = blocks_of(prev)
                .first()
                .and_then(|b| b.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("text");
            if first != "thinking" && first != "redacted_thinking" {
                return bad(format!(
                    "messages.{}.content.0.type: Expected `thinking` or `redacted_thinking`, but \
                     found `{first}`. When `thinking` is enabled, a final `assistant` message \
                     must start with a thinking block (preceeding the lastmost set of \
                     `tool_use` and `tool_result` blocks). We recommend you include thinking \
                     blocks from previous turns. To avoid this requirement, disable `thinking`. \
                     Please consult our documentation at \
                     https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
                    last - 1
                ));
            }
        }
    }
    Ok(())
}

fn check_block(
    block: &Value,
    path: &str,
    role: &str,
    cache_controls: &mut usize,
) -> Result<(), Refusal> {
    let Some(b) = block.as_object() else {
        return bad(format!("{path}: Input should be a valid dictionary"));
    };
    let Some(kind) = b.get("type").and_then(Value::as_str) else {
        return bad(format!(
            "{path}: Unable to extract tag using discriminator 'type'"
        ));
    };
    if !USER_BLOCKS.contains(&kind) && !ASSISTANT_BLOCKS.contains(&kind) {
        return bad(format!(
            "{path}: Input tag '{kind}' found using 'type' does not match any of the expected \
             tags: 'text', 'image', 'document', 'search_result', 'thinking', \
             'redacted_thinking', 'tool_use', 'tool_result', 'server_tool_use', \
             'web_search_tool_result'"
        ));
    }
    let allowed_here = if role == "user" {
        USER_BLOCKS
    } else {
        ASSISTANT_BLOCKS
    };
    if !allowed_here.contains(&kind) {
        return bad(format!(
            "{path}.type: `{kind}` blocks are not allowed in `{role}` messages"
        ));
    }
    if let Some(cc) = b.get("cache_control") {
        check_cache_control(cc, path, cache_controls)?;
    }
    match kind {
        "text" => {
            check_keys(b, &["type", "text", "cache_control", "citations"], path)?;
            check_text(b, path)
        }
        "image" | "document" => {
            check_keys(
                b,
                &[
                    "type",
                    "source",
                    "cache_control",
                    "title",
                    "context",
                    "citations",
                ],
                path,
            )?;
            match b.get("source") {
                Some(Value::Object(_)) => Ok(()),
                None => bad(format!("{path}.source: Field required")),
                Some(_) => bad(format!("{path}.source: Input should be a valid dictionary")),
            }
        }
        "tool_use" => {
            check_keys(b, &["type", "id", "name", "input", "cache_control"], path)?;
            match b.get("id") {
                None => return bad(format!("{path}.id: Field required")),
                Some(Value::String(id)) if valid_id(id) => {}
                Some(_) => {
                    return bad(format!(
                        "{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                    ));
                }
            }
            match b.get("name") {
                None => return bad(format!("{path}.name: Field required")),
                Some(Value::String(name)) if !name.is_empty() => {}
                Some(_) => return bad(format!("{path}.name: Input should be a valid string")),
            }
            match b.get("input") {
                None => bad(format!("{path}.input: Field required")),
                Some(Value::Object(_)) => Ok(()),
                Some(_) => bad(format!("{path}.input: Input should be a valid dictionary")),
            }
        }
        "tool_result" => {
            check_keys(
                b,
                &[
                    "type",
                    "tool_use_id",
                    "content",
                    "is_error",
                    "cache_control",
                ],
                path,
            )?;
            match b.get("tool_use_id") {
                None => return bad(format!("{path}.tool_use_id: Field required")),
                Some(Value::String(id)) if valid_id(id) => {}
                Some(_) => {
                    return bad(format!(
                        "{path}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                    ));
                }
            }
            if let Some(e) = b.get("is_error")
                && !e.is_boolean()
            {
                return bad(format!("{path}.is_error: Input should be a valid boolean"));
            }
            match b.get("content") {
                None | Some(Value::String(_)) => Ok(()),
                Some(Value::Array(inner)) => {
                    for (k, item) in inner.iter().enumerate() {
                        let inner_path = format!("{path}.content.{k}");
                        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
                        if !["text", "image", "document", "search_result"].contains(&kind) {
                            return bad(format!(
                                "{inner_path}: Input tag '{kind}' found using 'type' does not \
                                 match any of the expected tags: 'text', 'image', 'document', \
                                 'search_result'"
                            ));
                        }
                        check_block(item, &inner_path, "user", cache_controls)?;
                    }
                    Ok(())
                }
                Some(_) => bad(format!(
                    "{path}.content: Input should be a valid string or a list of content blocks"
                )),
            }
        }
        "thinking" => {
            check_keys(b, &["type", "thinking", "signature"], path)?;
            for key in ["thinking", "signature"] {
                match b.get(key) {
                    None => return bad(format!("{path}.{key}: Field required")),
                    Some(Value::String(_)) => {}
                    Some(_) => return bad(format!("{path}.{key}: Input should be a valid string")),
                }
            }
            Ok(())
        }
        "redacted_thinking" => {
            check_keys(b, &["type", "data"], path)?;
            match b.get("data") {
                Some(Value::String(_)) => Ok(()),
                _ => bad(format!("{path}.data: Field required")),
            }
        }
        _ => Ok(()),
    }
}

fn stop_reason(stop: Stop) -> &'static str {
    match stop {
        Stop::EndTurn => "end_turn",
        Stop::ToolCall => "tool_use",
        Stop::MaxTokens => "max_tokens",
    }
}

/// Anthropic's usage object: only the members the script gave, in the API's order.
fn usage_json(usage: &Usage) -> Value {
    let mut out = Map::new();
    if let Some(n) = usage.input {
        out.insert("input_tokens".into(), n.into());
    }
    if let Some(n) = usage.cache_write {
        out.insert("cache_creation_input_tokens".into(), n.into());
    }
    if let Some(n) = usage.cache_read {
        out.insert("cache_read_input_tokens".into(), n.into());
    }
    if let Some(n) = usage.output {
        out.insert("output_tokens".into(), n.into());
    }
    Value::Object(out)
}

fn content(r: &Resolved) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(t) = &r.thinking {
        blocks.push(json!({"type": "thinking", "thinking": t.text, "signature": t.signature}));
    }
    if let Some(text) = &r.text {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &r.calls {
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}),
        );
    }
    blocks
}

fn message(r: &Resolved, content: Vec<Value>, stop: Option<&str>, usage: Value) -> Value {
    json!({
        "id": r.id,
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage,
    })
}

/// The non-streaming response body.
pub(crate) fn reply_body(r: &Resolved) -> Value {
    let usage = match &r.usage {
        UsageOut::Shaped(u) => usage_json(u),
        UsageOut::Raw(v) => v.clone(),
    };
    message(r, content(r), Some(stop_reason(r.stop)), usage)
}

/// The streaming response: `message_start`, `ping`, each block's start/deltas/stop,
/// `message_delta` (stop reason, output tokens), `message_stop`.
pub(crate) fn reply_events(r: &Resolved) -> Vec<SseEvent> {
    let (start_usage, delta_usage) = match &r.usage {
        UsageOut::Shaped(u) => {
            // The start reports the input side and a first output token; the delta the final
            // (cumulative) output count.
            let start = Usage {
                output: u.output.map(|n| n.min(1)),
                ..*u
            };
            let delta = Usage {
                output: u.output,
                ..Usage::default()
            };
            (usage_json(&start), usage_json(&delta))
        }
        UsageOut::Raw(v) => (v.clone(), v.clone()),
    };
    let mut events = vec![
        SseEvent::named(
            "message_start",
            &json!({"type": "message_start", "message": message(r, Vec::new(), None, start_usage)}),
        ),
        SseEvent::named("ping", &json!({"type": "ping"})),
    ];
    let mut index = 0;
    let mut block = |events: &mut Vec<SseEvent>, start: Value, deltas: Vec<Value>| {
        events.push(SseEvent::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            events.push(SseEvent::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(SseEvent::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    };
    if let Some(t) = &r.thinking {
        let mut deltas: Vec<Value> = split_text(&t.text)
            .into_iter()
            .map(|piece| json!({"type": "thinking_delta", "thinking": piece}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": t.signature}));
        block(
            &mut events,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if let Some(text) = &r.text {
        let deltas = split_text(text)
            .into_iter()
            .map(|piece| json!({"type": "text_delta", "text": piece}))
            .collect();
        block(&mut events, json!({"type": "text", "text": ""}), deltas);
    }
    for call in &r.calls {
        // The API opens with an empty `partial_json`; a tool without arguments gets nothing
        // more (the assembled text is then empty, meaning `{}`).
        let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
        let empty = call.input.as_object().is_some_and(Map::is_empty);
        if !empty {
            deltas.extend(
                split_json(&call.arguments)
                    .into_iter()
                    .map(|piece| json!({"type": "input_json_delta", "partial_json": piece})),
            );
        }
        block(
            &mut events,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            deltas,
        );
    }
    events.push(SseEvent::named(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(r.stop), "stop_sequence": null},
            "usage": delta_usage,
        }),
    ));
    events.push(SseEvent::named(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    events
}

/// The in-stream error event.
pub(crate) fn stream_error_event() -> SseEvent {
    SseEvent::named(
        "error",
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
}
