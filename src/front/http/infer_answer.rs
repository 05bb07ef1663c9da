//! The answer of a streamed `/infer` request whose outputs are all binary
//! (`Plan::answer_streams`): written to the client while the upstream
//! still sends it. The call runs in a task of its own with an answer tap
//! (`upstream::reply`); its head (the small fields) fixes the status and
//! the JSON header, whose `binary_data_size`s come from each output's
//! shape and datatype, so `Content-Length` is known before the first
//! output byte. The outputs' bytes then go to the client as they arrive,
//! each checked against the size the header declared; an answer that
//! breaks off, or whose sizes miss, is cut short (the client sees fewer
//! bytes than `Content-Length` and a closed connection, or a reset h2
//! stream). An answer that cannot stream (an output of BYTES, typed
//! contents) is collected and encoded as usual.

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::app::door::{self, InferCall};
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::infer::sent_error;
use crate::front::http::pipeline::Pipeline;
use crate::front::http::plan::Plan;
use crate::front::http::{Answer, StreamedResponse};
use crate::model::{element_count, InferRequest, InferResponse, OutputKind};
use crate::translate::{from_grpc, outputs};
use crate::upstream::reply::{self, join, ReplyTap, Tapped};
use crate::wire::v2_response;

/// Chunks between the relay and the session: the tap's queue holds the
/// rest.
const WRITE_AHEAD: usize = 4;

impl Pipeline {
    /// Sends `request` (checked; its body's rest still arriving) and
    /// answers with its outputs streamed when they can be.
    pub(crate) async fn infer_streamed_answer(
        &self,
        ctx: &RequestContext,
        plan: &Plan,
        mut request: InferRequest,
        rest: BodyRest,
    ) -> Result<Answer> {
        let (tap, mut tapped) = reply::tap();
        self.spawn_call(ctx, &request, rest.clone(), tap);
        let (response, raw_follow) = match tapped.recv().await {
            Some(Tapped::Head {
                response,
                raw_follow,
            }) => (response, raw_follow),
            Some(Tapped::Ended(Err(error))) => return Err(sent_error(&request, &rest, error)),
            _ => return Err(reply::ended_without_answer()),
        };
        // Sent: the answer is made without the input tensors.
        request.inputs = Vec::new();
        let mut head = from_grpc::model_infer(response.clone(), &request.id);
        let wanted = outputs::requested_mask(&head, &request)?;
        if let Some(sizes) = entry_sizes(&head, &request, &wanted).filter(|_| raw_follow) {
            let mut wanted = wanted.into_iter();
            head.outputs.retain(|_| wanted.next().unwrap_or(false));
            return streamed(&head, &request, sizes, tapped);
        }
        let raw = collect(&mut tapped).await?;
        let mut response = from_grpc::model_infer_with_raw(response, raw, &request.id);
        outputs::keep_requested(&mut response, &request)?;
        let encoded = v2_response::encode(&response, &request)?;
        Ok(Answer::Full(
            self.infer_response(encoded, plan.answer_encoding),
        ))
    }

    /// `ModelInfer` for `request` in a task of its own (the answer outlives
    /// the pipeline), its raw outputs into `tap`, its end last.
    fn spawn_call(
        &self,
        ctx: &RequestContext,
        request: &InferRequest,
        rest: BodyRest,
        tap: ReplyTap,
    ) {
        let gateway = self.gateway.clone();
        // The same context: the access log sees the call's backend and time.
        let ctx = ctx.clone();
        let call = InferCall::new(request, Some(rest))
            .tapped(tap.clone())
            .into_owned();
        tokio::spawn(async move {
            let sent = door::infer(&gateway, &ctx, call).await;
            tap.end(sent.map(drop)).await;
        });
    }
}

/// For each raw entry of the answer (one per output, in order): its size
/// when the client gets it, `None` when it is skipped (an output the client
/// did not ask for, which an upstream like KServe's sends anyway). `None`
/// altogether unless every output is in raw entries and every wanted one
/// is binary, of a fixed-size datatype.
fn entry_sizes(
    head: &InferResponse,
    request: &InferRequest,
    wanted: &[bool],
) -> Option<Vec<Option<u64>>> {
    head.outputs
        .iter()
        .zip(wanted)
        .map(|(output, wanted)| {
            output.data.is_empty().then_some(())?;
            if !wanted {
                return Some(None);
            }
            let binary = request.output_kind(&output.name) == OutputKind::Binary;
            let size = output.datatype.known()?.element_size()?;
            let count = element_count(&output.shape)?;
            binary.then_some(())?;
            count.checked_mul(size as u64).map(Some)
        })
        .collect()
}

/// The streamed answer: its JSON header (of the outputs `head` keeps),
/// then the relay's chunks.
fn streamed(
    head: &InferResponse,
    request: &InferRequest,
    entries: Vec<Option<u64>>,
    tapped: mpsc::Receiver<Tapped>,
) -> Result<Answer> {
    let sizes: Vec<u64> = entries.iter().flatten().copied().collect();
    let header = v2_response::binary_header(head, request, &sizes)?;
    let total = sizes
        .iter()
        .try_fold(header.len() as u64, |sum, n| sum.checked_add(*n))
        .ok_or_else(|| Error::internal("output sizes overflow"))?;
    let mut headers = Vec::with_capacity(2);
    if v2_response::is_binary(&sizes) {
        headers.push(("Content-Type", "application/octet-stream".to_string()));
        headers.push(("Inference-Header-Content-Length", header.len().to_string()));
    } else {
        headers.push(("Content-Type", "application/json".to_string()));
    }
    let (tx, rx) = mpsc::channel(WRITE_AHEAD);
    // A fresh channel has room for the header.
    let _ = tx.try_send(Bytes::from(header));
    tokio::spawn(relay(tapped, Walk::new(entries), tx));
    Ok(Answer::Streamed(StreamedResponse {
        status: 200,
        headers,
        body: rx,
        length: Some(total),
    }))
}

/// Where the relay is among the answer's raw entries.
struct Walk {
    entries: Vec<Option<u64>>,
    /// The next entry's index in `entries`.
    next: usize,
    /// Bytes still to come of the current entry.
    left: u64,
    /// The current entry is skipped.
    skipping: bool,
}

impl Walk {
    fn new(entries: Vec<Option<u64>>) -> Walk {
        Walk {
            entries,
            next: 0,
            left: 0,
            skipping: false,
        }
    }

    /// An entry of `n` bytes begins: whether it is the one `entries`
    /// expects (a wanted entry must have its declared size).
    fn enter(&mut self, n: u64) -> bool {
        let Some(&expected) = self.entries.get(self.next).filter(|_| self.left == 0) else {
            return false;
        };
        if expected.is_some_and(|size| size != n) {
            return false;
        }
        self.next += 1;
        self.left = n;
        self.skipping = expected.is_none();
        true
    }

    /// `len` more bytes of the current entry: whether they go to the
    /// client, `None` when the entry has fewer left.
    fn take(&mut self, len: u64) -> Option<bool> {
        self.left = self.left.checked_sub(len)?;
        Some(!self.skipping)
    }

    fn done(&self) -> bool {
        self.next == self.entries.len() && self.left == 0
    }
}

/// Hands the tapped outputs the client asked for to the session, each
/// checked against its declared size; the others are skipped. The last
/// chunk waits for the call's successful end, so an answer whose call
/// failed is never complete. Anything else stops the relay, which cuts the
/// answer short.
async fn relay(mut tapped: mpsc::Receiver<Tapped>, mut walk: Walk, tx: mpsc::Sender<Bytes>) {
    let mut held: Option<Bytes> = None;
    while let Some(item) = tapped.recv().await {
        let what = match item {
            Tapped::Entry(n) if walk.enter(n) => continue,
            Tapped::Data(chunk) => match walk.take(chunk.len() as u64) {
                Some(false) => continue,
                Some(true) => {
                    if let Some(previous) = held.replace(chunk) {
                        if tx.send(previous).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
                None => "an output's size differs from its shape's".to_string(),
            },
            Tapped::Ended(Ok(())) if walk.done() => {
                if let Some(last) = held {
                    let _ = tx.send(last).await;
                }
                return;
            }
            Tapped::Ended(Err(error)) => error.message,
            Tapped::Ended(Ok(())) => "it ended early".to_string(),
            _ => "an output's size differs from its shape's".to_string(),
        };
        tracing::warn!(%what, "the upstream's answer broke off; cutting it short");
        return;
    }
}

/// The raw outputs of an answer that is not streamed, each in one piece,
/// once the call ended well.
async fn collect(tapped: &mut mpsc::Receiver<Tapped>) -> Result<Vec<Bytes>> {
    let mut raw: Vec<Vec<Bytes>> = Vec::new();
    while let Some(item) = tapped.recv().await {
        match item {
            Tapped::Entry(_) => raw.push(Vec::new()),
            Tapped::Data(chunk) => {
                if let Some(entry) = raw.last_mut() {
                    entry.push(chunk);
                }
            }
            Tapped::Ended(result) => {
                result?;
                return Ok(raw.into_iter().map(join).collect());
            }
            Tapped::Head { .. } => break,
        }
    }
    Err(reply::ended_without_answer())
}
