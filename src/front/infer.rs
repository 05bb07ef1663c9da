//! The `/infer` pipeline (protocol §2.1 order of operations): model lookup,
//! decompression, header split, decode, model-level checks, header
//! forwarding, `ModelInfer` upstream, encode, response compression.

use bytes::Bytes;

use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::front::http::{HttpRequest, HttpResponse};
use crate::front::route::ModelRef;
use crate::model::{InferRequest, Param};
use crate::translate::sequence::request_sequence_key;
use crate::translate::{checks, from_grpc, to_grpc};
use crate::upstream::Target;
use crate::wire::{compress, v2_request, v2_response};

impl Gateway {
    pub(crate) async fn infer(
        &self,
        ctx: &RequestContext,
        model: &ModelRef,
        req: &mut HttpRequest,
    ) -> Result<HttpResponse> {
        let info = self.model_info(ctx, model).await.map_err(Error::plain)?;
        if info.as_ref().is_some_and(|i| i.decoupled) {
            return Err(Error::unsupported(
                "HTTP end point doesn't support models with decoupled transaction policy",
            )
            .plain());
        }
        // The body goes into the decoder: a JSON body is freed once decoded,
        // a binary one once the tensors sliced from it have gone upstream.
        let body = self.decompress(std::mem::take(&mut req.body), req)?;
        let decoded = v2_request::decode(
            &model.name,
            &model.version,
            body,
            req.header("Inference-Header-Content-Length"),
            self.decode_limits(),
        )?;
        let mut request = match decoded {
            v2_request::Body::Json(request) => request,
            v2_request::Body::Raw(body) => {
                let info = info.as_deref().ok_or_else(|| {
                    Error::unsupported("raw binary requests need the model configuration, which the upstream does not provide")
                })?;
                checks::raw_request(&model.name, &model.version, info, body)?
            }
        };
        checks::classification(&request, info.as_deref())?;
        checks::tensor_sizes(&request, info.as_deref())?;
        self.forward_headers(req, &mut request);
        let response = self.call_infer(ctx, &request).await?;
        // Sent: the answer is made without the input tensors.
        request.inputs = Vec::new();
        let encoded = v2_response::encode(&response, &request)?;
        Ok(self.infer_response(encoded, req.header("Accept-Encoding")))
    }

    /// `ModelInfer` on a backend serving the model (the sequence's own
    /// backend for sequence requests), within the gateway's own deadline
    /// (`upstream.request_timeout_ms`). The request's `timeout` parameter
    /// is Triton's queueing timeout: forwarded as a parameter only, for the
    /// server to enforce, as on Triton.
    pub(crate) async fn call_infer(
        &self,
        ctx: &RequestContext,
        request: &InferRequest,
    ) -> Result<crate::model::InferResponse> {
        let sequence = request_sequence_key(request);
        let target = Target {
            model: Some(&request.model_name),
            sequence: sequence.as_deref(),
        };
        let message = to_grpc::model_infer(request);
        let response = self.pool().model_infer(ctx, &target, message).await?;
        Ok(from_grpc::model_infer(response, &request.id))
    }

    /// Request `Content-Encoding` (protocol §4.1): gzip/deflate inflated with
    /// the decompressed-size limit; anything else is 501.
    fn decompress(&self, body: Bytes, req: &HttpRequest) -> Result<Bytes> {
        let encoding =
            compress::request_encoding(req.header("Content-Encoding")).map_err(|()| {
                Error::new(Kind::UnsupportedEncoding, "Unsupported compression type").plain()
            })?;
        if encoding == compress::Encoding::Identity {
            return Ok(body);
        }
        compress::inflate(&body, self.config().limits.max_input_size)
            .map(Bytes::from)
            .map_err(|e| Error::invalid(e.to_string()).plain())
    }

    /// `--http-header-forward-pattern`: matching headers become string
    /// parameters named exactly as the client wrote them (protocol §4.3).
    fn forward_headers(&self, req: &HttpRequest, request: &mut InferRequest) {
        let Some(pattern) = &self.forward_pattern() else {
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

    fn infer_response(&self, encoded: v2_response::Encoded, accept: Option<&[u8]>) -> HttpResponse {
        let mut headers = vec![("Content-Type", encoded.content_type().to_string())];
        if let Some(n) = encoded.header_length() {
            headers.push(("Inference-Header-Content-Length", n.to_string()));
        }
        let encoding = compress::negotiate(accept);
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
