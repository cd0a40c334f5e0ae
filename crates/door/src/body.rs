//! Request bodies, read within the door's limit.
//!
//! What this module promises: a body of at most the limit is returned whole; one over it is
//! never kept, but read on and dropped up to [`DRAIN_LIMIT`] bytes before the door answers, so
//! that a client still sending it gets the refusal (413) rather than a connection cut
//! mid-write; past that the connection is let go.

use axum::body::{Body, Bytes};

/// How much of a body over the limit is read on (and dropped) before the door answers.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// The whole body, when it is at most `limit` bytes; `None` when it is over (or broke off). A
/// body over the limit is not kept, but read on and dropped up to [`DRAIN_LIMIT`] bytes, so
/// that a client still sending it gets the refusal rather than a connection cut mid-write.
pub(crate) async fn read_body(body: Body, limit: usize) -> Option<Bytes> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        seen += chunk.len();
        if seen > limit {
            while seen <= DRAIN_LIMIT {
                match stream.next().await {
                    Some(Ok(chunk)) => seen += chunk.len(),
                    _ => break,
                }
            }
            return None;
        }
        kept.extend_from_slice(&chunk);
    }
    Some(Bytes::from(kept))
}
