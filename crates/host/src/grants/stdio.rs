//! A component's stdout and stderr: captured, never inherited.
//!
//! Each stream keeps its first [`CAPTURE_BYTES`] bytes; later bytes are counted and dropped,
//! never refused, so a chatty component cannot fail on its own logging nor fill the host's
//! memory. What stderr kept explains a trap (a Rust panic message lands there). Stdin is empty.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much of each stream is kept.
pub const CAPTURE_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
}

/// One captured output stream. Clones share the buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct CapturedOutput {
    inner: Arc<Mutex<Captured>>,
}

impl CapturedOutput {
    fn append(&self, bytes: &[u8]) {
        let mut captured = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let room = CAPTURE_BYTES.saturating_sub(captured.kept.len());
        let kept = bytes.len().min(room);
        captured.kept.extend_from_slice(&bytes[..kept]);
        captured.dropped += (bytes.len() - kept) as u64;
    }

    /// What was kept, as text.
    /// What was captured since the last take, emptying the capture.
    pub(crate) fn take_text(&self) -> String {
        let mut captured = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let kept = std::mem::take(&mut captured.kept);
        captured.dropped = 0;
        String::from_utf8(kept)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    pub(crate) fn text(&self) -> String {
        let captured = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        String::from_utf8_lossy(&captured.kept).into_owned()
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(CAPTURE_BYTES)
    }
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_dropped_not_refused() {
        let mut output = CapturedOutput::default();
        let chunk = Bytes::from(vec![b'x'; 40 * 1024]);
        output.write(chunk.clone()).unwrap();
        output.write(chunk).unwrap();
        let captured = output.inner.lock().unwrap();
        assert_eq!(captured.kept.len(), CAPTURE_BYTES);
        assert_eq!(captured.dropped, (80 * 1024 - CAPTURE_BYTES) as u64);
    }
}
