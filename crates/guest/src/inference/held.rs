//! A conversation the driver holds in its own instance, so a turn costs what is new in it, not
//! the whole conversation (`docs/driver-protocol.md`, "A conversation held in the driver").
//!
//! What a driver whose [`Provider`] names a [`Provider::messages_key`] can rely on:
//!
//! - **The body is the same as if built whole.** The provider-shaped messages of every call
//!   so far are kept serialised; a call appends the request's new messages, rendered, and
//!   after a successful answer the answer itself, as the runtime will store it. The body is
//!   [`Provider::request_body`] of the request without messages, with the held messages
//!   spliced into its array at the key: byte for byte what serialising the whole body gives.
//! - **Each answer is named by a fresh id** beginning with `instance:`, returned as its
//!   `continuation_id`; the runtime sends it back, with only what came after, to this
//!   instance only.
//! - **An id this instance does not hold is refused** as `invalid_request`, never guessed at:
//!   nothing but a whole conversation starts a held one. A call that fails keeps nothing.

use std::cell::{Cell, RefCell};

use serde_json::Value;

use super::provider::Provider;
use super::types::{InferenceError, Message, Request, Response};
use murmur_protocol::inference::INSTANCE_CONTINUATION_PREFIX;

/// The held conversation: its id, and its messages in the provider's shape, serialised and
/// joined by commas (the inside of the array, without its brackets).
struct Held {
    id: String,
    rendered: Vec<u8>,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
    static ANSWERS: Cell<u64> = const { Cell::new(0) };
}

/// The conversation of one call, until its answer is kept.
pub struct Conversation {
    rendered: Vec<u8>,
}

/// The body of `request` for `provider`, whose messages live at `key`, and the conversation
/// to keep once the call is answered. Takes the held conversation: a call that fails before
/// [`keep`] leaves nothing held.
pub fn body<P: Provider>(
    provider: &P,
    key: &str,
    request: &mut Request,
) -> Result<(Vec<u8>, Conversation), InferenceError> {
    let held = HELD.with(|held| held.borrow_mut().take());
    let mut rendered = match (request.continuation_id.take(), held) {
        (None, _) => Vec::new(),
        (Some(id), Some(held)) if id == held.id => held.rendered,
        (Some(id), _) => {
            return Err(InferenceError::invalid_request(format!(
                "continuation `{id}` is not held by this driver instance: send the whole conversation"
            )));
        }
    };
    let messages = std::mem::take(&mut request.messages);
    append(&mut rendered, provider.render_messages(&messages))?;
    let Value::Object(skeleton) = provider.request_body(request)? else {
        return Err(InferenceError::invalid_request(
            "the driver's request body is not a JSON object",
        ));
    };
    let mut body = Vec::with_capacity(rendered.len() + 4096);
    body.push(b'{');
    let mut spliced = false;
    for (at, (name, value)) in skeleton.iter().enumerate() {
        if at > 0 {
            body.push(b',');
        }
        write(&mut body, name)?;
        body.push(b':');
        if name != key {
            write(&mut body, value)?;
            continue;
        }
        let Value::Array(head) = value else {
            return Err(InferenceError::invalid_request(format!(
                "the driver's request body holds no array at `{key}`"
            )));
        };
        body.push(b'[');
        for (at, message) in head.iter().enumerate() {
            if at > 0 {
                body.push(b',');
            }
            write(&mut body, message)?;
        }
        if !head.is_empty() && !rendered.is_empty() {
            body.push(b',');
        }
        body.extend_from_slice(&rendered);
        body.push(b']');
        spliced = true;
    }
    body.push(b'}');
    if !spliced {
        return Err(InferenceError::invalid_request(format!(
            "the driver's request body has no `{key}`"
        )));
    }
    Ok((body, Conversation { rendered }))
}

/// Keeps `conversation` with `response` appended as the assistant's message, under a fresh
/// id: the one the call returns.
pub fn keep<P: Provider>(
    provider: &P,
    mut conversation: Conversation,
    response: &Response,
) -> Result<String, InferenceError> {
    let answer = Message::Assistant {
        content: response.content.clone(),
    };
    append(
        &mut conversation.rendered,
        provider.render_messages(std::slice::from_ref(&answer)),
    )?;
    let number = ANSWERS.with(|answers| {
        answers.set(answers.get() + 1);
        answers.get()
    });
    let id = format!("{INSTANCE_CONTINUATION_PREFIX}{number}");
    HELD.with(|held| {
        *held.borrow_mut() = Some(Held {
            id: id.clone(),
            rendered: conversation.rendered,
        });
    });
    Ok(id)
}

fn append(rendered: &mut Vec<u8>, messages: Vec<Value>) -> Result<(), InferenceError> {
    for message in &messages {
        if !rendered.is_empty() {
            rendered.push(b',');
        }
        write(rendered, message)?;
    }
    Ok(())
}

fn write(
    out: &mut Vec<u8>,
    value: &(impl serde::Serialize + ?Sized),
) -> Result<(), InferenceError> {
    serde_json::to_writer(out, value)
        .map_err(|e| InferenceError::invalid_request(format!("cannot serialize the request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::types::{Block, Outcome, StopReason};
    use crate::inference::{SseEvent, StreamDecoder};
    use serde_json::{Map, json};

    /// A provider of the Chat shape: a system message first, one message per neutral one.
    struct Listing;

    struct NoStream;

    impl StreamDecoder for NoStream {
        fn on_event(
            &mut self,
            _: &SseEvent,
            _: &mut dyn FnMut(crate::inference::Delta<'_>),
        ) -> Result<(), InferenceError> {
            Ok(())
        }
        fn finish(self) -> Result<Outcome, InferenceError> {
            Err(InferenceError::stream("unused"))
        }
    }

    impl Provider for Listing {
        type Stream = NoStream;
        fn path(&self) -> &str {
            "/v1/x"
        }
        fn request_body(&self, request: &Request) -> Result<Value, InferenceError> {
            let mut body = Map::new();
            body.insert("model".into(), json!(request.model));
            let mut all = vec![json!({"role": "system", "content": request.system})];
            all.extend(self.render_messages(&request.messages));
            body.insert("messages".into(), Value::Array(all));
            body.insert("tools".into(), json!(request.tools.len()));
            Ok(Value::Object(body))
        }
        fn messages_key(&self) -> Option<&str> {
            Some("messages")
        }
        fn render_messages(&self, messages: &[Message]) -> Vec<Value> {
            messages
                .iter()
                .map(|m| json!({"said": m.clone(), "weird": "\"\\\u{2028}"}))
                .collect()
        }
        fn parse_response(&self, _: &[u8]) -> Result<Outcome, InferenceError> {
            Err(InferenceError::stream("unused"))
        }
        fn stream_decoder(&self) -> NoStream {
            NoStream
        }
    }

    fn request(messages: Vec<Message>, continuation: Option<&str>) -> Request {
        Request {
            model: "m".into(),
            system: Some("be brief".into()),
            messages,
            continuation_id: continuation.map(str::to_string),
            ..Request::default()
        }
    }

    fn answer(text: &str) -> Response {
        Response {
            stop_reason: StopReason::EndTurn,
            content: vec![Block::Text { text: text.into() }],
            usage: None,
        }
    }

    #[test]
    fn a_held_conversation_gives_the_body_built_whole_and_refuses_an_id_it_does_not_hold() {
        let user = |text: &str| Message::User {
            content: vec![Block::Text { text: text.into() }],
        };
        // Turn 1: the whole conversation.
        let mut first = request(vec![user("one")], None);
        let (sent, conversation) = body(&Listing, "messages", &mut first).unwrap();
        let whole = |messages: Vec<Message>| {
            serde_json::to_vec(&Listing.request_body(&request(messages, None)).unwrap()).unwrap()
        };
        assert_eq!(sent, whole(vec![user("one")]));
        let id = keep(&Listing, conversation, &answer("two")).unwrap();
        assert!(id.starts_with(INSTANCE_CONTINUATION_PREFIX), "{id}");

        // Turn 2: only what is new, and the body is the whole one.
        let mut second = request(vec![user("three")], Some(&id));
        let (sent, conversation) = body(&Listing, "messages", &mut second).unwrap();
        let assistant = Message::Assistant {
            content: answer("two").content,
        };
        assert_eq!(
            sent,
            whole(vec![user("one"), assistant.clone(), user("three")])
        );
        let next = keep(&Listing, conversation, &answer("four")).unwrap();
        assert_ne!(next, id);

        // The old id, an unknown one, or a provider's: refused, and nothing is held after.
        for stale in [id.as_str(), "instance:999", "resp_1"] {
            let mut again = request(vec![user("five")], Some(stale));
            let refused = body(&Listing, "messages", &mut again).err().unwrap();
            assert_eq!(refused.kind.as_deref(), Some("invalid_request"));
            assert!(refused.message.contains(stale), "{}", refused.message);
        }
        let mut lost = request(vec![user("five")], Some(&next));
        assert!(body(&Listing, "messages", &mut lost).is_err());

        // A whole conversation starts over.
        let mut fresh = request(vec![user("six")], None);
        let (sent, _) = body(&Listing, "messages", &mut fresh).unwrap();
        assert_eq!(sent, whole(vec![user("six")]));
    }

    #[test]
    fn a_body_without_the_named_array_is_an_error_not_a_lost_conversation() {
        let mut request = request(Vec::new(), None);
        let refused = body(&Listing, "input", &mut request).err().unwrap();
        assert!(refused.message.contains("`input`"), "{}", refused.message);
        let refused = body(&Listing, "model", &mut request).err().unwrap();
        assert!(refused.message.contains("no array"), "{}", refused.message);
    }
}
