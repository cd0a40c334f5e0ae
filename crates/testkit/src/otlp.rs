//! Reading what an OTLP/HTTP exporter sent: a [`RecordingServer`](crate::RecordingServer)
//! answering `200` with an empty body is a receiver (an empty body is an empty
//! `ExportTraceServiceResponse`), and this module decodes each request it recorded with the
//! `opentelemetry-proto` types, as a collector would.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::Value;

use crate::RecordedRequest;

/// One span as the receiver decoded it, ids in lowercase hex.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// The OTLP `SpanKind` number (1 internal, 2 server, 3 client).
    pub kind: i32,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: BTreeMap<String, Value>,
    /// The names of the span's events, in order, with their attributes.
    pub events: Vec<(String, BTreeMap<String, Value>)>,
    /// `(trace_id, span_id)` of each link.
    pub links: Vec<(String, String)>,
    /// The OTLP status code (0 unset, 1 ok, 2 error) and message.
    pub status: (i32, String),
    /// The attributes of the resource the span came with.
    pub resource: BTreeMap<String, Value>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }
}

fn value(any: Option<&AnyValue>) -> Value {
    match any.and_then(|any| any.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Value::from(s.clone()),
        Some(any_value::Value::BoolValue(b)) => Value::from(*b),
        Some(any_value::Value::IntValue(i)) => Value::from(*i),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(|item| value(Some(item))).collect())
        }
        Some(other) => Value::from(format!("{other:?}")),
        None => Value::Null,
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter()
        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
        .collect()
}

/// Every span in `requests`, which must all be OTLP/HTTP protobuf trace exports: a `POST` to
/// `/v1/traces` with `content-type: application/x-protobuf` whose body decodes. Panics (this
/// is a test's receiver) on anything else, naming the request.
pub fn spans(requests: &[RecordedRequest]) -> Vec<ReceivedSpan> {
    let mut found = Vec::new();
    for request in requests {
        assert_eq!(request.method, "POST", "{request:?}");
        assert_eq!(request.path, "/v1/traces", "{request:?}");
        let content_type = request
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.as_str());
        assert_eq!(content_type, Some("application/x-protobuf"));
        let export = ExportTraceServiceRequest::decode(request.body.as_slice())
            .expect("an ExportTraceServiceRequest");
        for resource_spans in export.resource_spans {
            let resource = resource_spans
                .resource
                .as_ref()
                .map(|resource| attributes(&resource.attributes))
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    found.push(ReceivedSpan {
                        trace_id: hex::encode(&span.trace_id),
                        span_id: hex::encode(&span.span_id),
                        parent_span_id: hex::encode(&span.parent_span_id),
                        name: span.name.clone(),
                        kind: span.kind,
                        start_unix_nano: span.start_time_unix_nano,
                        end_unix_nano: span.end_time_unix_nano,
                        attributes: attributes(&span.attributes),
                        events: span
                            .events
                            .iter()
                            .map(|event| (event.name.clone(), attributes(&event.attributes)))
                            .collect(),
                        links: span
                            .links
                            .iter()
                            .map(|link| (hex::encode(&link.trace_id), hex::encode(&link.span_id)))
                            .collect(),
                        status: span
                            .status
                            .as_ref()
                            .map(|status| (status.code, status.message.clone()))
                            .unwrap_or_default(),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
    found
}
