//! Reading a request body within its limits: whole, or (a binary `/infer`
//! body of `body::STREAM_FROM` bytes or more, or chunked: `front::http::plan`) its head up to the
//! JSON header, the rest then read by [`pump`] into the queue that streams
//! it upstream (`body.rs`). The body-size and chunk-count limits, the
//! body deadline and `100-continue` apply to both; `session` runs the
//! pipeline and writes the answer.

use bytes::{Bytes, BytesMut};
use pingora_core::protocols::http::ServerSession;
use pingora_core::Error as PingoraError;

use crate::body::BodyFeed;
use crate::config::Limits;
use crate::error::{Error, Kind};
use crate::front::http::plan::{Body, Plan};
use crate::front::http::too_large;

/// Why a body could not be read in full.
pub(super) enum BodyError {
    /// Refused by a limit or malformed: answer, then close the connection.
    Refused(Error),
    /// The client went away or the stream broke: nobody to answer.
    Gone,
}

/// Reads the body as `plan` says: whole, into one buffer sized from
/// `Content-Length`, or, of a body to stream, only until its JSON header
/// is in, unless the body ends first; the body-size and chunk-count
/// limits are enforced as it goes.
pub(super) async fn read_body(
    session: &mut ServerSession,
    plan: &Plan,
    limits: &Limits,
) -> Result<Read, BodyError> {
    let declared = plan.declared_length;
    let stop_at = match plan.body {
        Body::Whole => None,
        Body::Streamed { header_len } => Some(header_len),
    };
    let counted = Counted {
        declared,
        streamed: stop_at.is_some(),
        ..Counted::default()
    };
    if let Some(n) = declared {
        counted.check(n, limits)?;
    }
    if plan.expects_continue {
        session
            .write_continue_response()
            .await
            .map_err(|_| BodyError::Gone)?;
    }
    let reserve = declared.unwrap_or(0) as usize;
    let mut body = BytesMut::with_capacity(stop_at.map_or(reserve, |n| n.min(reserve)));
    let mut counted = counted;
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| body_error(&e))?
    {
        if chunk.is_empty() {
            continue;
        }
        counted.add(chunk.len(), limits)?;
        if body.is_empty() && declared == Some(chunk.len() as u64) {
            return Ok(Read::Whole(chunk));
        }
        body.extend_from_slice(&chunk);
        if stop_at.is_some_and(|n| body.len() >= n) {
            return Ok(Read::Head(body.freeze(), counted));
        }
    }
    Ok(Read::Whole(body.freeze()))
}

/// A body read failure: malformed framing (bad chunk sizes, extensions or
/// trailers) is the client's mistake and gets a 400; anything else means
/// the connection broke or closed.
fn body_error(e: &PingoraError) -> BodyError {
    match e.etype().as_str() {
        "InvalidChunk" | "InvalidTrailerEnd" | "InvalidHTTPHeader" => {
            let detail = e
                .context
                .as_ref()
                .map(|c| c.as_str())
                .unwrap_or("invalid framing");
            BodyError::Refused(Error::invalid(format!(
                "malformed chunked request body: {detail}"
            )))
        }
        _ => BodyError::Gone,
    }
}

/// What [`read_body`] read.
pub(super) enum Read {
    /// The whole body.
    Whole(Bytes),
    /// Its first bytes (the JSON header at least); the rest is to come.
    Head(Bytes, Counted),
}

/// A body's chunks and bytes so far, against the limits.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counted {
    /// `Content-Length`, if the client sent one.
    declared: Option<u64>,
    /// Streamed upstream (`limits.max_streamed_body_size` applies), or
    /// read whole (`limits.max_body_size`).
    streamed: bool,
    chunks: usize,
    bytes: usize,
}

impl Counted {
    /// `Content-Length`, if the client sent one.
    pub(super) fn declared(&self) -> Option<u64> {
        self.declared
    }

    /// Counts one more non-empty chunk: refused past the body-size limit,
    /// or past the chunk-count limit for a body of undeclared length.
    fn add(&mut self, len: usize, limits: &Limits) -> Result<(), BodyError> {
        self.chunks += 1;
        if self.declared.is_none() && self.chunks > limits.max_chunks {
            return Err(BodyError::Refused(Error::invalid(format!(
                "Chunked request body exceeds maximum of {} non-empty chunks. Send fewer or larger HTTP chunks.",
                limits.max_chunks
            ))));
        }
        self.bytes = self.bytes.saturating_add(len);
        self.check(self.bytes as u64, limits)
    }

    /// Refuses a body of `size` bytes above its limit.
    fn check(&self, size: u64, limits: &Limits) -> Result<(), BodyError> {
        let (limit, setting) = if self.streamed {
            (
                limits.max_streamed_body_size,
                "limits.max_streamed_body_size",
            )
        } else {
            (limits.max_body_size, "--max-body-size")
        };
        if size > limit as u64 {
            return Err(BodyError::Refused(too_large(size, limit, setting)));
        }
        Ok(())
    }
}

/// Reads the rest of a streamed body into `feed`, within the limits, and
/// marks its end. Stops quietly when nobody reads the rest any more (the
/// pipeline answered without it). `deadline` is the body's: time spent
/// waiting for room in the queue (the upstream holding the body back) is
/// added to it, so a slow upstream is never blamed on the client.
pub(super) async fn pump(
    session: &mut ServerSession,
    feed: BodyFeed,
    mut counted: Counted,
    limits: &Limits,
    mut deadline: tokio::time::Instant,
) -> Result<(), BodyError> {
    loop {
        let read = tokio::time::timeout_at(deadline, session.read_request_body()).await;
        let read = read.map_err(|_| slow_body(limits.body_timeout()))?;
        let Some(chunk) = read.map_err(|e| body_error(&e))? else {
            let _ = feed.end().await;
            return Ok(());
        };
        if chunk.is_empty() {
            continue;
        }
        counted.add(chunk.len(), limits)?;
        let waiting = tokio::time::Instant::now();
        if feed.send(chunk).await.is_err() {
            return Ok(());
        }
        deadline += waiting.elapsed();
    }
}

/// The refusal of a body that did not arrive within `limit`.
pub(super) fn slow_body(limit: std::time::Duration) -> BodyError {
    BodyError::Refused(Error::new(
        Kind::RequestTimeout,
        format!(
            "the request body did not arrive within {} ms",
            limit.as_millis()
        ),
    ))
}
