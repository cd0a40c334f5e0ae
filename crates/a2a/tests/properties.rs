//! Properties over generated input: nothing panics, every refusal has the right JSON-RPC code,
//! and what is written reads back the same and validates.

use murmur_testkit::a2a_schema as common;

use murmur_a2a::rpc::{self, Method};
use murmur_a2a::*;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};

// --- Generators ----------------------------------------------------------------------------

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        // Strings that mean something to A2A readers.
        prop::sample::select(vec![
            "ROLE_USER",
            "user",
            "agent",
            "TASK_STATE_WORKING",
            "input-required",
            "text",
            "file",
            "data",
            "task",
            "message",
            "status-update",
            "2.0",
            "AAEC",
            "SendMessage",
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((field_name(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Field names, mostly ones the readers look for.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "message", "messageId", "message_id", "role", "parts", "kind", "text", "raw", "url",
            "data", "file", "bytes", "uri", "id", "status", "state", "historyLength", "pageSize",
            "configuration", "blocking", "returnImmediately", "metadata", "contextId", "taskId",
            "artifact", "task", "statusUpdate", "artifactUpdate", "final", "jsonrpc", "method",
            "params", "tasks", "skills", "capabilities", "supportedInterfaces",
        ])
        .prop_map(str::to_string),
        1 => "[a-zA-Z_]{1,6}",
    ]
}

fn metadata() -> impl Strategy<Value = Option<Metadata>> {
    prop::option::of(
        prop::collection::vec(("[a-z]{1,5}", json_leaf()), 0..3)
            .prop_map(|pairs| pairs.into_iter().collect::<Map<String, Value>>()),
    )
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z0-9-]{1,10}"
}

fn words() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z/+.]{1,8}", 0..3)
}

/// Parts that both versions can carry (v0.3 has no media type on text or data, and only
/// object data).
fn part() -> impl Strategy<Value = Part> {
    let content = prop_oneof![
        ".{0,20}".prop_map(PartContent::Text),
        prop::collection::vec(any::<u8>(), 0..24)
            .prop_map(|b| PartContent::File(FileContent::Bytes(b))),
        "https://[a-z]{1,8}\\.example/[a-z]{0,8}"
            .prop_map(|u| PartContent::File(FileContent::Uri(u))),
        prop::collection::vec(("[a-z]{1,5}", any_json()), 0..3)
            .prop_map(|pairs| PartContent::Data(Value::Object(pairs.into_iter().collect()))),
    ];
    (
        content,
        prop::option::of(ident()),
        prop::option::of("[a-z]{1,5}/[a-z]{1,5}"),
        metadata(),
    )
        .prop_map(|(content, filename, media_type, metadata)| {
            let is_file = matches!(content, PartContent::File(_));
            Part {
                content,
                filename: filename.filter(|_| is_file),
                media_type: media_type.filter(|_| is_file),
                metadata,
            }
        })
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::User), Just(Role::Agent)]
}

fn state() -> impl Strategy<Value = TaskState> {
    prop::sample::select(TaskState::ALL.to_vec())
}

fn message() -> impl Strategy<Value = Message> {
    (
        ident(),
        prop::option::of(ident()),
        prop::option::of(ident()),
        role(),
        prop::collection::vec(part(), 1..4),
        metadata(),
        words(),
        words(),
    )
        .prop_map(
            |(message_id, context_id, task_id, role, parts, metadata, refs, extensions)| Message {
                message_id,
                context_id,
                task_id,
                role,
                parts,
                metadata,
                reference_task_ids: refs,
                extensions,
            },
        )
}

fn artifact() -> impl Strategy<Value = Artifact> {
    (
        ident(),
        prop::option::of(".{1,10}"),
        prop::option::of(".{1,10}"),
        prop::collection::vec(part(), 1..3),
        metadata(),
        words(),
    )
        .prop_map(
            |(artifact_id, name, description, parts, metadata, extensions)| Artifact {
                artifact_id,
                name,
                description,
                parts,
                metadata,
                extensions,
            },
        )
}

fn status() -> impl Strategy<Value = TaskStatus> {
    (
        state(),
        prop::option::of(message()),
        prop::option::of(0i64..4_102_444_800_000),
    )
        .prop_map(|(state, message, millis)| TaskStatus {
            state,
            message,
            timestamp: millis.map(time::format_timestamp_millis),
        })
}

fn task() -> impl Strategy<Value = Task> {
    (
        ident(),
        ident(),
        status(),
        prop::collection::vec(message(), 0..3),
        prop::collection::vec(artifact(), 0..3),
        metadata(),
    )
        .prop_map(
            |(id, context_id, status, history, artifacts, metadata)| Task {
                id,
                context_id,
                status,
                history,
                artifacts,
                metadata,
            },
        )
}

/// Events; a status update's `is_final` follows its state, as v1.0 (which has no `final`)
/// reads it back.
fn event() -> impl Strategy<Value = StreamEvent> {
    prop_oneof![
        task().prop_map(StreamEvent::Task),
        message().prop_map(StreamEvent::Message),
        (ident(), ident(), status(), metadata()).prop_map(
            |(task_id, context_id, status, metadata)| {
                let mut update = TaskStatusUpdate::new(task_id, context_id, status);
                update.metadata = metadata;
                StreamEvent::StatusUpdate(update)
            }
        ),
        (
            ident(),
            ident(),
            artifact(),
            any::<bool>(),
            any::<bool>(),
            metadata()
        )
            .prop_map(
                |(task_id, context_id, artifact, append, last_chunk, metadata)| {
                    StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
                        task_id,
                        context_id,
                        artifact,
                        append,
                        last_chunk,
                        metadata,
                    })
                }
            ),
    ]
}

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::V0_3), Just(Version::V1_0)]
}

/// A valid request for a random method, then one random subtree replaced by arbitrary JSON
/// or removed: requests that get past the envelope and into the params readers.
fn mutated_request() -> impl Strategy<Value = Value> {
    let names: Vec<&'static str> = Method::ALL
        .into_iter()
        .flat_map(|method| Version::ALL.into_iter().filter_map(move |v| method.name(v)))
        .collect();
    (
        prop::sample::select(names),
        any::<Index>(),
        prop::option::of(any_json()),
        any::<bool>(),
    )
        .prop_map(|(name, at, replacement, mutate)| {
            let v03 = name.contains('/');
            let (role, part) = if v03 {
                ("user", json!({"kind": "text", "text": "hi"}))
            } else {
                ("ROLE_USER", json!({"text": "hi"}))
            };
            let params = match name {
                "SendMessage" | "SendStreamingMessage" | "message/send" | "message/stream" => json!({
                    "message": {"messageId": "m", "role": role, "parts": [part, {"data": {"a": [1]}}]},
                    "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2, "blocking": true},
                    "metadata": {"k": 1}
                }),
                "ListTasks" => json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": 10, "historyLength": 1}),
                _ => json!({"id": "t", "historyLength": 3}),
            };
            let mut request = json!({"jsonrpc": "2.0", "id": 1, "method": name, "params": params});
            if mutate {
                mutate_at(&mut request, at, replacement);
            }
            request
        })
}

fn paths(value: &Value, prefix: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = format!("{prefix}/{}", key.replace('~', "~0").replace('/', "~1"));
                out.push(path.clone());
                paths(inner, path, out);
            }
        }
        Value::Array(items) => {
            for (at, inner) in items.iter().enumerate() {
                let path = format!("{prefix}/{at}");
                out.push(path.clone());
                paths(inner, path, out);
            }
        }
        _ => {}
    }
}

fn mutate_at(value: &mut Value, at: Index, replacement: Option<Value>) {
    let mut all = Vec::new();
    paths(value, String::new(), &mut all);
    let path = &all[at.index(all.len())];
    match replacement {
        Some(replacement) => *value.pointer_mut(path).unwrap() = replacement,
        None => {
            let (parent, last) = path.rsplit_once('/').unwrap();
            match value.pointer_mut(parent).unwrap() {
                Value::Object(map) => {
                    map.remove(&last.replace("~1", "/").replace("~0", "~"));
                }
                Value::Array(items) => {
                    items.remove(last.parse::<usize>().unwrap());
                }
                _ => unreachable!(),
            }
        }
    }
}

// --- Checks --------------------------------------------------------------------------------

/// Runs `body` through the whole request path, checking every refusal's code and response.
fn check_request(body: &[u8]) {
    match rpc::parse_request(body) {
        Err(rejected) => {
            assert!(
                [-32700, -32600, -32601].contains(&rejected.error.code),
                "{rejected:?}"
            );
            if rejected.error.code == -32700 {
                assert!(rejected.id.is_null(), "no id can be read from broken JSON");
            }
            let response = rejected.to_response();
            common::assert_v1_error_response(&response, rejected.error.code);
            assert!(
                common::is_v03("JSONRPCErrorResponse", &response),
                "{response}"
            );
        }
        Ok(request) => {
            assert!(matches!(
                request.id,
                Value::Null | Value::String(_) | Value::Number(_)
            ));
            for result in [
                rpc::send_params(&request).map(drop),
                rpc::get_task_params(&request).map(drop),
                rpc::cancel_task_params(&request).map(drop),
                rpc::subscribe_params(&request).map(drop),
                rpc::list_tasks_params(&request).map(drop),
                request.call().map(drop),
            ] {
                if let Err(error) = result {
                    assert_eq!(error.code, -32602, "{error:?}");
                    assert_eq!(error.field_violations().len(), 1, "{error:?}");
                    let response = rpc::error(&request.id, &error);
                    common::assert_v1_error_response(&response, -32602);
                }
            }
        }
    }
}

/// Every reader, on any JSON value: an answer or a field error, never a panic.
fn read_everything(version: Version, value: &Value) {
    let _ = Task::from_wire(version, value);
    let _ = Message::from_wire(version, value);
    let _ = Part::from_wire(version, value);
    let _ = Artifact::from_wire(version, value);
    let _ = TaskStatus::from_wire(version, value);
    let _ = StreamEvent::from_wire(version, value);
    let _ = SendMessageResult::from_wire(version, value);
    let _ = ListTasksResult::from_wire(version, value);
    let _ = AgentCard::from_wire(version, value);
    let _ = SendMessageParams::from_wire(version, value);
    let _ = GetTaskParams::from_wire(version, value);
    let _ = CancelTaskParams::from_wire(version, value);
    let _ = SubscribeParams::from_wire(version, value);
    let _ = ListTasksParams::from_wire(version, value);
    let _ = RpcError::from_json(value);
    let _ = rpc::parse_response(value.to_string().as_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_are_answered_with_a_json_rpc_code(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check_request(&body);
    }

    #[test]
    fn any_json_body_is_answered_with_a_json_rpc_code(value in any_json()) {
        check_request(value.to_string().as_bytes());
    }

    #[test]
    fn any_params_for_any_method_are_answered_with_a_json_rpc_code(
        method in prop::sample::select(Method::ALL.to_vec()),
        version in version(),
        params in any_json(),
    ) {
        if let Some(name) = method.name(version) {
            let body = json!({"jsonrpc": "2.0", "id": "x", "method": name, "params": params});
            check_request(body.to_string().as_bytes());
        }
    }

    #[test]
    fn mutated_valid_requests_are_answered_with_a_json_rpc_code(request in mutated_request()) {
        check_request(request.to_string().as_bytes());
    }

    #[test]
    fn every_reader_takes_any_json_without_panicking(value in any_json(), version in version()) {
        read_everything(version, &value);
    }

    #[test]
    fn truncations_of_a_valid_request_are_parse_errors(cut in 0usize..160) {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}"#;
        let cut = cut.min(body.len() - 1);
        let rejected = rpc::parse_request(&body[..cut]).unwrap_err();
        prop_assert_eq!(rejected.error.code, -32700);
    }
}

proptest! {
    // Schema validation makes these slower: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn tasks_read_back_the_same_and_validate(task in task()) {
        for version in Version::ALL {
            let wire = task.to_wire(version);
            prop_assert_eq!(&Task::from_wire(version, &wire).unwrap(), &task);
        }
        common::assert_v1("Task", &task.to_wire(Version::V1_0));
        common::assert_v03("Task", &task.to_wire(Version::V0_3));
    }

    #[test]
    fn events_read_back_the_same_and_validate(event in event()) {
        for version in Version::ALL {
            let wire = event.to_wire(version);
            prop_assert_eq!(&StreamEvent::from_wire(version, &wire).unwrap(), &event);
        }
        let v1 = rpc::success(&json!(1), Version::V1_0, &event);
        common::assert_v1("StreamResponse", &v1["result"]);
        common::assert_v03("SendStreamingMessageSuccessResponse", &rpc::success(&json!(1), Version::V0_3, &event));
    }

    #[test]
    fn send_params_read_back_the_same_and_validate(
        message in message(),
        modes in words(),
        history_length in prop::option::of(0u32..1000),
        blocking in any::<bool>(),
        metadata in metadata(),
    ) {
        let params = SendMessageParams {
            message,
            configuration: Some(SendMessageConfiguration {
                accepted_output_modes: modes,
                history_length,
                blocking,
                push_notification: None,
            }),
            metadata,
        };
        for version in Version::ALL {
            let request = rpc::request(&json!(1), Method::SendMessage, version, Some(&params)).unwrap();
            let parsed = rpc::parse_request(request.to_string().as_bytes()).unwrap();
            prop_assert_eq!(parsed.version, version);
            prop_assert_eq!(&rpc::send_params(&parsed).unwrap(), &params);
        }
        common::assert_v1("SendMessageRequest", &params.to_wire(Version::V1_0));
        common::assert_v03("MessageSendParams", &params.to_wire(Version::V0_3));
    }
}

// --- SSE decoding --------------------------------------------------------------------------

/// Every event of `body`, fed in pieces cut at `cuts` (positions taken modulo the length).
fn decode_in_pieces(body: &[u8], cuts: &[usize]) -> Vec<sse::SseEvent> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| if body.is_empty() { 0 } else { c % body.len() })
        .collect();
    points.push(0);
    points.push(body.len());
    points.sort_unstable();
    points.dedup();
    let mut decoder = sse::Decoder::new();
    let mut events = Vec::new();
    for pair in points.windows(2) {
        decoder.push(&body[pair[0]..pair[1]]);
        events.extend(std::iter::from_fn(|| decoder.next_event()));
    }
    events.extend(decoder.finish());
    events
}

/// SSE-looking bytes: fields, values and line endings in any order.
fn sse_body() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"id: ".to_vec()),
        Just(b": comment".to_vec()),
        Just(b"retry: 10".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n\n".to_vec()),
        "[a-z{}\":0-9 ]{0,8}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..6),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn sse_events_do_not_depend_on_where_the_chunks_were_cut(
        body in sse_body(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = decode_in_pieces(&body, &[]);
        let pieces = decode_in_pieces(&body, &cuts);
        prop_assert_eq!(whole, pieces);
    }

    #[test]
    fn written_frames_read_back_as_their_events(
        frames in prop::collection::vec((prop::option::of("[a-z0-9_:-]{1,12}"), any_json()), 0..6),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let body: String = frames
            .iter()
            .map(|(id, payload)| rpc::sse_frame(id.as_deref(), payload))
            .collect();
        let events = decode_in_pieces(body.as_bytes(), &cuts);
        prop_assert_eq!(events.len(), frames.len());
        for (event, (id, payload)) in events.iter().zip(&frames) {
            prop_assert_eq!(&event.id, id);
            prop_assert_eq!(serde_json::from_str::<Value>(&event.data).unwrap(), payload.clone());
        }
    }
}
