//! The only pingora glue: one `ProxyHttp` service whose `request_filter`
//! classifies the request, reads the body within the limits, runs the
//! pipeline and writes the one answer (returning `Ok(true)`, so pingora
//! never proxies these routes itself). `/generate_stream` answers are
//! written event by event while the client is watched for going away.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::{Error as PingoraError, ErrorType, Result as PingoraResult};
use pingora_http::ResponseHeader;
use pingora_proxy::{ProxyHttp, Session};

use crate::error::{Error, Kind};
use crate::front::handler::Gateway;
use crate::front::http::{Answer, HttpRequest, HttpResponse, StreamedResponse};
use crate::front::route::Route;

/// The pingora service: translated routes only.
pub struct GatewayService {
    pub gateway: Arc<Gateway>,
}

/// Why a body could not be read in full.
enum BodyError {
    /// Refused by a limit: answer, then close the connection.
    Refused(Error),
    /// The client went away or the stream broke: nobody to answer.
    Io(Box<PingoraError>),
}

#[async_trait]
impl ProxyHttp for GatewayService {
    type CTX = ();

    fn new_ctx(&self) -> Self::CTX {}

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut (),
    ) -> PingoraResult<Box<HttpPeer>> {
        // Every route is answered in request_filter; nothing is proxied raw.
        Err(PingoraError::explain(
            ErrorType::InternalError,
            "no raw proxy route",
        ))
    }

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> PingoraResult<bool> {
        let _inflight = self.gateway.inflight().enter();
        let header = session.req_header();
        let target = String::from_utf8_lossy(header.raw_path()).into_owned();
        let path = target.split('?').next().unwrap_or_default().to_string();
        let method = header.method.clone();
        let headers: Vec<(String, Bytes)> = header
            .case_header_iter()
            .map(|(name, value)| {
                let name = String::from_utf8_lossy(name.as_slice()).into_owned();
                (name, Bytes::copy_from_slice(value.as_bytes()))
            })
            .collect();
        let v1_prefix = &self.gateway.config().v1.path_prefix;
        let Some(route) = Route::classify_target(&target, v1_prefix) else {
            return self
                .answer(
                    session,
                    HttpResponse::error(&Error::route_not_found()),
                    true,
                )
                .await;
        };
        let body_timeout = self.gateway.config().limits.body_timeout();
        let body = match tokio::time::timeout(body_timeout, self.read_body(session)).await {
            Err(_) => Err(BodyError::Refused(Error::new(
                Kind::RequestTimeout,
                format!(
                    "the request body did not arrive within {} ms",
                    body_timeout.as_millis()
                ),
            ))),
            Ok(read) => read,
        };
        let body = match body {
            Ok(body) => body,
            Err(BodyError::Refused(error)) => {
                let reason = if error.kind == Kind::RequestTimeout {
                    "slow"
                } else {
                    "size"
                };
                let metrics = self.gateway.metrics();
                metrics.rejected.with_label_values(&[reason]).inc();
                linger(session).await;
                let refusal = crate::front::v1::refusal(&self.gateway, &route, &error);
                return self.answer(session, refusal, true).await;
            }
            Err(BodyError::Io(e)) => return Err(e),
        };
        let request = HttpRequest {
            method,
            path,
            headers,
            body,
            peer: session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip()),
        };
        if !route.is_generate() {
            let response = self.gateway.handle_route(&route, &request).await;
            return self.answer(session, response, false).await;
        }
        // A generation may take long before its first response: a client
        // that goes away meanwhile drops the pipeline, cancelling upstream.
        let answer = tokio::select! {
            answer = self.gateway.answer(&route, &request) => answer,
            _ = session.read_body_or_idle(true) => return Ok(client_gone(session)),
        };
        match answer {
            Answer::Full(response) => self.answer(session, response, false).await,
            Answer::Streamed(streamed) => self.stream(session, streamed).await,
        }
    }
}

impl GatewayService {
    /// Reads the whole body into one buffer sized from `Content-Length`,
    /// enforcing the body-size and chunk-count limits as it goes.
    async fn read_body(&self, session: &mut Session) -> Result<Bytes, BodyError> {
        let limits = &self.gateway.config().limits;
        let declared = session
            .req_header()
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(n) = declared.filter(|n| *n > limits.max_body_size as u64) {
            return Err(BodyError::Refused(too_large(n, limits.max_body_size)));
        }
        let expects_continue = session
            .req_header()
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if expects_continue {
            session
                .as_downstream_mut()
                .write_continue_response()
                .await
                .map_err(BodyError::Io)?;
        }
        let mut body = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
        let mut chunks = 0usize;
        while let Some(chunk) = session.read_request_body().await.map_err(BodyError::Io)? {
            if chunk.is_empty() {
                continue;
            }
            chunks += 1;
            if declared.is_none() && chunks > limits.max_chunks {
                return Err(BodyError::Refused(Error::invalid(format!(
                    "Chunked request body exceeds maximum of {} non-empty chunks. Send fewer or larger HTTP chunks.",
                    limits.max_chunks
                ))));
            }
            if body.len() + chunk.len() > limits.max_body_size {
                return Err(BodyError::Refused(too_large(
                    (body.len() + chunk.len()) as u64,
                    limits.max_body_size,
                )));
            }
            if body.is_empty() && declared == Some(chunk.len() as u64) {
                return Ok(chunk);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }

    /// Writes the one answer. `close` drops the connection afterwards
    /// (used when the request body was not read to its end).
    async fn answer(
        &self,
        session: &mut Session,
        response: HttpResponse,
        close: bool,
    ) -> PingoraResult<bool> {
        let mut header = ResponseHeader::build(response.status, Some(response.headers.len() + 1))?;
        for (name, value) in &response.headers {
            header.insert_header(*name, value.as_str())?;
        }
        header.insert_header("Content-Length", response.body_len().to_string())?;
        if close {
            session.set_keepalive(None);
        }
        let empty = response.body.is_empty();
        session
            .write_response_header(Box::new(header), empty)
            .await?;
        let last = response.body.len().saturating_sub(1);
        for (i, chunk) in response.body.into_iter().enumerate() {
            session.write_response_body(Some(chunk), i == last).await?;
        }
        Ok(true)
    }
}

impl GatewayService {
    /// Writes a streamed answer chunk by chunk as the pipeline produces it
    /// (chunked encoding: pingora flushes every chunk). Stops when the
    /// client goes away (a failed write, or the connection closing while
    /// we wait): dropping `streamed` then cancels the upstream call.
    async fn stream(
        &self,
        session: &mut Session,
        mut streamed: StreamedResponse,
    ) -> PingoraResult<bool> {
        let mut header = ResponseHeader::build(streamed.status, Some(streamed.headers.len() + 1))?;
        for (name, value) in &streamed.headers {
            header.insert_header(*name, value.as_str())?;
        }
        header.insert_header("Transfer-Encoding", "chunked")?;
        session
            .write_response_header(Box::new(header), false)
            .await?;
        loop {
            let chunk = tokio::select! {
                chunk = streamed.body.recv() => chunk,
                _ = session.read_body_or_idle(true) => return Ok(client_gone(session)),
            };
            let Some(chunk) = chunk else { break };
            if session
                .write_response_body(Some(chunk), false)
                .await
                .is_err()
            {
                return Ok(client_gone(session));
            }
        }
        session.write_response_body(None, true).await?;
        Ok(true)
    }
}

/// The client closed the connection (or broke it) while its answer was
/// being produced: nothing more to write, and the connection is not reused.
fn client_gone(session: &mut Session) -> bool {
    tracing::debug!("client closed the connection during a streamed answer");
    session.set_keepalive(None);
    true
}

/// Bytes of a refused body read and discarded before the connection closes:
/// closing a socket with unread input makes the kernel send a reset that
/// can destroy our error answer before the client reads it (nginx's
/// "lingering close"). Bounded so a refused upload cannot hold us long.
const LINGER_BYTES: usize = 1 << 20;
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads and drops what the client already sent of a refused body.
async fn linger(session: &mut Session) {
    let drain = async {
        let mut seen = 0usize;
        while let Ok(Some(chunk)) = session.read_request_body().await {
            seen += chunk.len();
            if seen > LINGER_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

fn too_large(size: u64, limit: usize) -> Error {
    Error::new(
        Kind::PayloadTooLarge,
        format!("request body of {size} bytes exceeds the maximum allowed size of {limit} bytes. Use --max-body-size to increase the limit."),
    )
}
