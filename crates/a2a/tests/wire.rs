//! The exact JSON of each version, and reading it back.

use murmur_testkit::a2a_schema as common;

use murmur_a2a::rpc;
use murmur_a2a::*;
use serde_json::{Value, json};

fn input_required_task() -> Task {
    let mut question = Message::text("msg-2", Role::Agent, "Where would you like to fly from?");
    question.task_id = Some("task-1".into());
    question.context_id = Some("ctx-1".into());
    let mut status = TaskStatus::new(TaskState::InputRequired);
    status.message = Some(question);
    status.timestamp = Some("2025-10-28T10:30:00.000Z".into());
    Task::new("task-1", "ctx-1", status)
}

#[test]
fn an_input_required_task_in_v1_is_protojson_inside_a_task_wrapper() {
    let response = rpc::success(
        &json!(1),
        Version::V1_0,
        &SendMessageResult::Task(input_required_task()),
    );
    assert_eq!(
        response,
        json!({
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "task": {
                    "id": "task-1",
                    "contextId": "ctx-1",
                    "status": {
                        "state": "TASK_STATE_INPUT_REQUIRED",
                        "message": {
                            "messageId": "msg-2",
                            "contextId": "ctx-1",
                            "taskId": "task-1",
                            "role": "ROLE_AGENT",
                            "parts": [{"text": "Where would you like to fly from?"}]
                        },
                        "timestamp": "2025-10-28T10:30:00.000Z"
                    }
                }
            }
        })
    );
}

#[test]
fn an_input_required_task_in_v03_is_the_task_itself_with_kinds() {
    let response = rpc::success(
        &json!("req-3"),
        Version::V0_3,
        &SendMessageResult::Task(input_required_task()),
    );
    assert_eq!(
        response,
        json!({
            "jsonrpc": "2.0",
            "id": "req-3",
            "result": {
                "kind": "task",
                "id": "task-1",
                "contextId": "ctx-1",
                "status": {
                    "state": "input-required",
                    "message": {
                        "kind": "message",
                        "messageId": "msg-2",
                        "contextId": "ctx-1",
                        "taskId": "task-1",
                        "role": "agent",
                        "parts": [{"kind": "text", "text": "Where would you like to fly from?"}]
                    },
                    "timestamp": "2025-10-28T10:30:00.000Z"
                }
            }
        })
    );
}

#[test]
fn getting_a_task_answers_the_task_without_a_wrapper_in_both_versions() {
    let task = input_required_task();
    let v1 = rpc::success(&json!(1), Version::V1_0, &task);
    assert_eq!(v1["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert!(v1["result"].get("task").is_none());
    let v03 = rpc::success(&json!(1), Version::V0_3, &task);
    assert_eq!(v03["result"]["kind"], "task");
}

#[test]
fn every_state_and_role_has_its_spelling_in_each_version() {
    let table = [
        (TaskState::Submitted, "submitted", "TASK_STATE_SUBMITTED"),
        (TaskState::Working, "working", "TASK_STATE_WORKING"),
        (
            TaskState::InputRequired,
            "input-required",
            "TASK_STATE_INPUT_REQUIRED",
        ),
        (
            TaskState::AuthRequired,
            "auth-required",
            "TASK_STATE_AUTH_REQUIRED",
        ),
        (TaskState::Completed, "completed", "TASK_STATE_COMPLETED"),
        (TaskState::Failed, "failed", "TASK_STATE_FAILED"),
        (TaskState::Canceled, "canceled", "TASK_STATE_CANCELED"),
        (TaskState::Rejected, "rejected", "TASK_STATE_REJECTED"),
        (TaskState::Unknown, "unknown", "TASK_STATE_UNSPECIFIED"),
    ];
    for (state, v03, v1) in table {
        let status = TaskStatus::new(state);
        assert_eq!(status.to_wire(Version::V0_3)["state"], v03);
        assert_eq!(status.to_wire(Version::V1_0)["state"], v1);
        for version in Version::ALL {
            let back = TaskStatus::from_wire(version, &status.to_wire(version)).unwrap();
            assert_eq!(back.state, state);
        }
    }
    for (role, v03, v1) in [
        (Role::User, "user", "ROLE_USER"),
        (Role::Agent, "agent", "ROLE_AGENT"),
    ] {
        let message = Message::text("m", role, "hi");
        assert_eq!(message.to_wire(Version::V0_3)["role"], v03);
        assert_eq!(message.to_wire(Version::V1_0)["role"], v1);
    }
}

#[test]
fn terminal_and_interrupted_states_are_the_ones_the_specs_name() {
    let terminal: Vec<TaskState> = TaskState::ALL
        .into_iter()
        .filter(|state| state.is_terminal())
        .collect();
    assert_eq!(
        terminal,
        [
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
            TaskState::Rejected
        ]
    );
    let interrupted: Vec<TaskState> = TaskState::ALL
        .into_iter()
        .filter(|state| state.is_interrupted())
        .collect();
    assert_eq!(
        interrupted,
        [TaskState::InputRequired, TaskState::AuthRequired]
    );
}

#[test]
fn status_updates_carry_final_in_v03_only() {
    let update = TaskStatusUpdate::new("t", "c", TaskStatus::new(TaskState::Completed));
    assert!(update.is_final);
    let event = StreamEvent::StatusUpdate(update);
    assert_eq!(
        event.to_wire(Version::V0_3),
        json!({
            "kind": "status-update",
            "taskId": "t",
            "contextId": "c",
            "status": {"state": "completed"},
            "final": true
        })
    );
    assert_eq!(
        event.to_wire(Version::V1_0),
        json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})
    );
    assert!(event.ends_stream());
    let working = TaskStatusUpdate::new("t", "c", TaskStatus::new(TaskState::Working));
    assert!(!working.is_final);
    assert_eq!(
        StreamEvent::StatusUpdate(working).to_wire(Version::V0_3)["final"],
        false
    );
}

#[test]
fn reading_a_v1_status_update_derives_final_from_the_state() {
    for (state, ends) in [
        ("TASK_STATE_WORKING", false),
        ("TASK_STATE_INPUT_REQUIRED", true),
        ("TASK_STATE_COMPLETED", true),
    ] {
        let wire =
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": state}}});
        let event = StreamEvent::from_wire(Version::V1_0, &wire).unwrap();
        assert_eq!(event.ends_stream(), ends, "{state}");
    }
}

#[test]
fn artifact_updates_have_their_wrapper_or_kind() {
    let event = StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: Artifact::new("a", vec![Part::text("chunk 2")]),
        append: true,
        last_chunk: false,
        metadata: None,
    });
    assert_eq!(
        event.to_wire(Version::V1_0),
        json!({"artifactUpdate": {
            "taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "chunk 2"}]},
            "append": true, "lastChunk": false
        }})
    );
    assert_eq!(
        event.to_wire(Version::V0_3),
        json!({
            "kind": "artifact-update", "taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "chunk 2"}]},
            "append": true, "lastChunk": false
        })
    );
    assert!(!event.ends_stream());
}

#[test]
fn sse_frames_are_one_data_line_with_an_optional_event_id() {
    let event = StreamEvent::Message(Message::text("m", Role::Agent, "line one\nline two"));
    let frame = rpc::sse_event(&json!(5), Version::V1_0, &event, Some("42"));
    let lines: Vec<&str> = frame.split('\n').collect();
    assert_eq!(lines.len(), 4, "{frame:?}");
    assert_eq!(lines[0], "id: 42");
    let data: Value = serde_json::from_str(lines[1].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(
        data["result"]["message"]["parts"][0]["text"],
        "line one\nline two"
    );
    assert_eq!((lines[2], lines[3]), ("", ""));
    // An id cannot break the framing.
    let frame = rpc::sse_frame(Some("7\n\ndata: evil"), &json!({}));
    assert_eq!(frame, "id: 7data: evil\ndata: {}\n\n");
}

#[test]
fn file_parts_map_between_the_v1_and_v03_shapes() {
    let bytes = Part::file_bytes(
        vec![0, 1, 2, 250, 251, 252],
        Some("b.bin".into()),
        Some("application/octet-stream".into()),
    );
    assert_eq!(
        bytes.to_wire(Version::V1_0),
        json!({"raw": "AAEC+vv8", "filename": "b.bin", "mediaType": "application/octet-stream"})
    );
    assert_eq!(
        bytes.to_wire(Version::V0_3),
        json!({"kind": "file", "file": {"bytes": "AAEC+vv8", "name": "b.bin", "mimeType": "application/octet-stream"}})
    );
    let uri = Part::file_uri(
        "https://x.example/f.pdf",
        None,
        Some("application/pdf".into()),
    );
    assert_eq!(
        uri.to_wire(Version::V1_0),
        json!({"url": "https://x.example/f.pdf", "mediaType": "application/pdf"})
    );
    assert_eq!(
        uri.to_wire(Version::V0_3),
        json!({"kind": "file", "file": {"uri": "https://x.example/f.pdf", "mimeType": "application/pdf"}})
    );
    for part in [bytes, uri] {
        for version in Version::ALL {
            assert_eq!(
                Part::from_wire(version, &part.to_wire(version)).unwrap(),
                part
            );
        }
    }
    // URL-safe, unpadded base64 is read too (ProtoJSON allows it) and written back standard.
    let read = Part::from_wire(Version::V1_0, &json!({"raw": "AAEC-vv8"})).unwrap();
    assert_eq!(
        read.content,
        PartContent::File(FileContent::Bytes(vec![0, 1, 2, 250, 251, 252]))
    );
}

#[test]
fn what_v03_cannot_say_is_folded_or_dropped_as_documented() {
    // Non-object data is wrapped; text parts lose their media type and filename.
    let list = Part::data(json!([1, 2]));
    assert_eq!(
        list.to_wire(Version::V0_3),
        json!({"kind": "data", "data": {"value": [1, 2]}})
    );
    assert_eq!(list.to_wire(Version::V1_0), json!({"data": [1, 2]}));
    let markdown = Part {
        media_type: Some("text/markdown".into()),
        ..Part::text("# hi")
    };
    assert_eq!(
        markdown.to_wire(Version::V0_3),
        json!({"kind": "text", "text": "# hi"})
    );
    assert_eq!(
        markdown.to_wire(Version::V1_0),
        json!({"text": "# hi", "mediaType": "text/markdown"})
    );
}

#[test]
fn the_v1_reader_takes_proto_names_enum_numbers_and_string_integers() {
    let request = rpc::parse_request(
        br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{
            "message":{"message_id":"m1","role":1,"parts":[{"text":"hi","media_type":"text/plain"}],
                       "context_id":"c1","reference_task_ids":["t0"]},
            "configuration":{"history_length":"3","return_immediately":true}}}"#,
    )
    .unwrap();
    let params = rpc::send_params(&request).unwrap();
    assert_eq!(params.message.message_id, "m1");
    assert_eq!(params.message.role, Role::User);
    assert_eq!(params.message.context_id.as_deref(), Some("c1"));
    assert_eq!(params.message.reference_task_ids, ["t0"]);
    assert_eq!(
        params.message.parts[0].media_type.as_deref(),
        Some("text/plain")
    );
    assert_eq!(params.history_length(), Some(3));
    assert!(!params.blocking());

    let task = Task::from_wire(Version::V1_0, &json!({"id": "t", "status": {"state": 6}})).unwrap();
    assert_eq!(task.status.state, TaskState::InputRequired);
}

#[test]
fn blocking_defaults_to_waiting_in_both_versions() {
    let message = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let cases = [
        (Version::V1_0, json!({"message": message}), true),
        (
            Version::V1_0,
            json!({"message": message, "configuration": {}}),
            true,
        ),
        (
            Version::V1_0,
            json!({"message": message, "configuration": {"returnImmediately": true}}),
            false,
        ),
    ];
    for (version, params, blocking) in cases {
        assert_eq!(
            SendMessageParams::from_wire(version, &params)
                .unwrap()
                .blocking(),
            blocking
        );
    }
    let message =
        json!({"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]});
    for (params, blocking) in [
        (json!({"message": message}), true),
        (
            json!({"message": message, "configuration": {"blocking": true}}),
            true,
        ),
        (
            json!({"message": message, "configuration": {"blocking": false}}),
            false,
        ),
    ] {
        assert_eq!(
            SendMessageParams::from_wire(Version::V0_3, &params)
                .unwrap()
                .blocking(),
            blocking
        );
    }
}

#[test]
fn a_push_notification_config_reads_and_writes_in_each_version() {
    let params = json!({
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"taskPushNotificationConfig": {
            "url": "https://client.example/hook", "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "cred"}}}
    });
    let read = SendMessageParams::from_wire(Version::V1_0, &params).unwrap();
    let push = read
        .configuration
        .clone()
        .unwrap()
        .push_notification
        .unwrap();
    assert_eq!(push.url, "https://client.example/hook");
    assert_eq!(push.token.as_deref(), Some("tok"));
    let auth = push.authentication.clone().unwrap();
    assert_eq!(
        (auth.scheme.as_str(), auth.credentials.as_deref()),
        ("Bearer", Some("cred"))
    );
    // The same config in 0.3: `schemes`, and the task binding nests it.
    let v03 = read.to_wire(Version::V0_3);
    assert_eq!(
        v03["configuration"]["pushNotificationConfig"]["authentication"],
        json!({"schemes": ["Bearer"], "credentials": "cred"})
    );
    assert_eq!(
        SendMessageParams::from_wire(Version::V0_3, &v03).unwrap(),
        read
    );
    let bound = TaskPushNotificationConfig {
        task_id: "t1".into(),
        config: PushNotificationConfig {
            id: Some("c1".into()),
            ..push
        },
    };
    let v1 = bound.to_wire(Version::V1_0);
    assert_eq!(v1["taskId"], "t1");
    assert_eq!(v1["id"], "c1");
    common::assert_v1("TaskPushNotificationConfig", &v1);
    let v03 = bound.to_wire(Version::V0_3);
    assert_eq!(v03["pushNotificationConfig"]["id"], "c1");
    common::assert_v03("TaskPushNotificationConfig", &v03);
    for version in Version::ALL {
        let back = TaskPushNotificationConfig::from_wire(version, &bound.to_wire(version)).unwrap();
        assert_eq!(back, bound);
    }
    // A config without its url is refused, naming the field.
    let missing = TaskPushNotificationConfig::from_wire(Version::V1_0, &json!({"taskId": "t"}));
    assert_eq!(missing.unwrap_err().field, "url");
    let list = PushConfigList {
        configs: vec![bound.clone()],
    };
    common::assert_v1(
        "ListTaskPushNotificationConfigsResponse",
        &list.to_wire(Version::V1_0),
    );
    assert!(list.to_wire(Version::V0_3).is_array());
    for version in Version::ALL {
        assert_eq!(
            PushConfigList::from_wire(version, &list.to_wire(version)).unwrap(),
            list
        );
    }
}

#[test]
fn cards_describe_both_interfaces_and_read_back() {
    let mut card = AgentCard::new("Echo", "Repeats you", "0.1.0", "http://127.0.0.1:4000/");
    card.capabilities.streaming = true;
    card.skills = vec![AgentSkill::new(
        "echo",
        "Echo",
        "Echoes",
        vec!["test".into()],
    )];
    let v1 = card.to_wire(Version::V1_0);
    assert_eq!(
        v1["supportedInterfaces"],
        json!([
            {"url": "http://127.0.0.1:4000/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://127.0.0.1:4000/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ])
    );
    assert_eq!(
        v1["capabilities"],
        json!({"streaming": true, "pushNotifications": false, "extendedAgentCard": false})
    );
    let v03 = card.to_wire(Version::V0_3);
    assert_eq!(v03["protocolVersion"], "0.3.0");
    assert_eq!(v03["url"], "http://127.0.0.1:4000/");
    assert_eq!(v03["preferredTransport"], "JSONRPC");
    assert!(
        v03.get("additionalInterfaces").is_none(),
        "one URL, one transport: nothing more to list"
    );
    assert_eq!(
        v03["capabilities"],
        json!({"streaming": true, "pushNotifications": false, "stateTransitionHistory": false})
    );
    assert_eq!(AgentCard::from_wire(Version::V1_0, &v1).unwrap(), card);
    let from_v03 = AgentCard::from_wire(Version::V0_3, &v03).unwrap();
    assert_eq!(from_v03.url(), Some("http://127.0.0.1:4000/"));
    assert_eq!(from_v03.skills, card.skills);
    assert_eq!(from_v03.capabilities, card.capabilities);
}

#[test]
fn a_cards_credentials_are_declared_in_each_versions_form_and_read_back() {
    let mut card = AgentCard::new("Guard", "Asks", "0.1.0", "http://127.0.0.1:4000/");
    card.skills = vec![AgentSkill::new("g", "G", "Guards", vec!["t".into()])];
    card.security_schemes = vec![
        ("bearer".into(), SecurityScheme::Bearer),
        (
            "api_key".into(),
            SecurityScheme::ApiKeyHeader {
                header: "X-API-Key".into(),
            },
        ),
    ];
    let v1 = card.to_wire(Version::V1_0);
    assert_eq!(
        v1["securitySchemes"],
        json!({
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
            "api_key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}}
        })
    );
    assert_eq!(
        v1["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}, {"schemes": {"api_key": {"list": []}}}])
    );
    let v03 = card.to_wire(Version::V0_3);
    assert_eq!(
        v03["securitySchemes"],
        json!({
            "bearer": {"type": "http", "scheme": "bearer"},
            "api_key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}
        })
    );
    assert_eq!(v03["security"], json!([{"bearer": []}, {"api_key": []}]));
    assert_eq!(AgentCard::from_wire(Version::V1_0, &v1).unwrap(), card);
    assert_eq!(
        AgentCard::from_wire(Version::V0_3, &v03)
            .unwrap()
            .security_schemes,
        card.security_schemes
    );

    // The discovery card: 1.0's fields and 0.3's beside them, each version reading its own.
    let both = card.discovery_json();
    assert_eq!(both["supportedInterfaces"], v1["supportedInterfaces"]);
    assert_eq!(both["securityRequirements"], v1["securityRequirements"]);
    assert_eq!(both["security"], v03["security"]);
    assert_eq!(both["url"], "http://127.0.0.1:4000/");
    assert_eq!(both["protocolVersion"], "0.3.0");
    assert_eq!(
        both["securitySchemes"]["api_key"],
        json!({"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"},
               "type": "apiKey", "in": "header", "name": "X-API-Key"})
    );
    assert_eq!(AgentCard::from_wire(Version::V1_0, &both).unwrap(), card);
    let read_03 = AgentCard::from_wire(Version::V0_3, &both).unwrap();
    assert_eq!(read_03.url(), Some("http://127.0.0.1:4000/"));
    assert_eq!(read_03.security_schemes, card.security_schemes);
}

#[test]
fn a_card_with_several_transports_lists_them_all_in_v03() {
    let mut card = AgentCard::new("Geo", "Maps", "1.0", "https://a.example/rpc");
    card.interfaces.push(AgentInterface {
        url: "https://a.example/grpc".into(),
        protocol_binding: "GRPC".into(),
        protocol_version: "1.0".into(),
    });
    let v03 = card.to_wire(Version::V0_3);
    assert_eq!(
        v03["additionalInterfaces"],
        json!([
            {"url": "https://a.example/rpc", "transport": "JSONRPC"},
            {"url": "https://a.example/grpc", "transport": "GRPC"}
        ])
    );
}

#[test]
fn results_are_read_leniently_and_requests_strictly() {
    // An agent's message without id, role or parts still reads…
    let message =
        Message::from_wire(Version::V0_3, &json!({"kind": "message", "parts": []})).unwrap();
    assert_eq!(
        (message.message_id.as_str(), message.role),
        ("", Role::Agent)
    );
    // …an unknown state from a newer agent reads as unknown…
    let task = Task::from_wire(
        Version::V1_0,
        &json!({"id": "t", "status": {"state": "TASK_STATE_PAUSED"}}),
    )
    .unwrap();
    assert_eq!(task.status.state, TaskState::Unknown);
    // …but a wrong JSON type does not.
    let error = Task::from_wire(
        Version::V1_0,
        &json!({"id": "t", "status": {"state": "TASK_STATE_WORKING"}, "history": {}}),
    )
    .unwrap_err();
    assert_eq!(error.field, "history");
    // The same message as a request param is refused.
    let error = SendMessageParams::from_wire(
        Version::V0_3,
        &json!({"message": {"kind": "message", "parts": []}}),
    )
    .unwrap_err();
    assert_eq!(error.field, "message.messageId");
}

#[test]
fn a_v03_part_without_kind_is_recognised_by_its_content() {
    let part = Part::from_wire(Version::V0_3, &json!({"text": "hi"})).unwrap();
    assert_eq!(part, Part::text("hi"));
    let part = Part::from_wire(Version::V0_3, &json!({"data": {"a": 1}})).unwrap();
    assert_eq!(part, Part::data(json!({"a": 1})));
}

#[test]
fn responses_are_read_back_into_the_model() {
    let task = input_required_task();
    for version in Version::ALL {
        let body =
            rpc::success(&json!("r"), version, &SendMessageResult::Task(task.clone())).to_string();
        let response = rpc::parse_response(body.as_bytes()).unwrap();
        assert_eq!(response.id, json!("r"));
        let result: SendMessageResult =
            rpc::read_result(version, &response.outcome.unwrap()).unwrap();
        assert_eq!(result, SendMessageResult::Task(task.clone()));
    }
    let body = rpc::error(&json!(4), &RpcError::task_not_found("t9")).to_string();
    let response = rpc::parse_response(body.as_bytes()).unwrap();
    let error = response.outcome.unwrap_err();
    assert_eq!(error.code, -32001);
    assert_eq!(error.reason(), Some("TASK_NOT_FOUND"));
    // A result that does not fit is the agent's fault: -32006 naming the field.
    let bad = rpc::read_result::<Task>(Version::V1_0, &json!({"id": 5})).unwrap_err();
    assert_eq!(bad.code, -32006);
    assert!(bad.message.contains("result.id"), "{}", bad.message);
    let garbage = rpc::parse_response(b"<html>").unwrap_err();
    assert_eq!(garbage.code, -32006);
}

#[test]
fn the_a2a_version_header_is_read_as_major_minor() {
    assert_eq!(Version::from_header("1.0").unwrap(), Version::V1_0);
    assert_eq!(Version::from_header("1.0.1").unwrap(), Version::V1_0);
    assert_eq!(Version::from_header("0.3").unwrap(), Version::V0_3);
    assert_eq!(
        Version::from_header("").unwrap(),
        Version::V0_3,
        "empty means 0.3 (§3.6.2)"
    );
    for unsupported in ["0.5", "2.0", "1", "v1.0", "1.0.x"] {
        let error = Version::from_header(unsupported).unwrap_err();
        assert_eq!(error.code, -32009, "{unsupported}");
        assert_eq!(error.reason(), Some("VERSION_NOT_SUPPORTED"));
    }
}

#[test]
fn timestamps_made_here_are_what_the_v1_schema_accepts() {
    let mut task = input_required_task();
    task.status.timestamp = Some(time::format_timestamp_millis(1_700_000_000_123));
    assert_eq!(
        task.status.timestamp.as_deref(),
        Some("2023-11-14T22:13:20.123Z")
    );
    common::assert_v1("Task", &task.to_wire(Version::V1_0));
}
