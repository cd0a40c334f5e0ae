//! Reading Server-Sent Events, the frames [`crate::rpc::sse_frame`] writes, as a client
//! receives them: in chunks cut anywhere.
//!
//! What [`Decoder`] promises:
//!
//! - An event ends at a blank line. `\r\n`, `\n` and a lone `\r` all end a line, also when a
//!   chunk boundary falls between `\r` and `\n`; the events read never depend on where the
//!   chunks were cut.
//! - `data:` lines are joined with `\n`; `id:` sets the event's id; a leading space after the
//!   colon is dropped; comments (`:` first) and other fields are skipped. A block with no
//!   `data:` line (a keep-alive) is no event.
//! - It never panics, on any bytes; bytes that are not UTF-8 are read lossily.
//! - It holds only what has not yet formed an event: [`Decoder::pending`] says how much, so a
//!   caller can refuse an event that grows without end. Each byte is searched for the end of
//!   its event once, however many chunks the event arrives in.

/// One event: its id, if it had one, and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
}

/// Turns chunks of an SSE body into events.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Received and not yet read, every line ending turned into `\n`.
    buffer: Vec<u8>,
    last_was_cr: bool,
    /// How much of `buffer` is known to hold no blank line (`\n\n`).
    scanned: usize,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Appends a chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        for &byte in chunk {
            match byte {
                b'\r' => {
                    self.buffer.push(b'\n');
                    self.last_was_cr = true;
                }
                b'\n' if self.last_was_cr => self.last_was_cr = false,
                _ => {
                    self.buffer.push(byte);
                    self.last_was_cr = false;
                }
            }
        }
    }

    /// The next complete event, if one has arrived.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            // A blank line may straddle the scanned part's last byte.
            let from = self.scanned.saturating_sub(1);
            let Some(found) = self.buffer[from..]
                .windows(2)
                .position(|pair| pair == b"\n\n")
            else {
                self.scanned = self.buffer.len();
                return None;
            };
            let end = from + found;
            self.scanned = 0;
            let block: Vec<u8> = self.buffer.drain(..end + 2).take(end).collect();
            if let Some(event) = read_block(&block) {
                return Some(event);
            }
        }
    }

    /// At the end of the body: the last event when it was not followed by its blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let block = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        read_block(&block)
    }

    /// Bytes held that do not yet form an event.
    pub fn pending(&self) -> usize {
        self.buffer.len()
    }
}

fn read_block(block: &[u8]) -> Option<SseEvent> {
    let text = String::from_utf8_lossy(block);
    let mut id = None;
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            "id" => id = Some(value.to_string()),
            _ => {}
        }
    }
    Some(SseEvent { id, data: data? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(decoder: &mut Decoder) -> Vec<SseEvent> {
        std::iter::from_fn(|| decoder.next_event()).collect()
    }

    #[test]
    fn events_end_at_blank_lines_in_every_line_ending() {
        let mut decoder = Decoder::new();
        decoder.push(b"id: 1\ndata: {\"a\":1}\n\n: keep-alive\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\nretry: 5\rdata:z\r\r");
        assert_eq!(
            all(&mut decoder),
            vec![
                SseEvent {
                    id: Some("1".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    id: Some("2".into()),
                    data: "x\ny".into()
                },
                SseEvent {
                    id: None,
                    data: "z".into()
                },
            ]
        );
        assert_eq!(decoder.pending(), 0);
    }

    #[test]
    fn a_crlf_cut_between_chunks_is_one_line_ending() {
        let mut decoder = Decoder::new();
        decoder.push(b"data: a\r");
        decoder.push(b"\n\r");
        decoder.push(b"\n");
        assert_eq!(
            all(&mut decoder),
            vec![SseEvent {
                id: None,
                data: "a".into()
            }]
        );
    }

    proptest::proptest! {
        /// However a body is cut into chunks, and however often events are asked for between
        /// them, the same events come out as from the whole body at once.
        #[test]
        fn the_events_never_depend_on_the_cuts(
            body in proptest::collection::vec(proptest::prop_oneof![
                proptest::prelude::Just(b'\n'),
                proptest::prelude::Just(b'\r'),
                proptest::prelude::Just(b':'),
                proptest::prelude::Just(b'd'),
                proptest::prelude::any::<u8>(),
            ], 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..8),
        ) {
            let mut whole = Decoder::new();
            whole.push(&body);
            let mut expected = all(&mut whole);
            expected.extend(whole.finish());
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.push(0);
            cuts.push(body.len());
            cuts.sort_unstable();
            let mut chunked = Decoder::new();
            let mut got = Vec::new();
            for pair in cuts.windows(2) {
                chunked.push(&body[pair[0]..pair[1]]);
                got.extend(all(&mut chunked));
            }
            got.extend(chunked.finish());
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn the_last_event_may_lack_its_blank_line() {
        let mut decoder = Decoder::new();
        decoder.push(b"data: tail");
        assert_eq!(decoder.next_event(), None);
        assert_eq!(decoder.pending(), 10);
        assert_eq!(
            decoder.finish(),
            Some(SseEvent {
                id: None,
                data: "tail".into()
            })
        );
    }
}
