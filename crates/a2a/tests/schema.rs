//! Everything the crate writes validates against the published schema of its version.

use murmur_testkit::a2a_schema as common;

use common::{assert_v1, assert_v1_error_response, assert_v03, is_v1, is_v03};
use murmur_a2a::rpc::{self, Method};
use murmur_a2a::*;
use serde_json::{Value, json};

fn metadata(pairs: Value) -> Option<Metadata> {
    pairs.as_object().cloned()
}

/// A message showing every part kind and every optional field.
fn rich_message(role: Role) -> Message {
    let mut text = Part::text("Where would you like to fly from?");
    text.metadata = metadata(json!({"source": "planner"}));
    let mut message = Message::new(
        "msg-1",
        role,
        vec![
            text,
            Part::file_bytes(
                b"\x89PNG\r\n\x1a\n".to_vec(),
                Some("map.png".into()),
                Some("image/png".into()),
            ),
            Part::file_uri(
                "https://example.com/report.pdf",
                Some("report.pdf".into()),
                Some("application/pdf".into()),
            ),
            Part::data(json!({"from": "JFK", "to": "LHR"})),
        ],
    );
    message.context_id = Some("ctx-1".into());
    message.task_id = Some("task-1".into());
    message.metadata = metadata(json!({"trace": "abc"}));
    message.reference_task_ids = vec!["task-0".into()];
    message.extensions = vec!["https://example.com/ext/v1".into()];
    message
}

fn rich_task(state: TaskState) -> Task {
    let mut status = TaskStatus::new(state);
    status.message = Some(Message::text("msg-2", Role::Agent, "Working on it"));
    status.timestamp = Some(time::format_timestamp_millis(1_761_647_400_000));
    let mut artifact = Artifact::new("art-1", vec![Part::text("Flight booked: XYZ123")]);
    artifact.name = Some("Itinerary".into());
    artifact.description = Some("The booked flight".into());
    artifact.metadata = metadata(json!({"pages": 1}));
    artifact.extensions = vec!["https://example.com/ext/v1".into()];
    let mut task = Task::new("task-1", "ctx-1", status);
    task.history = vec![
        rich_message(Role::User),
        Message::text("msg-3", Role::Agent, "ok"),
    ];
    task.artifacts = vec![artifact];
    task.metadata = metadata(json!({"owner": "alice"}));
    task
}

fn minimal_task(state: TaskState) -> Task {
    Task::new("task-1", "ctx-1", TaskStatus::new(state))
}

fn status_update(state: TaskState) -> StreamEvent {
    let mut status = TaskStatus::new(state);
    status.timestamp = Some("2025-10-28T10:30:00.000Z".into());
    StreamEvent::StatusUpdate(TaskStatusUpdate::new("task-1", "ctx-1", status))
}

fn artifact_update(append: bool, last_chunk: bool) -> StreamEvent {
    StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
        task_id: "task-1".into(),
        context_id: "ctx-1".into(),
        artifact: Artifact::new("art-1", vec![Part::text("chunk")]),
        append,
        last_chunk,
        metadata: metadata(json!({"seq": 3})),
    })
}

fn full_card() -> AgentCard {
    let mut card = AgentCard::new(
        "Travel agent",
        "Books flights",
        "1.2.0",
        "http://127.0.0.1:8080/",
    );
    card.provider = Some(AgentProvider {
        organization: "Murmur".into(),
        url: "https://murmur.example".into(),
    });
    card.documentation_url = Some("https://murmur.example/docs".into());
    card.icon_url = Some("https://murmur.example/icon.png".into());
    card.capabilities = AgentCapabilities {
        streaming: true,
        push_notifications: false,
        state_transition_history: true,
        extended_agent_card: true,
    };
    card.default_input_modes = vec!["text/plain".into(), "application/json".into()];
    let mut skill = AgentSkill::new(
        "book-flight",
        "Book a flight",
        "Finds and books flights",
        vec!["travel".into()],
    );
    skill.examples = vec!["Book me a flight to London".into()];
    skill.input_modes = vec!["text/plain".into()];
    skill.output_modes = vec!["application/json".into()];
    card.skills = vec![skill];
    card
}

/// The `result` of a v1.0 success response, after checking the envelope.
fn v1_result(response: &Value, id: &Value) -> Value {
    assert_eq!(response["jsonrpc"], "2.0");
    assert_eq!(&response["id"], id);
    assert!(response.get("error").is_none());
    response["result"].clone()
}

#[test]
fn tasks_in_every_state_validate_in_both_versions() {
    for state in TaskState::ALL {
        for task in [rich_task(state), minimal_task(state)] {
            assert_v1("Task", &task.to_wire(Version::V1_0));
            assert_v03("Task", &task.to_wire(Version::V0_3));
        }
    }
}

#[test]
fn messages_with_each_part_kind_validate_in_both_versions() {
    let mut message = rich_message(Role::Agent);
    message
        .parts
        .push(Part::data(json!(["a", "list", "of", "data"])));
    message.parts.push(Part {
        media_type: Some("text/markdown".into()),
        filename: Some("notes.md".into()),
        ..Part::text("# Notes")
    });
    for role in [Role::User, Role::Agent] {
        message.role = role;
        assert_v1("Message", &message.to_wire(Version::V1_0));
        assert_v03("Message", &message.to_wire(Version::V0_3));
    }
    for part in &message.parts {
        assert_v1("Part", &part.to_wire(Version::V1_0));
        assert_v03("Part", &part.to_wire(Version::V0_3));
    }
}

#[test]
fn a_part_written_for_one_version_is_invalid_in_the_other() {
    // The checks are not vacuous: the shapes really differ.
    let part = Part::text("hi");
    assert!(!is_v1("Part", &part.to_wire(Version::V0_3)));
    assert!(!is_v03("Part", &part.to_wire(Version::V1_0)));
    let task = minimal_task(TaskState::InputRequired);
    assert!(!is_v1("Task", &task.to_wire(Version::V0_3)));
    assert!(!is_v03("Task", &task.to_wire(Version::V1_0)));
}

#[test]
fn send_message_results_validate_in_both_versions() {
    let id = json!("req-1");
    for result in [
        SendMessageResult::Task(rich_task(TaskState::InputRequired)),
        SendMessageResult::Task(minimal_task(TaskState::Completed)),
        SendMessageResult::Message(rich_message(Role::Agent)),
    ] {
        let v1 = rpc::success(&id, Version::V1_0, &result);
        assert_v1("SendMessageResponse", &v1_result(&v1, &id));
        assert_v03(
            "SendMessageSuccessResponse",
            &rpc::success(&id, Version::V0_3, &result),
        );
    }
}

#[test]
fn stream_events_validate_in_both_versions() {
    let id = json!(7);
    let mut events = vec![
        StreamEvent::Task(rich_task(TaskState::Submitted)),
        StreamEvent::Message(rich_message(Role::Agent)),
        artifact_update(false, false),
        artifact_update(true, true),
    ];
    events.extend(TaskState::ALL.into_iter().map(status_update));
    for event in &events {
        let v1 = rpc::success(&id, Version::V1_0, event);
        assert_v1("StreamResponse", &v1_result(&v1, &id));
        assert_v03(
            "SendStreamingMessageSuccessResponse",
            &rpc::success(&id, Version::V0_3, event),
        );
        // The SSE data line carries the same response.
        let frame = rpc::sse_event(&id, Version::V0_3, event, None);
        let data: Value = serde_json::from_str(
            frame
                .strip_prefix("data: ")
                .and_then(|rest| rest.strip_suffix("\n\n"))
                .unwrap(),
        )
        .unwrap();
        assert_v03("SendStreamingMessageSuccessResponse", &data);
    }
}

#[test]
fn get_cancel_and_list_results_validate_in_both_versions() {
    let id = json!("x");
    let task = rich_task(TaskState::Canceled);
    let v1 = rpc::success(&id, Version::V1_0, &task);
    assert_v1("Task", &v1_result(&v1, &id));
    assert_v03(
        "GetTaskSuccessResponse",
        &rpc::success(&id, Version::V0_3, &task),
    );
    assert_v03(
        "CancelTaskSuccessResponse",
        &rpc::success(&id, Version::V0_3, &task),
    );

    for tasks in [
        vec![],
        vec![
            rich_task(TaskState::Working),
            minimal_task(TaskState::Failed),
        ],
    ] {
        let list = ListTasksResult {
            total_size: tasks.len() as u32,
            tasks,
            next_page_token: String::new(),
            page_size: 50,
        };
        let v1 = rpc::success(&id, Version::V1_0, &list);
        assert_v1("ListTasksResponse", &v1_result(&v1, &id));
    }
}

#[test]
fn agent_cards_validate_in_both_versions() {
    let mut minimal = AgentCard::new("Echo", "Repeats you", "0.1.0", "http://127.0.0.1:9/");
    minimal.skills = vec![AgentSkill::new(
        "echo",
        "Echo",
        "Echoes",
        vec!["test".into()],
    )];
    for card in [full_card(), minimal] {
        assert!(card.problems().is_empty(), "{:?}", card.problems());
        assert_v1("AgentCard", &card.to_wire(Version::V1_0));
        assert_v03("AgentCard", &card.to_wire(Version::V0_3));
        let id = json!(1);
        let v1 = rpc::success(&id, Version::V1_0, &card);
        assert_v1("AgentCard", &v1_result(&v1, &id));
        assert_v03(
            "GetAuthenticatedExtendedCardSuccessResponse",
            &rpc::success(&id, Version::V0_3, &card),
        );
    }
}

#[test]
fn a_card_without_skills_is_flagged_and_fails_the_v1_requirements() {
    let card = AgentCard::new("Echo", "Repeats you", "0.1.0", "http://127.0.0.1:9/");
    assert_eq!(
        card.problems(),
        vec![(
            "skills".to_string(),
            "at least one skill is required".to_string()
        )]
    );
    assert!(!is_v1("AgentCard", &card.to_wire(Version::V1_0)));
}

#[test]
fn error_responses_validate_in_both_versions() {
    let errors = [
        RpcError::parse_error("EOF while parsing an object at line 1 column 9"),
        RpcError::invalid_request("\"jsonrpc\" must be \"2.0\", got \"1.0\""),
        RpcError::method_not_found("tasks/foo", None),
        RpcError::invalid_params("message.parts", "at least one part is required"),
        RpcError::internal("the session ended"),
        RpcError::task_not_found("nope"),
        RpcError::task_not_cancelable("t", TaskState::Completed),
        RpcError::push_notification_not_supported(),
        RpcError::unsupported_operation("streaming is off"),
        RpcError::content_type_not_supported("image/gif"),
        RpcError::invalid_agent_response("result.status: required"),
        RpcError::extended_agent_card_not_configured(),
        RpcError::extension_support_required("https://example.com/ext/v1"),
        RpcError::version_not_supported("0.5"),
        RpcError::unauthenticated("Bearer realm=\"a2a\""),
    ];
    let mut codes: Vec<i64> = errors.iter().map(|error| error.code).collect();
    codes.sort_unstable();
    let mut all = error::codes::ALL.to_vec();
    all.sort_unstable();
    assert_eq!(codes, all, "one constructor per code");
    for id in [json!(null), json!(3), json!("abc")] {
        for error in &errors {
            let response = rpc::error(&id, error);
            assert_v03("JSONRPCErrorResponse", &response);
            assert_v1_error_response(&response, error.code);
        }
    }
}

#[test]
fn client_requests_validate_in_both_versions() {
    let id = json!("req-9");
    let mut send = SendMessageParams {
        message: rich_message(Role::User),
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into()],
            history_length: Some(5),
            blocking: false,
            push_notification: None,
        }),
        metadata: metadata(json!({"k": "v"})),
    };
    send.message.task_id = None;
    let get = GetTaskParams {
        id: "task-1".into(),
        history_length: Some(0),
    };
    let cancel = CancelTaskParams {
        id: "task-1".into(),
        metadata: None,
    };
    let subscribe = SubscribeParams {
        id: "task-1".into(),
    };
    let list = ListTasksParams {
        context_id: Some("ctx-1".into()),
        status: Some(TaskState::InputRequired),
        page_size: Some(10),
        page_token: Some("cursor".into()),
        history_length: Some(2),
        status_timestamp_after: Some("2025-10-28T10:30:00Z".into()),
        include_artifacts: true,
    };

    let v1 = |method, params: &dyn rpc::WireDyn| {
        let request = rpc::request(&id, method, Version::V1_0, Some(params)).unwrap();
        assert_eq!(request["method"], method.name(Version::V1_0).unwrap());
        request["params"].clone()
    };
    assert_v1("SendMessageRequest", &v1(Method::SendMessage, &send));
    assert_v1(
        "SendMessageRequest",
        &v1(Method::SendStreamingMessage, &send),
    );
    assert_v1("GetTaskRequest", &v1(Method::GetTask, &get));
    assert_v1("CancelTaskRequest", &v1(Method::CancelTask, &cancel));
    assert_v1(
        "SubscribeToTaskRequest",
        &v1(Method::SubscribeToTask, &subscribe),
    );
    assert_v1("ListTasksRequest", &v1(Method::ListTasks, &list));

    let v03 = |method, params: &dyn rpc::WireDyn| {
        rpc::request(&id, method, Version::V0_3, Some(params)).unwrap()
    };
    assert_v03("SendMessageRequest", &v03(Method::SendMessage, &send));
    assert_v03(
        "SendStreamingMessageRequest",
        &v03(Method::SendStreamingMessage, &send),
    );
    assert_v03("GetTaskRequest", &v03(Method::GetTask, &get));
    assert_v03("CancelTaskRequest", &v03(Method::CancelTask, &cancel));
    assert_v03(
        "TaskResubscriptionRequest",
        &v03(Method::SubscribeToTask, &subscribe),
    );
    assert!(
        rpc::request(&id, Method::ListTasks, Version::V0_3, Some(&list)).is_none(),
        "0.3 has no JSON-RPC tasks/list"
    );
}

#[test]
fn the_schema_checks_reject_what_the_specifications_forbid() {
    // Guards against a vacuous harness: each of these must fail validation.
    let mut task = minimal_task(TaskState::InputRequired).to_wire(Version::V1_0);
    task["status"]["state"] = json!("input-required");
    assert!(!is_v1("Task", &task), "a v0.3 state in a v1.0 task");
    let mut task = minimal_task(TaskState::Working).to_wire(Version::V1_0);
    task["status"]["timestamp"] = json!("yesterday");
    assert!(!is_v1("Task", &task), "a timestamp that is not date-time");
    let mut task = minimal_task(TaskState::Working).to_wire(Version::V1_0);
    task.as_object_mut().unwrap().remove("status");
    assert!(!is_v1("Task", &task), "the proto requires status");
    let message = Message::new("m", Role::User, vec![]).to_wire(Version::V1_0);
    assert!(!is_v1("Message", &message), "the proto requires a part");

    let mut update = status_update(TaskState::Completed).to_wire(Version::V0_3);
    update.as_object_mut().unwrap().remove("final");
    assert!(
        !is_v03("TaskStatusUpdateEvent", &update),
        "v0.3 requires final"
    );
    let mut task = minimal_task(TaskState::Working).to_wire(Version::V0_3);
    task["status"]["state"] = json!("TASK_STATE_WORKING");
    assert!(!is_v03("Task", &task), "a v1.0 state in a v0.3 task");
}
