//! The tool __NAME__: reads a text file of the session workdir, or writes one.
//!
//! Built against its own world in `wit/world.wit`, which includes Murmur's `tool` world. The session workdir is the component's `.` when
//! the capsule grants it a filesystem; a path that leaves it is refused by the runtime.

wit_bindgen::generate!({
    path: "wit",
    world: "__NAME__",
    generate_all,
});

use exports::murmur::tool::run::{Guest, Status, ToolInput, ToolResult};

struct Tool;

fn result(status: Status, data: String, metadata: Vec<(String, String)>) -> ToolResult {
    ToolResult {
        status,
        summary: None,
        data: Some(data),
        data_path: None,
        truncated: false,
        metadata,
    }
}

impl Guest for Tool {
    fn run(input: ToolInput) -> ToolResult {
        let args: serde_json::Value = match serde_json::from_str(input.data.as_deref().unwrap_or("{}")) {
            Ok(args) => args,
            Err(error) => return result(Status::Failed, format!("the input is not JSON: {error}"), Vec::new()),
        };
        let Some(path) = args["path"].as_str() else {
            return result(Status::Failed, "`path` is missing".to_string(), Vec::new());
        };
        let touched = |effect: &str| {
            vec![
                ("state_effect".to_string(), effect.to_string()),
                ("resource_id".to_string(), format!("file:{path}")),
            ]
        };
        if let Some(text) = args["write"].as_str() {
            return match std::fs::write(path, text) {
                Ok(()) => result(Status::Passed, format!("wrote {} bytes to {path}", text.len()), touched("mutate")),
                Err(error) => result(Status::Failed, format!("{path}: {error}"), Vec::new()),
            };
        }
        match std::fs::read_to_string(path) {
            Ok(text) => result(Status::Passed, text, touched("read")),
            Err(error) => result(Status::Failed, format!("{path}: {error}"), Vec::new()),
        }
    }
}

export!(Tool);
