//! `murmur:text/chunks`: text and thinking deltas a component streams while it works. They go to
//! the call's [`ChunkSink`] as they arrive (the A2A stream, `mur run --stream`, a tool author's
//! terminal); without a sink they are dropped. Streaming is a side channel: it never changes the
//! call's result.

use std::sync::Arc;

use crate::bindings::murmur::text::chunks::Host;

/// Which kind of text a chunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    Text,
    Thinking,
}

/// Receives every chunk of a call, in order.
pub type ChunkSink = Arc<dyn Fn(ChunkKind, &str) + Send + Sync>;

/// A call streams to its sink, if it has one.
impl Host for Option<ChunkSink> {
    async fn emit_chunk(&mut self, chunk: String) -> wasmtime::Result<()> {
        if let Some(sink) = self {
            sink(ChunkKind::Text, &chunk);
        }
        Ok(())
    }

    async fn emit_thinking_chunk(&mut self, chunk: String) -> wasmtime::Result<()> {
        if let Some(sink) = self {
            sink(ChunkKind::Thinking, &chunk);
        }
        Ok(())
    }
}
