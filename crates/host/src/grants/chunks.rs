//! `murmur:text/chunks`: text and thinking deltas a component streams while it works. They go to
//! the call's [`ChunkSink`] as they arrive (the A2A stream, `mur run --stream`, a tool author's
//! terminal); without a sink they are dropped. Streaming is a side channel: it never changes the
//! call's result.
//!
//! `murmur:stream/events@0.1.0` is served too: the name another Murmur runtime gives this
//! channel, so tools and drivers built for it run here. Its `emit-chunk` and
//! `emit-thinking-chunk` stream as above; its `tool-call-started` and `tool-call-input-bytes`
//! (a driver's progress on a tool call it is writing) are accepted and not shown.

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

/// The interface another Murmur runtime streams through (see the module's docs).
pub(crate) const STREAM_EVENTS: &str = "murmur:stream/events@0.1.0";

/// Links [`STREAM_EVENTS`] into `linker`, each chunk to the call's sink.
pub(crate) fn add_stream_events(
    linker: &mut wasmtime::component::Linker<crate::grants::HostState>,
) -> wasmtime::Result<()> {
    use wasmtime::StoreContextMut;
    type State<'a> = StoreContextMut<'a, crate::grants::HostState>;
    let mut events = linker.instance(STREAM_EVENTS)?;
    events.func_wrap("emit-chunk", |mut store: State<'_>, (chunk,): (String,)| {
        if let Some(sink) = &store.data_mut().chunks {
            sink(ChunkKind::Text, &chunk);
        }
        Ok(())
    })?;
    events.func_wrap(
        "emit-thinking-chunk",
        |mut store: State<'_>, (chunk,): (String,)| {
            if let Some(sink) = &store.data_mut().chunks {
                sink(ChunkKind::Thinking, &chunk);
            }
            Ok(())
        },
    )?;
    events.func_wrap(
        "tool-call-started",
        |_: State<'_>, (_id, _name): (String, String)| Ok(()),
    )?;
    events.func_wrap(
        "tool-call-input-bytes",
        |_: State<'_>, (_id, _bytes): (String, u64)| Ok(()),
    )?;
    Ok(())
}
