//! The `inference` group's `/infer` (v2 §2): the HTTP front's part
//! of the inference use case (`app::infer`, which holds the order of the
//! steps and the checks) — decoding the body (decompression, the
//! binary-extension split, the JSON header; a streamed body's header
//! while its tensors still arrive), header forwarding, and the answer's
//! encoding and framing: Triton's JSON header and binary outputs, the
//! answer compressed as negotiated, or, for a streamed answer, the JSON
//! header first (each `binary_data_size` from the output's shape and
//! datatype, so `Content-Length` is known before the first output byte)
//! and the outputs' bytes as they arrive.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::app::infer::{self, Decoded, Decoder, Inferred, Streaming};
use crate::app::Gateway;
use crate::body::{BodyRest, Fault};
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::front::http::plan::Plan;
use crate::front::http::StreamedRest;
use crate::front::http::{too_large, Answer, HttpRequest, HttpResponse, StreamedResponse};
use crate::model::{DataType, InferRequest, InputData, ModelInfo, ModelRef, Param};
use crate::translate::checks;
use crate::wire::{compress, v2_request, v2_response};

/// `/infer`: the use case with this request's body as its decoder, then
/// the answer encoded.
pub(super) async fn infer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    plan: &Plan,
    model: &ModelRef,
    req: &mut HttpRequest,
) -> Result<Answer> {
    let body = HttpBody {
        gateway,
        plan,
        model,
        req,
    };
    let (inferred, ()) = infer::infer(gateway, ctx, model, body).await?;
    match inferred {
        Inferred::Whole { request, response } => {
            let encoded = v2_response::encode(&response, &request)?;
            Ok(Answer::Full(encoded_answer(encoded, plan.answer_encoding)))
        }
        Inferred::Streaming(streaming) => streamed_answer(streaming),
    }
}

/// An `/infer` request's body and head, decoded once the model's
/// signature is known.
struct HttpBody<'r> {
    gateway: &'r Gateway,
    plan: &'r Plan,
    model: &'r ModelRef,
    req: &'r mut HttpRequest,
}

impl Decoder for HttpBody<'_> {
    type Kept = ();

    const DECOUPLED: Option<&'static str> =
        Some("HTTP end point doesn't support models with decoupled transaction policy");

    async fn decode(self, info: Option<Arc<ModelInfo>>) -> Result<Decoded<()>> {
        let HttpBody {
            gateway,
            plan,
            model,
            req,
        } = self;
        let (mut request, rest) = match req.rest.take() {
            Some(rest) => decode_streamed(gateway, plan, model, req, rest).await?,
            None => {
                let request = decode_whole(gateway, plan, model, req, info.as_deref())?;
                (request, None)
            }
        };
        forward_headers(gateway, req, &mut request);
        Ok(Decoded {
            streams: rest.is_some() && plan.answer_streams(&request),
            request,
            rest,
            kept: (),
        })
    }

    /// Triton's words for a streamed body that ended short or ran long.
    fn body_fault(request: &InferRequest, fault: Fault) -> Error {
        match fault {
            Fault::Short { read } => v2_request::short_tail(request, read),
            Fault::Long => v2_request::long_tail(&request.model_name),
            // The session answers the reason it knows (a limit, a
            // deadline) or nobody, if the client left; this text is for
            // the record only.
            fault => Error::invalid(format!("the request body broke off ({fault:?})")),
        }
    }
}

/// Decodes a body in hand. It goes into the decoder: a JSON body is freed
/// once decoded, a binary one once the tensors sliced from it have gone
/// upstream.
fn decode_whole(
    gateway: &Gateway,
    plan: &Plan,
    model: &ModelRef,
    req: &mut HttpRequest,
    info: Option<&ModelInfo>,
) -> Result<InferRequest> {
    let body = decompress(gateway, std::mem::take(&mut req.body), plan)?;
    let decoded = v2_request::decode(
        &model.name,
        &model.version,
        body,
        plan.header_length.as_deref(),
        gateway.decode_limits(),
    )?;
    match decoded {
        v2_request::Body::Json(request) => Ok(request),
        v2_request::Body::Raw(body) => {
            let info = info.ok_or_else(|| {
                Error::unsupported("raw binary requests need the model configuration, which the upstream does not provide")
            })?;
            checks::raw_request(&model.name, &model.version, info, body)
        }
    }
}

/// Decodes the JSON header of a body still arriving (`front::http::session`
/// streams only binary bodies whose whole header is in `req.body`). Its
/// binary inputs are streamed from the rest, unless one is BYTES: BYTES
/// framing is checked on the bytes in hand, so that body is read to its
/// end first and decoded whole.
async fn decode_streamed(
    gateway: &Gateway,
    plan: &Plan,
    model: &ModelRef,
    req: &mut HttpRequest,
    rest: StreamedRest,
) -> Result<(InferRequest, Option<BodyRest>)> {
    let header_len = plan.binary_header_len().unwrap_or(0).min(req.body.len());
    let in_hand = (req.body.len() - header_len) as u64;
    let request = v2_request::decode_streamed(
        &model.name,
        &model.version,
        &req.body[..header_len],
        rest.len.map(|n| n + in_hand),
        gateway.decode_limits(),
    )?;
    let bytes_input = request
        .inputs
        .iter()
        .any(|i| matches!(i.data, InputData::Streamed(_)) && i.datatype == DataType::Bytes);
    if !bytes_input {
        rest.rest.unread(req.body.slice(header_len..));
        return Ok((request, Some(rest.rest)));
    }
    // Held whole, so the whole-body limit applies.
    let limit = gateway.config().limits.max_body_size;
    let too_large = |size: u64| too_large(size, limit, "--max-body-size");
    let declared = rest.len.map(|n| n + req.body.len() as u64);
    if let Some(size) = declared.filter(|n| *n > limit as u64) {
        return Err(too_large(size));
    }
    let max = (limit - req.body.len().min(limit)) as u64;
    let chunks = match rest.rest.collect(max).await {
        Ok(chunks) => chunks,
        Err(Fault::Long) => return Err(too_large(limit as u64 + 1)),
        Err(fault) => return Err(HttpBody::body_fault(&request, fault)),
    };
    let len = req.body.len() + chunks.iter().map(Bytes::len).sum::<usize>();
    let mut body = BytesMut::with_capacity(len);
    body.extend_from_slice(&req.body);
    chunks
        .iter()
        .for_each(|chunk| body.extend_from_slice(chunk));
    req.body = body.freeze();
    Ok((decode_whole(gateway, plan, model, req, None)?, None))
}

/// Request `Content-Encoding` (v2 §4.1): gzip/deflate inflated with
/// the decompressed-size limit; anything else is 501.
fn decompress(gateway: &Gateway, body: Bytes, plan: &Plan) -> Result<Bytes> {
    let encoding = plan
        .body_encoding
        .map_err(|()| Error::new(Kind::UnsupportedEncoding, "Unsupported compression type"))?;
    if encoding == compress::Encoding::Identity {
        return Ok(body);
    }
    compress::inflate(&body, gateway.config().limits.max_input_size)
        .map(Bytes::from)
        .map_err(|e| Error::invalid(e.to_string()))
}

/// `--http-header-forward-pattern`: matching headers become string
/// parameters named exactly as the client wrote them (v2 §4.3).
fn forward_headers(gateway: &Gateway, req: &HttpRequest, request: &mut InferRequest) {
    let Some(pattern) = &gateway.forward_pattern() else {
        return;
    };
    for (name, value) in &req.headers {
        if pattern.is_match(name) {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            request
                .parameters
                .push((name.clone(), Param::String(value)));
        }
    }
}

/// A collected answer: Triton's JSON header and binary outputs, compressed
/// as negotiated (v2 §3.2, v2 §4.1).
fn encoded_answer(encoded: v2_response::Encoded, encoding: compress::Encoding) -> HttpResponse {
    // Room for every header it may get: grown from one, it would move.
    let mut headers = Vec::with_capacity(3);
    headers.push(("Content-Type", encoded.content_type().to_string()));
    if let Some(n) = encoded.header_length() {
        headers.push(("Inference-Header-Content-Length", n.to_string()));
    }
    let mut body: Vec<Bytes> = Vec::with_capacity(1 + encoded.tails.len());
    body.push(Bytes::from(encoded.header));
    body.extend(encoded.tails);
    if let Some(name) = encoding.header_value() {
        let chunks: Vec<&[u8]> = body.iter().map(Bytes::as_ref).collect();
        if let Ok(compressed) = compress::compress(encoding, &chunks) {
            headers.push(("Content-Encoding", name.to_string()));
            body = vec![Bytes::from(compressed)];
        }
    }
    HttpResponse {
        status: 200,
        headers,
        body,
    }
}

/// A streamed answer: its JSON header, then the outputs' bytes as the
/// core hands them on; `Content-Length` counts both, so an answer whose
/// bytes stop short was cut off.
fn streamed_answer(streaming: Streaming) -> Result<Answer> {
    let Streaming {
        request,
        head,
        sizes,
        outputs,
    } = streaming;
    let header = v2_response::binary_header(&head, &request, &sizes)?;
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
    Ok(Answer::Streamed(StreamedResponse {
        status: 200,
        headers,
        first: Some(Bytes::from(header)),
        body: outputs,
        length: Some(total),
    }))
}
