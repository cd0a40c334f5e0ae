//! A server-sent events parser (the WHATWG `text/event-stream` rules), fed bytes as they
//! arrive.
//!
//! Lines end in `\n`, `\r\n` or `\r`, also when the two bytes of a `\r\n` arrive in different
//! chunks; `event:`, `data:` and `id:` fields are read (one space after the colon dropped),
//! several `data:` lines join with `\n`, `:` lines are comments, a blank line dispatches the
//! event, and an event without data is not dispatched. [`SseParser::finish`] tells a stream
//! that ended on an event boundary from one cut in the middle of an event.
//!
//! ```
//! use murmur_guest::inference::sse::SseParser;
//!
//! let mut parser = SseParser::new();
//! let mut events = parser.push(b"event: ping\ndata: {\"type\"");
//! assert!(events.is_empty());
//! events.extend(parser.push(b": \"ping\"}\r\n\r\n"));
//! assert_eq!(events[0].event, "ping");
//! assert_eq!(events[0].data, r#"{"type": "ping"}"#);
//! assert!(parser.finish().is_ok());
//! ```

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when the event had none.
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
    /// The last `id:` seen so far in the stream, if any.
    pub id: Option<String>,
}

/// The stream ended in the middle of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncompleteStream;

impl std::fmt::Display for IncompleteStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the event stream ended in the middle of an event")
    }
}

impl std::error::Error for IncompleteStream {}

/// An incremental SSE parser. Feed it with [`push`](Self::push), end with
/// [`finish`](Self::finish).
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` of the next one belongs to it.
    after_cr: bool,
    /// Whether the byte-order mark check at the start of the stream is done.
    started: bool,
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feed the next bytes; returns the events they complete, in order. Invalid UTF-8 is
    /// replaced (U+FFFD), never an error.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.started {
            // The byte-order mark may itself arrive split; wait for three bytes.
            self.line.extend_from_slice(bytes);
            if self.line.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.line) {
                return events;
            }
            self.started = true;
            let mut pending = std::mem::take(&mut self.line);
            if pending.starts_with(b"\xEF\xBB\xBF") {
                pending.drain(..3);
            }
            self.lines(&pending, &mut events);
            return events;
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        self.lines(bytes, &mut events);
        events
    }

    fn lines(&mut self, mut bytes: &[u8], events: &mut Vec<SseEvent>) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&bytes[..end]);
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, events);
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            let event = self.event.take();
            if let Some(data) = self.data.take() {
                events.push(SseEvent {
                    event: event.unwrap_or_else(|| "message".to_string()),
                    data,
                    id: self.id.clone(),
                });
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {}
        }
    }

    /// The stream ended: `Ok` when it ended between events, [`IncompleteStream`] when a line
    /// or an event was left unfinished (fields read but no blank line after them).
    pub fn finish(self) -> Result<(), IncompleteStream> {
        if !self.line.is_empty() || self.event.is_some() || self.data.is_some() {
            Err(IncompleteStream)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
        }
    }

    /// Every event of `stream` fed in one piece, and fed in pieces cut at every position.
    fn parse_all_ways(stream: &[u8]) -> (Vec<SseEvent>, Result<(), IncompleteStream>) {
        let mut parser = SseParser::new();
        let whole = parser.push(stream);
        let whole_end = parser.finish();
        for cut in 0..=stream.len() {
            let mut parser = SseParser::new();
            let mut events = parser.push(&stream[..cut]);
            events.extend(parser.push(&stream[cut..]));
            assert_eq!(events, whole, "cut at {cut}");
            assert_eq!(parser.finish(), whole_end, "cut at {cut}");
        }
        // And byte by byte.
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for b in stream {
            events.extend(parser.push(std::slice::from_ref(b)));
        }
        assert_eq!(events, whole, "byte by byte");
        assert_eq!(parser.finish(), whole_end, "byte by byte");
        (whole, whole_end)
    }

    #[test]
    fn events_and_data() {
        let (events, end) = parse_all_ways(
            b"event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\ndata: plain\n\n",
        );
        assert_eq!(
            events,
            vec![
                ev("message_start", "{\"a\":1}"),
                ev("ping", "{}"),
                ev("message", "plain")
            ]
        );
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn crlf_and_cr_line_ends() {
        let (events, end) =
            parse_all_ways(b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\r\n\n");
        assert_eq!(events, vec![ev("a", "1"), ev("b", "2"), ev("message", "3")]);
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn multi_line_data_comments_and_spacing() {
        let (events, end) = parse_all_ways(
            b": keep-alive\n\ndata: line one\n: a comment in between\ndata:line two\ndata:  two spaces\ndata\n\n",
        );
        assert_eq!(
            events,
            vec![ev("message", "line one\nline two\n two spaces\n")]
        );
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_unknown_fields_ignored() {
        let (events, end) = parse_all_ways(b"event: lonely\n\nretry: 100\nfoo: bar\ndata: x\n\n");
        assert_eq!(events, vec![ev("message", "x")]);
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn id_persists() {
        let (events, _) = parse_all_ways(b"id: 7\ndata: a\n\ndata: b\n\n");
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].id.as_deref(), Some("7"));
    }

    #[test]
    fn byte_order_mark_is_skipped() {
        let (events, end) = parse_all_ways(b"\xEF\xBB\xBFdata: x\n\n");
        assert_eq!(events, vec![ev("message", "x")]);
        assert_eq!(end, Ok(()));
    }

    #[test]
    fn utf8_split_across_chunks() {
        let (events, _) = parse_all_ways("data: héllo ✓\n\n".as_bytes());
        assert_eq!(events, vec![ev("message", "héllo ✓")]);
    }

    #[test]
    fn a_stream_cut_mid_event_is_incomplete() {
        for cut in [
            &b"data: {\"a\""[..],
            b"event: x\ndata: 1\n",
            b"event: x\n",
            b"data: 1\n\ndata: 2",
            b"\xEF\xBB",
        ] {
            let (_, end) = parse_all_ways(cut);
            assert_eq!(
                end,
                Err(IncompleteStream),
                "{:?}",
                String::from_utf8_lossy(cut)
            );
        }
        let (events, end) = parse_all_ways(b"data: 1\n\n: trailing comment\n");
        assert_eq!(events, vec![ev("message", "1")]);
        assert_eq!(end, Ok(()));
        assert_eq!(SseParser::new().finish(), Ok(()));
    }
}
