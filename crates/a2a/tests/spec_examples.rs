//! The specifications' own JSON examples, read into the model. Quoted verbatim from
//! `a2a-v1.0.1-specification.md` and `a2a-v0.3.0-specification.md`; where an example breaks its
//! own spec, the test shows the error a client would get.

use murmur_testkit::a2a_schema as common;

use murmur_a2a::rpc::{self, Call};
use murmur_a2a::*;
use serde_json::{Value, json};

fn v(text: &str) -> Value {
    serde_json::from_str(text).expect("the example is JSON")
}

/// Wraps REST-style params (the v1 examples in §6 are HTTP+JSON bodies) in a JSON-RPC request.
fn jsonrpc(method: &str, params: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": v(params)})
        .to_string()
        .into_bytes()
}

// --- A2A 1.0 -------------------------------------------------------------------------------

/// v1.0 §6.1, request and response.
#[test]
fn v1_basic_task_execution() {
    let request = rpc::parse_request(&jsonrpc(
        "SendMessage",
        r#"{
  "message": {
    "role": "ROLE_USER",
    "parts": [{"text": "What is the weather today?"}],
    "messageId": "msg-uuid"
  }
}"#,
    ))
    .unwrap();
    let Call::SendMessage(params) = request.call().unwrap() else {
        panic!()
    };
    assert_eq!(params.message.role, Role::User);
    assert_eq!(params.message.joined_text(), "What is the weather today?");
    assert!(params.blocking());

    let response = v(r#"{
  "task": {
    "id": "task-uuid",
    "contextId": "context-uuid",
    "status": {"state": "TASK_STATE_COMPLETED"},
    "artifacts": [{
      "artifactId": "artifact-uuid",
      "name": "Weather Report",
      "parts": [{"text": "Today will be sunny with a high of 75°F"}]
    }]
  }
}"#);
    let SendMessageResult::Task(task) =
        SendMessageResult::from_wire(Version::V1_0, &response).unwrap()
    else {
        panic!()
    };
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.artifacts[0].name.as_deref(), Some("Weather Report"));
    assert_eq!(
        task.artifacts[0].parts[0],
        Part::text("Today will be sunny with a high of 75°F")
    );
    // Written back, it is the same JSON.
    assert_eq!(
        SendMessageResult::Task(task).to_wire(Version::V1_0),
        response
    );
}

/// v1.0 §6.2: the SSE events leave out ids the proto requires; they are still read.
#[test]
fn v1_streaming_events() {
    let events = [
        r#"{"task": {"id": "task-uuid", "status": {"state": "TASK_STATE_WORKING"}}}"#,
        r##"{"artifactUpdate": {"taskId": "task-uuid", "artifact": {"parts": [{"text": "# Climate Change Report\n\n"}]}}}"##,
        r#"{"statusUpdate": {"taskId": "task-uuid", "status": {"state": "TASK_STATE_COMPLETED"}}}"#,
    ];
    let events: Vec<StreamEvent> = events
        .iter()
        .map(|event| StreamEvent::from_wire(Version::V1_0, &v(event)).unwrap())
        .collect();
    assert!(
        matches!(&events[0], StreamEvent::Task(task) if task.status.state == TaskState::Working)
    );
    let StreamEvent::ArtifactUpdate(update) = &events[1] else {
        panic!()
    };
    assert_eq!(
        update.artifact.parts[0],
        Part::text("# Climate Change Report\n\n")
    );
    assert_eq!(update.artifact.artifact_id, "");
    assert!(!events[0].ends_stream() && !events[1].ends_stream() && events[2].ends_stream());
    assert!(
        events
            .iter()
            .all(|event| event.task_id() == Some("task-uuid"))
    );
}

/// v1.0 §6.3: input required, then the follow-up on the same task.
#[test]
fn v1_multi_turn() {
    let response = v(r#"{
  "task": {
    "id": "task-uuid",
    "status": {
      "state": "TASK_STATE_INPUT_REQUIRED",
      "message": {
        "role": "ROLE_AGENT",
        "parts": [{"text": "I need more details. Where would you like to fly from and to?"}]
      }
    }
  }
}"#);
    let SendMessageResult::Task(task) =
        SendMessageResult::from_wire(Version::V1_0, &response).unwrap()
    else {
        panic!()
    };
    assert!(task.status.state.is_interrupted());
    let question = task.status.message.unwrap();
    assert_eq!(question.role, Role::Agent);
    assert!(question.joined_text().starts_with("I need more details"));

    let request = rpc::parse_request(&jsonrpc(
        "SendMessage",
        r#"{
  "message": {
    "taskId": "task-uuid",
    "role": "ROLE_USER",
    "parts": [{"text": "From San Francisco to New York"}],
    "messageId": "msg-2"
  }
}"#,
    ))
    .unwrap();
    let params = rpc::send_params(&request).unwrap();
    assert_eq!(params.message.task_id.as_deref(), Some("task-uuid"));
}

/// v1.0 §6.5: listing tasks.
#[test]
fn v1_list_tasks_response() {
    let response = v(r#"{
  "tasks": [
    {
      "id": "789abc-def0-1234-5678-9abcdef01234",
      "contextId": "another-context-id",
      "status": {
        "state": "TASK_STATE_WORKING",
        "message": {
          "role": "ROLE_AGENT",
          "parts": [
            {
              "text": "Processing your document analysis..."
            }
          ],
          "messageId": "msg-status-update"
        },
        "timestamp": "2024-03-15T10:20:00Z"
      }
    }
  ],
  "totalSize": 1,
  "pageSize": 20,
  "nextPageToken": ""
}"#);
    let list = ListTasksResult::from_wire(Version::V1_0, &response).unwrap();
    assert_eq!(
        (
            list.total_size,
            list.page_size,
            list.next_page_token.as_str()
        ),
        (1, 20, "")
    );
    assert_eq!(
        list.tasks[0].status.timestamp.as_deref(),
        Some("2024-03-15T10:20:00Z")
    );
    common::assert_v1("ListTasksResponse", &list.to_wire(Version::V1_0));
}

/// v1.0 §6.7: the request is not JSON (a missing comma, a trailing comma); the response is.
#[test]
fn v1_file_exchange() {
    let request = br#"{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
  "message": {
    "role": "ROLE_USER",
    "parts": [
      {
        "text": "Analyze this image and highlight any faces."
      },
      {
        "raw": "iVBORw0KGgoAAAANSUhEUgAAAAUA..."
        "filename": "input_image.png",
        "mediaType": "image/png",
      }
    ],
    "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
  }
}}"#;
    let rejected = rpc::parse_request(request).unwrap_err();
    assert_eq!(rejected.error.code, -32700);
    assert!(
        rejected.error.message.contains("line 10"),
        "{}",
        rejected.error.message
    );

    let response = v(r#"{
  "task": {
    "id": "43667960-d455-4453-b0cf-1bae4955270d",
    "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
    "status": {
      "state": "TASK_STATE_COMPLETED",
      "timestamp": "2024-03-15T12:05:00Z"
    },
    "artifacts": [
      {
        "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
        "name": "processed_image_with_faces.png",
        "parts": [
          {
            "url": "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
            "filename": "output.png",
            "mediaType": "image/png"
          }
        ]
      }
    ]
  }
}"#);
    let SendMessageResult::Task(task) =
        SendMessageResult::from_wire(Version::V1_0, &response).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        task.artifacts[0].parts[0],
        Part::file_uri(
            "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
            Some("output.png".into()),
            Some("image/png".into()),
        )
    );
}

/// v1.0 §6.8: a text part with metadata hinting at the wanted schema.
#[test]
fn v1_structured_data_request() {
    let request = rpc::parse_request(&jsonrpc(
        "SendMessage",
        r#"{
  "message": {
    "role": "ROLE_USER",
    "parts": [
      {
        "text": "Show me a list of my open IT tickets",
        "metadata": {
          "mediaType": "application/json",
          "schema": {
            "type": "array",
            "items": {
              "type": "object",
              "properties": {
                "ticketNumber": { "type": "string" },
                "description": { "type": "string" }
              }
            }
          }
        }
      }
    ],
    "messageId": "85b26db5-ffbb-4278-a5da-a7b09dea1b47"
  }
}"#,
    ))
    .unwrap();
    let params = rpc::send_params(&request).unwrap();
    let metadata = params.message.parts[0].metadata.as_ref().unwrap();
    assert_eq!(metadata["schema"]["type"], "array");
}

/// v1.0 §9.4: the JSON-RPC requests, as sent.
#[test]
fn v1_json_rpc_requests() {
    let get = rpc::parse_request(
        br#"{
  "jsonrpc": "2.0",
  "id": 2,
  "method": "GetTask",
  "params": {
    "id": "task-uuid",
    "historyLength": 10
  }
}"#,
    )
    .unwrap();
    assert_eq!(get.id, json!(2));
    assert_eq!(
        get.call().unwrap(),
        Call::GetTask(GetTaskParams {
            id: "task-uuid".into(),
            history_length: Some(10)
        })
    );

    let list = rpc::parse_request(
        br#"{
  "jsonrpc": "2.0",
  "id": 3,
  "method": "ListTasks",
  "params": {
    "contextId": "context-uuid",
    "status": "TASK_STATE_WORKING",
    "pageSize": 50,
    "pageToken": "cursor-token"
  }
}"#,
    )
    .unwrap();
    let Call::ListTasks(params) = list.call().unwrap() else {
        panic!()
    };
    assert_eq!(params.context_id.as_deref(), Some("context-uuid"));
    assert_eq!(params.status, Some(TaskState::Working));
    assert_eq!(
        (params.page_size, params.page_token.as_deref()),
        (Some(50), Some("cursor-token"))
    );

    let cancel = rpc::parse_request(
        br#"{
  "jsonrpc": "2.0",
  "id": 4,
  "method": "CancelTask",
  "params": {
    "id": "task-uuid"
  }
}"#,
    )
    .unwrap();
    assert_eq!(
        cancel.call().unwrap(),
        Call::CancelTask(CancelTaskParams {
            id: "task-uuid".into(),
            metadata: None
        })
    );

    let subscribe = rpc::parse_request(
        br#"{
  "jsonrpc": "2.0",
  "id": 5,
  "method": "SubscribeToTask",
  "params": {
    "id": "task-uuid"
  }
}"#,
    )
    .unwrap();
    assert_eq!(
        subscribe.call().unwrap(),
        Call::SubscribeToTask(SubscribeParams {
            id: "task-uuid".into()
        })
    );

    let card = rpc::parse_request(
        br#"{
  "jsonrpc": "2.0",
  "id": 6,
  "method": "GetExtendedAgentCard"
}"#,
    )
    .unwrap();
    assert_eq!(card.call().unwrap(), Call::GetExtendedAgentCard);
}

/// v1.0 §9.5: the error responses, as a client reads them.
#[test]
fn v1_error_responses() {
    let response = rpc::parse_response(
        br#"{
  "jsonrpc": "2.0",
  "id": 1,
  "error": {
    "code": -32602,
    "message": "Invalid parameters",
    "data": [
      {
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [
          {
            "field": "message.parts",
            "description": "At least one part is required"
          }
        ]
      }
    ]
  }
}"#,
    )
    .unwrap();
    let error = response.outcome.unwrap_err();
    assert_eq!(error.code, -32602);
    assert_eq!(
        error.field_violations(),
        [(
            "message.parts".to_string(),
            "At least one part is required".to_string()
        )]
    );

    let response = rpc::parse_response(
        br#"{
  "jsonrpc": "2.0",
  "id": 2,
  "error": {
    "code": -32001,
    "message": "Task not found",
    "data": [
      {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org",
        "metadata": {
          "taskId": "nonexistent-task-id",
          "timestamp": "2025-11-09T10:30:00.000Z"
        }
      }
    ]
  }
}"#,
    )
    .unwrap();
    let error = response.outcome.unwrap_err();
    assert_eq!(
        (error.code, error.reason()),
        (-32001, Some("TASK_NOT_FOUND"))
    );
    // Ours has the same shape.
    let ours = RpcError::task_not_found("nonexistent-task-id");
    assert_eq!(
        ours.data.as_ref().unwrap()[0]["reason"],
        error.data.as_ref().unwrap()[0]["reason"]
    );
    assert_eq!(
        ours.data.as_ref().unwrap()[0]["domain"],
        error.data.as_ref().unwrap()[0]["domain"]
    );
}

/// v1.0 §8.5: the sample agent card.
#[test]
fn v1_sample_agent_card() {
    let card = v(r#"{
  "name": "GeoSpatial Route Planner Agent",
  "description": "Provides advanced route planning, traffic analysis, and custom map generation services. This agent can calculate optimal routes, estimate travel times considering real-time traffic, and create personalized maps with points of interest.",
  "supportedInterfaces": [
    {"url": "https://georoute-agent.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    {"url": "https://georoute-agent.example.com/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    {"url": "https://georoute-agent.example.com/a2a/json", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
  ],
  "provider": {
    "organization": "Example Geo Services Inc.",
    "url": "https://www.examplegeoservices.com"
  },
  "iconUrl": "https://georoute-agent.example.com/icon.png",
  "version": "1.2.0",
  "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
  "capabilities": {
    "streaming": true,
    "pushNotifications": true,
    "extendedAgentCard": true
  },
  "securitySchemes": {
    "google": {
      "openIdConnectSecurityScheme": {
        "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
      }
    }
  },
  "security": [{ "google": ["openid", "profile", "email"] }],
  "defaultInputModes": ["application/json", "text/plain"],
  "defaultOutputModes": ["application/json", "image/png"],
  "skills": [
    {
      "id": "route-optimizer-traffic",
      "name": "Traffic-Aware Route Optimizer",
      "description": "Calculates the optimal driving route between two or more locations, taking into account real-time traffic conditions, road closures, and user preferences (e.g., avoid tolls, prefer highways).",
      "tags": ["maps", "routing", "navigation", "directions", "traffic"],
      "examples": [
        "Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls.",
        "{\"origin\": {\"lat\": 37.422, \"lng\": -122.084}, \"destination\": {\"lat\": 37.7749, \"lng\": -122.4194}, \"preferences\": [\"avoid_ferries\"]}"
      ],
      "inputModes": ["application/json", "text/plain"],
      "outputModes": [
        "application/json",
        "application/vnd.geo+json",
        "text/html"
      ]
    },
    {
      "id": "custom-map-generator",
      "name": "Personalized Map Generator",
      "description": "Creates custom map images or interactive map views based on user-defined points of interest, routes, and style preferences. Can overlay data layers.",
      "tags": ["maps", "customization", "visualization", "cartography"],
      "examples": [
        "Generate a map of my upcoming road trip with all planned stops highlighted.",
        "Show me a map visualizing all coffee shops within a 1-mile radius of my current location."
      ],
      "inputModes": ["application/json"],
      "outputModes": [
        "image/png",
        "image/jpeg",
        "application/json",
        "text/html"
      ]
    }
  ],
  "signatures": [
    {
      "protected": "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vYWdlbnQvandrcy5qc29uIn0",
      "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6HXoZKHv4GtHgKQ"
    }
  ]
}"#);
    let card = AgentCard::from_wire(Version::V1_0, &card).unwrap();
    assert_eq!(
        card.url(),
        Some("https://georoute-agent.example.com/a2a/v1")
    );
    assert_eq!(card.interfaces.len(), 3);
    assert_eq!(card.interfaces[1].protocol_binding, "GRPC");
    assert!(card.capabilities.streaming && card.capabilities.extended_agent_card);
    assert_eq!(card.skills.len(), 2);
    assert_eq!(card.skills[0].tags[0], "maps");
    assert!(card.problems().is_empty());
    // Re-served as 0.3 it names all three transports.
    let v03 = card.to_wire(Version::V0_3);
    assert_eq!(v03["additionalInterfaces"].as_array().unwrap().len(), 3);
    common::assert_v03("AgentCard", &v03);
}

// --- A2A 0.3 -------------------------------------------------------------------------------

/// v0.3 §9.2: message/send, answered with a task and with a direct message.
#[test]
fn v03_basic_execution() {
    let request = rpc::parse_request(
        br#"{
     "jsonrpc": "2.0",
     "id": 1,
     "method": "message/send",
     "params": {
       "message": {
         "role": "user",
         "parts": [
           {
             "kind": "text",
             "text": "tell me a joke"
           }
         ],
         "messageId": "9229e770-767c-417b-a0b0-f0741243c589"
       },
       "metadata": {}
     }
   }"#,
    )
    .unwrap();
    assert_eq!(request.version, Version::V0_3);
    let params = rpc::send_params(&request).unwrap();
    assert_eq!(params.message.joined_text(), "tell me a joke");
    assert_eq!(params.metadata, Some(Metadata::new()));

    let response = rpc::parse_response(
        br#"{
     "jsonrpc": "2.0",
     "id": 1,
     "result": {
       "id": "363422be-b0f9-4692-a24d-278670e7c7f1",
       "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
       "status": {
         "state": "completed"
       },
       "artifacts": [
         {
           "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
           "name": "joke",
           "parts": [
             {
               "kind": "text",
               "text": "Why did the chicken cross the road? To get to the other side!"
             }
           ]
         }
       ],
       "history": [
         {
           "role": "user",
           "parts": [
             {
               "kind": "text",
               "text": "tell me a joke"
             }
           ],
           "messageId": "9229e770-767c-417b-a0b0-f0741243c589",
           "taskId": "363422be-b0f9-4692-a24d-278670e7c7f1",
           "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4"
         }
       ],
       "kind": "task",
       "metadata": {}
     }
   }"#,
    )
    .unwrap();
    let result: SendMessageResult =
        rpc::read_result(Version::V0_3, &response.outcome.unwrap()).unwrap();
    let SendMessageResult::Task(task) = result else {
        panic!()
    };
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.history[0].role, Role::User);
    assert_eq!(
        task.history[0].task_id.as_deref(),
        Some("363422be-b0f9-4692-a24d-278670e7c7f1")
    );

    // The direct reply leaves out its role: read as the agent's.
    let response = v(r#"{
       "messageId": "363422be-b0f9-4692-a24d-278670e7c7f1",
       "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
       "parts": [
         {
           "kind": "text",
           "text": "Why did the chicken cross the road? To get to the other side!"
         }
       ],
       "kind": "message",
       "metadata": {}
     }"#);
    let SendMessageResult::Message(reply) =
        SendMessageResult::from_wire(Version::V0_3, &response).unwrap()
    else {
        panic!()
    };
    assert_eq!(reply.role, Role::Agent);
    assert!(reply.joined_text().starts_with("Why did the chicken"));
}

/// v0.3 §9.3: the request's file part says `data` where the schema says `bytes`, so it is
/// refused naming the part; the SSE events are read.
#[test]
fn v03_streaming() {
    let request = rpc::parse_request(
        br#"{
     "jsonrpc": "2.0",
     "id": 1,
     "method": "message/stream",
     "params": {
       "message": {
         "role": "user",
         "parts": [
           {
             "kind": "text",
             "text": "write a long paper describing the attached pictures"
           },
           {
             "kind": "file",
             "file": {
               "mimeType": "image/png",
               "data": "<base64-encoded-content>"
             }
           }
         ],
         "messageId": "bbb7dee1-cf5c-4683-8a6f-4114529da5eb"
       },
       "metadata": {}
     }
   }"#,
    )
    .unwrap();
    assert!(request.method.is_streaming());
    let error = rpc::send_params(&request).unwrap_err();
    assert_eq!(error.code, -32602);
    assert_eq!(error.field_violations()[0].0, "message.parts[1].file");
    assert!(
        error.message.contains("needs bytes (base64) or a uri"),
        "{}",
        error.message
    );

    let events = [
        r#"{
       "id": "225d6247-06ba-4cda-a08b-33ae35c8dcfa",
       "contextId": "05217e44-7e9f-473e-ab4f-2c2dde50a2b1",
       "status": {
         "state": "submitted",
         "timestamp":"2025-04-02T16:59:25.331844"
       },
       "history": [
         {
           "role": "user",
           "parts": [
             {
               "kind": "text",
               "text": "write a long paper describing the attached pictures"
             }
           ],
           "messageId": "bbb7dee1-cf5c-4683-8a6f-4114529da5eb",
           "taskId": "225d6247-06ba-4cda-a08b-33ae35c8dcfa",
           "contextId": "05217e44-7e9f-473e-ab4f-2c2dde50a2b1"
         }
       ],
       "kind": "task",
       "metadata": {}
     }"#,
        r#"{
       "taskId": "225d6247-06ba-4cda-a08b-33ae35c8dcfa",
       "contextId": "05217e44-7e9f-473e-ab4f-2c2dde50a2b1",
       "artifact": {
         "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
         "parts": [
           {"kind":"text", "text": "<section 1...>"}
         ]
       },
       "append": false,
       "lastChunk": false,
       "kind":"artifact-update"
     }"#,
        r#"{
       "taskId": "225d6247-06ba-4cda-a08b-33ae35c8dcfa",
       "contextId": "05217e44-7e9f-473e-ab4f-2c2dde50a2b1",
       "artifact": {
         "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
         "parts": [
           {"kind":"text", "text": "<section 3...>"}
         ]
       },
       "append": true,
       "lastChunk": true,
       "kind":"artifact-update"
     }"#,
        r#"{
       "taskId": "225d6247-06ba-4cda-a08b-33ae35c8dcfa",
       "contextId": "05217e44-7e9f-473e-ab4f-2c2dde50a2b1",
       "status": {
         "state": "completed",
         "timestamp":"2025-04-02T16:59:35.331844"
       },
       "final": true,
       "kind":"status-update"
     }"#,
    ];
    let events: Vec<StreamEvent> = events
        .iter()
        .map(|event| StreamEvent::from_wire(Version::V0_3, &v(event)).unwrap())
        .collect();
    let StreamEvent::Task(task) = &events[0] else {
        panic!()
    };
    assert_eq!(task.status.state, TaskState::Submitted);
    assert_eq!(
        task.status.timestamp.as_deref(),
        Some("2025-04-02T16:59:25.331844")
    );
    let StreamEvent::ArtifactUpdate(last) = &events[2] else {
        panic!()
    };
    assert!(last.append && last.last_chunk);
    let StreamEvent::StatusUpdate(done) = &events[3] else {
        panic!()
    };
    assert!(done.is_final && done.status.state == TaskState::Completed);
    assert_eq!(events.iter().filter(|event| event.ends_stream()).count(), 1);
}

/// v0.3 §9.4: the first request puts `messageId` beside the message instead of inside it, and
/// is refused naming the field; the rest of the exchange reads.
#[test]
fn v03_multi_turn() {
    let first = rpc::parse_request(
        br#"{
     "jsonrpc": "2.0",
     "id": "req-003",
     "method": "message/send",
     "params": {
       "message": {
         "role": "user",
         "parts": [{ "kind": "text", "text": "I'd like to book a flight." }]
       },
       "messageId": "c53ba666-3f97-433c-a87b-6084276babe2"
     }
   }"#,
    )
    .unwrap();
    let error = first.call().unwrap_err();
    assert_eq!(
        (error.code, error.field_violations()[0].0.as_str()),
        (-32602, "message.messageId")
    );
    assert_eq!(rpc::error(&first.id, &error)["id"], "req-003");

    let answer = v(r#"{
       "id": "3f36680c-7f37-4a5f-945e-d78981fafd36",
       "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
       "status": {
         "state": "input-required",
         "message": {
           "role": "agent",
           "parts": [
             {
               "kind": "text",
               "text": "Sure, I can help with that! Where would you like to fly to, and from where? Also, what are your preferred travel dates?"
             }
           ],
           "messageId": "c2e1b2dd-f200-4b04-bc22-1b0c65a1aad2",
           "taskId": "3f36680c-7f37-4a5f-945e-d78981fafd36",
           "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4"
         },
         "timestamp": "2024-03-15T10:10:00Z"
       },
       "history": [
         {
           "role": "user",
           "parts": [
             {
               "kind": "text",
               "text": "I'd like to book a flight."
             }
           ],
           "messageId": "c53ba666-3f97-433c-a87b-6084276babe2",
           "taskId": "3f36680c-7f37-4a5f-945e-d78981fafd36",
           "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4"
         }
       ],
       "kind": "task"
     }"#);
    let task = Task::from_wire(Version::V0_3, &answer).unwrap();
    assert_eq!(task.status.state, TaskState::InputRequired);
    // Written back as 0.3, it is the example plus the `kind` its messages lack (which the
    // schema requires: the example itself does not validate, ours does).
    assert!(!common::is_v03("Task", &answer));
    let mut expected = answer.clone();
    expected["status"]["message"]["kind"] = json!("message");
    expected["history"][0]["kind"] = json!("message");
    assert_eq!(task.to_wire(Version::V0_3), expected);
    common::assert_v03("Task", &task.to_wire(Version::V0_3));

    let follow_up = rpc::parse_request(br#"{
     "jsonrpc": "2.0",
     "id": "req-004",
     "method": "message/send",
     "params": {
       "message": {
         "role": "user",
         "parts": [
           {
             "kind": "text",
             "text": "I want to fly from New York (JFK) to London (LHR) around October 10th, returning October 17th."
           }
         ],
         "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
         "taskId": "3f36680c-7f37-4a5f-945e-d78981fafd36",
         "messageId": "0db1d6c4-3976-40ed-b9b8-0043ea7a03d3"
       },
       "configuration": {
         "blocking": true
       }
     }
   }"#)
    .unwrap();
    let params = rpc::send_params(&follow_up).unwrap();
    assert_eq!(
        params.message.task_id.as_deref(),
        Some("3f36680c-7f37-4a5f-945e-d78981fafd36")
    );
    assert!(params.blocking());

    let done = v(r#"{
       "id": "3f36680c-7f37-4a5f-945e-d78981fafd36",
       "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
       "status": {
         "state": "completed",
         "message": {
           "role": "agent",
           "parts": [
             {
               "kind": "text",
               "text": "Okay, I've found a flight for you. Confirmation XYZ123. Details are in the artifact."
             }
           ]
         }
       },
       "artifacts": [
         {
           "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
           "name": "FlightItinerary.json",
           "parts": [
             {
               "kind": "data",
               "data": {
                 "confirmationId": "XYZ123",
                 "from": "JFK",
                 "to": "LHR",
                 "departure": "2024-10-10T18:00:00Z",
                 "arrival": "2024-10-11T06:00:00Z",
                 "returnDeparture": "..."
               }
             }
           ]
         }
       ],
       "kind": "task",
       "metadata": {}
     }"#);
    let task = Task::from_wire(Version::V0_3, &done).unwrap();
    assert!(task.status.state.is_terminal());
    let PartContent::Data(data) = &task.artifacts[0].parts[0].content else {
        panic!()
    };
    assert_eq!(data["confirmationId"], "XYZ123");
    // The same task, re-served to a 1.0 client.
    common::assert_v1("Task", &{
        let mut task = task.clone();
        // The example's status message has no messageId, which 1.0 requires.
        task.status.message.as_mut().unwrap().message_id = "status-1".into();
        task.to_wire(Version::V1_0)
    });
}

/// v0.3 §5.7: the sample agent card.
#[test]
fn v03_sample_agent_card() {
    let card = v(r#"{
  "protocolVersion": "0.2.9",
  "name": "GeoSpatial Route Planner Agent",
  "description": "Provides advanced route planning, traffic analysis, and custom map generation services. This agent can calculate optimal routes, estimate travel times considering real-time traffic, and create personalized maps with points of interest.",
  "url": "https://georoute-agent.example.com/a2a/v1",
  "preferredTransport": "JSONRPC",
  "additionalInterfaces" : [
    {"url": "https://georoute-agent.example.com/a2a/v1", "transport": "JSONRPC"},
    {"url": "https://georoute-agent.example.com/a2a/grpc", "transport": "GRPC"},
    {"url": "https://georoute-agent.example.com/a2a/json", "transport": "HTTP+JSON"}
  ],
  "provider": {
    "organization": "Example Geo Services Inc.",
    "url": "https://www.examplegeoservices.com"
  },
  "iconUrl": "https://georoute-agent.example.com/icon.png",
  "version": "1.2.0",
  "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
  "capabilities": {
    "streaming": true,
    "pushNotifications": true,
    "stateTransitionHistory": false
  },
  "securitySchemes": {
    "google": {
      "type": "openIdConnect",
      "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
    }
  },
  "security": [{ "google": ["openid", "profile", "email"] }],
  "defaultInputModes": ["application/json", "text/plain"],
  "defaultOutputModes": ["application/json", "image/png"],
  "skills": [
    {
      "id": "route-optimizer-traffic",
      "name": "Traffic-Aware Route Optimizer",
      "description": "Calculates the optimal driving route between two or more locations, taking into account real-time traffic conditions, road closures, and user preferences (e.g., avoid tolls, prefer highways).",
      "tags": ["maps", "routing", "navigation", "directions", "traffic"],
      "inputModes": ["application/json", "text/plain"],
      "outputModes": [
        "application/json",
        "application/vnd.geo+json",
        "text/html"
      ]
    }
  ],
  "supportsAuthenticatedExtendedCard": true
}"#);
    let card = AgentCard::from_wire(Version::V0_3, &card).unwrap();
    let transports: Vec<(&str, &str)> = card
        .interfaces
        .iter()
        .map(|interface| {
            (
                interface.protocol_binding.as_str(),
                interface.protocol_version.as_str(),
            )
        })
        .collect();
    assert_eq!(
        transports,
        [("JSONRPC", "0.2"), ("GRPC", "0.2"), ("HTTP+JSON", "0.2")]
    );
    assert!(card.capabilities.extended_agent_card);
    assert!(!card.capabilities.state_transition_history);
    assert_eq!(card.skills[0].output_modes.len(), 3);
    // Re-served to a 1.0 client it lists the same three interfaces.
    let v1 = card.to_wire(Version::V1_0);
    assert_eq!(v1["supportedInterfaces"].as_array().unwrap().len(), 3);
    common::assert_v1("AgentCard", &v1);
}
