//! The answer of a streamed `/infer` request whose outputs are all binary
//! (`infer::answer_streams`): written to the client while the upstream
//! still sends it. The call runs in a task of its own with an answer tap
//! (`upstream::answer`); its head (the small fields) fixes the status and
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

use crate::app::Gateway;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::{Answer, StreamedResponse};
use crate::front::infer::sent_error;
use crate::model::{element_count, DataType, InferRequest, InferResponse, OutputKind};
use crate::translate::sequence::request_sequence_key;
use crate::translate::{from_grpc, to_grpc};
use crate::upstream::answer::{self, AnswerTap, Tapped};
use crate::upstream::Target;
use crate::wire::v2_response;

/// Chunks between the relay and the session: the tap's queue holds the
/// rest.
const WRITE_AHEAD: usize = 4;

impl Gateway {
    /// Sends `request` (checked; its body's rest still arriving) and
    /// answers with its outputs streamed when they can be.
    pub(crate) async fn infer_streamed_answer(
        &self,
        ctx: &RequestContext,
        mut request: InferRequest,
        rest: BodyRest,
    ) -> Result<Answer> {
        let (tap, mut tapped) = answer::tap();
        self.spawn_call(ctx, &request, rest.clone(), tap);
        let (response, raw_follow) = match tapped.recv().await {
            Some(Tapped::Head {
                response,
                raw_follow,
            }) => (response, raw_follow),
            Some(Tapped::Ended(Err(error))) => return Err(sent_error(&request, &rest, error)),
            _ => return Err(Error::internal("the upstream call ended without an answer")),
        };
        // Sent: the answer is made without the input tensors.
        request.inputs = Vec::new();
        let head = from_grpc::model_infer(response.clone(), &request.id);
        if let Some(sizes) = binary_sizes(&head, &request).filter(|_| raw_follow) {
            return streamed(&head, &request, sizes, tapped);
        }
        let raw = collect(&mut tapped).await?;
        let response = from_grpc::model_infer_with_raw(response, raw, &request.id);
        let encoded = v2_response::encode(&response, &request)?;
        Ok(Answer::Full(self.infer_response(encoded, None)))
    }

    /// `ModelInfer` for `request` in a task of its own (the answer outlives
    /// the pipeline), its raw outputs into `tap`, its end last.
    fn spawn_call(
        &self,
        ctx: &RequestContext,
        request: &InferRequest,
        rest: BodyRest,
        tap: AnswerTap,
    ) {
        let pool = self.pool().clone();
        let ctx = RequestContext::with_trace(ctx.trace().cloned());
        let model = request.model_name.clone();
        let sequence = request_sequence_key(request);
        let message = to_grpc::model_infer(request);
        let streamed = to_grpc::streamed_sizes(request);
        tokio::spawn(async move {
            let target = Target {
                model: Some(&model),
                sequence: sequence.as_deref(),
            };
            let sent = pool
                .model_infer_streamed(&ctx, &target, message, &streamed, rest, Some(tap.clone()))
                .await;
            tap.end(sent.map(drop)).await;
        });
    }
}

/// Each output's size from its shape and datatype, when every output is
/// binary, of a fixed-size datatype, and not in typed contents.
fn binary_sizes(head: &InferResponse, request: &InferRequest) -> Option<Vec<u64>> {
    head.outputs
        .iter()
        .map(|output| {
            let binary = request.output_kind(&output.name) == OutputKind::Binary;
            let size = DataType::parse(output.datatype.as_bytes())?.element_size()?;
            let count = element_count(&output.shape)?;
            (binary && output.data.is_empty()).then_some(())?;
            count.checked_mul(size as u64)
        })
        .collect()
}

/// The streamed answer: its JSON header, then the relay's chunks.
fn streamed(
    head: &InferResponse,
    request: &InferRequest,
    sizes: Vec<u64>,
    tapped: mpsc::Receiver<Tapped>,
) -> Result<Answer> {
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
    tokio::spawn(relay(tapped, sizes, tx));
    Ok(Answer::Streamed(StreamedResponse {
        status: 200,
        headers,
        body: rx,
        length: Some(total),
    }))
}

/// Hands the tapped outputs to the session, each checked against its
/// declared size. The last chunk waits for the call's successful end, so
/// an answer whose call failed is never complete. Anything else stops the
/// relay, which cuts the answer short.
async fn relay(mut tapped: mpsc::Receiver<Tapped>, sizes: Vec<u64>, tx: mpsc::Sender<Bytes>) {
    let mut next = 0;
    let mut left = 0u64;
    let mut held: Option<Bytes> = None;
    while let Some(item) = tapped.recv().await {
        match item {
            Tapped::Entry(n) if left == 0 && sizes.get(next) == Some(&n) => {
                next += 1;
                left = n;
            }
            Tapped::Data(chunk) if chunk.len() as u64 <= left => {
                left -= chunk.len() as u64;
                if let Some(previous) = held.replace(chunk) {
                    if tx.send(previous).await.is_err() {
                        return;
                    }
                }
            }
            Tapped::Ended(Ok(())) if next == sizes.len() && left == 0 => {
                if let Some(last) = held {
                    let _ = tx.send(last).await;
                }
                return;
            }
            other => {
                let what = match other {
                    Tapped::Ended(Err(error)) => error.message,
                    Tapped::Ended(Ok(())) => "it ended early".to_string(),
                    _ => "an output's size differs from its shape's".to_string(),
                };
                tracing::warn!(%what, "the upstream's answer broke off; cutting it short");
                return;
            }
        }
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
    Err(Error::internal("the upstream call ended without an answer"))
}

/// One output's chunks as one `Bytes` (a copy only when it came in
/// several).
fn join(chunks: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(chunks) {
        Ok([one]) => one,
        Err(chunks) => Bytes::from(chunks.concat()),
    }
}
