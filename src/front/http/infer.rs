//! The `/infer` pipeline (v2 §2.1 order of operations): model lookup,
//! decompression, header split, decode, shared-memory inputs read (bridge
//! mode, `app::shm`), model-level checks, header forwarding, `ModelInfer`
//! upstream, shared-memory outputs written, encode, response compression.

use bytes::{Bytes, BytesMut};

use crate::app::shm::HeldOutputs;
use crate::body::{BodyRest, Fault};
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::front::http::pipeline::Pipeline;
use crate::front::http::plan::Plan;
use crate::front::http::route::ModelRef;
use crate::front::http::{too_large, Answer, HttpRequest, HttpResponse, StreamedRest};
use crate::model::{DataType, InferRequest, InputData, ModelInfo, Param};
use crate::translate::{checks, outputs};
use crate::wire::{compress, v2_request, v2_response};

impl Pipeline {
    pub(crate) async fn infer(
        &self,
        ctx: &RequestContext,
        plan: &Plan,
        model: &ModelRef,
        req: &mut HttpRequest,
    ) -> Result<Answer> {
        let info = self.gateway.model_info(ctx, model).await?;
        if info.as_ref().is_some_and(|i| i.decoupled) {
            return Err(Error::unsupported(
                "HTTP end point doesn't support models with decoupled transaction policy",
            ));
        }
        let (mut request, rest) = match req.rest.take() {
            Some(rest) => self.decode_streamed(plan, model, req, rest).await?,
            None => (self.decode_whole(plan, model, req, info.as_deref())?, None),
        };
        // Bridge mode: regions read and output windows held now, as Triton
        // reads them while it parses the request (v2 §1.7).
        let held = match self.gateway.shm_bridge() {
            Some(bridge) => bridge.take_regions(&mut request).await?,
            None => HeldOutputs::default(),
        };
        // The core's order: requested outputs before the inputs.
        outputs::check_requested(&request, info.as_deref())?;
        checks::classification(&request, info.as_deref())?;
        checks::tensor_sizes(&request, info.as_deref())?;
        self.forward_headers(req, &mut request);
        // Never with a shared-memory output: it is not binary.
        if let Some(rest) = rest.as_ref().filter(|_| plan.answer_streams(&request)) {
            return self
                .infer_streamed_answer(ctx, plan, request, rest.clone())
                .await;
        }
        // Shared-memory outputs are written into their windows as they
        // arrive.
        let mut response = self
            .gateway
            .call_infer_into(ctx, &request, rest.as_ref(), held)
            .await
            .map_err(|error| match &rest {
                Some(rest) => sent_error(&request, rest, error),
                None => error,
            })?;
        outputs::keep_requested(&mut response, &request)?;
        // Sent: the answer is made without the input tensors.
        request.inputs = Vec::new();
        let encoded = v2_response::encode(&response, &request)?;
        Ok(Answer::Full(
            self.infer_response(encoded, plan.answer_encoding),
        ))
    }

    /// Decodes a body in hand. It goes into the decoder: a JSON body is
    /// freed once decoded, a binary one once the tensors sliced from it
    /// have gone upstream.
    fn decode_whole(
        &self,
        plan: &Plan,
        model: &ModelRef,
        req: &mut HttpRequest,
        info: Option<&ModelInfo>,
    ) -> Result<InferRequest> {
        let body = self.decompress(std::mem::take(&mut req.body), plan)?;
        let decoded = v2_request::decode(
            &model.name,
            &model.version,
            body,
            plan.header_length.as_deref(),
            self.gateway.decode_limits(),
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
    /// streams only binary bodies whose whole header is in `req.body`).
    /// Its binary inputs are streamed from the rest, unless one is BYTES:
    /// BYTES framing is checked on the bytes in hand, so that body is read
    /// to its end first and decoded whole.
    async fn decode_streamed(
        &self,
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
            self.gateway.decode_limits(),
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
        let limit = self.gateway.config().limits.max_body_size;
        let too_large = |size: u64| too_large(size, limit, "--max-body-size");
        let declared = rest.len.map(|n| n + req.body.len() as u64);
        if let Some(size) = declared.filter(|n| *n > limit as u64) {
            return Err(too_large(size));
        }
        let max = (limit - req.body.len().min(limit)) as u64;
        let chunks = match rest.rest.collect(max).await {
            Ok(chunks) => chunks,
            Err(Fault::Long) => return Err(too_large(limit as u64 + 1)),
            Err(fault) => return Err(body_fault(fault)),
        };
        let len = req.body.len() + chunks.iter().map(Bytes::len).sum::<usize>();
        let mut body = BytesMut::with_capacity(len);
        body.extend_from_slice(&req.body);
        chunks
            .iter()
            .for_each(|chunk| body.extend_from_slice(chunk));
        req.body = body.freeze();
        Ok((self.decode_whole(plan, model, req, None)?, None))
    }

    /// Request `Content-Encoding` (v2 §4.1): gzip/deflate inflated with
    /// the decompressed-size limit; anything else is 501.
    fn decompress(&self, body: Bytes, plan: &Plan) -> Result<Bytes> {
        let encoding = plan
            .body_encoding
            .map_err(|()| Error::new(Kind::UnsupportedEncoding, "Unsupported compression type"))?;
        if encoding == compress::Encoding::Identity {
            return Ok(body);
        }
        compress::inflate(&body, self.gateway.config().limits.max_input_size)
            .map(Bytes::from)
            .map_err(|e| Error::invalid(e.to_string()))
    }

    /// `--http-header-forward-pattern`: matching headers become string
    /// parameters named exactly as the client wrote them (v2 §4.3).
    fn forward_headers(&self, req: &HttpRequest, request: &mut InferRequest) {
        let Some(pattern) = &self.gateway.forward_pattern() else {
            return;
        };
        for (name, value) in &req.headers {
            if pattern.is_match(name) {
                let value = String::from_utf8_lossy(value).into_owned();
                request
                    .parameters
                    .push((name.clone(), Param::String(value)));
            }
        }
    }

    pub(crate) fn infer_response(
        &self,
        encoded: v2_response::Encoded,
        encoding: compress::Encoding,
    ) -> HttpResponse {
        let mut headers = vec![("Content-Type", encoded.content_type().to_string())];
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
}

/// Why a call with a streamed body failed: the body's fault, worded as
/// Triton words it, if the body failed; otherwise the call's own error.
pub(crate) fn sent_error(request: &InferRequest, rest: &BodyRest, error: Error) -> Error {
    match rest.fault() {
        Some(Fault::Short { read }) => v2_request::short_tail(request, read),
        Some(Fault::Long) => v2_request::long_tail(&request.model_name),
        Some(fault) => body_fault(fault),
        None => error,
    }
}

/// A body whose feed stopped: the session answers the reason it knows (a
/// limit, a deadline) or nobody, if the client left; this text is for the
/// record only.
fn body_fault(fault: Fault) -> Error {
    Error::invalid(format!("the request body broke off ({fault:?})"))
}
