//! The answer of an inference whose body streamed and whose outputs the
//! front can send as they arrive (`Decoded::streams`): the call runs in a
//! task of its own with a reply tap (`upstream::reply`), because the
//! answer outlives the front's part of the request. Its head (the small
//! fields) comes first: when every output the request names is binary, in
//! raw entries, of a fixed-size datatype, the answer is [`Streaming`] —
//! each output's size known from its shape and datatype before its first
//! byte, its bytes handed on as they arrive, each checked against that
//! size; an answer that breaks off, or whose sizes miss, is cut short
//! (the front's body ends early). Otherwise (an output of BYTES, typed
//! contents) the answer is collected whole.

use bytes::Bytes;
use tokio::sync::mpsc;

use super::Inferred;
use crate::app::door::{self, InferCall};
use crate::app::routing::Routed;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::{element_count, InferRequest, InferResponse, OutputKind};
use crate::translate::{from_grpc, outputs};
use crate::upstream::reply::{self, join, ReplyTap, Tapped};

/// Chunks handed on ahead of the front's writing: the tap's queue holds
/// the rest.
const WRITE_AHEAD: usize = 4;

/// An answer whose outputs' bytes are still arriving.
pub(crate) struct Streaming {
    /// The request, without its input tensors.
    pub(crate) request: InferRequest,
    /// The answer's small fields: the outputs the request names, without
    /// their data.
    pub(crate) head: InferResponse,
    /// Each output's size in bytes, in `head`'s order.
    pub(crate) sizes: Vec<u64>,
    /// The outputs' bytes, one after another. The last chunk comes only
    /// once the call ended well: a channel that closes before the sizes
    /// add up means the answer broke off.
    pub(crate) outputs: mpsc::Receiver<Bytes>,
}

/// Sends `request` (checked; its body's rest still arriving) and answers
/// with its outputs streamed when they can be. A failure before the head
/// comes back with the request, for the front's words.
pub(super) async fn call(
    ctx: &RequestContext,
    mut request: InferRequest,
    rest: BodyRest,
    routed: &Routed,
) -> std::result::Result<Inferred, (InferRequest, Error)> {
    let (tap, mut tapped) = reply::tap();
    spawn_call(ctx, &request, rest, routed, tap);
    let (response, raw_follow) = match tapped.recv().await {
        Some(Tapped::Head {
            mut response,
            raw_follow,
        }) => match door::client_answer(routed, &request, &mut response) {
            Ok(()) => (response, raw_follow),
            Err(error) => return Err((request, error)),
        },
        Some(Tapped::Ended(Err(error))) => return Err((request, error)),
        _ => return Err((request, reply::ended_without_answer())),
    };
    // Sent: the answer is made without the input tensors.
    request.inputs = Vec::new();
    answer(request, response, raw_follow, tapped).await
}

/// The answer from the reply's head: streamed, or collected.
async fn answer(
    request: InferRequest,
    response: crate::proto::inference::ModelInferResponse,
    raw_follow: bool,
    mut tapped: mpsc::Receiver<Tapped>,
) -> std::result::Result<Inferred, (InferRequest, Error)> {
    let mut head = from_grpc::model_infer(response.clone(), &request.id);
    let wanted = match outputs::requested_mask(&head, &request) {
        Ok(wanted) => wanted,
        Err(error) => return Err((request, error)),
    };
    if let Some(entries) = entry_sizes(&head, &request, &wanted).filter(|_| raw_follow) {
        let mut keep = wanted.into_iter();
        head.outputs.retain(|_| keep.next().unwrap_or(false));
        let sizes = entries.iter().flatten().copied().collect();
        let (tx, outputs) = mpsc::channel(WRITE_AHEAD);
        tokio::spawn(relay(tapped, Walk::new(entries), tx));
        return Ok(Inferred::Streaming(Streaming {
            request,
            head,
            sizes,
            outputs,
        }));
    }
    let whole = async {
        let raw = collect(&mut tapped).await?;
        from_grpc::answer(response, Some(raw), &request)
    };
    match whole.await {
        Ok(response) => Ok(Inferred::Whole { request, response }),
        Err(error) => Err((request, error)),
    }
}

/// `ModelInfer` for `request` in a task of its own (the answer outlives
/// the request's own task), its raw outputs into `tap`, its end last.
fn spawn_call(
    ctx: &RequestContext,
    request: &InferRequest,
    rest: BodyRest,
    routed: &Routed,
    tap: ReplyTap,
) {
    // The same context: the access log sees the call's backend and time.
    let ctx = ctx.clone();
    let call = InferCall::new(request, Some(rest), routed)
        .tapped(tap.clone())
        .into_owned();
    tokio::spawn(async move {
        let sent = door::infer(&ctx, call).await;
        tap.end(sent.map(drop)).await;
    });
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

/// Hands the tapped outputs the client asked for on, each checked against
/// its declared size; the others are skipped. The last chunk waits for
/// the call's successful end, so an answer whose call failed is never
/// complete. Anything else stops the relay, which cuts the answer short.
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
