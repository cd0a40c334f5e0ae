//! Every way a request can be refused, through `parse_request` and the params readers, and the
//! response the client gets.

use murmur_testkit::a2a_schema as common;

use murmur_a2a::rpc::{self, Call, Method};
use murmur_a2a::*;
use serde_json::{Value, json};

/// Parses `body` expecting a refusal; checks the response is valid in both versions and
/// returns it.
fn refused(body: &[u8]) -> (Value, RpcError) {
    let rejected = rpc::parse_request(body).expect_err("the request must be refused");
    let response = rejected.to_response();
    common::assert_v03("JSONRPCErrorResponse", &response);
    common::assert_v1_error_response(&response, rejected.error.code);
    (rejected.id, rejected.error)
}

/// Parses `body` (a valid envelope), reads its params, expecting -32602; returns the error
/// after checking its response.
fn bad_params(body: Value) -> RpcError {
    let request = rpc::parse_request(body.to_string().as_bytes()).expect("the envelope is fine");
    let error = request.call().expect_err("the params must be refused");
    assert_eq!(error.code, -32602, "{error}");
    let response = rpc::error(&request.id, &error);
    common::assert_v03("JSONRPCErrorResponse", &response);
    common::assert_v1_error_response(&response, -32602);
    assert_eq!(response["id"], request.id);
    error
}

fn field(error: &RpcError) -> String {
    let violations = error.field_violations();
    assert_eq!(violations.len(), 1, "{error:?}");
    violations[0].0.clone()
}

fn send(version: Version, message: Value) -> Value {
    let method = if version == Version::V1_0 {
        "SendMessage"
    } else {
        "message/send"
    };
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}})
}

#[test]
fn truncated_json_is_a_parse_error_with_a_null_id() {
    let (id, error) = refused(br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"mess"#);
    assert_eq!(error.code, -32700);
    assert_eq!(id, Value::Null);
    assert!(
        error.message.starts_with("Invalid JSON payload"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("EOF"),
        "says where it broke off: {}",
        error.message
    );
}

#[test]
fn empty_and_non_utf8_bodies_are_parse_errors() {
    for body in [
        &b""[..],
        b"   ",
        b"\xff\xfe{}",
        b"{'single': 'quotes'}",
        b"{} trailing",
    ] {
        let (id, error) = refused(body);
        assert_eq!((error.code, id), (-32700, Value::Null), "{body:?}");
    }
}

#[test]
fn a_batch_is_refused_as_an_invalid_request_saying_why() {
    let one = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}});
    for batch in [json!([one, one]), json!([])] {
        let (id, error) = refused(batch.to_string().as_bytes());
        assert_eq!(error.code, -32600);
        assert_eq!(id, Value::Null);
        assert!(
            error.message.contains("batch requests"),
            "{}",
            error.message
        );
    }
}

#[test]
fn a_body_that_is_not_an_object_is_an_invalid_request() {
    for body in [&b"\"SendMessage\""[..], b"42", b"null", b"true"] {
        let (_, error) = refused(body);
        assert_eq!(error.code, -32600, "{body:?}");
        assert!(
            error.message.contains("must be a JSON object"),
            "{}",
            error.message
        );
    }
}

#[test]
fn jsonrpc_1_0_is_an_invalid_request_that_echoes_the_id() {
    let (id, error) =
        refused(br#"{"jsonrpc":"1.0","id":"abc","method":"GetTask","params":{"id":"t"}}"#);
    assert_eq!(error.code, -32600);
    assert_eq!(id, json!("abc"));
    assert!(
        error
            .message
            .contains(r#""jsonrpc" must be "2.0", got "1.0""#),
        "{}",
        error.message
    );
    let (_, error) = refused(br#"{"id":1,"method":"GetTask","params":{"id":"t"}}"#);
    assert!(
        error.message.contains(r#""jsonrpc": "2.0" is required"#),
        "{}",
        error.message
    );
    let (_, error) = refused(br#"{"jsonrpc":2.0,"id":1,"method":"GetTask"}"#);
    assert_eq!(error.code, -32600, "a number is not the string \"2.0\"");
}

#[test]
fn a_missing_or_non_string_method_is_an_invalid_request() {
    let (id, error) = refused(br#"{"jsonrpc":"2.0","id":7,"params":{}}"#);
    assert_eq!((error.code, id), (-32600, json!(7)));
    assert!(
        error.message.contains(r#""method" is required"#),
        "{}",
        error.message
    );
    let (_, error) = refused(br#"{"jsonrpc":"2.0","id":7,"method":["GetTask"]}"#);
    assert_eq!(error.code, -32600);
    assert!(
        error
            .message
            .contains(r#""method" must be a string, not an array"#),
        "{}",
        error.message
    );
}

#[test]
fn an_id_of_the_wrong_type_is_an_invalid_request_answered_with_a_null_id() {
    for id in [json!(true), json!({"n": 1}), json!([1])] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "GetTask", "params": {"id": "t"}});
        let (answered_id, error) = refused(body.to_string().as_bytes());
        assert_eq!((error.code, answered_id), (-32600, Value::Null), "{id}");
        assert!(
            error
                .message
                .contains(r#""id" must be a string, an integer or null"#)
        );
    }
    // JSON-RPC discourages fractional ids; A2A's schemas forbid them.
    let (id, error) =
        refused(br#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":{"id":"t"}}"#);
    assert_eq!((error.code, id), (-32600, Value::Null));
    assert!(
        error.message.contains("must be an integer"),
        "{}",
        error.message
    );
    let request = rpc::parse_request(
        br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"GetTask","params":{"id":"t"}}"#,
    )
    .unwrap();
    assert_eq!(request.id, json!(u64::MAX));
}

#[test]
fn params_that_are_not_structured_are_an_invalid_request() {
    let (_, error) = refused(br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":"t-1"}"#);
    assert_eq!(error.code, -32600);
    assert!(
        error
            .message
            .contains(r#""params" must be an object, not a string"#)
    );
}

#[test]
fn an_unknown_method_is_method_not_found_naming_it() {
    let (id, error) = refused(br#"{"jsonrpc":"2.0","id":"q","method":"tasks/foo","params":{}}"#);
    assert_eq!((error.code, id), (-32601, json!("q")));
    assert!(
        error.message.contains(r#""tasks/foo""#),
        "{}",
        error.message
    );
    assert!(error.message.contains("SendMessage") && error.message.contains("message/send"));
}

#[test]
fn a_method_in_the_wrong_case_is_not_found_but_the_right_spelling_is_suggested() {
    let (_, error) = refused(br#"{"jsonrpc":"2.0","id":1,"method":"sendMessage","params":{}}"#);
    assert_eq!(error.code, -32601);
    assert!(
        error.message.contains(r#"did you mean "SendMessage"?"#),
        "{}",
        error.message
    );
}

#[test]
fn tasks_list_is_not_a_v03_json_rpc_method() {
    let (_, error) = refused(br#"{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}"#);
    assert_eq!(error.code, -32601);
    assert!(error.message.contains("ListTasks"), "{}", error.message);
}

#[test]
fn every_method_name_of_both_versions_is_recognised_and_decides_the_version() {
    let names = [
        ("SendMessage", Method::SendMessage, Version::V1_0),
        (
            "SendStreamingMessage",
            Method::SendStreamingMessage,
            Version::V1_0,
        ),
        ("GetTask", Method::GetTask, Version::V1_0),
        ("CancelTask", Method::CancelTask, Version::V1_0),
        ("SubscribeToTask", Method::SubscribeToTask, Version::V1_0),
        ("ListTasks", Method::ListTasks, Version::V1_0),
        (
            "GetExtendedAgentCard",
            Method::GetExtendedAgentCard,
            Version::V1_0,
        ),
        (
            "CreateTaskPushNotificationConfig",
            Method::CreatePushNotificationConfig,
            Version::V1_0,
        ),
        ("message/send", Method::SendMessage, Version::V0_3),
        (
            "message/stream",
            Method::SendStreamingMessage,
            Version::V0_3,
        ),
        ("tasks/get", Method::GetTask, Version::V0_3),
        ("tasks/cancel", Method::CancelTask, Version::V0_3),
        ("tasks/resubscribe", Method::SubscribeToTask, Version::V0_3),
        (
            "agent/getAuthenticatedExtendedCard",
            Method::GetExtendedAgentCard,
            Version::V0_3,
        ),
        (
            "tasks/pushNotificationConfig/set",
            Method::CreatePushNotificationConfig,
            Version::V0_3,
        ),
    ];
    for (name, method, version) in names {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": name});
        let request = rpc::parse_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            (request.method, request.version),
            (method, version),
            "{name}"
        );
        assert_eq!(method.name(version), Some(name));
    }
    assert!(Method::SendStreamingMessage.is_streaming() && Method::SubscribeToTask.is_streaming());
    assert!(!Method::SendMessage.is_streaming());
}

#[test]
fn push_notification_methods_are_read_with_their_params() {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"t"}}"#;
    let request = rpc::parse_request(body).unwrap();
    assert_eq!(
        request.call().unwrap(),
        Call::GetPushConfig(PushConfigRef {
            task_id: "t".into(),
            config_id: None
        })
    );
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"t","id":"c"}}"#;
    assert_eq!(
        rpc::parse_request(body).unwrap().call().unwrap(),
        Call::DeletePushConfig(PushConfigRef {
            task_id: "t".into(),
            config_id: Some("c".into())
        })
    );
    let response = rpc::error(&request.id, &RpcError::push_notification_not_supported());
    assert_eq!(response["error"]["code"], -32003);
    common::assert_v03("JSONRPCErrorResponse", &response);
}

#[test]
fn a_request_without_id_is_a_notification() {
    let request =
        rpc::parse_request(br#"{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t"}}"#).unwrap();
    assert!(request.is_notification);
    assert_eq!(request.id, Value::Null);
    let request = rpc::parse_request(
        br#"{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"t"}}"#,
    )
    .unwrap();
    assert!(!request.is_notification, "an explicit null id is a request");
}

#[test]
fn wrong_param_types_are_invalid_params_naming_the_field() {
    let error =
        bad_params(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 42}}));
    assert_eq!(field(&error), "id");
    assert!(
        error.message.contains("id: must be a string, not a number"),
        "{}",
        error.message
    );

    let error = bad_params(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t", "historyLength": "ten"}}),
    );
    assert_eq!(field(&error), "historyLength");

    let error = bad_params(
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t", "historyLength": -1}}),
    );
    assert!(
        error
            .message
            .contains("must be a non-negative integer, got -1"),
        "{}",
        error.message
    );

    let error =
        bad_params(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": ["t"]}));
    assert_eq!(field(&error), "params");
    assert!(
        error.message.contains("named parameters"),
        "{}",
        error.message
    );

    let error = bad_params(
        json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": ""}}),
    );
    assert_eq!(field(&error), "id");

    let error = bad_params(json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}));
    assert_eq!(
        (field(&error), error.message.contains("required")),
        ("id".to_string(), true)
    );

    let error = bad_params(send(Version::V1_0, json!("hello")));
    assert_eq!(field(&error), "message");
    assert!(error.message.contains("must be an object, not a string"));

    let error =
        bad_params(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}));
    assert_eq!(field(&error), "message");
}

#[test]
fn missing_message_parts_are_invalid_params() {
    for version in Version::ALL {
        let role = if version == Version::V1_0 {
            "ROLE_USER"
        } else {
            "user"
        };
        for message in [
            json!({"messageId": "m", "role": role, "parts": []}),
            json!({"messageId": "m", "role": role}),
        ] {
            let error = bad_params(send(version, message));
            assert_eq!(field(&error), "message.parts");
            assert!(
                error.message.contains("at least one part is required"),
                "{}",
                error.message
            );
        }
    }
}

#[test]
fn a_bad_role_is_invalid_params_and_a_role_from_the_other_version_is_explained() {
    let error = bad_params(send(
        Version::V0_3,
        json!({"messageId": "m", "role": "robot", "parts": [{"kind": "text", "text": "hi"}]}),
    ));
    assert_eq!(field(&error), "message.role");
    assert!(
        error.message.contains("must be user or agent"),
        "{}",
        error.message
    );

    let error = bad_params(send(
        Version::V1_0,
        json!({"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}),
    ));
    assert_eq!(field(&error), "message.role");
    assert!(
        error.message.contains("ROLE_USER or ROLE_AGENT"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("A2A 0.3 spelling"),
        "{}",
        error.message
    );

    for missing in [
        json!({"messageId": "m", "parts": [{"text": "hi"}]}),
        json!({"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": [{"text": "hi"}]}),
    ] {
        let error = bad_params(send(Version::V1_0, missing));
        assert_eq!(field(&error), "message.role");
        assert!(error.message.contains("required"), "{}", error.message);
    }
}

#[test]
fn a_missing_message_id_is_invalid_params() {
    for message_id in [None, Some("")] {
        let mut message = json!({"role": "ROLE_USER", "parts": [{"text": "hi"}]});
        if let Some(id) = message_id {
            message["messageId"] = json!(id);
        }
        let error = bad_params(send(Version::V1_0, message));
        assert_eq!(field(&error), "message.messageId");
    }
}

#[test]
fn malformed_parts_are_invalid_params_naming_the_part() {
    let error = bad_params(send(
        Version::V1_0,
        json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}, {"text": "b", "url": "https://x"}]}),
    ));
    assert_eq!(field(&error), "message.parts[1]");
    assert!(
        error
            .message
            .contains("exactly one of text, raw, url or data, not text and url"),
        "{}",
        error.message
    );

    let error = bad_params(send(
        Version::V1_0,
        json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"mediaType": "text/plain"}]}),
    ));
    assert_eq!(field(&error), "message.parts[0]");

    let error = bad_params(send(
        Version::V1_0,
        json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "not base64!"}]}),
    ));
    assert_eq!(field(&error), "message.parts[0].raw");

    let error = bad_params(send(
        Version::V0_3,
        json!({"messageId": "m", "role": "user", "parts": [{"kind": "image", "url": "x"}]}),
    ));
    assert_eq!(field(&error), "message.parts[0].kind");
    assert!(
        error.message.contains(r#"unknown part kind "image""#),
        "{}",
        error.message
    );

    let error = bad_params(send(
        Version::V0_3,
        json!({"messageId": "m", "role": "user", "parts": [{"kind": "data", "data": [1]}]}),
    ));
    assert_eq!(field(&error), "message.parts[0].data");

    let error = bad_params(send(
        Version::V0_3,
        json!({"messageId": "m", "role": "user", "parts": [{"kind": "text"}]}),
    ));
    assert_eq!(field(&error), "message.parts[0].text");

    let error = bad_params(send(
        Version::V0_3,
        json!({"kind": "task", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}),
    ));
    assert_eq!(field(&error), "message.kind");
}

#[test]
fn list_tasks_validates_as_the_v1_spec_example_does() {
    let list =
        |params: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": params});
    let error = bad_params(list(json!({"pageSize": 150})));
    assert_eq!(field(&error), "pageSize");
    assert!(
        error
            .message
            .contains("must be between 1 and 100 inclusive, got 150")
    );
    let error = bad_params(list(json!({"historyLength": -5})));
    assert_eq!(field(&error), "historyLength");
    let error = bad_params(list(json!({"status": "TASK_STATE_RUNNING"})));
    assert_eq!(field(&error), "status");
    assert!(
        error
            .message
            .contains("TASK_STATE_SUBMITTED, TASK_STATE_WORKING"),
        "{}",
        error.message
    );
    let error = bad_params(list(json!({"statusTimestampAfter": "last tuesday"})));
    assert_eq!(field(&error), "statusTimestampAfter");

    let request = rpc::parse_request(
        list(json!({"status": "TASK_STATE_UNSPECIFIED"}))
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let Call::ListTasks(params) = request.call().unwrap() else {
        panic!()
    };
    assert_eq!(params.status, None, "unspecified is no filter");
    assert_eq!(params.effective_page_size(), 50);
}

#[test]
fn a2a_errors_carry_their_error_info() {
    let response = rpc::error(&json!(2), &RpcError::task_not_found("nonexistent-task-id"));
    assert_eq!(
        response,
        json!({
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32001,
                "message": "Task not found: \"nonexistent-task-id\"",
                "data": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "nonexistent-task-id"}
                }]
            }
        })
    );
    let reasons = [
        (
            RpcError::task_not_cancelable("t", TaskState::Completed),
            "TASK_NOT_CANCELABLE",
        ),
        (
            RpcError::unsupported_operation("streaming is off"),
            "UNSUPPORTED_OPERATION",
        ),
        (
            RpcError::content_type_not_supported("image/gif"),
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            RpcError::invalid_agent_response("bad"),
            "INVALID_AGENT_RESPONSE",
        ),
        (
            RpcError::version_not_supported("0.5"),
            "VERSION_NOT_SUPPORTED",
        ),
    ];
    for (error, reason) in reasons {
        assert_eq!(error.reason(), Some(reason));
    }
}

#[test]
fn invalid_params_carry_a_bad_request_like_the_v1_spec_example() {
    let error = bad_params(send(
        Version::V1_0,
        json!({"messageId": "m", "role": "ROLE_USER", "parts": []}),
    ));
    assert_eq!(
        error.data,
        Some(json!([{
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "message.parts", "description": "at least one part is required"}]
        }]))
    );
}
