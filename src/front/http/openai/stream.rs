//! A generation answered as server-sent events (`stream: true`): the
//! first upstream response is awaited and fixes the status (a failure or
//! refusal then is an ordinary OpenAI error answer); from there every
//! response becomes a chunk the moment it arrives, sent by a spawned
//! [`pump`] through a bounded channel, then the finish chunk, the usage
//! chunk when asked for, and `data: [DONE]`. An upstream failure in the
//! middle is an `{"error":...}` event before `[DONE]`. A client that goes
//! away drops the receiver: the pump returns, dropping the upstream
//! stream, which cancels it (`RST_STREAM`), as `/generate_stream` does.

use bytes::Bytes;
use tokio::sync::mpsc;

use super::generation::{Opened, Outcome, Taken};
use crate::app::Gateway;
use crate::error::Result;
use crate::front::http::{Answer, StreamedResponse};
use crate::metrics::Metrics;
use crate::wire::generate::sse_event;
use crate::wire::openai::DONE;

/// Events buffered between the upstream reader and the HTTP writer: past
/// it the reader waits for the client (backpressure, as `/generate_stream`).
const EVENT_BUFFER: usize = 16;

const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";

/// The streamed answer: status 200 once the first response is in.
pub(super) async fn answer(gateway: &Gateway, mut opened: Opened) -> Result<Answer> {
    let metrics = gateway.metrics();
    let item = opened.upstream.next().await;
    let first = match opened.tally.take(item) {
        Ok(taken) => taken,
        Err(error) => {
            opened.tally.end(metrics, Outcome::Failed(&error.message));
            return Err(error);
        }
    };
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let mut events = Vec::new();
    let ended = opened.event(first, true, &mut events);
    let first: Bytes = events.concat().into();
    let metrics = gateway.metrics_arc();
    if ended {
        opened.tally.end(&metrics, Outcome::Done);
        tokio::spawn(opened.upstream.drain());
    } else {
        tokio::spawn(pump(opened, tx, metrics));
    }
    Ok(Answer::Streamed(StreamedResponse {
        status: 200,
        headers: vec![
            ("Content-Type", SSE_CONTENT_TYPE.to_string()),
            ("Cache-Control", "no-cache".to_string()),
        ],
        first: Some(first),
        body: rx,
        length: None,
    }))
}

impl Opened {
    /// The events of one message into `out`; `true` when it ended the
    /// answer (then the finish, the usage and `[DONE]` are in `out`).
    fn event(&self, taken: Taken, first: bool, out: &mut Vec<Bytes>) -> bool {
        let usage_null = self.include_usage;
        match taken {
            Taken::Piece(piece, last) => {
                if first || !piece.text.is_empty() {
                    out.push(self.answering.chunk(&piece.text, first, None, usage_null));
                }
                if last {
                    self.close(out);
                }
                last
            }
            Taken::End => {
                if first {
                    out.push(self.answering.chunk("", true, None, usage_null));
                }
                self.close(out);
                true
            }
        }
    }

    /// The finish chunk, the usage chunk if asked for, `[DONE]`.
    fn close(&self, out: &mut Vec<Bytes>) {
        let finish = Some(self.tally.finish());
        out.push(self.answering.chunk("", false, finish, self.include_usage));
        if self.include_usage {
            out.push(self.answering.usage_chunk(self.tally.usage()));
        }
        out.push(Bytes::from_static(DONE));
    }
}

/// Forwards the rest of the stream; returns — dropping the upstream
/// stream, which cancels the call — as soon as the client is gone, even
/// while the model is between tokens.
async fn pump(mut opened: Opened, tx: mpsc::Sender<Bytes>, metrics: std::sync::Arc<Metrics>) {
    let gone = |opened: &Opened| {
        tracing::debug!("client gone: cancelling the upstream stream");
        opened.tally.end(&metrics, Outcome::Cancelled);
    };
    loop {
        let item = tokio::select! {
            () = tx.closed() => return gone(&opened),
            item = opened.upstream.next() => item,
        };
        let mut events = Vec::with_capacity(1);
        let (ended, failure) = match opened.tally.take(item) {
            Ok(taken) => (opened.event(taken, false, &mut events), None),
            Err(error) => {
                events.push(sse_event(&error.openai_body()));
                events.push(Bytes::from_static(DONE));
                (true, Some(error))
            }
        };
        for event in events {
            // Waits while the channel is full: the client sets the pace.
            if tx.send(event).await.is_err() {
                return gone(&opened);
            }
        }
        if ended {
            drop(tx);
            match failure {
                Some(error) => opened.tally.end(&metrics, Outcome::Failed(&error.message)),
                None => {
                    opened.tally.end(&metrics, Outcome::Done);
                    opened.upstream.drain().await;
                }
            }
            return;
        }
    }
}
