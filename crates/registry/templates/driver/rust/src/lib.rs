//! The driver __NAME__: answers every request by echoing the last user text.
//!
//! The request and response are the neutral driver protocol (see the driver protocol in the
//! Murmur docs): `{model, messages, tools, system, …}` in, `{stop_reason, content, usage}` out.

wit_bindgen::generate!({
    path: "wit",
    world: "__NAME__",
    generate_all,
});

use exports::murmur::tool::run::{Guest, Status, ToolInput, ToolResult};
use serde_json::{Value, json};

struct Driver;

fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let Some(user) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    let blocks = user["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    texts.join(" ")
}

impl Guest for Driver {
    fn run(input: ToolInput) -> ToolResult {
        let request: Value = serde_json::from_str(input.data.as_deref().unwrap_or("{}")).unwrap_or_default();
        let model = request["model"].as_str().unwrap_or_default();
        let text = format!("({model}) you said: {}", last_user_text(&request));
        murmur::text::chunks::emit_chunk(&text);
        let response = json!({
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 0, "output_tokens": text.split(' ').count()},
        });
        ToolResult {
            status: Status::Passed,
            summary: None,
            data: Some(response.to_string()),
            data_path: None,
            truncated: false,
            metadata: Vec::new(),
        }
    }
}

export!(Driver);
